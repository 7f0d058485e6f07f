#include "parallel/zero.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/clock.h"
#include "optim/clip.h"
#include "parallel/registry.h"

namespace cohort {

namespace {

constexpr int kZeroTag = 125;  // clear of pipeline (110-111), ps (120-121), resume (130)

int mod(int a, int p) { return ((a % p) + p) % p; }

}  // namespace

Zero::Zero(comm::Communicator& comm, nn::Model& model, Optimizer& opt, const ZeroConfig& cfg,
           uint64_t seed, float clip_norm, const Precision& precision)
    : comm_(comm),
      model_(model),
      opt_(opt),
      cfg_(cfg),
      clip_norm_(clip_norm),
      local_(model, opt, seed, 0, precision),
      params_(model.params().size()) {
  COHORT_INPUT_CHECK(cfg.stage == 1 || cfg.stage == 2, "--zero-stage must be 1 or 2, got ",
                     cfg.stage);
  COHORT_INPUT_CHECK(cfg.accumulate >= 1, "--accumulate must be at least 1, got ", cfg.accumulate);
  auto [begin, end] = optimizer_range();
  opt_.init_state(end - begin);
  if (cfg.stage == 1)
    buckets_ =
        std::make_unique<BucketReducer>(comm, model.params().grads().f32(), params_, cfg.bucket_mb,
                                        true, DType::kF32, comm::Algorithm::kAuto);
  if (cfg.stage == 2) {
    int64_t largest = 0;
    for (int r = 0; r < comm.size(); ++r)
      largest = std::max(largest, shard_begin(r + 1) - shard_begin(r));
    scratch_ = Tensor::empty({largest});
  }
}

// Ring reduce-scatter over the shards in place: at step s rank r passes on
// its partial sum of shard r-s-1 and adds the one it receives into shard
// r-s-2; after N-1 steps shard r (its own) holds every rank's contribution.
// The other shards of the arena are left holding partial sums.
void Zero::reduce_scatter_grads() {
  const int p = comm_.size(), r = rank();
  float* g = model_.params().grads().f32();
  float* tmp = scratch_.f32();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r - s - 1, p), rb = mod(r - s - 2, p);
    const int64_t rn = shard_begin(rb + 1) - shard_begin(rb);
    comm_.sendrecv(g + shard_begin(sb), shard_bytes(sb), right, tmp, shard_bytes(rb), left,
                   kZeroTag);
    float* acc = g + shard_begin(rb);
#pragma omp simd
    for (int64_t i = 0; i < rn; ++i) acc[i] += tmp[i];
  }
}

// Ring allgather in place: at step s rank r passes on shard r-s (its own
// first) and receives shard r-s-1.
void Zero::allgather_params() {
  const int p = comm_.size(), r = rank();
  float* w = model_.params().params().f32();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    comm_.sendrecv(w + shard_begin(sb), shard_bytes(sb), right, w + shard_begin(rb),
                   shard_bytes(rb), left, kZeroTag);
  }
}

bool Zero::any_rank(bool v) {
  float f = v ? 1.0f : 0.0f;
  comm_.allreduce(&f, 1, comm::ReduceOp::kSum);
  return f > 0;
}

double Zero::sum_over_ranks(double v) {
  std::vector<double> all(size_t(comm_.size()), 0.0);
  all[size_t(rank())] = v;
  for (int r = 0; r < comm_.size(); ++r) comm_.broadcast(&all[size_t(r)], sizeof(double), r);
  double sum = 0;
  for (double x : all) sum += x;
  return sum;
}

// scaled_step's order (overflow check, unscale, clip, step) on this rank's
// shard, with the two decisions that span shards taken over all ranks.
void Zero::step_shard(float lr) {
  const Arena& a = model_.params();
  const auto [begin, end] = optimizer_range();
  const int64_t n = end - begin;
  float* w = a.params().f32() + begin;
  float* g = a.grads().f32() + begin;
  if (LossScaler* scaler = local_.loss_scaler()) {
    const float carried = scaler->scale();
    if (!scaler->update(any_rank(has_nonfinite(g, n)))) return;  // every rank skips alike
    if (carried != 1.0f) scale_inplace(g, n, 1.0f / carried);
  }
  if (clip_norm_ > 0) {
    const float c = clip_scale(std::sqrt(sum_over_ranks(sum_squares(g, n))), clip_norm_);
    if (c != 1.0f) scale_inplace(g, n, c);
  }
  if (n > 0) opt_.step(w, g, n, lr);
}

StepResult Zero::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  nn::Context ctx;
  ctx.accumulate = micro_ > 0;
  // As data parallelism: the mean over the global batch.
  const float scale = 1.0f / float(batch.size() * comm_.size() * cfg_.accumulate);
  const bool last = micro_ + 1 == cfg_.accumulate;
  if (last && buckets_) buckets_->arm(ctx);
  StepResult r = local_.forward_backward(batch, scale, ctx);
  times.compute += t.seconds();
  if (!last) {
    ++micro_;
    return r;
  }
  micro_ = 0;
  t.reset();
  if (buckets_)
    buckets_->finish();
  else
    reduce_scatter_grads();
  times.comm += t.seconds();
  t.reset();
  step_shard(lr);
  times.compute += t.seconds();
  t.reset();
  allgather_params();
  times.comm += t.seconds();
  return r;
}

