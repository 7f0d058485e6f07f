#include "parallel/pipeline.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "nn/models/zoo.h"
#include "ops/loss.h"
#include "parallel/stages.h"

namespace cohort {

constexpr int kActivationTag = 110, kGradientTag = 111;

// One micro-batch in flight on this stage: a view of the model with its own
// activations, the tensors received for it, and its sends still in progress.
struct Pipeline::Slot {
  std::unique_ptr<nn::Model> model;
  Shape rows;    // the micro-batch's image shape {n, H, W, C}
  Tensor x, dy;  // received input (stages > 0); output gradient (or dlogits)
  std::unique_ptr<comm::Request> send_y, send_dx;
  bool busy = false;

  void finish_sends() {
    if (send_y) send_y->wait();
    if (send_dx) send_dx->wait();
    send_y.reset();
    send_dx.reset();
  }
};

Pipeline::Pipeline(comm::Communicator& world, nn::Model& model, Optimizer& opt,
                   std::vector<size_t> cuts, PipelineConfig cfg, uint64_t seed)
    : world_(world), model_(model), opt_(opt), cuts_(std::move(cuts)), cfg_(cfg),
      rng_(seed ^ 0x5eedull), activations_(std::make_shared<MemoryCounter>()) {
  stages_ = int(cuts_.size()) - 1;
  COHORT_INPUT_CHECK(cfg_.dp >= 1 && world.size() == cfg_.dp * stages_, "--dp ", cfg_.dp,
                     " x --stages ", stages_, " needs ", cfg_.dp * stages_, " ranks, got ",
                     world.size());
  COHORT_INPUT_CHECK(cfg_.micro_batches >= 1, "--micro-batches must be at least 1, got ",
                     cfg_.micro_batches);
  const int replica = world.rank() / stages_;
  stage_ = world.rank() % stages_;
  if (cfg_.dp > 1) {
    pipe_ = world.split(replica, stage_);
    dp_ = world.split(stage_, replica);
  }
  // The dropout masks differ per replica, as under data parallelism.
  rng_ = Rng(seed ^ 0x5eedull ^ (uint64_t(replica) * 0x9e3779b97f4a7c15ull));
  begin_ = cuts_[size_t(stage_)];
  end_ = cuts_[size_t(stage_) + 1];
  nn::Sequential& layers = model.layers();
  param_begin_ = layers.child(begin_).param_begin();
  param_end_ = layers.child(end_ - 1).param_end();
}

Pipeline::~Pipeline() {
  for (auto& s : slots_) s->finish_sends();
}

Pipeline::Slot& Pipeline::acquire() {
  for (auto& s : slots_)
    if (!s->busy) {
      s->finish_sends();  // its tensors are about to be overwritten
      s->busy = true;
      return *s;
    }
  auto s = std::make_unique<Slot>();
  s->model = nn::make_model_view(model_);
  // A stage's first layer hands its input gradient back, except stage 0's.
  s->model->layers().child(begin_).set_needs_input_grad(stage_ > 0);
  s->busy = true;
  slots_.push_back(std::move(s));
  return *slots_.back();
}

void Pipeline::release(Slot& s) { s.busy = false; }

void Pipeline::forward(int m, const Batch& batch, double* metrics, StepTimes& times) {
  const int last = stages_ - 1, mb = int(in_flight_.size());
  const int64_t n = int64_t(batch.labels.size());
  const int64_t r0 = n * m / mb, r1 = n * (m + 1) / mb;
  Slot& slot = acquire();
  in_flight_[size_t(m)] = &slot;
  nn::Sequential& layers = slot.model->layers();
  Tensor rows = batch.images.slice(r0, r1);
  slot.rows = rows.shape();
  const Tensor* x = &rows;
  if (stage_ > 0) {
    nn::ensure(slot.x, shape_before(layers, begin_, rows.shape()));
    Timer w;
    pipe().recv(slot.x.data(), slot.x.nbytes(), stage_ - 1, kActivationTag);
    wait_s_ += w.seconds();
    times.comm += w.seconds();
    x = &slot.x;
  }
  nn::Context ctx;
  ctx.rng = &rng_;
  const Tensor& y = layers.forward_range(begin_, end_, *x, ctx);
  if (stage_ == last) {
    nn::ensure(slot.dy, y.shape());
    // Mean over the whole batch: each micro-batch's share of it.
    auto loss = ops::softmax_cross_entropy(y.f32(), batch.labels.data() + r0, r1 - r0, y.dim(1),
                                           slot.dy.f32(), 1.0f / float(n));
    metrics[0] += loss.loss_sum;
    metrics[1] += double(loss.correct);
  } else {
    slot.send_y = pipe().isend(y.data(), y.nbytes(), stage_ + 1, kActivationTag);
  }
}

void Pipeline::backward(int m, StepTimes& times) {
  Slot& slot = *in_flight_[size_t(m)];
  nn::Sequential& layers = slot.model->layers();
  if (stage_ < stages_ - 1) {
    nn::ensure(slot.dy, shape_before(layers, end_, slot.rows));
    Timer w;
    pipe().recv(slot.dy.data(), slot.dy.nbytes(), stage_ + 1, kGradientTag);
    wait_s_ += w.seconds();
    times.comm += w.seconds();
  }
  nn::Context ctx;
  ctx.rng = &rng_;
  ctx.accumulate = !first_backward_;  // every micro-batch adds into the one gradient arena
  first_backward_ = false;
  const Tensor& dx = layers.backward_range(begin_, end_, slot.dy, ctx);
  if (stage_ > 0) slot.send_dx = pipe().isend(dx.data(), dx.nbytes(), stage_ - 1, kGradientTag);
  release(slot);
}

StepResult Pipeline::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const double comm_before = times.comm;
  const int64_t n = int64_t(batch.labels.size());
  const int mb = int(std::min<int64_t>(cfg_.micro_batches, n));
  in_flight_.assign(size_t(mb), nullptr);
  first_backward_ = true;
  double metrics[2] = {0, 0};  // the last stage's loss sum and correct count, sent to all
  {
    CountAllocations count(activations_);
    if (!cfg_.one_f_one_b) {
      for (int m = 0; m < mb; ++m) forward(m, batch, metrics, times);
      for (int m = 0; m < mb; ++m) backward(m, times);
    } else {
      const int warmup = std::min(stages_ - stage_ - 1, mb);
      for (int m = 0; m < warmup; ++m) forward(m, batch, metrics, times);
      for (int m = warmup; m < mb; ++m) {
        forward(m, batch, metrics, times);
        backward(m - warmup, times);
      }
      for (int m = mb - warmup; m < mb; ++m) backward(m, times);
    }
  }
  const Arena& a = model_.params();
  if (dp_) {
    Timer c;
    if (param_end_ > param_begin_)
      dp_->allreduce(a.grads().slice(param_begin_, param_end_), param_end_ - param_begin_,
                     comm::ReduceOp::kAverage);
    times.comm += c.seconds();
  }
  if (param_end_ > param_begin_)
    opt_.step(a.params().f32() + param_begin_, a.grads().f32() + param_begin_,
              param_end_ - param_begin_, lr);
  pipe().broadcast(metrics, sizeof metrics, stages_ - 1);
  for (auto& s : slots_) s->finish_sends();
  step_s_ += t.seconds();
  times.compute += t.seconds() - (times.comm - comm_before);
  return {metrics[0], int64_t(metrics[1]), n};
}

