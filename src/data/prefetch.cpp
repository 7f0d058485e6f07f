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
                       bool drop_last, int depth, BatchTransform transform,
                       const ImageTransform* images, int epoch)
    : data_(data),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      transform_(std::move(transform)),
      images_(images && images->active() ? images : nullptr),
      epoch_(epoch) {
  COHORT_INPUT_CHECK(batch_size >= 1, "batch size must be >= 1, got ", batch_size);
  COHORT_INPUT_CHECK(depth >= 1, "prefetch depth must be >= 1, got ", depth);
  COHORT_CHECK(data.images.ndim() >= 2 && (data.size() == 0 ||
                   int64_t(data.labels.size()) % data.size() == 0),
               "dataset inputs ", shape_str(data.images.shape()), " vs ", data.labels.size(),
               " targets");
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
  // A sample is one row of the inputs (an image, or a sequence of tokens) and
  // its `p` targets (a label, or one per position), whatever the dtype.
  Shape shape = data_.images.shape();
  const size_t row = size_t(data_.images.numel() / shape[0]) * dtype_size(data_.images.dtype());
  const int64_t p = data_.positions();
  shape[0] = end - begin;
  const Shape hwc(shape.begin() + 1, shape.end());
  if (images_) {
    const Shape o = images_->output_shape(hwc);
    std::copy(o.begin(), o.end(), shape.begin() + 1);
  }
  const size_t out_row = size_t(numel(shape) / shape[0]) * dtype_size(data_.images.dtype());
  Batch out;
  out.images = Tensor::empty(shape, data_.images.dtype());
  out.labels.resize(size_t((end - begin) * p));
  const char* src = static_cast<const char*>(data_.images.data());
  char* dst = static_cast<char*>(out.images.data());
  for (int64_t k = begin; k < end; ++k) {
    const int64_t i = indices_[size_t(k)];
    if (images_)
      images_->apply(reinterpret_cast<const float*>(src + size_t(i) * row), hwc,
                     reinterpret_cast<float*>(dst + size_t(k - begin) * out_row), epoch_, i,
                     true);
    else
      std::memcpy(dst + size_t(k - begin) * row, src + size_t(i) * row, row);
    std::copy_n(data_.labels.begin() + i * p, p, out.labels.begin() + (k - begin) * p);
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
