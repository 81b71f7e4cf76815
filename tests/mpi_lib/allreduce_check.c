/* tests/mpi_lib/allreduce_check.c: MPI_Allreduce checked exactly, run with and without
 * libccoll_mpi.so.
 *
 * Every call's result is compared element by element with the reduction computed here (values are
 * small integers, halves or quarters, so float sums are exact in any order), the output's guard
 * elements and, out of place, the send buffer are checked untouched. The calls cover every
 * datatype and op the library serves, 1 to about 1e6 elements, MPI_IN_PLACE, MPI_COMM_WORLD, a
 * duplicate, split communicators (one in reverse rank order), communicators duplicated and freed
 * in a loop, and calls the library must hand to MPI: count 0, unsupported, pair and derived
 * datatypes, user ops, logical and bitwise ops, MINLOC, MPI_COMM_SELF, an intercommunicator.
 *
 * --expect says what the library must have done, through its counters (ccoll_mpi.h):
 *   served    every servable call served (or, with CCOLL_MPI_ALGO=auto or unset, served or passed
 * as small), every other call passed for its own reason disabled  every call passed as
 * CCOLL_MPI_DISABLE=1;  settings: every call passed as a bad setting absent    the library is not
 * loaded Exit status 0 when every rank saw no failure. */
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

static int world_rank, world_size;
static long failures;
static unsigned long long expected[CCOLL_MPI_NCOUNTERS]; /* what the library must have counted */
static unsigned long long servable, servable_bytes, servable_in_place, calls;

#define FAIL(...)                                                \
  do {                                                           \
    if (failures < 20) {                                         \
      fprintf(stderr, "allreduce_check: rank %d: ", world_rank); \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
    }                                                            \
    ++failures;                                                  \
  } while (0)

/* The value comm rank r contributes at element i for op; exact in every type and every order. */
static long long value(enum kind k, MPI_Op op, int r, size_t i) {
  if (op == MPI_PROD) {
    static const long long signed_table[4] = {1, 2, -1, 3};
    static const long long unsigned_table[4] = {1, 2, 3, 1};
    const size_t j = (i * 7 + (size_t)r * 3) % 4;
    return k == K_U8 ? unsigned_table[j] : signed_table[j];
  }
  if (op == MPI_SUM) {
    if (k == K_U8) return (long long)((i * 131 + (size_t)r * 71) % 61); /* <= 60 x 4 ranks */
    long long v = (long long)((i * 131 + (size_t)r * 71) % 61) - 30;
    if (k == K_I64) v += (long long)(i % 7) << 40; /* beyond 32 bits */
    return v;
  }
  /* min and max */
  const unsigned long long h =
      (unsigned long long)i * 2654435761ull + (unsigned long long)r * 40503ull;
  if (k == K_U8) return (long long)(h % 256);
  long long v = (long long)(h % 2001) - 1000;
  if (k == K_I64) v *= 1ll << 33;
  return v;
}

/* Floats carry value/4 (f32) or value/2 (f64), exact and not integers; products carry the value
 * itself (a product of quarters is not the quarter of the product). */
static double divisor(enum kind k, MPI_Op op) {
  if (op == MPI_PROD) return 1;
  return k == K_F32 ? 4 : 2;
}

