// `cohort bench step`: time training steps on synthetic input after a
// warm-up, validate them, and put PyTorch's figure for the same model, batch
// and threads beside it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "comm/communicator.h"

namespace cohort {

struct StepBenchConfig {
  std::string model = "mnist-small";
  int64_t batch = 128;
  int threads = 1;
  int steps = 20;
  int warmup = 5;
  std::string peer;  // "" or "pytorch"
  bool peak = false; // also measure the matmul peak and report the share of it
  int workers = 1;   // ranks (data-parallel, under mpirun); the peer runs DDP with as many
  bool overlap = true;
};

// comm: null for one process; else every rank calls this and rank 0 prints.
nlohmann::ordered_json run_step_bench(const StepBenchConfig& cfg,
                                      comm::Communicator* comm = nullptr);

}  // namespace cohort
