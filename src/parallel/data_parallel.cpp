#include "parallel/data_parallel.h"

#include <algorithm>
#include <exception>
#include <sstream>

#include "core/clock.h"

namespace cohort {

DataParallel::DataParallel(comm::Communicator& comm, nn::Model& model, Optimizer& opt,
                           const DataParallelConfig& cfg, uint64_t seed, float clip_norm)
    : comm_(comm), model_(model), cfg_(cfg), local_(model, opt, seed, clip_norm) {
  COHORT_INPUT_CHECK(cfg.bucket_mb > 0, "--bucket-mb must be positive, got ", cfg.bucket_mb);
  COHORT_INPUT_CHECK(cfg.accumulate >= 1, "--accumulate must be at least 1, got ",
                     cfg.accumulate);
  // Buckets are cut from the end of the arena: backward finishes the last
  // layers first, so the first bucket to fill is the arena's tail.
  const int64_t total = model.params().size();
  const size_t elem = dtype_size(model.params().grads().dtype());
  const int64_t per = std::max<int64_t>(1, int64_t(cfg.bucket_mb * (1 << 20) / elem));
  for (int64_t end = total; end > 0; end -= per)
    buckets_.push_back({std::max<int64_t>(0, end - per), end});
  pending_.assign(buckets_.size(), 0);
  if (cfg_.overlap) thread_ = std::thread([this] { comm_loop(); });
}

DataParallel::~DataParallel() {
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

void DataParallel::reduce_bucket(size_t i) {
  auto [b, e] = buckets_[i];
  comm_.allreduce(model_.params().grads().slice(b, e), e - b, comm::ReduceOp::kSum,
                  cfg_.algorithm);
}

void DataParallel::comm_loop() {
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

void DataParallel::on_grad_ready(int64_t begin, int64_t end) {
  // A module's range may straddle buckets: count what each bucket received.
  for (size_t i = 0; i < buckets_.size(); ++i) {
    auto [b, e] = buckets_[i];
    const int64_t overlap = std::min(e, end) - std::max(b, begin);
    if (overlap <= 0) continue;
    pending_[i] -= overlap;
    if (pending_[i] == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(i);
      cv_.notify_all();
    }
  }
}

void DataParallel::wait_all_buckets() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == buckets_.size(); });
  if (error_) std::rethrow_exception(error_);
}

StepResult DataParallel::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  const bool last = (micro_ + 1) == cfg_.accumulate;
  nn::Context ctx;
  ctx.accumulate = micro_ > 0;
  // Mean over the global batch: every rank scales by 1/(world * batch * accumulate)
  // and the all-reduce sums, so N ranks at batch b follow one rank at batch N*b.
  const float scale = 1.0f / float(int64_t(batch.labels.size()) * comm_.size() * cfg_.accumulate);
  if (last && cfg_.overlap) {
    for (size_t i = 0; i < buckets_.size(); ++i)
      pending_[i] = buckets_[i].second - buckets_[i].first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = 0;
    }
    ctx.grad_ready = [this](int64_t b, int64_t e) { on_grad_ready(b, e); };
  }
  StepResult r = local_.forward_backward(batch, scale, ctx);
  times.compute += t.seconds();
  if (!last) {
    ++micro_;
    return r;
  }
  micro_ = 0;
  t.reset();
  if (cfg_.overlap) {
    wait_all_buckets();
  } else {
    for (size_t i = 0; i < buckets_.size(); ++i) reduce_bucket(i);
  }
  times.comm += t.seconds();
  t.reset();
  local_.apply(lr);
  times.compute += t.seconds();
  return r;
}

void DataParallel::sum(double* v, int n) { comm::sum_metrics(comm_, v, n); }

// Rank 0's text is broadcast and compared line by line on every rank.
static std::string broadcast_text(comm::Communicator& comm, const std::string& text) {
  uint64_t len = text.size();
  comm.broadcast(&len, sizeof len, 0);
  std::string out = text;
  out.resize(len);
  comm.broadcast(out.data(), len, 0);
  return out;
}

static std::string first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream a(mine), b(theirs);
  std::string la, lb;
  while (true) {
    const bool ga = bool(std::getline(a, la)), gb = bool(std::getline(b, lb));
    if (!ga && !gb) return "";
    if (!ga || !gb || la != lb) return (ga ? la : "(nothing)") + " here, " + (gb ? lb : "(nothing)");
  }
}

void check_and_broadcast(comm::Communicator& comm, nn::Model& model, const std::string& flags) {
  std::ostringstream desc;
  for (auto& p : model.params().infos()) desc << "parameter " << p.name << " " << shape_str(p.shape) << "\n";
  for (auto& p : model.buffers().infos()) desc << "buffer " << p.name << " " << shape_str(p.shape) << "\n";
  const std::string flag_diff = first_difference(flags, broadcast_text(comm, flags));
  const std::string model_diff = first_difference(desc.str(), broadcast_text(comm, desc.str()));
  // Every rank learns whether any rank differs, so all stop together.
  float bad = (flag_diff.empty() && model_diff.empty()) ? 0.0f : 1.0f;
  comm.allreduce(&bad, 1, comm::ReduceOp::kSum, comm::Algorithm::kMpi);
  if (!flag_diff.empty())
    throw InputError(detail::concat("rank ", comm.rank(), " was started with other flags than rank 0: ",
                                    flag_diff, " on rank 0"));
  if (!model_diff.empty())
    throw InputError(detail::concat("rank ", comm.rank(), " built another model than rank 0: ",
                                    model_diff, " on rank 0"));
  if (bad > 0) throw InputError(detail::concat("rank ", comm.rank(), ": another rank's model or flags differ from rank 0's"));
  comm.broadcast(model.params().params().data(), model.params().params().nbytes(), 0);
  if (model.buffers().size())
    comm.broadcast(model.buffers().params().data(), model.buffers().params().nbytes(), 0);
}

}  // namespace cohort
