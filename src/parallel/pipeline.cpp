#include "parallel/pipeline.h"

#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "core/error.h"
#include "core/timeline.h"
#include "parallel/registry.h"
#include "parallel/stages.h"

namespace cohort {

constexpr int kActivationTag = 110, kGradientTag = 111;

namespace {

// fp16 runs (emulated: f32 tensors holding fp16 values) send their
// activations and gradients as fp16, half the bytes and no loss; the other
// precisions send the tensor itself. Returns what to send.
const Tensor& to_wire(const Tensor& t, DType precision, Tensor& wire) {
  if (precision != DType::kF16 || t.dtype() != DType::kF32) return t;
  nn::ensure(wire, t.shape(), DType::kF16);
  f32_to_f16(t.f32(), wire.f16(), size_t(t.numel()));
  return wire;
}

// A receive that leaves the core to others while it waits (comm::wait_yielding):
// a stage idle in its bubble spinning in MPI_Recv stays runnable, and with
// more ranks than cores the kernel may then pair two computing stages on one
// core (mnist-large hybrid 2x2 on 2 cores ran at 580 or 1120 images/s from
// one run to the next).
void recv_politely(comm::Communicator& c, void* buf, size_t bytes, int src, int tag) {
  auto r = c.irecv(buf, bytes, src, tag);
  comm::wait_yielding(c, *r);
}

// Receives `dst` (already shaped, of the activation dtype) from `src`.
void recv_wire(comm::Communicator& c, Tensor& dst, DType precision, Tensor& wire, int src,
               int tag) {
  if (precision != DType::kF16) return recv_politely(c, dst.data(), dst.nbytes(), src, tag);
  nn::ensure(wire, dst.shape(), DType::kF16);
  recv_politely(c, wire.data(), wire.nbytes(), src, tag);
  f16_to_f32(wire.f16(), dst.f32(), size_t(dst.numel()));
}

// A non-blocking send's span on the timeline: from isend until a wait saw it
// complete (an async span: sends of several micro-batches overlap).
void begin_send(timeline::Event& e, const char* name, int m, const Tensor& t) {
  if (!timeline::on()) return;
  e.name = name;
  e.cat = "pipeline";
  e.ph = 'a';
  e.id_name = "micro_batch";
  e.id = m;
  e.bytes = t.nbytes();
  e.begin_ns = timeline::now_ns();
}

void end_send(timeline::Event& e) {
  if (!e.name) return;
  e.end_ns = timeline::now_ns();
  timeline::record(e);
  e.name = nullptr;
}

}  // namespace

// One micro-batch in flight on this stage: a view of the model with its own
// activations, the tensors received for it, and its sends still in progress.
struct Pipeline::Slot {
  std::unique_ptr<nn::Model> model;
  Shape rows;    // the micro-batch's image shape {n, H, W, C}
  Tensor x, dy;  // received input (stages > 0); output gradient (or dlogits)
  Tensor input;  // stage 0: the micro-batch's images in the compute precision
  Tensor wire_in, wire_y, wire_dx;  // fp16: what travels, as fp16
  std::unique_ptr<comm::Request> send_y, send_dx;
  timeline::Event trace_y, trace_dx;  // the sends' spans while in flight (timeline on)
  bool busy = false;

