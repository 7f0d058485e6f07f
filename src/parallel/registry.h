// The strategies, each registered once (registry.cpp). A strategy family is
// one file under parallel/: its Strategy class and, beside it, the family
// that knows its --parallel names, declares and checks its flags, says how
// many ranks it needs, describes itself, builds the Strategy and names its
// rows in `cohort bench strategies`. train/, bench/ and cli/ ask the
// registry; none of them names a strategy.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "optim/precision.h"
#include "parallel/defaults.h"
#include "parallel/strategy.h"

namespace cohort {

// The training flags a strategy may read or must check against.
struct RunSettings {
  std::shared_ptr<const nn::ModelSpec> model;
  int64_t batch = 128;  // per rank
  int accumulate = 1;   // micro-batches per optimizer step
  float clip_norm = 0;  // 0: off
  uint64_t seed = 0;
  Precision precision;  // mixed precision (optim/precision.h)
  // Families' flags that other layers read (StrategyFamily::export_flags):
  // the memory estimate (train/memory_plan.h) needs them before any strategy exists.
  std::string freeze = "none";  // --freeze (nn::Model::freeze)
  int zero_stage = 1;     // --zero-stage (read under --parallel zero)
  double bucket_mb = kDefaultBucketMb;      // --bucket-mb
  double prefetch_mb = kDefaultPrefetchMb;  // --prefetch-mb (zero stage 3)
};

// What a family builds a strategy from.
struct StrategyArgs {
  const RunSettings& run;
  comm::Communicator* comm;  // null in a single process
  nn::Model& model;
  Optimizer& opt;
};

// One row of `cohort bench strategies`: how to start it and how it divides
// the global batch G and the CPUs.
struct BenchRow {
  std::string name;                // --only key
  std::string label;               // the table's first column
  std::string engine;              // cohort | pytorch
  int ranks;                       // processes
  int data_ranks;                  // ranks that each take G / data_ranks images a step
  int micro;                       // micro-batches a rank's batch is cut into
  bool own_threads;                // one process whose threads split the CPUs
  std::vector<std::string> flags;  // cohort train's (or the peer's) flags for it
  std::string versus;              // PyTorch rows: the cohort row it is compared with
  std::string note = "";           // for the table's notes column
};

class StrategyFamily {
 public:
  virtual ~StrategyFamily() = default;
  // The --parallel values it serves, and one line of help for them.
  virtual std::vector<std::string> names() const = 0;
  virtual std::string help() const = 0;
  // Declares its flags, bound to this object's members.
  virtual void add_flags(CLI::App& app) = 0;
  // InputError for a value of its flags that no run could take (checked
  // whichever strategy runs, so a bad value is never silently ignored).
  virtual void validate() const {}
  // InputError for flags that `name` cannot run with on `world` ranks.
  virtual void check(const std::string& name, const RunSettings& run, int world) const {}
  // Ranks `name` needs; 0 when any number will do (mpirun -np or --workers).
  virtual int ranks_needed(const std::string& name) const { return 0; }
  // Whether `name` runs over ranks, or in one process.
  virtual bool distributed(const std::string& name) const { return true; }
  // Whether `name` keeps a frozen prefix of the arena (--freeze) out of its
  // optimizer and its communication; the registry refuses --freeze otherwise.
  virtual bool freezes(const std::string& name) const { return false; }
  // Whether `name` all-reduces gradients over ranks (what --grad-dtype acts on).
  virtual bool reduces_gradients(const std::string& name) const { return false; }
  // What `name` means when the job has several ranks (single process: dp).
  virtual std::string under_ranks(const std::string& name) const { return name; }
  // Its flags as "--name value" lines, compared across ranks at start.
  virtual void describe(std::ostream& os) const {}
  // Copies the flags RunSettings names (zero_stage, bucket_mb) into `run`.
  virtual void export_flags(RunSettings& run) const {}
  virtual std::unique_ptr<Strategy> make(const std::string& name, StrategyArgs& args) const = 0;
  // Human lines for what its Strategy::summary() added to the run's summary.
  virtual std::string summary_text(const nlohmann::ordered_json& summary) const { return ""; }
  virtual std::vector<BenchRow> bench_rows() const { return {}; }
};

// Every family (a fresh set: the flags' values live in them).
class StrategyRegistry {
 public:
  StrategyRegistry();
  void add_flags(CLI::App& app);
  // Every family's validate(), that a one-process strategy has one rank,
  // that --grad-dtype bf16 has an all-reduce to act on, then `name`'s check().
  void check(const std::string& name, const RunSettings& run, int world) const;
  // The family serving `name`; InputError naming --parallel and the valid names.
  const StrategyFamily& find(const std::string& name) const;
  // What `name` means in a job of several ranks (the family's under_ranks).
  std::string under_ranks(const std::string& name) const { return find(name).under_ranks(name); }
  std::string names() const;  // "none, dp, ..." for help and errors
  std::string help() const;   // every family's help line
  std::string describe() const;
  void export_flags(RunSettings& run) const;  // every family's
  std::vector<BenchRow> bench_rows() const;

 private:
  std::vector<std::unique_ptr<StrategyFamily>> families_;
};

// The registrations (one per family, listed in registry.cpp).
std::unique_ptr<StrategyFamily> local_family();
std::unique_ptr<StrategyFamily> replicas_family();
std::unique_ptr<StrategyFamily> data_parallel_family();
std::unique_ptr<StrategyFamily> zero_family();
std::unique_ptr<StrategyFamily> parameter_server_family();
std::unique_ptr<StrategyFamily> pipeline_family();

}  // namespace cohort
