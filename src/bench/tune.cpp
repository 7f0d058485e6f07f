#include "bench/tune.h"

#include "core/error.h"

namespace cohort {

void add_tune_options(CLI::App& cmd, TuneConfig& cfg) {
  cmd.add_option("--model", cfg.model, "model to tune");
}

int run_tune(const TuneConfig&) { throw Error("bench tune: not written yet"); }

}  // namespace cohort
