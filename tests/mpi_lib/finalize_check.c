/* tests/mpi_lib/finalize_check.c: MPI_Finalize returns on every rank when only some ranks made a
 * call the library looked at: here rank 0 alone calls MPI_Allreduce, on MPI_COMM_SELF (handed to
 * MPI: one process), and the other ranks call nothing before MPI_Finalize. The library's own
 * teardown at MPI_Finalize must not wait for ranks that have nothing to tear down.
 *
 * --expect is accepted for tests/mpi_lib/run_check.sh and not used: the check is that every rank
 * returns from MPI_Finalize (the test's timeout catches a hang) with the right result. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) ++i;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failures = 0;
  if (rank == 0) {
    double x[4096];
    for (int i = 0; i < 4096; ++i) x[i] = 0.5 * i;
    if (MPI_Allreduce(MPI_IN_PLACE, x, 4096, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF) != MPI_SUCCESS)
      ++failures;
    for (int i = 0; i < 4096; ++i)
      if (x[i] != 0.5 * i) ++failures;
    printf("finalize_check: rank 0 made its one call, %d failures\n", failures);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