  void finish_sends() {
    if (send_y) send_y->wait();
    end_send(trace_y);
    if (send_dx) send_dx->wait();
    end_send(trace_dx);
    send_y.reset();
    send_dx.reset();
  }
};

Pipeline::Pipeline(comm::Communicator& world, nn::Model& model, Optimizer& opt,
                   std::vector<size_t> cuts, PipelineConfig cfg, uint64_t seed)
    : world_(world), model_(model), opt_(opt), cuts_(std::move(cuts)), cfg_(cfg),
      reducer_(cfg.precision.grad_comm, comm::Algorithm::kAuto),
      rng_(seed ^ 0x5eedull), scaler_(cfg.precision.scaling, cfg.precision.scaled()),
      activations_(std::make_shared<MemoryCounter>()) {
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
    // A stage idles while the others compute: its all-reduces, tied sums and
    // broadcasts wait politely, as its receives do.
    pipe_->set_polite(true);
    dp_->set_polite(true);
  }
  // The dropout masks differ per replica, as under data parallelism.
  rng_ = Rng(seed ^ 0x5eedull ^ (uint64_t(replica) * 0x9e3779b97f4a7c15ull));
  begin_ = cuts_[size_t(stage_)];
  end_ = cuts_[size_t(stage_) + 1];
  nn::Sequential& layers = model.layers();
  // --freeze: frozen layers are a prefix, so a stage trains from the first
  // unfrozen parameter on; a stage wholly frozen runs forward only, and the
  // stage after it sends it no gradient.
  param_end_ = layers.child(end_ - 1).param_end();
  param_begin_ = std::min(param_end_, std::max(layers.child(begin_).param_begin(),
                                               model.frozen_params()));
  trains_ = !layers.child(end_ - 1).frozen();
  sends_dx_ = stage_ > 0 && !layers.child(begin_ - 1).frozen();
  COHORT_INPUT_CHECK(model.frozen_params() == 0 || model.params().ties().empty(), "--freeze ",
                     model.frozen_through(), ": --parallel ", cfg_.name,
                     " does not freeze a model with tied parameters (", model.name(), ")");
  for (const auto& tie : model.params().ties()) {
    const ParamInfo& owner = model.params().infos()[tie.owner];
    int s = 0;
    while (s + 1 < stages_ && owner.offset >= layers.child(cuts_[size_t(s) + 1]).param_begin()) ++s;
    ties_.push_back({owner.offset, owner.offset + owner.numel(), s});
  }
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
  s->model = model_.view();
  // A stage's first layer hands its input gradient back when the stage
  // before trains (not stage 0's, nor one below the first unfrozen layer).
  s->model->layers().child(begin_).set_needs_input_grad(sends_dx_);
  s->busy = true;
  slots_.push_back(std::move(s));
  return *slots_.back();
}

void Pipeline::release(Slot& s) { s.busy = false; }

void Pipeline::forward(int m, const Batch& batch, double* metrics, StepTimes& times) {
  const int last = stages_ - 1, mb = int(in_flight_.size());
  const int64_t n = batch.size();
  const int64_t r0 = n * m / mb, r1 = n * (m + 1) / mb;
  Slot& slot = acquire();
  in_flight_[size_t(m)] = &slot;
  nn::Sequential& layers = slot.model->layers();
  Tensor rows = batch.images.slice(r0, r1);
  slot.rows = rows.shape();
  const DType precision = cfg_.precision.compute;
  const Tensor* x = &nn::cast_input(rows, precision, slot.input);
  if (stage_ > 0) {
    nn::ensure(slot.x, shape_before(layers, begin_, rows.shape()), nn::activation_dtype(precision));
    Timer w;
    timeline::Span span("pipeline", "recv activation", "micro_batch", m, slot.x.nbytes());
    recv_wire(pipe(), slot.x, precision, slot.wire_in, stage_ - 1, kActivationTag);
    wait_s_ += w.seconds();
    times.comm += w.seconds();
    x = &slot.x;
  }
  nn::Context ctx;
  ctx.rng = &rng_;
  ctx.precision = precision;
  const Tensor& y = layers.forward_range(begin_, end_, *x, ctx);
  if (stage_ == last) {
    nn::ensure(slot.dy, y.shape(), y.dtype());
    // Mean over the whole batch: each micro-batch's share of it.
    const int64_t positions = batch.positions();
    auto loss = model_.loss().compute(y, batch.labels.data() + r0 * positions, &slot.dy,
                                      scaler_.scale() / float(n));
    metrics[0] += loss.loss_sum;
    metrics[1] += loss.correct;
  } else {
    const Tensor& out = to_wire(y, precision, slot.wire_y);
    begin_send(slot.trace_y, "send activation", m, out);
    slot.send_y = pipe().isend(out.data(), out.nbytes(), stage_ + 1, kActivationTag);
  }
}

