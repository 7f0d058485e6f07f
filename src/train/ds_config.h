// `cohort train --config FILE`: a DeepSpeed ds_config.json, read for the keys
// that mean the same in cohort (the table is in docs/DESIGN.md). Each key
// sets the flag it stands for, unless that flag was given on the command
// line: flags win. A key cohort does not know, a value of the wrong type, an
// impossible value, or one cohort cannot honour (a log warm-up, Adam's
// max_grad_norm) is refused in one line naming the key.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "train/config.h"

namespace cohort {

// Reads the file at `path` into cfg. `given`: the flags the command line set
// ("--batch", "--lr", ...), which the file does not touch. `world`: the
// data-parallel ranks the batch keys are checked against, as DeepSpeed checks
// train_batch_size = micro batch x accumulation x world. InputError
// "--config PATH: KEY: what" on any refusal. What a key only noted (a
// cadence cohort has no use for, a bucket it does not cut) goes to
// cfg.config_notes for the run's summary.
void apply_ds_config(const std::string& path, TrainConfig& cfg, const std::set<std::string>& given,
                     int world);

// The same for a parsed document; `path` names it in errors.
void apply_ds_config(const nlohmann::json& doc, const std::string& path, TrainConfig& cfg,
                     const std::set<std::string>& given, int world);

}  // namespace cohort