static void store(enum kind k, MPI_Op op, void* buf, size_t i, long long v) {
  switch (k) {
    case K_F32:
      ((float*)buf)[i] = (float)((double)v / divisor(k, op));
      break;
    case K_F64:
      ((double*)buf)[i] = (double)v / divisor(k, op);
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

static long long combine(MPI_Op op, long long a, long long b) {
  if (op == MPI_SUM) return a + b;
  if (op == MPI_PROD) return a * b;
  if (op == MPI_MIN) return b < a ? b : a;
  return b > a ? b : a;
}

/* Expected values are formed in long long and stored the way the element type holds them; for
 * float sums of quarters that is exact. Products are made of factors <= 3 over <= 4 ranks. */
static int same(enum kind k, MPI_Op op, const void* buf, size_t i, long long v) {
  switch (k) {
    case K_F32:
      return ((const float*)buf)[i] == (float)((double)v / divisor(k, op));
    case K_F64:
      return ((const double*)buf)[i] == (double)v / divisor(k, op);
    case K_I32:
      return ((const int32_t*)buf)[i] == (int32_t)v;
    case K_I64:
      return ((const int64_t*)buf)[i] == (int64_t)v;
    case K_U8:
      return ((const uint8_t*)buf)[i] == (uint8_t)v;
  }
  return 0;
}

static const char* op_name(MPI_Op op) {
  return op == MPI_SUM ? "sum" : op == MPI_PROD ? "prod" : op == MPI_MIN ? "min" : "max";
}

enum { GUARD = 8 }; /* elements past the end that must stay untouched */

/* One servable call: count elements of t, op, on comm, in place or not; checks everything. */
static void check_call(const struct type_case* t, MPI_Op op, size_t count, int in_place,
                       MPI_Comm comm, const char* comm_name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const size_t bytes = (count + GUARD) * t->size;
  unsigned char* recv = malloc(bytes);
  unsigned char* send = in_place ? NULL : malloc(bytes);
  if (recv == NULL || (!in_place && send == NULL)) {
    FAIL("out of memory");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(recv, 0xa5, bytes);
  unsigned char* input = in_place ? recv : send;
  for (size_t i = 0; i < count; ++i) store(t->kind, op, input, i, value(t->kind, op, rank, i));
  if (!in_place) memset(send + count * t->size, 0x5a, GUARD * t->size);

  const int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)count, t->type, op, comm);
  ++calls;
  if (size > 1) {
    ++servable;
    servable_bytes += count * t->size;
    if (in_place) ++servable_in_place;
  } else {
    ++expected[CCOLL_MPI_PASS_ONE_RANK];
  }
  if (rc != MPI_SUCCESS)
    FAIL("%s %s count %zu on %s: MPI error %d", t->name, op_name(op), count, comm_name, rc);

  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    long long e = value(t->kind, op, 0, i);
    for (int r = 1; r < size; ++r) e = combine(op, e, value(t->kind, op, r, i));
    if (!same(t->kind, op, recv, i, e)) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad != 0)
    FAIL("%s %s count %zu %s on %s (size %d): %zu wrong elements, first at %zu", t->name,
         op_name(op), count, in_place ? "in place" : "out of place", comm_name, size, bad, first);
  for (size_t b = count * t->size; b < bytes; ++b)
    if (recv[b] != 0xa5) {
      FAIL("%s %s count %zu on %s: output guard byte %zu overwritten", t->name, op_name(op), count,
           comm_name, b - count * t->size);
      break;
    }
  if (!in_place) {
    for (size_t i = 0; i < count; ++i)
      if (!same(t->kind, op, send, i, value(t->kind, op, rank, i))) {
        FAIL("%s %s count %zu on %s: send buffer changed at %zu", t->name, op_name(op), count,
             comm_name, i);
        break;
      }
  }
  free(recv);
  free(send);
}

static struct type_case types[] = {
    {"MPI_FLOAT", MPI_FLOAT, K_F32, 4},
    {"MPI_DOUBLE", MPI_DOUBLE, K_F64, 8},
    {"MPI_INT", MPI_INT, K_I32, sizeof(int)},
    {"MPI_INT32_T", MPI_INT32_T, K_I32, 4},
    {"MPI_LONG", MPI_LONG, K_I64, sizeof(long)},
    {"MPI_LONG_LONG", MPI_LONG_LONG, K_I64, 8},
    {"MPI_INT64_T", MPI_INT64_T, K_I64, 8},
    {"MPI_UINT8_T", MPI_UINT8_T, K_U8, 1},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_U8, 1},
};
enum { NTYPES = sizeof(types) / sizeof(types[0]) };