void Zero::sum(double* v, int n) { comm::sum_metrics(comm_, v, n); }

nlohmann::ordered_json Zero::summary() {
  // What this rank holds, then every rank's (sizes differ by a shard's rounding).
  int64_t state = 0;
  for (const Tensor* t : opt_.state()) state += int64_t(t->nbytes());
  const Arena& a = model_.params();
  const int64_t mine[3] = {int64_t(a.params().nbytes()),
                           int64_t(a.grads().nbytes() + (cfg_.stage == 2 ? scratch_.nbytes() : 0)),
                           state};
  const int n = comm_.size();
  std::vector<int64_t> all(size_t(3 * n), 0);
  for (int i = 0; i < 3; ++i) all[size_t(3 * rank() + i)] = mine[i];
  for (int r = 0; r < n; ++r) comm_.broadcast(&all[size_t(3 * r)], 3 * sizeof(int64_t), r);
  nlohmann::ordered_json params = nlohmann::ordered_json::array(), grads = params, opt = params;
  for (int r = 0; r < n; ++r) {
    params.push_back(all[size_t(3 * r)]);
    grads.push_back(all[size_t(3 * r + 1)]);
    opt.push_back(all[size_t(3 * r + 2)]);
  }
  // DeepSpeed's model (ZeRO paper, section 3): Adam in mixed precision holds
  // 2 bytes of fp16 weights, 2 of fp16 gradients and K = 12 of f32 state
  // (master weights, momentum, variance) per parameter.
  const double psi = double(params_);
  nlohmann::ordered_json s = local_.summary();
  s["zero"] = {
      {"stage", cfg_.stage},
      {"ranks", n},
      {"parameters", params_},
      {"held_bytes_per_rank",
       {{"parameters", params}, {"gradients", grads}, {"optimizer_state", opt}}},
      {"holds",
       "f32 master weights and f32 gradients for the whole arena on every rank" +
           std::string(cfg_.stage == 2 ? " plus one shard of reduce-scatter scratch" : "") + "; " +
           opt_.name() + " state for this rank's shard only"},
      {"deepspeed_model_bytes_per_rank",
       {{"dp", 16 * psi}, {"zero1", 4 * psi + 12 * psi / n}, {"zero2", 2 * psi + 14 * psi / n}}}};
  return s;
}

namespace {

// --parallel zero --zero-stage 1|2.
class ZeroFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"zero"}; }
  std::string help() const override {
    return "zero: data parallelism with the optimizer state (--zero-stage 1) and the gradient "
           "reduction (2) sharded over ranks (DeepSpeed ZeRO)";
  }
  void add_flags(CLI::App& app) override {
    app.add_option("--zero-stage", stage_, "1 | 2: what ZeRO shards over ranks (zero)");
  }
  void validate() const override {
    COHORT_INPUT_CHECK(stage_ != 3, "--zero-stage 3 is not built yet; use 1 or 2");
    COHORT_INPUT_CHECK(stage_ == 1 || stage_ == 2, "--zero-stage must be 1 or 2, got ", stage_);
  }
  void describe(std::ostream& os) const override { os << "--zero-stage " << stage_ << "\n"; }
  void export_flags(RunSettings& run) const override { run.zero_stage = stage_; }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    COHORT_INPUT_CHECK(a.comm, "--parallel zero needs ranks: start with mpirun or --workers N");
    ZeroConfig cfg;
    cfg.stage = stage_;
    cfg.accumulate = a.run.accumulate;
    return std::make_unique<Zero>(*a.comm, a.model, a.opt, cfg, a.run.seed, a.run.clip_norm,
                                  a.run.precision);
  }
  std::string summary_text(const nlohmann::ordered_json& s) const override {
    if (!s.contains("zero")) return "";
    const auto& z = s["zero"];
    const auto& held = z["held_bytes_per_rank"];
    const auto& ds = z["deepspeed_model_bytes_per_rank"];
    const double mb = 1 << 20;
    char line[512];
    std::snprintf(line, sizeof line,
                  "zero stage %d on %d ranks, rank 0 holds: parameters %.1f MB, gradients %.1f "
                  "MB, optimizer state %.1f MB (DeepSpeed's model, Adam mixed precision: dp "
                  "%.1f, zero-1 %.1f, zero-2 %.1f MB per rank)\n",
                  z["stage"].get<int>(), z["ranks"].get<int>(),
                  held["parameters"][0].get<double>() / mb, held["gradients"][0].get<double>() / mb,
                  held["optimizer_state"][0].get<double>() / mb, ds["dp"].get<double>() / mb,
                  ds["zero1"].get<double>() / mb, ds["zero2"].get<double>() / mb);
    return line;
  }
  std::vector<BenchRow> bench_rows() const override {
    return {{"zero2",
             "cohort zero-2 (reduce-scatter)",
             "cohort",
             2,
             2,
             1,
             false,
             {"--workers", "2", "--parallel", "zero", "--zero-stage", "2"},
             ""}};
  }

 private:
  int stage_ = 1;
};

}  // namespace

std::unique_ptr<StrategyFamily> zero_family() { return std::make_unique<ZeroFamily>(); }

}  // namespace cohort
