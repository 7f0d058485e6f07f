#include "core/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace cohort {

namespace {

thread_local std::shared_ptr<MemoryCounter> tls_counter;

// Host memory aligned to a cache line (and to AVX-512 vectors).
class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw Error(detail::concat("out of host memory allocating ", bytes, " bytes"));
    return p;
  }
  void deallocate(void* p) override { std::free(p); }
};

Allocator* allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator(Device device) {
  static HostAllocator host;
  if (device == Device::kCpu && !allocators[0]) return host;
  Allocator* a = allocators[int(device)];
  if (!a) throw Error(detail::concat("no allocator for device ", device_name(device),
                                     " in this build"));
  return *a;
}

void set_allocator(Device device, Allocator* a) { allocators[int(device)] = a; }

std::shared_ptr<void> allocate(Device device, size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  Allocator& a = allocator(device);
  void* p = a.allocate(bytes);
  const auto& counter = current_memory_counter();
  if (!counter) return std::shared_ptr<void>(p, [&a](void* q) { a.deallocate(q); });
  counter->add(int64_t(bytes));
  return std::shared_ptr<void>(p, [&a, counter, bytes](void* q) {
    counter->add(-int64_t(bytes));
    a.deallocate(q);
  });
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

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

}  // namespace cohort
