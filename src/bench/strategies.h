// `cohort bench strategies --model M --data synthetic`: every --parallel
// strategy at the same global batch on this machine, each as a `cohort train`
// subprocess, beside PyTorch's single process, DDP and Pipe, in one table
// (time per epoch, images/s, utilization = compute share of a step).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace cohort {

struct StrategiesConfig {
  std::string model = "mnist-large";
  std::string data = "synthetic";
  std::string data_dir;  // passed to every row; empty: train's default
  int batch = 0;         // global batch G (per rank G / data-parallel ranks); 0: by model
  int limit = -1;        // training images per epoch; -1: by model (quick on 2 vCPUs)
  int epochs = 2;
  std::string peer = "pytorch";  // pytorch | none
  std::string only;              // comma list of row names; empty: every row
  std::string out;               // results folder; empty: results/strategies-MODEL
  int cores = 0;                 // CPUs shared by a row's ranks; 0: this machine's
  std::string balance = "params";  // mp, pp, hybrid: --balance params | time
  int row_timeout = 1800;        // seconds before a row is stopped and marked failed
};

// Declares the subcommand's flags on `cmd`.
void add_strategies_options(CLI::App& cmd, StrategiesConfig& cfg);
// Runs every strategy; returns the process exit code (0: every row ran,
// 1: the table was written but some rows failed). Bad flags throw InputError.
int run_strategies(const StrategiesConfig& cfg);

}  // namespace cohort
