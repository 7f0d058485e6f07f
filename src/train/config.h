// Everything `cohort train` is told, in one place (flags fill it, and a
// DeepSpeed config file: train/ds_config.h). Defaults follow the studies: Adam, lr 0.001, batch 128.
// The strategies' own flags live in their families (parallel/registry.h),
// which `strategies` holds.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/registry.h"

namespace cohort {

struct TrainConfig {
  std::string model = "mnist-small";
  int64_t seq = 0, vocab = 0;  // token models: context and vocabulary (0: the model's)
  std::string data = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // --data text: a text file (empty: the default corpus, data/tokens.h);
  // --data tokens: an llm.c shard or a glob of them.
  std::string data_path;
  int epochs = 2;
  int64_t batch = 128;
  float lr = 0.001f;
  std::string optimizer = "adam";
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-7f;  // adam, adamw
  std::string schedule = "constant";
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine, linear: steps to the floor (0: the whole run)
  float min_lr = 0.0f;      // cosine, linear: the floor
  float clip_norm = 0.0f;
  int threads = 0;  // 0: the machine's CPUs / the job's ranks on it
  uint64_t seed = 0;
  int repeat = 1;
  int64_t limit = 0;  // keep the first N training images or windows (0: all)
  int64_t test_limit = 0;  // evaluate on the first N test images or windows (0: all)
  std::string log = "human";  // human | jsonl
  std::string eval = "epoch";  // evaluate after every epoch, or only after the last
  std::string save, load, resume;  // train/resume.h ("auto": the newest commit)
  // Classifiers: a head of K outputs (0: the model's own). --load then loads
  // every tensor whose name and shape match and re-initializes the head where
  // the file's differs; --load-partial also lets other tensors differ or be
  // missing (they keep their initialization) and the file hold others.
  int64_t num_classes = 0;
  bool load_partial = false;
  // Elastic runs (train/commits.h): commit every K optimizer updates and at
  // every epoch end (0: off) to this folder; --global-batch G holds the
  // global batch at G whatever the world (per-rank batch G / ranks).
  int64_t commit_every = 0;
  std::string checkpoint_dir = "/dev/shm/cohort-commits";
  int64_t global_batch = 0;
  std::string timeline;  // --timeline: every rank's steps as one Chrome trace-event file
  int64_t stop_after_steps = 0;  // testing: return after N steps of this process (0: off)
  int step_delay_ms = 0;  // testing: sleep after each step, so a test's signals land mid-run
  PrecisionFlags precision;  // --precision, --grad-dtype, loss scaling
  std::string config;                     // --config: the DeepSpeed file read ("" : none)
  std::vector<std::string> config_notes;  // what its keys only noted, for the summary

  // Parallelism (src/parallel/): the strategy's name and every family's flags.
  std::string parallel = "none";
  std::shared_ptr<StrategyRegistry> strategies = std::make_shared<StrategyRegistry>();
  int workers = 1;  // >1: start that many ranks with mpirun on this machine
  int accumulate = 1;
  double timeout = 0;  // seconds before a stalled collective is reported (0: off)
  // on: refuse a run whose ranks on this machine would not fit in its memory
  // (train/memory_plan.h); off: only report the estimate in the summary.
  std::string memory_check = "on";

  const StrategyFamily& strategy() const { return strategies->find(parallel); }
  // Ranks the strategy needs (0: any number, e.g. dp, ps).
  int ranks_needed() const { return strategy().ranks_needed(parallel); }
  // The flags a strategy may read or check.
  RunSettings run_settings() const;
  // The flags as "--name value" lines, compared across ranks at start.
  std::string describe() const;
  // The effective configuration, for the run's summary ("config").
  nlohmann::ordered_json effective(int64_t global_batch) const;
};

}  // namespace cohort
