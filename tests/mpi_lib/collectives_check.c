/* tests/mpi_lib/collectives_check.c: MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgather,
 * MPI_Bcast and MPI_Reduce checked exactly, run with and without libccoll_mpi.so.
 *
 * Every call's result is compared element by element with the one computed here (small integers,
 * exact in every type and order), guard elements around every buffer a call may write are checked
 * untouched, and so is the input out of place. The calls cover float, double, int, long long and
 * unsigned char (and MPI_CHAR / MPI_SHORT moved as bytes by all-gather and broadcast), sum, prod,
 * min and max, counts from 1 to about 2e5 per rank, every root, MPI_IN_PLACE in each function's
 * form, MPI_COMM_WORLD and a split communicator in reverse rank order, and calls the library must
 * hand to MPI: unequal MPI_Reduce_scatter counts and MPI_Allgather send and receive types that
 * differ.
 *
 * --expect served: every function served some calls (the library's counters, looked up with
 * dlsym); absent: the library is not loaded. Exit status 0 when no rank saw a failure. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoll_mpi.h"

enum kind { K_F32, K_F64, K_I32, K_I64, K_U8 };

struct type_case {
  const char* name;
  MPI_Datatype type;
  enum kind kind;
  size_t size;
};

static int world_rank;
static long failures;

#define FAIL(...)                                      \
  do {                                                 \
    if (failures < 20) {                               \
      fprintf(stderr, "[rank %d] FAIL: ", world_rank); \
      fprintf(stderr, __VA_ARGS__);                    \
      fprintf(stderr, "\n");                           \
    }                                                  \
    ++failures;                                        \
  } while (0)

/* The input of element i on rank r: 1..9 (prod: 1, 2 or 3 on few ranks, so products stay exact). */
static long long input(int op_is_prod, int r, long long i) {
  if (op_is_prod) return (i + r) % 5 == 0 ? 2 : 1;
  return (r * 3 + i * 7) % 9 + 1;
}

static void store(void* buf, enum kind k, size_t i, long long v) {
  switch (k) {
    case K_F32:
      ((float*)buf)[i] = (float)v;
      break;
    case K_F64:
      ((double*)buf)[i] = (double)v;
      break;
    case K_I32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case K_I64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case K_U8:
      ((uint8_t*)buf)[i] = (uint8_t)v;
      break;
  }
}

static long long load(const void* buf, enum kind k, size_t i) {
  switch (k) {
    case K_F32:
      return (long long)((const float*)buf)[i];
    case K_F64:
      return (long long)((const double*)buf)[i];
    case K_I32:
      return ((const int32_t*)buf)[i];
    case K_I64:
      return ((const int64_t*)buf)[i];
    case K_U8:
      return ((const uint8_t*)buf)[i];
  }
  return 0;
}

static long long combine(MPI_Op op, enum kind k, long long a, long long b) {
  long long v = op == MPI_SUM    ? a + b
                : op == MPI_PROD ? a * b
                : op == MPI_MIN  ? (a < b ? a : b)
                                 : (a > b ? a : b);
  return k == K_U8 ? (v & 0xff) : v;
}

static long long reduced(MPI_Op op, enum kind k, int p, long long i) {
  long long v = input(op == MPI_PROD, 0, i);
  for (int r = 1; r < p; ++r) v = combine(op, k, v, input(op == MPI_PROD, r, i));
  return v;
}

#define GUARD 7
static const unsigned char kGuardByte = 0xa5;

/* A buffer of n elements of `size` bytes with GUARD guard elements on either side. */
static unsigned char* guarded(size_t n, size_t size) {
  unsigned char* b = malloc((n + 2 * GUARD) * size);
  memset(b, kGuardByte, (n + 2 * GUARD) * size);
  return b;
}

static void check_guards(const unsigned char* b, size_t n, size_t size, const char* what) {
  for (size_t j = 0; j < GUARD * size; ++j)
    if (b[j] != kGuardByte || b[(GUARD + n) * size + j] != kGuardByte) {
      FAIL("%s: a guard element was written", what);
      return;
    }
}

static const struct type_case kTypes[] = {
    {"float", MPI_FLOAT, K_F32, 4},  {"double", MPI_DOUBLE, K_F64, 8},
    {"int", MPI_INT, K_I32, 4},      {"long long", MPI_LONG_LONG, K_I64, 8},
    {"uint8", MPI_UINT8_T, K_U8, 1},
};
#define NTYPES (sizeof kTypes / sizeof kTypes[0])
static const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};