static void servable_calls(MPI_Comm comm, const char* comm_name, int large) {
  static const size_t small_counts[] = {1, 3, 17, 255, 1001, 4099, 20011};
  static const size_t large_counts[] = {65537, 262143, 1000001};
  MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  for (int t = 0; t < NTYPES; ++t)
    for (int o = 0; o < 4; ++o)
      for (size_t c = 0; c < sizeof small_counts / sizeof small_counts[0]; ++c)
        check_call(&types[t], ops[o], small_counts[c], (int)((c + (size_t)o) % 2), comm, comm_name);
  if (!large) return;
  for (size_t c = 0; c < sizeof large_counts / sizeof large_counts[0]; ++c)
    for (int t = 0; t < NTYPES; t += 2)
      for (int in_place = 0; in_place < 2; ++in_place)
        check_call(&types[t], ops[(t / 2 + (int)c) % 4], large_counts[c], in_place, comm,
                   comm_name);
}

/* A user op: elementwise int sum, over MPI_INT or a contiguous type of ints (MPI's predefined ops
 * take no derived datatype in Open MPI). */
static void user_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  MPI_Type_size(*type, &size);
  const int n = *len * (size / (int)sizeof(int));
  for (int i = 0; i < n; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

static void int_pass_call(MPI_Comm comm, const char* what, MPI_Datatype type, int count,
                          int per_elem, MPI_Op op, int reason, long long (*expect)(int, int)) {
  int size, rank;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  const int n = count * per_elem;
  int* send = malloc(sizeof(int) * (size_t)(n + 1));
  int* recv = malloc(sizeof(int) * (size_t)(n + 1));
  for (int i = 0; i < n; ++i) send[i] = (i % 5 == rank % 5) ? 1 : ((i + rank) % 3 == 0 ? 3 : 0);
  const int rc = MPI_Allreduce(send, recv, count, type, op, comm);
  ++calls;
  ++expected[reason];
  if (rc != MPI_SUCCESS) FAIL("%s: MPI error %d", what, rc);
  for (int i = 0; i < n && expect != NULL; ++i) {
    long long e = expect(i, size);
    if (recv[i] != e) {
      FAIL("%s: element %d is %d, expected %lld", what, i, recv[i], e);
      break;
    }
  }
  free(send);
  free(recv);
}

static long long input_at(int i, int r) {
  return (i % 5 == r % 5) ? 1 : ((i + r) % 3 == 0 ? 3 : 0);
}
static long long expect_sum(int i, int size) {
  long long s = 0;
  for (int r = 0; r < size; ++r) s += input_at(i, r);
  return s;
}
static long long expect_land(int i, int size) {
  for (int r = 0; r < size; ++r)
    if (input_at(i, r) == 0) return 0;
  return 1;
}
static long long expect_bor(int i, int size) {
  long long s = 0;
  for (int r = 0; r < size; ++r) s |= input_at(i, r);
  return s;
}

static void pass_calls(void) {
  MPI_Op commutative, noncommutative;
  MPI_Op_create(user_sum, 1, &commutative);
  MPI_Op_create(user_sum, 0, &noncommutative);
  MPI_Datatype triple;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_commit(&triple);

  int_pass_call(MPI_COMM_WORLD, "user op", MPI_INT, 1001, 1, commutative, CCOLL_MPI_PASS_USER_OP,
                expect_sum);
  int_pass_call(MPI_COMM_WORLD, "non-commutative user op", MPI_INT, 37, 1, noncommutative,
                CCOLL_MPI_PASS_USER_OP, expect_sum);
  int_pass_call(MPI_COMM_WORLD, "MPI_LAND", MPI_INT, 1001, 1, MPI_LAND, CCOLL_MPI_PASS_OP,
                expect_land);
  int_pass_call(MPI_COMM_WORLD, "MPI_BOR", MPI_INT, 1001, 1, MPI_BOR, CCOLL_MPI_PASS_OP,
                expect_bor);
  int_pass_call(MPI_COMM_WORLD, "contiguous(3, MPI_INT) with a user op", triple, 333, 3,
                commutative, CCOLL_MPI_PASS_DATATYPE, expect_sum);
  int_pass_call(MPI_COMM_WORLD, "MPI_UNSIGNED", MPI_UNSIGNED, 1001, 1, MPI_SUM,
                CCOLL_MPI_PASS_DATATYPE, expect_sum);
  int_pass_call(MPI_COMM_WORLD, "count 0", MPI_INT, 0, 1, MPI_SUM, CCOLL_MPI_PASS_COUNT, NULL);

  { /* MPI_SHORT: a C integer type ccoll does not carry */
    short send[101], recv[101];
    for (int i = 0; i < 101; ++i) send[i] = (short)(i + world_rank);
    MPI_Allreduce(send, recv, 101, MPI_SHORT, MPI_MAX, MPI_COMM_WORLD);
    ++calls;
    ++expected[CCOLL_MPI_PASS_DATATYPE];
    for (int i = 0; i < 101; ++i)
      if (recv[i] != i + world_size - 1) {
        FAIL("MPI_SHORT max: element %d is %d", i, recv[i]);
        break;
      }
  }
  { /* MPI_MAXLOC on MPI_2INT: a pair type (the datatype is checked before the op) */
    int send[2] = {world_rank * 10 % 7, world_rank}, recv[2];
    MPI_Allreduce(send, recv, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    ++calls;
    ++expected[CCOLL_MPI_PASS_DATATYPE];
    int best = -1, where = -1;
    for (int r = 0; r < world_size; ++r)
      if (r * 10 % 7 > best) best = r * 10 % 7, where = r;
    if (recv[0] != best || recv[1] != where) FAIL("MPI_MAXLOC: (%d, %d)", recv[0], recv[1]);
  }
  { /* MPI_BXOR on MPI_INT64_T: a predefined op ccoll lacks */
    int64_t send = (int64_t)1 << (world_rank + 33), recv = 0;
    MPI_Allreduce(&send, &recv, 1, MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
    ++calls;
    ++expected[CCOLL_MPI_PASS_OP];
    if (recv != (((int64_t)1 << (world_size + 33)) - ((int64_t)1 << 33)))
      FAIL("MPI_BXOR: %lld", (long long)recv);
  }
  { /* MPI_COMM_SELF: one process */
    double x = 2.5 + world_rank;
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
    ++calls;
    ++expected[CCOLL_MPI_PASS_ONE_RANK];
    if (x != 2.5 + world_rank) FAIL("MPI_COMM_SELF: %g", x);
  }
  { /* An intercommunicator between the lower and the upper half of the ranks: each side gets
       the sum of the other side's values. */
    const int lower = world_rank < world_size / 2;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, lower, world_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lower ? world_size / 2 : 0, 99, &inter);
    int send[64], recv[64];
    for (int i = 0; i < 64; ++i) send[i] = i + world_rank;
    MPI_Allreduce(send, recv, 64, MPI_INT, MPI_SUM, inter);
    ++calls;
    ++expected[CCOLL_MPI_PASS_INTERCOMM];
    for (int i = 0; i < 64; ++i) {
      int e = 0;
      for (int r = 0; r < world_size; ++r)
        if ((r < world_size / 2) != lower) e += i + r;
      if (recv[i] != e) {
        FAIL("intercommunicator: element %d is %d, expected %d", i, recv[i], e);
        break;
      }
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  MPI_Type_free(&triple);
  MPI_Op_free(&commutative);
  MPI_Op_free(&noncommutative);
}

typedef unsigned long long (*counter_fn)(int);

static int check_counters(const char* expect, counter_fn counter,
                          const unsigned long long* before) {
  const int start = failures == 0;
  if (strcmp(expect, "absent") == 0) {
    if (counter != NULL) FAIL("--expect absent, but ccoll_mpi_counter is there");
    return start;
  }
  if (counter == NULL) {
    FAIL("--expect %s, but libccoll_mpi.so is not loaded (no ccoll_mpi_counter)", expect);
    return 0;
  }
  unsigned long long got[CCOLL_MPI_NCOUNTERS];
  for (int i = 0; i < CCOLL_MPI_NCOUNTERS; ++i) got[i] = counter(i) - before[i];
  unsigned long long want[CCOLL_MPI_NCOUNTERS];
  memset(want, 0, sizeof want);
  if (strcmp(expect, "disabled") == 0 || strcmp(expect, "settings") == 0) {
    want[strcmp(expect, "disabled") == 0 ? CCOLL_MPI_PASS_DISABLED : CCOLL_MPI_PASS_SETTINGS] =
        calls;
  } else {
    memcpy(want, expected, sizeof want);
    const char* algo = getenv("CCOLL_MPI_ALGO");
    const int is_auto = algo == NULL || *algo == '\0' || strcmp(algo, "auto") == 0;
    if (is_auto) {
      /* auto passes small calls on; every servable call is served or passed as small */
      want[CCOLL_MPI_SERVED] = got[CCOLL_MPI_SERVED];
      want[CCOLL_MPI_SERVED_BYTES] = got[CCOLL_MPI_SERVED_BYTES];
      want[CCOLL_MPI_SERVED_IN_PLACE] = got[CCOLL_MPI_SERVED_IN_PLACE];
      want[CCOLL_MPI_PASS_SMALL] = got[CCOLL_MPI_PASS_SMALL];
      if (got[CCOLL_MPI_SERVED] + got[CCOLL_MPI_PASS_SMALL] != servable)
        FAIL("auto: served %llu + small %llu != %llu servable calls", got[CCOLL_MPI_SERVED],
             got[CCOLL_MPI_PASS_SMALL], servable);
      if (got[CCOLL_MPI_SERVED] == 0) FAIL("auto: no call served");
    } else {
      want[CCOLL_MPI_SERVED] = servable;
      want[CCOLL_MPI_SERVED_BYTES] = servable_bytes;
      want[CCOLL_MPI_SERVED_IN_PLACE] = servable_in_place;
    }
  }
  for (int i = 0; i < CCOLL_MPI_NCOUNTERS; ++i)
    if (got[i] != want[i]) FAIL("counter %d is %llu, expected %llu", i, got[i], want[i]);
  if (world_rank == 0)
    printf("allreduce_check: rank 0: %llu calls, %llu servable, library served %llu\n", calls,
           servable, got[CCOLL_MPI_SERVED]);
  return start;
}

int main(int argc, char** argv) {
  const char* expect = "served";
  int large = 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
      expect = argv[++i];
    } else if (strcmp(argv[i], "--small") == 0) {
      large = 0;
    } else {
      fprintf(stderr, "usage: %s [--expect served|disabled|settings|absent] [--small]\n", argv[0]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  counter_fn counter = (counter_fn)dlsym(RTLD_DEFAULT, "ccoll_mpi_counter");
  unsigned long long before[CCOLL_MPI_NCOUNTERS];
  for (int i = 0; i < CCOLL_MPI_NCOUNTERS; ++i) before[i] = counter != NULL ? counter(i) : 0;

  servable_calls(MPI_COMM_WORLD, "MPI_COMM_WORLD", large);
  MPI_Comm dup, parity, reversed;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  servable_calls(dup, "a duplicate of MPI_COMM_WORLD", 0);
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &parity);
  servable_calls(parity, "split by parity", 0);
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &reversed);
  servable_calls(reversed, "split in reverse order", large);
  MPI_Comm_free(&parity);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&dup);

  /* Communicators made and freed: the library's state on each must go with it. */
  for (int k = 0; k < 12; ++k) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    check_call(&types[k % NTYPES], MPI_SUM, 70001, k % 2, c, "a short-lived duplicate");
    MPI_Comm_free(&c);
  }
  pass_calls();

  check_counters(expect, counter, before);
  long total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("allreduce_check: %d ranks, %llu calls per rank, %ld failures: %s\n", world_size, calls,
           total, total == 0 ? "PASS" : "FAIL");
  MPI_Bcast(&total, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
