// `cohort simulate`: predicts a training step at any number of hosts and
// ranks from the cost model (sim_model.h), prints the step's split and the
// scaling efficiency, and with --sweep a table and an efficiency plot.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "bench/sim_model.h"

namespace cohort {

struct SimulateConfig {
  std::string model = "mnist-large";
  int64_t seq = 0, vocab = 0;
  std::string parallel = "dp";
  std::string allreduce = "auto", schedule = "1f1b", ps_mode = "sync", precision = "fp32",
              grad_dtype = "fp32";
  bool no_overlap = false;
  sim::Plan plan;
  int hosts = 1, ranks_per_host = 1;
  std::string link = "10Gbit,20us";  // between hosts
  std::string intra = "80Gbit,2us";  // inside a host (shared memory)
  std::string calibrate;             // a `bench comm` JSON line: fits --intra
  std::string calibrate_inter;       // ... fits --link
  std::string calibrate_loaded;      // ... between hosts with every core computing: overlapped collectives
  std::string calibrate_cpu;         // ... between namespace hosts, unshaped: the cores' TCP cost
  std::string compute = "measured";  // or a profile file (--save-compute writes one)
  std::string save_compute;
  int threads = 0;                   // measuring: threads (0: this machine's CPUs)
  std::string contention;            // "2:1.9,4:3.6": measured slow-downs (Plan::contention)
  std::string sweep;                 // "1,2,4,...": ranks
  std::string out;                   // --sweep: folder for sweep.json and efficiency.png
  std::string config;                // a DeepSpeed ds_config.json (bench/sim_config.h)
};

void add_simulate_options(CLI::App& app, SimulateConfig& c);
int run_simulate(SimulateConfig& c);

}  // namespace cohort
