// How many CPUs this process may use, and how many threads a rank should run
// so that the ranks on one machine share its CPUs instead of oversubscribing
// them (torchrun's OMP_NUM_THREADS=1 default, made exact).
#pragma once

namespace cohort {

// Its affinity mask (which containers narrow), else the online count.
int usable_cpus();

// Ranks of this job on this machine, from the launcher's environment
// (OpenMPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS); 1 outside one.
int ranks_on_this_node();

// cpus / ranks, at least 1: the threads each of `ranks` processes runs so
// that together they fill `cpus` without oversubscribing them.
int threads_per_rank(int ranks, int cpus = usable_cpus());

// threads_per_rank(ranks_on_this_node()): what `--threads 0` means.
int default_threads_per_rank();

// The calling thread's OpenMP regions run on it alone. For helper threads
// (a rank's communication thread): a thread OpenMP has not seen starts with
// the process's default team size, every core, so a large conversion there
// would start a team of spinning threads beside the compute thread's.
void serial_openmp();

}  // namespace cohort
