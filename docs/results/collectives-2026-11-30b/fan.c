// What the network lab's links carry when one host sends, receives, or does both at once: the
// last rank S exchanges B bytes with every other rank, timed as the slowest rank sees it (REPS
// repetitions of each pattern, each after a barrier):
//   out   S sends B to every other rank at once;     in    every other rank sends B to S;
//   both  both at once, one message each way;        many  both at once, each B as 16 messages.
// Through the hetero scenario's slow host (S) these are the traffic of a reduce-scatter or
// all-gather forest on its link: docs/results/collectives-2026-11-30b.md.
//   mpicc -O2 -o fan fan.c; scripts/netlab run -- -np 4 ./fan [B [REPS]]
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  size_t B = argc > 1 ? strtoull(argv[1], 0, 0) : (4u << 20);
  int reps = argc > 2 ? atoi(argv[2]) : 4, S = p - 1;
  char* buf = malloc(B * 2 * p);
  MPI_Request req[256];
  for (int dir = 0; dir < 4; ++dir)
    for (int k = 0; k < reps; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      int n = 0;
      if (dir == 3) {  // both directions, each B as M messages, all posted at once
        int M = 16;
        size_t c = B / M;
        if (r == S) {
          for (int q = 0; q < p - 1; ++q)
            for (int m = 0; m < M; ++m) {
              MPI_Isend(buf + q * B + m * c, (int)c, MPI_BYTE, q, 0, MPI_COMM_WORLD, &req[n++]);
              MPI_Irecv(buf + (p + q) * B + m * c, (int)c, MPI_BYTE, q, 1, MPI_COMM_WORLD,
                        &req[n++]);
            }
        } else {
          for (int m = 0; m < M; ++m) {
            MPI_Irecv(buf + m * c, (int)c, MPI_BYTE, S, 0, MPI_COMM_WORLD, &req[n++]);
            MPI_Isend(buf + B + m * c, (int)c, MPI_BYTE, S, 1, MPI_COMM_WORLD, &req[n++]);
          }
        }
      } else if (dir == 2) {  // both directions at once
        if (r == S) {
          for (int q = 0; q < p - 1; ++q) {
            MPI_Isend(buf + q * B, (int)B, MPI_BYTE, q, 0, MPI_COMM_WORLD, &req[n++]);
            MPI_Irecv(buf + (p + q) * B, (int)B, MPI_BYTE, q, 1, MPI_COMM_WORLD, &req[n++]);
          }
        } else {
          MPI_Irecv(buf, (int)B, MPI_BYTE, S, 0, MPI_COMM_WORLD, &req[n++]);
          MPI_Isend(buf + B, (int)B, MPI_BYTE, S, 1, MPI_COMM_WORLD, &req[n++]);
        }
      } else if (r == S) {
        for (int q = 0; q < p - 1; ++q)
          if (dir == 0)
            MPI_Isend(buf + q * B, (int)B, MPI_BYTE, q, 0, MPI_COMM_WORLD, &req[n++]);
          else
            MPI_Irecv(buf + q * B, (int)B, MPI_BYTE, q, 0, MPI_COMM_WORLD, &req[n++]);
      } else {
        if (dir == 0)
          MPI_Irecv(buf, (int)B, MPI_BYTE, S, 0, MPI_COMM_WORLD, &req[n++]);
        else
          MPI_Isend(buf, (int)B, MPI_BYTE, S, 0, MPI_COMM_WORLD, &req[n++]);
      }
      MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
      double t = MPI_Wtime() - t0, tmax;
      MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (r == 0)
        printf("%s rep %d: %.4f s  %.1f Mbit/s through the slow host\n",
               dir == 3   ? "many"
               : dir == 2 ? "both"
               : dir      ? "in "
                          : "out",
               k, tmax, (double)B * (p - 1) * 8 / tmax / 1e6);
    }
  MPI_Finalize();
}
