/* mpi_probe: where does every rank run, and what does the network between rank pairs deliver?
 *
 * Prints one line per rank (rank, hostname, network namespace, process id), then for every pair
 * of ranks on different hosts (or only the pairs with rank 0, `-p root`):
 *   lat_us      half the round trip of an 8-byte ping-pong (median of -l round trips)
 *   pp_Mbit     ping-pong bandwidth with -s byte messages: 2 * bytes * iters / elapsed
 *   fwd_Mbit    a -n message stream lo -> hi, closed by a one-byte acknowledgement
 *   rev_Mbit    the same stream hi -> lo
 * Pairs run one at a time (the others wait in a barrier), so a pair sees the whole network.
 * Then (unless -R) a ring: every rank streams -n messages to rank+1 while receiving from rank-1,
 * all at once, the traffic pattern of a ring allreduce; it prints each rank's send rate.
 * Mbit = 10^6 bits, the unit tc uses for "mbit".
 *
 * Build: mpicc -O2 -o mpi_probe tests/netlab/mpi_probe.c   (scripts/netlab probe does this)
 * Usage: mpi_probe [-s bytes] [-i pingpong_iters] [-n stream_msgs] [-l latency_iters]
 *                  [-p all|root] [-a] [-R]   (-a: also pairs on the same host; -R: no ring)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NAME_LEN = 64 };

/* The name under /run/netns (`ip netns`) of this process's network namespace, else net:[inode] */
static void netns_name(char *out, size_t len) {
  struct stat self;
  snprintf(out, len, "?");
  if (stat("/proc/self/ns/net", &self) != 0) return;
  snprintf(out, len, "net:[%lu]", (unsigned long)self.st_ino);
  DIR *dir = opendir("/run/netns");
  if (!dir) return;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "/run/netns/%s", e->d_name);
    if (stat(path, &st) == 0 && st.st_ino == self.st_ino && st.st_dev == self.st_dev) {
      snprintf(out, len, "%.*s", (int)len - 1, e->d_name);
      break;
    }
  }
  closedir(dir);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double mbit(double bytes, double seconds) { return seconds > 0 ? bytes * 8.0 / seconds / 1e6 : 0; }

/* Stream `count` messages from `src` to `dst`, closed by an acknowledgement; returns Mbit/s on src */
static double stream(int me, int src, int dst, char *buf, int bytes, int count) {
  char ack = 0;
  double rate = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == src) {
    double t0 = MPI_Wtime();
    for (int k = 0; k < count; ++k) MPI_Send(buf, bytes, MPI_BYTE, dst, 2, MPI_COMM_WORLD);
    MPI_Recv(&ack, 1, MPI_BYTE, dst, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    rate = mbit((double)bytes * count, MPI_Wtime() - t0);
  } else if (me == dst) {
    for (int k = 0; k < count; ++k) MPI_Recv(buf, bytes, MPI_BYTE, src, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&ack, 1, MPI_BYTE, src, 3, MPI_COMM_WORLD);
  }
  return rate;
}

