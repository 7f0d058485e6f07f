#include "parallel/data_parallel.h"

#include <algorithm>
#include <exception>
#include <sstream>

#include "core/clock.h"
#include "core/cpus.h"
#include "core/timeline.h"
#include "parallel/registry.h"

namespace cohort {

BucketReducer::BucketReducer(comm::Communicator& comm, float* grads, int64_t n, double bucket_mb,
                             bool overlap, DType wire, comm::Algorithm algo, int64_t begin)
    : comm_(comm), grads_(grads), overlap_(overlap), reducer_(wire, algo) {
  COHORT_INPUT_CHECK(bucket_mb > 0, "--bucket-mb must be positive, got ", bucket_mb);
  const int64_t per = f32_elements_in_mib(bucket_mb);
  for (int64_t end = n; end > begin; end -= per)
    buckets_.push_back({std::max<int64_t>(begin, end - per), end});
  pending_.assign(buckets_.size(), 0);
  comm_.prepare(algo);  // collective splits here, not on the comm thread
  queued_ns_.assign(buckets_.size(), 0);
  if (overlap_) thread_ = std::thread([this] { comm_loop(); });
}

BucketReducer::~BucketReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // Unwinding from an error: the thread may sit in an all-reduce that another
  // rank will never join. Joining would hang; the process is about to exit
  // non-zero and mpirun ends the job, so leave the thread behind.
  if (std::uncaught_exceptions() > 0)
    thread_.detach();
  else
    thread_.join();
}

void BucketReducer::reduce_bucket(size_t i) {
  if (timeline::on()) [[unlikely]]
    return reduce_bucket_traced(i);
  auto [b, e] = buckets_[i];
  reducer_.allreduce(comm_, grads_ + b, e - b, comm::ReduceOp::kSum);
}

void BucketReducer::reduce_bucket_traced(size_t i) {
  auto [b, e] = buckets_[i];
  timeline::Event ev;
  ev.cat = "allreduce";
  ev.id_name = "bucket";
  ev.id = int64_t(i);
  ev.bytes = (e - b) * int64_t(sizeof(float));
  ev.lane = timeline::lane("allreduce bucket " + std::to_string(i));
  const int64_t start = timeline::now_ns();
  ev.name = "queued";  // from the moment backward completed it (no overlap: now)
  ev.begin_ns = overlap_ ? queued_ns_[i] : start;
  ev.end_ns = start;
  timeline::record(ev);
  reducer_.allreduce(comm_, grads_ + b, e - b, comm::ReduceOp::kSum);
  ev.name = "allreduce";
  ev.begin_ns = start;
  ev.end_ns = timeline::now_ns();
  timeline::record(ev);
}

void BucketReducer::comm_loop() {
  timeline::name_thread("allreduce");
  serial_openmp();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    size_t i = queue_.front();
    queue_.pop_front();
    lock.unlock();
    try {
      reduce_bucket(i);
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      ++done_;
      cv_.notify_all();
      continue;
    }
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

void BucketReducer::on_grad_ready(int64_t begin, int64_t end) {
  // A module's range may straddle buckets: count what each bucket received.
  for (size_t i = 0; i < buckets_.size(); ++i) {
    auto [b, e] = buckets_[i];
    const int64_t overlap = std::min(e, end) - std::max(b, begin);
    if (overlap <= 0) continue;
    pending_[i] -= overlap;
    if (pending_[i] == 0) {
      if (timeline::on()) [[unlikely]]
        queued_ns_[i] = timeline::now_ns();
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(i);
      cv_.notify_all();
    }
  }
}

void BucketReducer::arm(nn::Context& ctx) {
  if (!overlap_) return;
  for (size_t i = 0; i < buckets_.size(); ++i)
    pending_[i] = buckets_[i].second - buckets_[i].first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = 0;
  }
  ctx.grad_ready = [this](int64_t b, int64_t e) { on_grad_ready(b, e); };
}

void BucketReducer::finish() {
  if (!overlap_) {
    for (size_t i = 0; i < buckets_.size(); ++i) reduce_bucket(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == buckets_.size(); });
  if (error_) std::rethrow_exception(error_);
}

DataParallel::DataParallel(comm::Communicator& comm, nn::Model& model, Optimizer& opt,
                           const DataParallelConfig& cfg, uint64_t seed, float clip_norm,
                           const Precision& precision)
    : comm_(comm), cfg_(cfg), local_(model, opt, seed, clip_norm, precision),
      reduce_(comm, model.params().grads().f32(), model.params().size(), cfg.bucket_mb,
              cfg.overlap, cfg.grad_comm, cfg.algorithm, model.frozen_params()) {
  COHORT_INPUT_CHECK(cfg.accumulate >= 1, "--accumulate must be at least 1, got ",
                     cfg.accumulate);
}