void Pipeline::backward(int m, StepTimes& times) {
  Slot& slot = *in_flight_[size_t(m)];
  if (!trains_) return release(slot);  // wholly frozen: no gradient comes, none goes
  nn::Sequential& layers = slot.model->layers();
  if (stage_ < stages_ - 1) {
    nn::ensure(slot.dy, shape_before(layers, end_, slot.rows),
               nn::activation_dtype(cfg_.precision.compute));
    Timer w;
    timeline::Span span("pipeline", "recv gradient", "micro_batch", m, slot.dy.nbytes());
    recv_wire(pipe(), slot.dy, cfg_.precision.compute, slot.wire_in, stage_ + 1, kGradientTag);
    wait_s_ += w.seconds();
    times.comm += w.seconds();
  }
  nn::Context ctx;
  ctx.rng = &rng_;
  ctx.precision = cfg_.precision.compute;
  ctx.accumulate = !first_backward_;  // every micro-batch adds into the one gradient arena
  first_backward_ = false;
  const Tensor& dx = layers.backward_range(begin_, end_, slot.dy, ctx);
  if (sends_dx_) {
    const Tensor& out = to_wire(dx, cfg_.precision.compute, slot.wire_dx);
    begin_send(slot.trace_dx, "send gradient", m, out);
    slot.send_dx = pipe().isend(out.data(), out.nbytes(), stage_ - 1, kGradientTag);
  }
  release(slot);
}

StepResult Pipeline::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const double comm_before = times.comm;
  const int64_t n = batch.size();
  const int mb = int(std::min<int64_t>(cfg_.micro_batches, n));
  in_flight_.assign(size_t(mb), nullptr);
  first_backward_ = true;
  zero_tied_grads();
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
  {
    Timer c;
    sum_tied_grads();
    times.comm += c.seconds();
  }
  if (dp_) {
    Timer c;
    timeline::Span span("allreduce", "allreduce stage gradients", nullptr, -1,
                        (param_end_ - param_begin_) * int64_t(sizeof(float)));
    if (param_end_ > param_begin_)
      reducer_.allreduce(*dp_, a.grads().f32() + param_begin_, param_end_ - param_begin_,
                         comm::ReduceOp::kAverage);
    times.comm += c.seconds();
  }
  // fp16: a stage skips its step when any stage's gradients overflowed.
  auto vote = [this](bool overflow) {
    float v = overflow ? 1.0f : 0.0f;
    world_.allreduce(&v, 1, comm::ReduceOp::kSum);
    return v > 0;
  };
  const int64_t n_params = param_end_ - param_begin_;
  if (n_params > 0)
    scaled_step(opt_, scaler_, a.params().f32() + param_begin_, a.grads().f32() + param_begin_,
                n_params, lr, 0, vote);
  else if (scaler_.enabled())
    scaler_.update(vote(false));  // a stage without parameters still votes
  broadcast_tied_weights();
  pipe().broadcast(metrics, sizeof metrics, stages_ - 1);
  for (auto& s : slots_) s->finish_sends();
  step_s_ += t.seconds();
  times.compute += t.seconds() - (times.comm - comm_before);
  return {metrics[0], metrics[1], n};
}

void Pipeline::zero_tied_grads() {
  const Tensor& g = model_.params().grads();
  for (const auto& t : ties_) g.slice(t.begin, t.end).zero();
}

void Pipeline::sum_tied_grads() {
  float* g = model_.params().grads().f32();
  for (const auto& t : ties_) pipe().allreduce(g + t.begin, t.end - t.begin, comm::ReduceOp::kSum);
}

void Pipeline::broadcast_tied_weights() {
  float* w = model_.params().params().f32();
  for (const auto& t : ties_)
    pipe().broadcast(w + t.begin, size_t(t.end - t.begin) * sizeof(float), t.owner_stage);
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
  nlohmann::ordered_json s = scaler_.enabled() ? scaler_.summary() : nlohmann::ordered_json::object();
  s.update(nlohmann::ordered_json{{"pipeline",
           {{"schedule", cfg_.one_f_one_b ? "1f1b" : "gpipe"},
            {"stages", k},
            {"micro_batches", m},
            {"dp", cfg_.dp},
            {"cuts", cuts_},
            {"bubble_fraction", mean},
            {"ideal_bubble_fraction", double(k - 1) / double(m + k - 1)},
            {"bubble_fraction_per_stage", bubble},
            {"peak_activation_mb", peak}}}});
  return s;
}

