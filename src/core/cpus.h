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

// usable_cpus() / ranks_on_this_node(), at least 1: what `--threads 0` means.
int default_threads_per_rank();

}  // namespace cohort
