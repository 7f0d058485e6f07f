// cohort_train_worker: runs several `cohort` command lines, one after
// another, in one mpirun job, each as `cohort` itself runs it (src/cli/main.cpp,
// compiled in with its entry point renamed). Starting a job is what costs:
// MPI_Init took over 10 s a job on a fresh machine, while a run of the
// equality tests trains for well under one. The worker holds one world
// communicator for the whole job, so MPI stays initialized between runs and
// each run's own communicator is a copy of the world.
//
//   mpirun -np N cohort_train_worker train FLAGS... [--then train FLAGS...]...
//
// Before each run rank 0 prints `cohort_train_worker: run K` (K from 1) on
// stdout, so a test can cut the output into runs. A run that fails on any
// rank ends the job with its exit code (MPI_Abort: the other ranks may be
// waiting in a collective).
#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.h"

int cohort_cli_main(int argc, char** argv);

int main(int argc, char** argv) {
  using namespace cohort;
  auto world = comm::mpi_world(&argc, &argv);
  std::vector<std::vector<std::string>> runs(1);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--then")
      runs.emplace_back();
    else
      runs.back().push_back(argv[i]);
  }
  for (size_t k = 0; k < runs.size(); ++k) {
    if (world->rank() == 0) std::printf("cohort_train_worker: run %zu\n", k + 1);
    std::fflush(stdout);
    std::vector<std::string> args = runs[k];
    args.insert(args.begin(), argv[0]);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    const int code = cohort_cli_main(int(args.size()), cargs.data());
    std::fflush(stdout);
    if (code != 0) {
      std::fprintf(stderr, "cohort_train_worker: run %zu ended with exit code %d\n", k + 1, code);
      comm::mpi_abort(code);
    }
    world->barrier();  // every rank is done with run k before any starts k+1
  }
  return 0;
}