namespace {

// --parallel mp | pp | hybrid: the model cut into stages, one rank each.
class PipelineFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"mp", "pp", "hybrid"}; }
  bool freezes(const std::string&) const override { return true; }
  bool reduces_gradients(const std::string& name) const override {
    return name == "hybrid" && dp_ > 1;
  }
  std::string help() const override {
    return "mp | pp | hybrid: --stages ranks each run a stage (pp: --micro-batches in flight, "
           "hybrid: --dp replicas of the pipeline)";
  }
  void add_flags(CLI::App& app) override;
  void validate() const override;
  void check(const std::string& name, const RunSettings& run, int world) const override;
  int ranks_needed(const std::string& name) const override {
    return name == "hybrid" ? dp_ * stages_ : stages_;
  }
  void describe(std::ostream& os) const override {
    os << "--stages " << stages_ << "\n--split " << split_ << "\n--balance " << balance_
       << "\n--micro-batches " << micro_batches_ << "\n--schedule " << schedule_ << "\n--dp "
       << dp_ << "\n";
  }
  std::unique_ptr<Strategy> make(const std::string& name, StrategyArgs& a) const override;
  std::string summary_text(const nlohmann::ordered_json& s) const override;
  std::vector<BenchRow> bench_rows() const override;

 private:
  std::vector<size_t> plan(const std::string& name, StrategyArgs& a) const;

  int stages_ = 2;
  std::string split_;              // inner cut points ("3,7"); empty: balanced (--balance)
  std::string balance_ = "params";  // params | time: what balanced stages share equally
  int micro_batches_ = 4;
  std::string schedule_ = "1f1b";  // gpipe | 1f1b
  int dp_ = 1;
};

void PipelineFamily::add_flags(CLI::App& app) {
  app.add_option("--stages", stages_, "stages (one rank each) for --parallel mp | pp | hybrid");
  app.add_option("--split", split_, "cut points between stages, layer indices (\"3,7\")");
  app.add_option("--balance", balance_,
                 "stage cuts without --split: params (equal parameter counts) | time (measured)");
  app.add_option("--micro-batches", micro_batches_, "micro-batches per batch (pp, hybrid)");
  app.add_option("--schedule", schedule_, "pipeline schedule: gpipe | 1f1b");
  app.add_option("--dp", dp_, "data-parallel replicas of the pipeline (hybrid)");
}

void PipelineFamily::validate() const {
  COHORT_INPUT_CHECK(balance_ == "params" || balance_ == "time", "--balance: unknown choice '",
                     balance_, "' (valid: params, time)");
  COHORT_INPUT_CHECK(stages_ >= 1, "--stages must be at least 1, got ", stages_);
  COHORT_INPUT_CHECK(dp_ >= 1, "--dp must be at least 1, got ", dp_);
  COHORT_INPUT_CHECK(micro_batches_ >= 1, "--micro-batches must be at least 1, got ",
                     micro_batches_);
  COHORT_INPUT_CHECK(schedule_ == "gpipe" || schedule_ == "1f1b",
                     "--schedule: unknown pipeline schedule '", schedule_, "' (valid: gpipe, 1f1b)");
}

void PipelineFamily::check(const std::string& name, const RunSettings& run, int world) const {
  COHORT_INPUT_CHECK(run.clip_norm <= 0, "--clip is not supported with --parallel ", name,
                     " (the gradient norm spans ranks)");
  COHORT_INPUT_CHECK(run.accumulate == 1, "--accumulate is not supported with --parallel ", name,
                     name == "mp" ? "" : " (use --micro-batches)");
  COHORT_INPUT_CHECK(name == "hybrid" || dp_ == 1, "--dp ", dp_,
                     " is for --parallel hybrid (got --parallel ", name, ")");
  auto model = nn::build_model(run.model, 0);
  cut_stages(*model, stages_, split_);  // empty stages, more stages than layers
  COHORT_INPUT_CHECK(world == ranks_needed(name), name == "hybrid" ? "--dp " : "",
                     name == "hybrid" ? std::to_string(dp_) + " x " : "", "--stages ", stages_,
                     " needs ", ranks_needed(name), " ranks, got ", world);
  if (name != "mp")
    COHORT_INPUT_CHECK(run.batch % micro_batches_ == 0, "--micro-batches ", micro_batches_,
                       " does not divide --batch ", run.batch);
}

