// `cohort bench step`: time training steps on synthetic input after a
// warm-up, validate them, and put PyTorch's figure for the same model, batch,
// threads and precision beside it.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/communicator.h"
#include "optim/precision.h"
#include "parallel/registry.h"

namespace cohort {

struct StepBenchConfig {
  std::string model = "mnist-small";
  int64_t seq = 0, vocab = 0;  // token models: context and vocabulary (0: the model's)
  int64_t batch = 128;
  int threads = 1;
  int steps = 20;
  int warmup = 5;
  std::string peer;  // "" or "pytorch"
  bool peak = false; // also measure the matmul peak and report the share of it
  PrecisionFlags precision;  // --precision and the rest (optim/precision.h)
  std::string timeline;  // --timeline: the timed steps as Chrome trace-event JSON
  int workers = 1;   // ranks (under mpirun); the peer runs DDP with as many
  // The strategy (none: one process, dp under ranks) and every family's flags.
  std::string parallel = "none";
  std::shared_ptr<StrategyRegistry> strategies = std::make_shared<StrategyRegistry>();
};

// comm: null for one process; else every rank calls this and rank 0 prints.
nlohmann::ordered_json run_step_bench(const StepBenchConfig& cfg,
                                      comm::Communicator* comm = nullptr);

}  // namespace cohort
