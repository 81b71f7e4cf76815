/* ccoll_mpi.h: what libccoll_mpi.so offers besides the MPI functions it interposes.
 *
 * libccoll_mpi.so defines MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Allgather, MPI_Bcast, MPI_Reduce, MPI_Init, MPI_Init_thread and MPI_Finalize (PMPI
 * interposition, MPI standard Sec. 15.2): loaded before the MPI library (LD_PRELOAD, or linked
 * before it), it serves those collectives with ccoll for the predefined types and ops ccoll has
 * and hands every other call to the PMPI_ function of the same name. docs/mpi.md describes it. A
 * program that wants to know what happened to its calls looks the counter function up at run
 * time, so that it runs with and without the library:
 *
 *   unsigned long long (*counter)(int) =
 *       (unsigned long long (*)(int))dlsym(RTLD_DEFAULT, "ccoll_mpi_counter");
 */
#ifndef CCOLL_MPI_H
#define CCOLL_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* What happened to this process's calls of one interposed function (ccoll_mpi_counter: of
 * MPI_Allreduce). The CCOLL_MPI_PASS_* counters are the calls handed to MPI, one counter per
 * reason (the first reason that applies, in the order of docs/mpi.md's table; the ids keep their
 * values). */
enum ccoll_mpi_counter_id {
  CCOLL_MPI_SERVED = 0,      /* calls served by ccoll */
  CCOLL_MPI_SERVED_BYTES,    /* bytes (count x element size) of the served calls */
  CCOLL_MPI_SERVED_IN_PLACE, /* served calls with MPI_IN_PLACE */
  CCOLL_MPI_PASS_DISABLED,   /* CCOLL_MPI_DISABLE=1 */
  CCOLL_MPI_PASS_SETTINGS,   /* a bad CCOLL_MPI_* value on any rank, or values that differ across
                                the ranks (compared at MPI_Init; named on stderr) */
  CCOLL_MPI_PASS_NESTED,     /* called from inside a served call */
  CCOLL_MPI_PASS_STATE,      /* MPI not initialized or already finalized, MPI_COMM_NULL */
  CCOLL_MPI_PASS_COUNT,      /* count <= 0 */
  CCOLL_MPI_PASS_DATATYPE,   /* not a type ccoll carries: derived, MPI_BYTE, MPI_CHAR, MPI_SHORT,
                                pair types, ... */
  CCOLL_MPI_PASS_USER_OP,    /* an op made by MPI_Op_create */
  CCOLL_MPI_PASS_OP,         /* a predefined op ccoll lacks: MPI_LAND, MPI_BXOR, MPI_MAXLOC, ... */
  CCOLL_MPI_PASS_PAIR,       /* a datatype/op pair this build of ccoll refuses */
  CCOLL_MPI_PASS_INTERCOMM,  /* an intercommunicator */
  CCOLL_MPI_PASS_ONE_RANK,   /* a communicator of one process */
  CCOLL_MPI_PASS_SMALL,      /* CCOLL_MPI_ALGO=auto and fewer than CCOLL_MPI_AUTO_MIN_BYTES */
  CCOLL_MPI_PASS_ALGORITHM,  /* the algorithm cannot be planned for this communicator (named on
                                stderr) */
  CCOLL_MPI_PASS_ARGUMENTS,  /* arguments ccoll does not take: unequal MPI_Reduce_scatter counts,
                                MPI_Allgather send and receive types or counts that differ, a root
                                out of range (MPI reports it) */
  CCOLL_MPI_NCOUNTERS
};
/* The interposed collectives, for ccoll_mpi_function_counter. */
enum ccoll_mpi_function_id {
  CCOLL_MPI_ALLREDUCE = 0,
  CCOLL_MPI_REDUCE_SCATTER_BLOCK,
  CCOLL_MPI_REDUCE_SCATTER,
  CCOLL_MPI_ALLGATHER,
  CCOLL_MPI_BCAST,
  CCOLL_MPI_REDUCE,
  CCOLL_MPI_NFUNCTIONS
};

/* This process's value of one counter of MPI_Allreduce (0 for an unknown id). Thread-safe. */
unsigned long long ccoll_mpi_counter(int id);
/* The same for any interposed function (0 for an unknown function or id). */
unsigned long long ccoll_mpi_function_counter(int function, int id);

#ifdef __cplusplus
}
#endif

#endif /* CCOLL_MPI_H */
