// `cohort simulate --config FILE`: the DeepSpeed ds_config.json that `cohort
// train --config` reads, read by the same reader (train/ds_config.h), for
// the keys that set a step's time: the batch keys, gradient accumulation,
// zero_optimization (stage 0 is dp; 1-3 zero; reduce_bucket_size,
// overlap_comm, stage3_prefetch_bucket_size), bf16 and
// communication_data_type. Its other keys (optimizer, scheduler, clipping)
// are checked as train checks them and change no step time. Flags given on
// the command line win, as in train.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench/simulate.h"

namespace cohort {

// Applies c.config (if set) to c. `simulate`: the parsed subcommand, for the
// flags given. The batch keys are checked against the ranks of --hosts x
// --ranks-per-host; a --sweep then holds the per-rank batch they give.
// Returns what the file only noted; InputError "--config PATH: KEY: what"
// on any refusal.
std::vector<std::string> apply_sim_config(const CLI::App& simulate, SimulateConfig& c);

}  // namespace cohort
