// The MPI backend (OpenMPI; the way across machines). mpi_world() initializes
// MPI for a background communication thread and returns the world; the world
// communicator also owns MPI's lifetime (see mpi_world).
#pragma once
#include <memory>

#include "comm/communicator.h"

namespace cohort::comm {

// True when this process was started by mpirun (OpenMPI sets
// OMPI_COMM_WORLD_SIZE; srun/MPICH set PMI_SIZE).
bool launched_by_mpirun();

// Initializes MPI (once; later calls just return another world) asking for
// MPI_THREAD_MULTIPLE, starts the ranks' heartbeat (comm/mpi/heartbeat.h),
// and returns a communicator over all ranks. Throws
// CommError if the library offers less than MPI_THREAD_SERIALIZED.
//
// Lifetime: when the last world communicator is destroyed normally, MPI is
// finalized. When it is destroyed while an exception unwinds, MPI is left
// unfinalized on purpose: MPI_Finalize waits for every rank, so a rank that
// failed would hang there; exiting without it makes mpirun stop the job.
std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv);

// The thread level the library granted (MPI_THREAD_SERIALIZED or _MULTIPLE);
// with SERIALIZED only one thread may use any communicator at a time.
bool mpi_thread_multiple();

// Finalizes now (idempotent). Only on success paths: see mpi_world.
void mpi_finalize();

// Ends every rank of the job at once with `code` (MPI_Abort).
[[noreturn]] void mpi_abort(int code);

}  // namespace cohort::comm
