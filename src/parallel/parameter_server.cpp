#include "parallel/parameter_server.h"

#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "core/error.h"
#include "core/timeline.h"
#include "parallel/registry.h"

namespace cohort {

constexpr int kPushTag = 120, kPullTag = 121;

ParameterServer::ParameterServer(comm::Communicator& world, nn::Model& model, Optimizer& opt,
                                 PsConfig cfg, uint64_t seed, const Precision& precision)
    : world_(world), model_(model), opt_(opt), cfg_(cfg),
      local_(model, opt, seed + uint64_t(world.rank()), 0, precision), workers_(world.size() - cfg.servers) {
  COHORT_INPUT_CHECK(cfg.servers >= 1, "--servers must be at least 1, got ", cfg.servers);
  COHORT_INPUT_CHECK(workers_ >= 1, "--servers ", cfg.servers, " leaves no worker: ",
                     world.size(), " ranks in all (workers are the ranks that are not servers)");
  COHORT_INPUT_CHECK(cfg.staleness >= -1, "--staleness must be -1 (no bound) or more, got ",
                     cfg.staleness);
  const int64_t trainable = model.num_params() - model.frozen_params();
  COHORT_INPUT_CHECK(trainable >= cfg.servers, "--servers ", cfg.servers, ": ", model.name(),
                     " has only ", trainable, " trainable parameters to shard");
  server_ = world.rank() >= workers_ ? world.rank() - workers_ : -1;
  if (server_ < 0) return;
  const int64_t n = shard_end(server_) - shard_begin(server_);
  for (int w = 0; w < workers_; ++w) {
    inbox_.push_back(Tensor::empty({n}));
    if (cfg_.async) outbox_.push_back(Tensor::empty({n}));
  }
  sum_ = Tensor::empty({n});
  sends_.resize(size_t(workers_));
  clock_.assign(size_t(workers_), 0);
  read_version_.assign(size_t(workers_), 0);
  waiting_.assign(size_t(workers_), false);
}

ParameterServer::~ParameterServer() {
  for (auto& s : sends_)
    if (s) s->wait();
}

// The servers shard the trainable range only (--freeze): frozen parameters
// are never pushed, pulled or stepped, and every rank holds them as loaded.
int64_t ParameterServer::shard_begin(int j) const {
  const int64_t first = model_.frozen_params();
  return first + (model_.num_params() - first) * j / cfg_.servers;
}

StepResult ParameterServer::step(const Batch& batch, float lr, StepTimes& times) {
  if (server_ < 0) return work(batch, lr, times);
  if (cfg_.async)
    serve_async(lr, times);
  else
    serve_sync(lr, times);
  return {};  // servers see no images
}

StepResult ParameterServer::work(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const int64_t n = batch.size();
  // sync: the servers sum the workers' gradients into the global-batch mean;
  // async: each gradient is applied alone, as the mean over its own batch.
  const float scale = cfg_.async ? 1.0f / float(n) : 1.0f / float(n * workers_);
  nn::Context ctx;
  StepResult r = local_.forward_backward(batch, scale, ctx);
  times.compute += t.seconds();
  Timer c;
  const Arena& a = model_.params();
  const int64_t bytes = a.size() * int64_t(sizeof(float));
  std::vector<std::unique_ptr<comm::Request>> pushes, pulls;
  for (int j = 0; j < cfg_.servers; ++j) {
    const int64_t b = shard_begin(j), e = shard_end(j);
    const Tensor g = a.grads().slice(b, e), p = a.params().slice(b, e);
    pushes.push_back(world_.isend(g.data(), g.nbytes(), workers_ + j, kPushTag));
    pulls.push_back(world_.irecv(p.data(), p.nbytes(), workers_ + j, kPullTag));
  }
  {  // every push is done before any server answers, so the two spans follow each other
    timeline::Span span("ps", "push", nullptr, -1, bytes);
    for (auto& q : pushes) comm::wait_yielding(world_, *q);
  }
  {
    timeline::Span span("ps", "pull", nullptr, -1, bytes);
    for (auto& q : pulls) comm::wait_yielding(world_, *q);
  }
  times.comm += c.seconds();
  return r;
}

void ParameterServer::serve_sync(float lr, StepTimes& times) {
  Timer c;
  const int64_t b = shard_begin(server_), n = shard_end(server_) - b;
  std::vector<std::unique_ptr<comm::Request>> reqs;
  for (int w = 0; w < workers_; ++w) {
    const Tensor& in = inbox_[size_t(w)];
    reqs.push_back(world_.irecv(in.data(), in.nbytes(), w, kPushTag));
  }
  {
    timeline::Span span("ps", "push", nullptr, -1, sum_.nbytes() * workers_);
    for (auto& q : reqs) comm::wait_yielding(world_, *q);
  }
  times.comm += c.seconds();
  Timer t;
  float* params = model_.params().params().f32() + b;
  {
    timeline::Span span("optimizer", "optimizer");
    // In worker order, so every run sums alike.
    float* sum = sum_.f32();
    std::copy(inbox_[0].f32(), inbox_[0].f32() + n, sum);
    for (int w = 1; w < workers_; ++w) {
      const float* g = inbox_[size_t(w)].f32();
      for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
    }
    opt_.step(params, sum, n, lr);
  }
  ++version_;
  updates_ += workers_;  // every gradient was computed on the current weights: staleness 0
  times.compute += t.seconds();
  Timer s;
  timeline::Span span("ps", "pull", nullptr, -1, sum_.nbytes() * workers_);
  reqs.clear();
  for (int w = 0; w < workers_; ++w)
    reqs.push_back(world_.isend(params, sum_.nbytes(), w, kPullTag));  // n elements, as sum_
  for (auto& q : reqs) comm::wait_yielding(world_, *q);
  times.comm += s.seconds();
}

void ParameterServer::reply(int w) {
  const int64_t b = shard_begin(server_), n = shard_end(server_) - b;
  auto& pending = sends_[size_t(w)];
  // The answer's send is issued here and completes while the server goes on.
  timeline::Span span("ps", "pull", "worker", w, outbox_[size_t(w)].nbytes());
  if (pending) comm::wait_yielding(world_, *pending);
  const float* params = model_.params().params().f32() + b;
  Tensor& copy = outbox_[size_t(w)];
  std::copy(params, params + n, copy.f32());
  read_version_[size_t(w)] = version_;
  pending = world_.isend(copy.data(), copy.nbytes(), w, kPullTag);
}

void ParameterServer::serve_async(float lr, StepTimes& times) {
  const int64_t b = shard_begin(server_), n = shard_end(server_) - b;
  float* params = model_.params().params().f32() + b;
  // One step of the loop handles as many pushes as there are workers; over
  // the run that is every push, since every rank runs the same steps.
  Timer wait;
  for (int handled = 0, round = 0; handled < workers_;) {
    int from = -1;
    for (int i = 0; i < workers_ && from < 0; ++i) {
      const int w = (next_worker_ + i) % workers_;
      if (world_.probe(w, kPushTag)) from = w;
    }
    if (from < 0) {
      comm::idle(round++);
      continue;
    }
    {
      timeline::Span span("ps", "push", "worker", from, inbox_[size_t(from)].nbytes());
      world_.recv(inbox_[size_t(from)].data(), inbox_[size_t(from)].nbytes(), from, kPushTag);
    }
    times.comm += wait.seconds();
    Timer t;
    const int64_t stale = version_ - read_version_[size_t(from)];
    staleness_sum_ += double(stale);
    staleness_max_ = std::max(staleness_max_, stale);
    ++updates_;
    {
      timeline::Span span("optimizer", "optimizer", "worker", from);
      opt_.step(params, inbox_[size_t(from)].f32(), n, lr);
    }
    ++version_;
    ++clock_[size_t(from)];
    waiting_[size_t(from)] = true;
    next_worker_ = (from + 1) % workers_;
    ++handled;
    round = 0;
    // Answer every waiting worker the bound lets go on.
    const int64_t slowest = *std::min_element(clock_.begin(), clock_.end());
    for (int w = 0; w < workers_; ++w)
      if (waiting_[size_t(w)] &&
          (cfg_.staleness < 0 || clock_[size_t(w)] - slowest <= cfg_.staleness)) {
        waiting_[size_t(w)] = false;
        reply(w);
      }
    times.compute += t.seconds();
    wait = Timer();
  }
  times.comm += wait.seconds();
}

void ParameterServer::sum(double* v, int n) { comm::sum_metrics(world_, v, n); }

void ParameterServer::sync_model() {
  for (auto& s : sends_)
    if (s) comm::wait_yielding(world_, *s);
  // The servers' weights are the model; every rank takes them (and worker
  // 0's batch-norm statistics).
  for (int j = 0; j < cfg_.servers; ++j) {
    const int64_t b = shard_begin(j), e = shard_end(j);
    const Tensor p = model_.params().params().slice(b, e);
    world_.broadcast(p.data(), p.nbytes(), workers_ + j);
  }
  if (model_.buffers().size() > 0)
    world_.broadcast(model_.buffers().params().data(), model_.buffers().params().nbytes(), 0);
  if (server_ >= 0) std::fill(read_version_.begin(), read_version_.end(), version_);
}

nlohmann::ordered_json ParameterServer::summary() {
  // Per server: [staleness sum, updates, max].
  const int s = cfg_.servers;
  std::vector<double> v(size_t(3 * s), 0.0);
  if (server_ >= 0) {
    v[size_t(server_)] = staleness_sum_;
    v[size_t(s + server_)] = double(updates_);
    v[size_t(2 * s + server_)] = double(staleness_max_);
  }
  comm::sum_metrics(world_, v.data(), int(v.size()));
  double total = 0, updates = 0, worst = 0;
  for (int j = 0; j < s; ++j) {
    total += v[size_t(j)];
    updates += v[size_t(s + j)];
    worst = std::max(worst, v[size_t(2 * s + j)]);
  }
  return {{"ps",
           {{"mode", cfg_.async ? "async" : "sync"},
            {"servers", s},
            {"workers", workers_},
            {"staleness_bound", cfg_.staleness},
            {"staleness_mean", updates > 0 ? total / updates : 0.0},
            {"staleness_max", int64_t(worst)},
            {"updates_per_server", int64_t(updates / s)}}}};
}

namespace {

// --parallel ps: TensorFlow's ParameterServerStrategy, sync or async.
class ParameterServerFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"ps"}; }
  bool freezes(const std::string&) const override { return true; }
  std::string help() const override {
    return "ps: workers push gradients to --servers server ranks (sync, or async with --staleness)";
  }
  void add_flags(CLI::App& app) override {
    app.add_option("--servers", cfg_.servers, "parameter-server ranks, the last S (ps)");
    app.add_option("--ps-mode", mode_, "sync | async (ps)");
    app.add_option("--staleness", cfg_.staleness,
                   "async ps: steps a worker may run ahead of the slowest (-1: no bound)");
  }
  void validate() const override {
    COHORT_INPUT_CHECK(cfg_.servers >= 1, "--servers must be at least 1, got ", cfg_.servers);
    COHORT_INPUT_CHECK(mode_ == "sync" || mode_ == "async", "--ps-mode: unknown mode '", mode_,
                       "' (valid: sync, async)");
    COHORT_INPUT_CHECK(cfg_.staleness >= -1, "--staleness must be -1 (no bound) or more, got ",
                       cfg_.staleness);
  }
  void check(const std::string&, const RunSettings& run, int world) const override {
    COHORT_INPUT_CHECK(run.clip_norm <= 0,
                       "--clip is not supported with --parallel ps (the gradient norm spans ranks)");
    COHORT_INPUT_CHECK(run.accumulate == 1, "--accumulate is not supported with --parallel ps");
    COHORT_INPUT_CHECK(!run.precision.scaled(),
                       "--precision fp16 is not supported with --parallel ps (each server would "
                       "skip overflowing steps on its own shard; use bf16)");
    COHORT_INPUT_CHECK(cfg_.servers < world, "--servers ", cfg_.servers, " leaves no worker: ",
                       world, " ranks in all (workers are the ranks that are not servers)");
  }
  void describe(std::ostream& os) const override {
    os << "--servers " << cfg_.servers << "\n--ps-mode " << mode_ << "\n--staleness "
       << cfg_.staleness << "\n";
  }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    COHORT_INPUT_CHECK(a.comm, "--parallel ps needs ranks: start with mpirun or --workers N");
    PsConfig pc = cfg_;
    pc.async = mode_ == "async";
    return std::make_unique<ParameterServer>(*a.comm, a.model, a.opt, pc, a.run.seed,
                                             a.run.precision);
  }
  std::string summary_text(const nlohmann::ordered_json& s) const override;
  std::vector<BenchRow> bench_rows() const override;

 private:
  PsConfig cfg_;
  std::string mode_ = "sync";
};

std::string ParameterServerFamily::summary_text(const nlohmann::ordered_json& s) const {
  if (!s.contains("ps")) return "";
  const auto& p = s["ps"];
  char line[256];
  std::snprintf(line, sizeof line,
                "parameter server %s, %d server(s), %d worker(s): staleness mean %.2f, max %d "
                "updates\n",
                p["mode"].get<std::string>().c_str(), p["servers"].get<int>(),
                p["workers"].get<int>(), p["staleness_mean"].get<double>(),
                p["staleness_max"].get<int>());
  return line;
}

std::vector<BenchRow> ParameterServerFamily::bench_rows() const {
  return {{"ps-sync", "cohort ps sync (2 workers + 1 server)", "cohort", 3, 2, 1, false,
           {"--workers", "3", "--parallel", "ps", "--servers", "1", "--ps-mode", "sync"}, ""},
          {"ps-async", "cohort ps async (2 workers + 1 server)", "cohort", 3, 2, 1, false,
           {"--workers", "3", "--parallel", "ps", "--servers", "1", "--ps-mode", "async"}, ""}};
}

}  // namespace

std::unique_ptr<StrategyFamily> parameter_server_family() {
  return std::make_unique<ParameterServerFamily>();
}

}  // namespace cohort
