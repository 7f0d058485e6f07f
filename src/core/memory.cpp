#include "core/memory.h"

namespace cohort {

namespace {
thread_local std::shared_ptr<MemoryCounter> tls_counter;
}

void MemoryCounter::add(int64_t bytes) {
  const int64_t now = live_.fetch_add(bytes) + bytes;
  int64_t p = peak_.load();
  while (now > p && !peak_.compare_exchange_weak(p, now)) {
  }
}

CountAllocations::CountAllocations(std::shared_ptr<MemoryCounter> counter)
    : previous_(std::move(tls_counter)) {
  tls_counter = std::move(counter);
}

CountAllocations::~CountAllocations() { tls_counter = std::move(previous_); }

const std::shared_ptr<MemoryCounter>& current_memory_counter() { return tls_counter; }

}  // namespace cohort
