#include "bench/strategies.h"

#include "core/error.h"

namespace cohort {

void add_strategies_options(CLI::App& cmd, StrategiesConfig& cfg) {
  cmd.add_option("--model", cfg.model, "model to train with every strategy");
}

int run_strategies(const StrategiesConfig&) { throw Error("bench strategies: not written yet"); }

}  // namespace cohort
