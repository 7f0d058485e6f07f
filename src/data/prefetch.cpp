// Prefetcher: one producer thread, one consumer, a bounded queue of `depth`
// finished batches. Each batch gets fresh storage so a batch the consumer still
// holds (e.g. for logging) is never overwritten behind its back.
#include "data/prefetch.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"

namespace cohort {

Prefetcher::Prefetcher(const Dataset& data, std::vector<int64_t> indices, int64_t batch_size,
                       bool drop_last, int depth, BatchTransform transform)
    : data_(data),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      transform_(std::move(transform)) {
  COHORT_INPUT_CHECK(batch_size >= 1, "batch size must be >= 1, got ", batch_size);
  COHORT_INPUT_CHECK(depth >= 1, "prefetch depth must be >= 1, got ", depth);
  COHORT_CHECK(data.images.ndim() == 4 && data.images.dim(0) == data.size(),
               "dataset images ", shape_str(data.images.shape()), " vs ", data.size(),
               " labels");
  for (int64_t i : indices_)
    COHORT_CHECK(i >= 0 && i < data.size(), "index ", i, " outside dataset of ", data.size());
  int64_t n = int64_t(indices_.size());
  num_batches_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
  depth_ = size_t(depth);
  worker_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

Batch Prefetcher::gather(int64_t b) const {
  int64_t begin = b * batch_size_;
  int64_t end = std::min<int64_t>(begin + batch_size_, int64_t(indices_.size()));
  const Shape& s = data_.images.shape();
  int64_t row = s[1] * s[2] * s[3];
  Batch out;
  out.images = Tensor::empty({end - begin, s[1], s[2], s[3]});
  out.labels.resize(size_t(end - begin));
  const float* src = data_.images.f32();
  float* dst = out.images.f32();
  for (int64_t k = begin; k < end; ++k) {
    int64_t i = indices_[size_t(k)];
    std::memcpy(dst + (k - begin) * row, src + i * row, size_t(row) * sizeof(float));
    out.labels[size_t(k - begin)] = data_.labels[size_t(i)];
  }
  return out;
}

void Prefetcher::run() {
  try {
    for (int64_t b = 0; b < num_batches_; ++b) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_) break;
      }
      Batch batch = gather(b);  // outside the lock: this is the work we overlap
      if (transform_) transform_(batch, b);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.push_back(std::move(batch));
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

bool Prefetcher::next(Batch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ready_.empty() && !done_) {
    Timer t;
    cv_.wait(lock, [&] { return !ready_.empty() || done_; });
    wait_seconds_ += t.seconds();
  }
  if (ready_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  out = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return true;
}

}  // namespace cohort
