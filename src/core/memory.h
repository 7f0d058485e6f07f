// Counting tensor memory by scope: while a CountAllocations is alive on a
// thread, every Tensor::empty on that thread adds its bytes to the counter,
// and freeing that tensor later (on any thread) takes them off again. A
// pipeline stage counts its activations this way (live and peak bytes).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

namespace cohort {

class MemoryCounter {
 public:
  void add(int64_t bytes);  // negative: freed
  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }

 private:
  std::atomic<int64_t> live_{0}, peak_{0};
};

class CountAllocations {
 public:
  explicit CountAllocations(std::shared_ptr<MemoryCounter> counter);
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

 private:
  std::shared_ptr<MemoryCounter> previous_;
};

// The counter of the innermost live CountAllocations on this thread, or null.
const std::shared_ptr<MemoryCounter>& current_memory_counter();

}  // namespace cohort