// The stage cuts. --balance time: rank 0 times every layer on one
// micro-batch and all ranks cut by its figures.
std::vector<size_t> PipelineFamily::plan(const std::string& name, StrategyArgs& a) const {
  if (balance_ != "time" || !split_.empty()) return cut_stages(a.model, stages_, split_);
  std::vector<double> w(a.model.layers().size(), 0.0);
  const int64_t rows = name == "mp" ? a.run.batch : a.run.batch / micro_batches_;
  if (a.comm->rank() == 0) w = time_layers(a.model, rows);
  a.comm->broadcast(w.data(), w.size() * sizeof(double), 0);
  return cut_stages(a.model, stages_, "", &w);
}

std::unique_ptr<Strategy> PipelineFamily::make(const std::string& name, StrategyArgs& a) const {
  COHORT_INPUT_CHECK(a.comm, "--parallel ", name, " needs ranks: start with mpirun or --workers N");
  PipelineConfig pc;
  pc.name = name;
  // Model parallelism is a pipeline of one micro-batch.
  pc.micro_batches = name == "mp" ? 1 : micro_batches_;
  pc.one_f_one_b = name != "mp" && schedule_ == "1f1b";
  pc.dp = name == "hybrid" ? dp_ : 1;
  pc.precision = a.run.precision;
  return std::make_unique<Pipeline>(*a.comm, a.model, a.opt, plan(name, a), pc, a.run.seed);
}

std::string PipelineFamily::summary_text(const nlohmann::ordered_json& s) const {
  if (!s.contains("pipeline")) return "";
  const auto& p = s["pipeline"];
  std::string mem;
  for (auto& m : p["peak_activation_mb"]) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.1f", mem.empty() ? "" : ", ", m.get<double>());
    mem += b;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "pipeline %s, %d stages x %d micro-batches: bubble %.3f (ideal %.3f), "
                "peak activations per stage %s MB\n",
                p["schedule"].get<std::string>().c_str(), p["stages"].get<int>(),
                p["micro_batches"].get<int>(), p["bubble_fraction"].get<double>(),
                p["ideal_bubble_fraction"].get<double>(), mem.c_str());
  return line;
}

// clang-format off
std::vector<BenchRow> PipelineFamily::bench_rows() const {
  return {
      {"mp", "cohort mp (2 stages)", "cohort", 2, 1, 1, false,
       {"--parallel", "mp", "--stages", "2"}, ""},
      {"pp-gpipe", "cohort pp GPipe (2 stages x 4 micro)", "cohort", 2, 1, 4, false,
       {"--parallel", "pp", "--stages", "2", "--micro-batches", "4", "--schedule", "gpipe"}, ""},
      {"pp-1f1b", "cohort pp 1F1B (2 stages x 4 micro)", "cohort", 2, 1, 4, false,
       {"--parallel", "pp", "--stages", "2", "--micro-batches", "4", "--schedule", "1f1b"}, ""},
      {"hybrid", "cohort hybrid (dp 2 x pp 2, 2 micro)", "cohort", 4, 2, 2, false,
       {"--parallel", "hybrid", "--dp", "2", "--stages", "2", "--micro-batches", "2"}, ""},
      {"pytorch-pipe", "PyTorch Pipe (1 process, 2 partitions x 4 micro)", "pytorch", 1, 1, 4, true,
       {"--pipe-stages", "2", "--micro-batches", "4"}, "pp-gpipe",
       "partitions take turns on one worker thread"},
  };
}
// clang-format on

}  // namespace

std::unique_ptr<StrategyFamily> pipeline_family() { return std::make_unique<PipelineFamily>(); }

}  // namespace cohort
