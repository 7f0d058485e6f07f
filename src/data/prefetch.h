// Background batch assembly: a worker thread gathers an epoch's indices into
// Batch buffers up to `depth` batches ahead, so the copy overlaps compute.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "data/augment.h"
#include "data/batch.h"
#include "data/dataset.h"

namespace cohort {

// Runs on the worker thread on each finished batch (e.g. random crops/flips), so
// augmentation overlaps compute too. Exceptions it throws reach the consumer.
using BatchTransform = std::function<void(Batch&, int64_t batch_index)>;

class Prefetcher {
 public:
  // `data` must outlive the Prefetcher. Indices index into data (checked up
  // front). The last partial batch is dropped if drop_last, else delivered short.
  // InputError if batch_size < 1 or depth < 1. `transform` is optional;
  // `images` (optional, outliving the Prefetcher) augments and resizes each
  // f32 image as it is gathered, with the draws of (its seed, `epoch`, index).
  Prefetcher(const Dataset& data, std::vector<int64_t> indices, int64_t batch_size,
             bool drop_last, int depth = 2, BatchTransform transform = nullptr,
             const ImageTransform* images = nullptr, int epoch = 0);
  // Stops and joins the worker, even if the consumer quit mid-epoch.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Next batch in index order; false at epoch end. Rethrows a worker exception
  // once the batches produced before it have been consumed. Each batch owns
  // fresh storage, so the caller may keep it as long as it likes.
  bool next(Batch& out);

  int64_t num_batches() const { return num_batches_; }
  // Cumulative seconds next() spent blocked waiting for the worker ("data wait").
  double wait_seconds() const { return wait_seconds_; }

 private:
  void run();
  Batch gather(int64_t b) const;

  const Dataset& data_;
  std::vector<int64_t> indices_;
  int64_t batch_size_;
  int64_t num_batches_;
  size_t depth_;
  BatchTransform transform_;
  const ImageTransform* images_;
  int epoch_;

  std::mutex mu_;
  std::condition_variable cv_;  // one cv for both sides; few waiters, low rate
  std::deque<Batch> ready_;
  bool done_ = false;  // worker finished (normally or by exception)
  bool stop_ = false;  // consumer asked the worker to quit
  std::exception_ptr error_;
  double wait_seconds_ = 0;
  std::thread worker_;  // last: started after everything above is initialized
};

}  // namespace cohort
