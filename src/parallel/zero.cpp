#include "parallel/zero.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/clock.h"
#include "core/memory.h"
#include "core/timeline.h"
#include "ops/linear.h"
#include "optim/clip.h"
#include "parallel/registry.h"

namespace cohort {

Zero::Zero(comm::Communicator& comm, nn::Model& model, Optimizer& opt, const ZeroConfig& cfg,
           uint64_t seed, float clip_norm, const Precision& precision)
    : comm_(comm),
      model_(model),
      opt_(opt),
      cfg_(cfg),
      clip_norm_(clip_norm),
      local_(model, opt, seed, 0, precision),
      layout_(model.params().size(), comm.size(), model.frozen_params()) {
  COHORT_INPUT_CHECK(cfg.stage >= 1 && cfg.stage <= 3, "--zero-stage must be 1, 2 or 3, got ",
                     cfg.stage);
  COHORT_INPUT_CHECK(cfg.accumulate >= 1, "--accumulate must be at least 1, got ", cfg.accumulate);
  // The optimizer allocates its shard's state at the first step (or a
  // resume restores it), after stage 3 has released the other shards.
  // DeepSpeed's layout where it holds less: the weights outside the shard as
  // a bf16 copy (zero_replica.h). (gpt2 on 2 ranks, where it held the f32
  // weights' 4 Psi: zero-1 ran 0.84x of dp with it.)
  if (zero_holds_bf16_copy(cfg.stage, precision.compute, comm.size()))
    replica_ = std::make_unique<Bf16Replica>(model.params(), layout_, comm.rank());
  // bf16 on the wire: the shard's gradients at 2 bytes.
  if (precision.grad_comm == DType::kBF16 && comm.size() > 1)
    low_grads_ = std::make_unique<Bf16GradShard>(layout_, comm.rank());
  layers_ = std::make_unique<ZeroLayers>(comm, model, layout_, cfg.stage, cfg.bucket_mb,
                                         cfg.prefetch_mb, zero_streams_rows(precision.compute),
                                         replica_.get(), low_grads_.get());
  model.set_layer_hooks(layers_.get());
  // Which links cross hosts (the shards' all-gathers cut messages there):
  // found now, while every rank is here, not on a later first use.
  comm.host_layout();
  // bf16: no Linear keeps a copy of its weight from forward to backward (2 Psi
  // on every rank, where stage 3 holds 4 Psi/N of weights and the bf16
  // layout 2 Psi + 4 Psi/N).
  ops::set_keep_bf16_weights(false);
}

Zero::~Zero() {
  model_.set_layer_hooks(nullptr);
  ops::set_keep_bf16_weights(true);
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
  timeline::Span span("optimizer", "optimizer");
  const auto [begin, end] = optimizer_range();
  float* w = model_.params().params().f32() + begin;
  if (low_grads_)
    step_low(w, end - begin, lr);
  else
    step_shard(w, model_.params().grads().f32() + begin, end - begin, lr);
}

// step_shard's order on bf16 gradients, widened a piece at a time: a first
// pass for the decisions over ranks (overflow, the norm of the unscaled
// gradients), then the optimizer over each piece.
void Zero::step_low(float* w, int64_t n, float lr) {
  constexpr int64_t kPiece = 1 << 18;
  std::vector<float> piece(size_t(std::min(n, kPiece)));
  auto widened = [&](int64_t off, int64_t k, float unscale) {
    low_grads_->widen(off, k, piece.data());
    if (unscale != 1.0f) scale_inplace(piece.data(), k, unscale);
    return piece.data();
  };
  float unscale = 1.0f, c = 1.0f;
  LossScaler* scaler = local_.loss_scaler();
  if (scaler || clip_norm_ > 0) {
    bool bad = false;
    double squares = 0;
    const float carried = scaler ? scaler->scale() : 1.0f;
    for (int64_t off = 0; off < n; off += kPiece) {
      const int64_t k = std::min(kPiece, n - off);
      const float* g = widened(off, k, carried != 1.0f ? 1.0f / carried : 1.0f);
      bad = bad || has_nonfinite(g, k);
      squares += sum_squares(g, k);
    }
    if (scaler && !scaler->update(any_rank(bad))) return low_grads_->clear();
    if (carried != 1.0f) unscale = 1.0f / carried;
    if (clip_norm_ > 0) c = clip_scale(std::sqrt(sum_over_ranks(squares)), clip_norm_);
  }
  if (n > 0) opt_.begin_step(n);  // as step_shard: an empty shard counts no step
  for (int64_t off = 0; off < n; off += kPiece) {
    const int64_t k = std::min(kPiece, n - off);
    float* g = widened(off, k, unscale);
    if (c != 1.0f) scale_inplace(g, k, c);
    opt_.update(w + off, g, off, k, lr);
  }
  low_grads_->clear();
}

void Zero::step_shard(float* w, float* g, int64_t n, float lr) {
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

// Set-up (build, --load, --resume) wrote the whole arena on every rank;
// stage 3 keeps the shard only. The peak of training is measured from here.
void Zero::start() {
  started_ = true;
  if (replica_) replica_->build(model_.params().params().f32());
  layers_->release_all();  // stage 3 and the bf16 copy: the shard only
  reset_peak_rss();
}

StepResult Zero::step(const Batch& batch, float lr, StepTimes& times) {
  if (!started_) start();
  Timer t;
  nn::Context ctx;
  ctx.accumulate = micro_ > 0;
  // As data parallelism: the mean over the global batch.
  const float scale = 1.0f / float(batch.size() * comm_.size() * cfg_.accumulate);
  const bool last = micro_ + 1 == cfg_.accumulate;
  layers_->arm(last);
  const double waited = layers_->wait_seconds();
  StepResult r;
  {
    CountAllocations count(activations_);
    r = local_.forward_backward(batch, scale, ctx);
  }
  {
    timeline::Span span("zero", "wait for reduce-scatter");
    layers_->finish_backward();
  }
  const double comm_s = layers_->wait_seconds() - waited;
  times.compute += t.seconds() - comm_s;
  times.comm += comm_s;
  micro_ = last ? 0 : micro_ + 1;
  if (!last) return r;
  t.reset();
  step_shard(lr);
  times.compute += t.seconds();
  t.reset();
  if (cfg_.stage == 3)
    layers_->release_all();  // copies of other shards are stale now
  else if (replica_)
    replica_->refresh(comm_, model_.params().params().f32());
  else {
    timeline::Span span("zero", "allgather shards");
    allgather_shards(comm_, layout_, model_.params().params().f32());
  }
  times.comm += t.seconds();
  return r;
}

void Zero::gather_params(int root) {
  layers_->gather_all(root);
}

void Zero::release_params() {
  layers_->release_all();
}

void Zero::sum(double* v, int n) { comm::sum_metrics(comm_, v, n); }

// Per rank: the bytes of parameters, gradients, optimizer state and
// activations it held at most, and its peak resident memory (of training, and
// of the whole process with set-up).
nlohmann::ordered_json Zero::held_bytes() {
  const auto [sb, se] = optimizer_range();
  const double shard = double(se - sb) * 4, all = double(model_.params().size()) * 4;
  double state = 0;
  for (const Tensor* t : opt_.state()) state += double(t->nbytes());
  // Stage 3 and the bf16 copy: the shard, the most gathered (or widened) at
  // once, and the copy.
  const double params = cfg_.stage == 3 || replica_
                            ? shard + double(layers_->peak_gathered()) * 4 +
                                  double(replica_ ? replica_->bytes() : 0)
                            : all;
  // Stage 1 adds micro-batches into whole gradients before its reduction.
  const bool whole = cfg_.stage == 1 && cfg_.accumulate > 1;
  // bf16 gradients: 2 bytes a shard element.
  const double buckets = double(layers_->peak_bucket_bytes());
  const double grads = whole ? all : (low_grads_ ? double(low_grads_->bytes()) : shard) + buckets;
  const std::vector<double> mine = {params, grads, state, double(activations_->peak()),
                                    window_peak_rss_mb(), peak_rss_mb()};
  const int n = comm_.size(), k = int(mine.size());
  std::vector<double> every(size_t(n * k), 0.0);
  std::copy(mine.begin(), mine.end(), every.begin() + rank() * k);
  for (int r = 0; r < n; ++r) comm_.broadcast(&every[size_t(r * k)], size_t(k) * 8, r);
  const char* keys[] = {"parameters", "gradients", "optimizer_state", "activations",
                        "training_peak_rss_mb", "peak_rss_mb"};
  nlohmann::ordered_json out;
  for (int i = 0; i < k; ++i) {
    nlohmann::ordered_json per = nlohmann::ordered_json::array();
    for (int r = 0; r < n; ++r) per.push_back(every[size_t(r * k + i)]);
    out[keys[i]] = per;
  }
  return out;
}

nlohmann::ordered_json Zero::summary() {
  // DeepSpeed's model (ZeRO paper, section 3): Adam in mixed precision holds
  // 2 bytes of fp16 weights, 2 of fp16 gradients and K = 12 of f32 state
  // (master weights, momentum, variance) per parameter. cohort's f32 layout
  // holds f32 weights (the master copy), f32 gradients and 8 bytes of Adam
  // state: the same 16 bytes, with the replicated weights at 4 bytes; at
  // bf16, stages 1 and 2 hold DeepSpeed's 2-byte copy and f32 masters of the
  // shard (zero_replica.h), with f32 gradients.
  const double psi = double(model_.params().size());
  const int n = comm_.size();
  nlohmann::ordered_json s = local_.summary();
  s["zero"] = {{"stage", cfg_.stage},
               {"ranks", n},
               {"parameters", model_.params().size()},
               {"held_bytes_per_rank", held_bytes()},
               {"deepspeed_model_bytes_per_rank",
                {{"dp", 16 * psi},
                 {"zero1", 4 * psi + 12 * psi / n},
                 {"zero2", 2 * psi + 14 * psi / n},
                 {"zero3", 16 * psi / n}}}};
  return s;
}

namespace {

// --parallel zero --zero-stage 1|2|3.
class ZeroFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"zero"}; }
  bool freezes(const std::string&) const override { return true; }
  bool reduces_gradients(const std::string&) const override { return true; }
  std::string help() const override {
    return "zero: data parallelism with the optimizer state (--zero-stage 1), the gradients (2) "
           "and the parameters (3) sharded over ranks (DeepSpeed ZeRO)";
  }
  void add_flags(CLI::App& app) override {
    app.add_option("--zero-stage", stage_, "1 | 2 | 3: what ZeRO shards over ranks (zero)");
    app.add_option("--prefetch-mb", prefetch_mb_,
                   "stage 3: MiB of parameters gathered ahead of the layer computing, at least "
                   "the next layer's (zero)")
        ->capture_default_str();
  }
  void validate() const override {
    COHORT_INPUT_CHECK(stage_ >= 1 && stage_ <= 3, "--zero-stage must be 1, 2 or 3, got ", stage_);
    COHORT_INPUT_CHECK(prefetch_mb_ >= 0, "--prefetch-mb must be 0 or more, got ", prefetch_mb_);
  }
  void describe(std::ostream& os) const override {
    os << "--zero-stage " << stage_ << "\n--prefetch-mb " << prefetch_mb_ << "\n";
  }
  void export_flags(RunSettings& run) const override {
    run.zero_stage = stage_;
    run.prefetch_mb = prefetch_mb_;
  }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    COHORT_INPUT_CHECK(a.comm, "--parallel zero needs ranks: start with mpirun or --workers N");
    ZeroConfig cfg;
    cfg.stage = stage_;
    cfg.accumulate = a.run.accumulate;
    cfg.bucket_mb = a.run.bucket_mb;  // --bucket-mb, DeepSpeed's reduce_bucket_size
    cfg.prefetch_mb = prefetch_mb_;
    return std::make_unique<Zero>(*a.comm, a.model, a.opt, cfg, a.run.seed, a.run.clip_norm,
                                  a.run.precision);
  }
  std::string summary_text(const nlohmann::ordered_json& s) const override {
    if (!s.contains("zero")) return "";
    const auto& z = s["zero"];
    const auto& held = z["held_bytes_per_rank"];
    const auto& ds = z["deepspeed_model_bytes_per_rank"];
    const int stage = z["stage"].get<int>();
    const double mb = 1 << 20;
    const char* model_key[] = {"dp", "zero1", "zero2", "zero3"};
    char line[512];
    std::snprintf(line, sizeof line,
                  "zero stage %d on %d ranks, rank 0 held at most: parameters %.1f MB, gradients "
                  "%.1f MB, optimizer state %.1f MB, activations %.1f MB; peak resident %.0f MB "
                  "in training (DeepSpeed's model, Adam mixed precision: %.1f MB per rank)\n",
                  stage, z["ranks"].get<int>(), held["parameters"][0].get<double>() / mb,
                  held["gradients"][0].get<double>() / mb,
                  held["optimizer_state"][0].get<double>() / mb,
                  held["activations"][0].get<double>() / mb,
                  held["training_peak_rss_mb"][0].get<double>(),
                  ds[model_key[stage]].get<double>() / mb);
    return line;
  }
  std::vector<BenchRow> bench_rows() const override {
    std::vector<BenchRow> rows;
    for (int stage : {1, 2, 3}) {
      const std::string s = std::to_string(stage);
      rows.push_back({"zero" + s,
                      "cohort zero-" + s,
                      "cohort",
                      2,
                      2,
                      1,
                      false,
                      {"--workers", "2", "--parallel", "zero", "--zero-stage", s},
                      ""});
    }
    return rows;
  }

 private:
  int stage_ = 1;
  double prefetch_mb_ = kDefaultPrefetchMb;
};

}  // namespace

std::unique_ptr<StrategyFamily> zero_family() { return std::make_unique<ZeroFamily>(); }

}  // namespace cohort
