// `cohort bench tune --model M`: finds the fastest processes x threads x
// batch for a model on this machine and prints it.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cohort {

struct TuneConfig {
  std::string model = "mnist-small";
};

// Declares the subcommand's flags on `cmd`.
void add_tune_options(CLI::App& cmd, TuneConfig& cfg);
// Runs the search; returns the process exit code.
int run_tune(const TuneConfig& cfg);

}  // namespace cohort