void Pipeline::sum(double* v, int n) { comm::sum_metrics(world_, v, n); }

void Pipeline::sync_model() { broadcast_stages(pipe(), model_, cuts_); }

nlohmann::ordered_json Pipeline::summary() {
  // Per stage, averaged over the replicas: [bubble..., peak MB...].
  std::vector<double> v(size_t(2 * stages_), 0.0);
  v[size_t(stage_)] = step_s_ > 0 ? wait_s_ / step_s_ : 0;
  v[size_t(stages_ + stage_)] = double(activations_->peak()) / (1 << 20);
  comm::sum_metrics(world_, v.data(), int(v.size()));
  std::vector<double> bubble, peak;
  double mean = 0;
  for (int s = 0; s < stages_; ++s) {
    bubble.push_back(v[size_t(s)] / cfg_.dp);
    peak.push_back(v[size_t(stages_ + s)] / cfg_.dp);
    mean += bubble.back() / stages_;
  }
  const int m = cfg_.micro_batches, k = stages_;
  return {{"pipeline",
           {{"schedule", cfg_.one_f_one_b ? "1f1b" : "gpipe"},
            {"stages", k},
            {"micro_batches", m},
            {"dp", cfg_.dp},
            {"cuts", cuts_},
            {"bubble_fraction", mean},
            {"ideal_bubble_fraction", double(k - 1) / double(m + k - 1)},
            {"bubble_fraction_per_stage", bubble},
            {"peak_activation_mb", peak}}}};
}

}  // namespace cohort
