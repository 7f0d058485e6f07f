#include "core/cpus.h"

#include <omp.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace cohort {

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

int ranks_on_this_node() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 0) return std::atoi(v);
  }
  return 1;
}

int threads_per_rank(int ranks, int cpus) { return std::max(1, cpus / std::max(1, ranks)); }

int default_threads_per_rank() { return threads_per_rank(ranks_on_this_node()); }

void serial_openmp() { omp_set_num_threads(1); }

}  // namespace cohort
