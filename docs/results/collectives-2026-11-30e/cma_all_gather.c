// A single-copy all-gather of two processes through CMA (process_vm_readv), the mechanism Open
// MPI's shared-memory transport uses for large messages: each process reads its peer's block from
// the peer's ordinary (unshared) memory straight into its own output and copies its own block,
// then both meet at a barrier: one process_vm_readv of the whole block, no pipelining, no
// agreement. Prints busbw as nccl-tests counts it (all-gather: (P-1)/P x size / time), the best of
// the calls.
//   cc -O2 cma_all_gather.c -o cma_all_gather && ./cma_all_gather [iters]
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
  _Atomic uint64_t arrived[2];
  _Atomic uint64_t addr[2];  // each process's input block, in its own address space
  _Atomic int64_t pid[2];
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void barrier(struct shared* s, int me, uint64_t* round) {
  ++*round;
  atomic_store(&s->arrived[me], *round);
  while (atomic_load(&s->arrived[1 - me]) < *round) sched_yield();
}

static void run(struct shared* s, int me, size_t total, int iters) {
  const size_t block = total / 2;
  char* in = malloc(block);
  char* out = malloc(total);
  memset(in, me + 1, block);
  memset(out, 0, total);
  atomic_store(&s->addr[me], (uint64_t)(uintptr_t)in);
  atomic_store(&s->pid[me], getpid());
  uint64_t round = 0;
  barrier(s, me, &round);
  const int peer = 1 - me;
  double best = 1e30;
  for (int it = -2; it < iters; ++it) {
    barrier(s, me, &round);
    const double t0 = now();
    struct iovec local = {out + (size_t)peer * block, block};
    struct iovec remote = {(void*)(uintptr_t)atomic_load(&s->addr[peer]), block};
    if (process_vm_readv((pid_t)atomic_load(&s->pid[peer]), &local, 1, &remote, 1, 0) !=
        (ssize_t)block) {
      perror("process_vm_readv");
      exit(1);
    }
    memcpy(out + (size_t)me * block, in, block);
    barrier(s, me, &round);
    const double t = now() - t0;
    if (it >= 0 && t < best) best = t;
  }
  if (out[(size_t)peer * block] != peer + 1 || out[(size_t)me * block] != me + 1) {
    fprintf(stderr, "wrong result\n");
    exit(1);
  }
  if (me == 0)
    printf("%10zu B  best %9.1f us  busbw %6.2f GB/s\n", total, best * 1e6,
           (double)total / 2 / best / 1e9);
  free(in);
  free(out);
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20;
  const size_t sizes[] = {16u << 20, 64u << 20};
  for (int k = 0; k < 2; ++k) {
    struct shared* s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(s, 0, sizeof *s);
    fflush(stdout);
    const pid_t child = fork();
    run(s, child == 0 ? 1 : 0, sizes[k], iters);
    fflush(stdout);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    munmap(s, sizeof *s);
  }
  return 0;
}