int main(int argc, char **argv) {
  int bytes = 4 << 20, iters = 4, nstream = 4, lat_iters = 50, all_pairs = 1, same_host = 0, ring = 1;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-s") && v) bytes = atoi(argv[++i]);
    else if (!strcmp(a, "-i") && v) iters = atoi(argv[++i]);
    else if (!strcmp(a, "-n") && v) nstream = atoi(argv[++i]);
    else if (!strcmp(a, "-l") && v) lat_iters = atoi(argv[++i]);
    else if (!strcmp(a, "-p") && v) all_pairs = strcmp(argv[++i], "root") != 0;
    else if (!strcmp(a, "-a")) same_host = 1;
    else if (!strcmp(a, "-R")) ring = 0;
    else {
      fprintf(stderr, "mpi_probe: unknown or incomplete argument '%s'\n", a);
      return 2;
    }
  }
  if (bytes < 1 || iters < 1 || nstream < 1 || lat_iters < 1) {
    fprintf(stderr, "mpi_probe: sizes and counts must be positive\n");
    return 2;
  }

  MPI_Init(&argc, &argv);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  char id[2][NAME_LEN] = {{0}};
  gethostname(id[0], NAME_LEN - 1);
  netns_name(id[1], NAME_LEN);
  char *ids = malloc((size_t)n * sizeof id);
  int *pids = malloc((size_t)n * sizeof(int));
  int pid = (int)getpid();
  MPI_Allgather(id, (int)sizeof id, MPI_CHAR, ids, (int)sizeof id, MPI_CHAR, MPI_COMM_WORLD);
  MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (me == 0) {
    for (int r = 0; r < n; ++r)
      printf("rank %d host %s netns %s pid %d\n", r, ids + (size_t)r * sizeof id,
             ids + (size_t)r * sizeof id + NAME_LEN, pids[r]);
    printf("# pairs: bytes=%d pingpong_iters=%d stream_msgs=%d latency_iters=%d\n", bytes, iters,
           nstream, lat_iters);
    fflush(stdout);
  }

  char *buf = malloc((size_t)bytes);
  memset(buf, me, (size_t)bytes);
  double *rtt = malloc((size_t)lat_iters * sizeof(double));
  char small[8] = {0};
  for (int lo = 0; lo < n; ++lo) {
    for (int hi = lo + 1; hi < n; ++hi) {
      if (!all_pairs && lo != 0) continue;
      const char *hlo = ids + (size_t)lo * sizeof id, *hhi = ids + (size_t)hi * sizeof id;
      if (!same_host && !strcmp(hlo, hhi)) continue;
      int peer = me == lo ? hi : lo;
      int active = me == lo || me == hi;
      double lat = 0, pp = 0;
      MPI_Barrier(MPI_COMM_WORLD);
      if (active) {
        for (int k = -2; k < lat_iters; ++k) { /* two untimed round trips open the connection */
          double t0 = MPI_Wtime();
          if (me == lo) {
            MPI_Send(small, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(small, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else {
            MPI_Recv(small, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(small, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          }
          if (k >= 0) rtt[k] = MPI_Wtime() - t0;
        }
        qsort(rtt, (size_t)lat_iters, sizeof(double), cmp_double);
        lat = rtt[lat_iters / 2] / 2 * 1e6;
        double t0 = 0;
        for (int k = -1; k < iters; ++k) { /* one untimed exchange of the big message */
          if (k == 0) t0 = MPI_Wtime();
          if (me == lo) {
            MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else {
            MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
          }
        }
        pp = mbit(2.0 * bytes * iters, MPI_Wtime() - t0);
      }
      double fwd = stream(me, lo, hi, buf, bytes, nstream);
      double rev = stream(me, hi, lo, buf, bytes, nstream);
      /* rank lo knows lat, pp and fwd; rank hi knows rev: collect on rank 0 */
      double mine[4] = {lat, pp, fwd, rev}, got[4] = {0};
      if (me == hi) MPI_Send(mine, 4, MPI_DOUBLE, lo, 4, MPI_COMM_WORLD);
      if (me == lo) {
        MPI_Recv(got, 4, MPI_DOUBLE, hi, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mine[3] = got[3];
        if (lo != 0) MPI_Send(mine, 4, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
      }
      if (me == 0 && lo != 0) MPI_Recv(mine, 4, MPI_DOUBLE, lo, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (me == 0) {
        printf("pair %d-%d %s-%s lat_us %.1f pp_Mbit %.0f fwd_Mbit %.0f rev_Mbit %.0f\n", lo, hi, hlo,
               hhi, mine[0], mine[1], mine[2], mine[3]);
        fflush(stdout);
      }
    }
  }
  if (ring && n > 1) {
    char *rbuf = malloc((size_t)bytes);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < nstream; ++k)
      MPI_Sendrecv(buf, bytes, MPI_BYTE, next, 6, rbuf, bytes, MPI_BYTE, prev, 6, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    double rate = mbit((double)bytes * nstream, MPI_Wtime() - t0);
    double *rates = malloc((size_t)n * sizeof(double));
    MPI_Gather(&rate, 1, MPI_DOUBLE, rates, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (me == 0) {
      printf("ring Mbit");
      for (int r = 0; r < n; ++r) printf(" %d->%d:%.0f", r, (r + 1) % n, rates[r]);
      printf("\n");
    }
    free(rates);
    free(rbuf);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) printf("# probe done\n");
  free(rtt);
  free(buf);
  free(pids);
  free(ids);
  MPI_Finalize();
  return 0;
}