static void reduce_scatter(MPI_Comm comm, const struct type_case* t, MPI_Op op, int n, int in_place,
                           int vector) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  const size_t total = (size_t)n * (size_t)p;
  unsigned char* in = guarded(total, t->size);
  unsigned char* out = in_place ? in : guarded((size_t)n, t->size);
  for (size_t i = 0; i < total; ++i)
    store(in + GUARD * t->size, t->kind, i, input(op == MPI_PROD, r, (long long)i));
  int* counts = malloc(sizeof(int) * (size_t)p);
  for (int q = 0; q < p; ++q) counts[q] = n;
  void* send = in_place ? MPI_IN_PLACE : (void*)(in + GUARD * t->size);
  if (vector)
    MPI_Reduce_scatter(send, out + GUARD * t->size, counts, t->type, op, comm);
  else
    MPI_Reduce_scatter_block(send, out + GUARD * t->size, n, t->type, op, comm);
  for (int j = 0; j < n; ++j) {
    const long long want = reduced(op, t->kind, p, (long long)r * n + j);
    if (load(out + GUARD * t->size, t->kind, (size_t)j) != want) {
      FAIL("%s %s n=%d in_place=%d: element %d is %lld, expected %lld",
           vector ? "MPI_Reduce_scatter" : "MPI_Reduce_scatter_block", t->name, n, in_place, j,
           load(out + GUARD * t->size, t->kind, (size_t)j), want);
      break;
    }
  }
  check_guards(out, in_place ? total : (size_t)n, t->size, "reduce-scatter output");
  if (!in_place) {
    check_guards(in, total, t->size, "reduce-scatter input");
    for (size_t i = 0; i < total; ++i)
      if (load(in + GUARD * t->size, t->kind, i) != input(op == MPI_PROD, r, (long long)i)) {
        FAIL("reduce-scatter: the input was written");
        break;
      }
    free(out);
  }
  free(in);
  free(counts);
}

static void allgather(MPI_Comm comm, const struct type_case* t, MPI_Datatype type, size_t size,
                      int n, int in_place) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  const size_t total = (size_t)n * (size_t)p;
  unsigned char* out = guarded(total, size);
  unsigned char* in = guarded((size_t)n, size);
  unsigned char* mine = in_place ? out + (GUARD + (size_t)r * (size_t)n) * size : in + GUARD * size;
  for (size_t j = 0; j < (size_t)n * size; ++j) mine[j] = (unsigned char)(r * 31 + (int)j * 7 + 1);
  MPI_Allgather(in_place ? MPI_IN_PLACE : mine, n, type, out + GUARD * size, n, type, comm);
  for (size_t i = 0; i < total * size; ++i) {
    const size_t owner = i / ((size_t)n * size), j = i % ((size_t)n * size);
    if (out[GUARD * size + i] != (unsigned char)(owner * 31 + j * 7 + 1)) {
      FAIL("MPI_Allgather %s n=%d in_place=%d: byte %zu is wrong", t ? t->name : "bytes", n,
           in_place, i);
      break;
    }
  }
  check_guards(out, total, size, "all-gather output");
  if (!in_place) check_guards(in, (size_t)n, size, "all-gather input");
  free(out);
  free(in);
}

static void bcast(MPI_Comm comm, MPI_Datatype type, size_t size, int n, int root) {
  int r;
  MPI_Comm_rank(comm, &r);
  unsigned char* b = guarded((size_t)n, size);
  for (size_t j = 0; j < (size_t)n * size; ++j)
    b[GUARD * size + j] = r == root ? (unsigned char)(root * 13 + (int)j * 3 + 5) : 0;
  MPI_Bcast(b + GUARD * size, n, type, root, comm);
  for (size_t j = 0; j < (size_t)n * size; ++j)
    if (b[GUARD * size + j] != (unsigned char)(root * 13 + j * 3 + 5)) {
      FAIL("MPI_Bcast n=%d root=%d: byte %zu is wrong", n, root, j);
      break;
    }
  check_guards(b, (size_t)n, size, "broadcast buffer");
  free(b);
}

static void reduce(MPI_Comm comm, const struct type_case* t, MPI_Op op, int n, int root,
                   int in_place) {
  int p, r;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &r);
  unsigned char* in = guarded((size_t)n, t->size);
  unsigned char* out = guarded((size_t)n, t->size);
  const int root_in_place = in_place && r == root;
  unsigned char* data = root_in_place ? out : in;
  for (int i = 0; i < n; ++i)
    store(data + GUARD * t->size, t->kind, (size_t)i, input(op == MPI_PROD, r, i));
  MPI_Reduce(root_in_place ? MPI_IN_PLACE : (void*)(in + GUARD * t->size), out + GUARD * t->size, n,
             t->type, op, root, comm);
  if (r == root) {
    for (int i = 0; i < n; ++i)
      if (load(out + GUARD * t->size, t->kind, (size_t)i) != reduced(op, t->kind, p, i)) {
        FAIL("MPI_Reduce %s n=%d root=%d in_place=%d: element %d is wrong", t->name, n, root,
             in_place, i);
        break;
      }
  } else {
    for (size_t j = 0; j < (size_t)n * t->size; ++j)
      if (out[GUARD * t->size + j] != kGuardByte) {
        FAIL("MPI_Reduce: a non-root's receive buffer was written");
        break;
      }
  }
  check_guards(out, (size_t)n, t->size, "reduce output");
  check_guards(in, (size_t)n, t->size, "reduce input");
  free(in);
  free(out);
}

