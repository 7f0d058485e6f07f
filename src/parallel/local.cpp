#include "parallel/local.h"

#include "core/clock.h"
#include "optim/clip.h"
#include "parallel/registry.h"

namespace cohort {

LocalStep::LocalStep(nn::Model& model, Optimizer& opt, uint64_t seed, float clip_norm,
                     const Precision& precision)
    : model_(model), opt_(opt), rng_(seed ^ 0x5eedull), clip_norm_(clip_norm),
      precision_(precision), scaler_(precision.scaling, precision.scaled()) {}

StepResult LocalStep::forward_backward(const Batch& batch, float grad_scale, nn::Context& ctx) {
  ctx.training = true;
  ctx.rng = &rng_;
  ctx.precision = precision_.compute;
  const Tensor& out = model_.forward(batch.images, ctx);
  nn::ensure(dout_, out.shape(), out.dtype());
  // fp16: the loss's gradient carries the loss scale (divided out in apply).
  auto loss = model_.loss().compute(out, batch.labels.data(), &dout_,
                                    grad_scale * scaler_.scale());
  model_.backward(dout_, ctx);
  return {loss.loss_sum, loss.correct, out.dim(0)};
}

bool LocalStep::apply(float lr, const OverflowVote& vote) {
  // Frozen parameters (Model::freeze) are the arena's prefix: no state, no step.
  const Arena& a = model_.params();
  const auto [begin, end] = model_.trainable();
  return scaled_step(opt_, scaler_, a.params().f32() + begin, a.grads().f32() + begin,
                     end - begin, lr, clip_norm_, vote);
}

nlohmann::ordered_json LocalStep::summary() {
  return scaler_.enabled() ? scaler_.summary() : nlohmann::ordered_json::object();
}

StepResult LocalStep::run(const Batch& batch, float lr) {
  nn::Context ctx;
  StepResult r = forward_backward(batch, 1.0f / float(batch.size()), ctx);
  apply(lr);
  return r;
}

}  // namespace cohort

namespace cohort {

StepResult LocalStep::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  StepResult r = run(batch, lr);
  times.compute += t.seconds();
  return r;
}

}  // namespace cohort

namespace cohort {
namespace {

// --parallel none: one process; under several ranks, data parallelism.
class LocalFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"none"}; }
  std::string help() const override { return "none: one process (dp when started with ranks)"; }
  void add_flags(CLI::App&) override {}
  bool distributed(const std::string&) const override { return false; }
  bool freezes(const std::string&) const override { return true; }
  std::string under_ranks(const std::string&) const override { return "dp"; }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    return std::make_unique<LocalStep>(a.model, a.opt, a.run.seed, a.run.clip_norm,
                                       a.run.precision);
  }
  std::vector<BenchRow> bench_rows() const override {
    return {{"single", "cohort single process", "cohort", 1, 1, 1, true, {"--parallel", "none"}, ""},
            {"pytorch-single", "PyTorch single process", "pytorch", 1, 1, 1, true, {}, "single"}};
  }
};

}  // namespace

std::unique_ptr<StrategyFamily> local_family() { return std::make_unique<LocalFamily>(); }

}  // namespace cohort
