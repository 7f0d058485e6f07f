#include "parallel/registry.h"

#include <sstream>

#include "core/error.h"

namespace cohort {

// The registrations, in the order of --parallel's help and of the rows of
// `cohort bench strategies`.
StrategyRegistry::StrategyRegistry() {
  families_.push_back(local_family());
  families_.push_back(replicas_family());
  families_.push_back(data_parallel_family());
  families_.push_back(zero_family());
  families_.push_back(parameter_server_family());
  families_.push_back(pipeline_family());
}

void StrategyRegistry::add_flags(CLI::App& app) {
  for (auto& f : families_) f->add_flags(app);
}

void StrategyRegistry::check(const std::string& name, const RunSettings& run, int world) const {
  for (auto& f : families_) f->validate();
  const StrategyFamily& family = find(name);
  COHORT_INPUT_CHECK(world == 1 || family.distributed(name), "--parallel ", name,
                     " runs in one process, got ", world, " ranks");
  COHORT_INPUT_CHECK(run.precision.grad_comm == DType::kF32 || family.reduces_gradients(name),
                     "--grad-dtype ", precision_name(run.precision.grad_comm),
                     " acts on gradients summed over ranks: --parallel dp or zero, or hybrid "
                     "with --dp 2 or more (got --parallel ", name, ")");
  COHORT_INPUT_CHECK(run.freeze == "none" || family.freezes(name), "--freeze ", run.freeze,
                     ": --parallel ", name, " does not keep frozen layers off the wire yet");
  family.check(name, run, world);
}

const StrategyFamily& StrategyRegistry::find(const std::string& name) const {
  for (auto& f : families_)
    for (auto& n : f->names())
      if (n == name) return *f;
  throw InputError("--parallel: unknown strategy '" + name + "' (valid: " + names() + ")");
}

std::string StrategyRegistry::names() const {
  std::string all;
  for (auto& f : families_)
    for (auto& n : f->names()) all += (all.empty() ? "" : ", ") + n;
  return all;
}

std::string StrategyRegistry::help() const {
  std::string all;
  for (auto& f : families_) all += "\n  " + f->help();
  return all;
}

void StrategyRegistry::export_flags(RunSettings& run) const {
  for (auto& f : families_) f->export_flags(run);
}

std::string StrategyRegistry::describe() const {
  std::ostringstream os;
  for (auto& f : families_) f->describe(os);
  return os.str();
}

std::vector<BenchRow> StrategyRegistry::bench_rows() const {
  std::vector<BenchRow> cohort, peer;
  for (auto& f : families_)
    for (auto& r : f->bench_rows()) (r.engine == "cohort" ? cohort : peer).push_back(r);
  cohort.insert(cohort.end(), peer.begin(), peer.end());
  return cohort;
}

}  // namespace cohort