static void run_all(MPI_Comm comm) {
  int p;
  MPI_Comm_size(comm, &p);
  static const int kCounts[] = {1, 3, 100, 4099, 50000, 200000};
  for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
    const int n = kCounts[c];
    for (size_t t = 0; t < NTYPES; ++t)
      for (size_t o = 0; o < 4; ++o) {
        if (n > 5000 && (t % 2 == 1 || o % 2 == 1)) continue; /* the large ones: fewer cases */
        for (int in_place = 0; in_place < 2; ++in_place) {
          reduce_scatter(comm, &kTypes[t], kOps[o], n, in_place, 0);
          reduce_scatter(comm, &kTypes[t], kOps[o], n, in_place, 1);
          for (int root = 0; root < p; root += (p > 2 ? p - 1 : 1))
            reduce(comm, &kTypes[t], kOps[o], n, root, in_place);
        }
      }
    for (size_t t = 0; t < NTYPES; ++t)
      for (int in_place = 0; in_place < 2; ++in_place)
        allgather(comm, &kTypes[t], kTypes[t].type, kTypes[t].size, n, in_place);
    allgather(comm, NULL, MPI_CHAR, 1, n, 0);
    for (int root = 0; root < p; ++root) {
      bcast(comm, MPI_FLOAT, 4, n, root);
      bcast(comm, MPI_SHORT, 2, n, root);
    }
  }
  /* Calls MPI must serve: unequal counts, and an all-gather whose two sides differ in type. */
  int r;
  MPI_Comm_rank(comm, &r);
  int* counts = malloc(sizeof(int) * (size_t)p);
  int total = 0;
  for (int q = 0; q < p; ++q) total += counts[q] = q + 1;
  int* in = malloc(sizeof(int) * (size_t)total);
  int* out = malloc(sizeof(int) * (size_t)(r + 1));
  for (int i = 0; i < total; ++i) in[i] = i + r;
  MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
  int offset = 0;
  for (int q = 0; q < r; ++q) offset += counts[q];
  for (int j = 0; j <= r; ++j)
    if (out[j] != p * (offset + j) + p * (p - 1) / 2) {
      FAIL("MPI_Reduce_scatter with unequal counts: element %d is wrong", j);
      break;
    }
  free(in);
  free(out);
  free(counts);
  int mine[2] = {r, -r};
  int* all = malloc(sizeof(int) * 2 * (size_t)p);
  MPI_Allgather(mine, 2, MPI_INT, all, 8, MPI_BYTE, comm);
  for (int q = 0; q < p; ++q)
    if (all[2 * q] != q || all[2 * q + 1] != -q) {
      FAIL("MPI_Allgather int -> bytes: rank %d's block is wrong", q);
      break;
    }
  free(all);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int world_size;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const char* expect = "served";
  for (int i = 1; i + 1 < argc; ++i)
    if (strcmp(argv[i], "--expect") == 0) expect = argv[i + 1];
  run_all(MPI_COMM_WORLD);
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &reversed);
  run_all(reversed);
  MPI_Comm_free(&reversed);

  unsigned long long (*counter)(int, int) =
      (unsigned long long (*)(int, int))dlsym(RTLD_DEFAULT, "ccoll_mpi_function_counter");
  if (strcmp(expect, "absent") == 0) {
    if (counter != NULL) FAIL("the library is loaded");
  } else if (counter == NULL) {
    FAIL("the library is not loaded");
  } else if (world_size > 1) {
    static const char* kNames[] = {
        "",          "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather", "MPI_Bcast",
        "MPI_Reduce"};
    for (int f = CCOLL_MPI_REDUCE_SCATTER_BLOCK; f < CCOLL_MPI_NFUNCTIONS; ++f)
      if (counter(f, CCOLL_MPI_SERVED) == 0) FAIL("%s: no call served", kNames[f]);
    if (counter(CCOLL_MPI_REDUCE_SCATTER, CCOLL_MPI_PASS_ARGUMENTS) == 0)
      FAIL("MPI_Reduce_scatter with unequal counts was not handed to MPI");
    if (counter(CCOLL_MPI_ALLGATHER, CCOLL_MPI_PASS_ARGUMENTS) == 0)
      FAIL("MPI_Allgather with differing types was not handed to MPI");
  }
  long all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("collectives_check: %s (%ld failures on all ranks)\n",
           all_failures ? "FAILED" : "passed", all_failures);
  MPI_Finalize();
  return all_failures == 0 ? 0 : 1;
}
