#include "parallel/replicas.h"

#include <omp.h>

#include <exception>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "ops/elementwise.h"
#include "parallel/registry.h"

namespace cohort {

Replicas::Replicas(nn::Model& master, Optimizer& opt, int replicas, int threads, uint64_t seed,
                   float clip_norm, const Precision& precision)
    : master_(master), threads_(std::max(1, threads)),
      master_step_(master, opt, seed, clip_norm, precision) {
  COHORT_INPUT_CHECK(replicas >= 1, "--replicas must be at least 1, got ", replicas);
  for (int r = 1; r < replicas; ++r) {
    models_.push_back(master.clone(seed));
    steps_.push_back(std::make_unique<LocalStep>(*models_.back(), opt, seed + uint64_t(r), 0,
                                                 precision));
  }
}

StepResult Replicas::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const int64_t size = batch.size();
  // An epoch's last, partial batch may be smaller than the replicas: fewer work.
  const int n = int(std::min<int64_t>(int64_t(models_.size()) + 1, size));
  const float scale = 1.0f / float(size);  // mean over the whole batch, as one process
  std::vector<StepResult> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto work = [&](int r) {
    try {
      omp_set_num_threads(threads_);
      nn::Model& m = r == 0 ? master_ : *models_[size_t(r - 1)];
      LocalStep& s = r == 0 ? master_step_ : *steps_[size_t(r - 1)];
      if (r > 0) {  // replicate: the master's weights, buffers and loss scale
        m.params().params().copy_from(master_.params().params());
        m.buffers().params().copy_from(master_.buffers().params());
        s.follow_scaler(master_step_.scaler());
      }
      nn::Context ctx;
      results[size_t(r)] = s.forward_backward(batch.slice(size * r / n, size * (r + 1) / n),
                                              scale, ctx);
    } catch (...) {
      errors[size_t(r)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int r = 1; r < n; ++r) pool.emplace_back(work, r);
  const int caller_threads = omp_get_max_threads();
  work(0);
  omp_set_num_threads(caller_threads);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Reduce the trainable range (--freeze) to the master, then one optimizer step there.
  const auto [b, e] = master_.trainable();
  float* g = master_.params().grads().f32();
  for (int r = 1; r < n; ++r)
    ops::add_inplace(g + b, models_[size_t(r - 1)]->params().grads().f32() + b, e - b);
  master_step_.apply(lr);
  times.compute += t.seconds();
  StepResult total;
  for (auto& r : results) {
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.images += r.images;
  }
  return total;
}

namespace {

// --parallel replicas: PyTorch's DataParallel, threads of one process.
class ReplicasFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"replicas"}; }
  std::string help() const override {
    return "replicas: one process, --replicas threads each on a slice of the batch";
  }
  void add_flags(CLI::App& app) override {
    app.add_option("--replicas", replicas_, "replica threads for --parallel replicas");
  }
  void validate() const override {
    COHORT_INPUT_CHECK(replicas_ >= 1, "--replicas must be at least 1, got ", replicas_);
  }
  void check(const std::string&, const RunSettings& run, int) const override {
    COHORT_INPUT_CHECK(replicas_ <= run.batch, "--replicas ", replicas_, " exceeds --batch ",
                       run.batch, " (each replica needs at least one image)");
  }
  bool distributed(const std::string&) const override { return false; }
  bool freezes(const std::string&) const override { return true; }
  void describe(std::ostream& os) const override { os << "--replicas " << replicas_ << "\n"; }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    return std::make_unique<Replicas>(a.model, a.opt, replicas_,
                                      std::max(1, omp_get_max_threads() / replicas_), a.run.seed,
                                      a.run.clip_norm, a.run.precision);
  }
  std::vector<BenchRow> bench_rows() const override {
    return {{"replicas", "cohort replicas (DataParallel-style)", "cohort", 1, 1, 1, true,
             {"--parallel", "replicas", "--replicas", "2"}, "", "2 replica threads in 1 process"}};
  }

 private:
  int replicas_ = 2;
};

}  // namespace

std::unique_ptr<StrategyFamily> replicas_family() { return std::make_unique<ReplicasFamily>(); }

}  // namespace cohort
