// `cohort bench strategies --model M --data synthetic`: every --parallel
// strategy at the same global batch, side by side in one table.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cohort {

struct StrategiesConfig {
  std::string model = "mnist-large";
};

// Declares the subcommand's flags on `cmd`.
void add_strategies_options(CLI::App& cmd, StrategiesConfig& cfg);
// Runs every strategy; returns the process exit code.
int run_strategies(const StrategiesConfig& cfg);

}  // namespace cohort
