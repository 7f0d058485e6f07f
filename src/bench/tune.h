// `cohort bench tune --model M`: finds the fastest processes x threads x
// batch for a model on this machine and prints it.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cohort {

// Comma lists as given on the command line; parsed (and refused) by run_tune.
struct TuneConfig {
  std::string model = "mnist-small";
  std::string processes = "1,2,4";      // data-parallel ranks (mpirun for more than 1)
  std::string threads = "1,2";          // OpenMP threads per process
  std::string batch = "32,64,128,256";  // batch per process
  int steps = 10;                       // timed steps per candidate
  int warmup = 3;                       // untimed steps before them
  int rounds = 1;                       // measurements per candidate; the best is kept
  int cpus = 0;                         // budget for processes x threads; 0: this machine's CPUs
};

// Declares the subcommand's flags on `cmd`.
void add_tune_options(CLI::App& cmd, TuneConfig& cfg);
// Runs the search; returns the process exit code.
int run_tune(const TuneConfig& cfg);

}  // namespace cohort