StepResult DataParallel::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const bool last = (micro_ + 1) == cfg_.accumulate;
  nn::Context ctx;
  ctx.accumulate = micro_ > 0;
  // Mean over the global batch: every rank scales by 1/(world * batch * accumulate)
  // and the all-reduce sums, so N ranks at batch b follow one rank at batch N*b.
  const float scale = 1.0f / float(batch.size() * comm_.size() * cfg_.accumulate);
  if (last) reduce_.arm(ctx);
  StepResult r = local_.forward_backward(batch, scale, ctx);
  times.compute += t.seconds();
  if (!last) {
    ++micro_;
    return r;
  }
  micro_ = 0;
  t.reset();
  {
    timeline::Span span("allreduce", "wait for all-reduce");
    reduce_.finish();
  }
  times.comm += t.seconds();
  t.reset();
  local_.apply(lr);
  times.compute += t.seconds();
  return r;
}

void DataParallel::sum(double* v, int n) { comm::sum_metrics(comm_, v, n); }

namespace {

// --parallel dp: synchronous data parallelism over all-reduce.
class DataParallelFamily final : public StrategyFamily {
 public:
  std::vector<std::string> names() const override { return {"dp"}; }
  bool reduces_gradients(const std::string&) const override { return true; }
  bool freezes(const std::string&) const override { return true; }
  std::string help() const override {
    return "dp: data-parallel ranks, gradients all-reduced in buckets (DDP, Horovod)";
  }
  void add_flags(CLI::App& app) override {
    app.add_option("--allreduce", allreduce_, "ring | tree | mpi | hierarchical | auto (dp)");
    app.add_option("--ranks-per-host", ranks_per_host_,
                   "pretend host layout for --allreduce: R per host, or R1,R2,... (dp; default: "
                   "mpirun's hosts)");
    app.add_option("--bucket-mb", bucket_mb_, "gradient bucket size in MiB (dp, zero)")
        ->capture_default_str();
    app.add_flag("--no-overlap{false}", overlap_, "reduce after backward, not during it (dp)");
    app.add_flag("--deterministic", deterministic_, "fixed reduction order: bit-for-bit runs (dp)");
  }
  void validate() const override {
    comm::parse_algorithm(allreduce_);  // InputError naming --allreduce
    COHORT_INPUT_CHECK(bucket_mb_ > 0, "--bucket-mb must be positive, got ", bucket_mb_);
  }
  void describe(std::ostream& os) const override {
    os << "--allreduce " << allreduce_ << "\n--ranks-per-host " << ranks_per_host_
       << "\n--bucket-mb " << bucket_mb_ << "\n--no-overlap "
       << !overlap_ << "\n--deterministic " << deterministic_ << "\n";
  }
  void export_flags(RunSettings& run) const override { run.bucket_mb = bucket_mb_; }
  std::unique_ptr<Strategy> make(const std::string&, StrategyArgs& a) const override {
    COHORT_INPUT_CHECK(a.comm, "--parallel dp needs ranks: start with mpirun or --workers N");
    if (!ranks_per_host_.empty())
      a.comm->set_ranks_per_host(comm::parse_ranks_per_host(ranks_per_host_, a.comm->size()));
    DataParallelConfig dp;
    dp.bucket_mb = bucket_mb_;
    dp.overlap = overlap_;
    dp.accumulate = a.run.accumulate;
    dp.algorithm = deterministic_ ? comm::Algorithm::kRing : comm::parse_algorithm(allreduce_);
    dp.grad_comm = a.run.precision.grad_comm;
    return std::make_unique<DataParallel>(*a.comm, a.model, a.opt, dp, a.run.seed,
                                          a.run.clip_norm, a.run.precision);
  }
  std::vector<BenchRow> bench_rows() const override {
    return {{"dp", "cohort dp (all-reduce)", "cohort", 2, 2, 1, false,
             {"--workers", "2", "--parallel", "dp"}, ""},
            {"pytorch-ddp", "PyTorch DDP (gloo)", "pytorch", 2, 2, 1, false, {"--world", "2"}, "dp"}};
  }

 private:
  std::string allreduce_ = "auto";
  std::string ranks_per_host_;  // empty: the launcher's layout
  double bucket_mb_ = kDefaultBucketMb;
  bool overlap_ = true;
  bool deterministic_ = false;
};

}  // namespace

std::unique_ptr<StrategyFamily> data_parallel_family() {
  return std::make_unique<DataParallelFamily>();
}

}  // namespace cohort
