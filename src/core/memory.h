// Device memory for tensors, and counting it by scope.
//
// Every Tensor::empty goes through allocate(device, bytes): one allocator per
// device (64-byte aligned host memory today; a CUDA allocator registers
// itself with set_allocator when that backend is built).
//
// While a CountAllocations is alive on a thread, every allocation on that
// thread adds its bytes to the counter, and freeing that memory later (on any
// thread) takes them off again. A pipeline stage counts its activations this
// way (live and peak bytes).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace cohort {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;  // throws Error when out of memory
  virtual void deallocate(void* p) = 0;
};

// The allocator of `device`; Error if none is built for it.
Allocator& allocator(Device device);
// Installs the allocator of a device (a backend at start-up; tests). Not
// thread-safe against concurrent allocation: call before any.
void set_allocator(Device device, Allocator* a);

// `bytes` (rounded up to whole 64-byte lines) on `device`, freed when the
// last copy of the pointer goes, and counted by the thread's CountAllocations.
std::shared_ptr<void> allocate(Device device, size_t bytes);

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

// This process's peak resident memory (getrusage's ru_maxrss), MB.
double peak_rss_mb();
// Its resident memory now (/proc/self/statm), MB.
double resident_mb();
// Its peak since the last reset_peak_rss (VmHWM in /proc/self/status), MB,
// and the reset (writes 5 to /proc/self/clear_refs): a run can report the
// peak of training apart from the peak of its set-up. 0 / false where the
// kernel does not offer them.
double window_peak_rss_mb();
bool reset_peak_rss();

// Zeroed host memory straight from the kernel (mmap): a page costs nothing
// until first touched, so an arena of which a rank uses one shard holds only
// that shard (and the pages it touches). 4096-byte aligned.
// Mappings of at least kHugePagesFrom bytes, and smaller ones asked with
// kHuge, ask for transparent huge pages and start on a huge page.
enum class PageSize { kBySize, kHuge };
std::shared_ptr<void> allocate_pages(size_t bytes, PageSize size = PageSize::kBySize);
constexpr size_t kHugePagesFrom = size_t(64) << 20;  // a mapping worth 32 huge pages
constexpr size_t kHugePage = size_t(2) << 20;
// Returns the whole pages inside [p, p + bytes) of such memory to the kernel
// (they read as zeros again, and are resident again once written) and, with
// `zero_edges`, zeroes the bytes of the range on the pages it shares with
// its neighbours, so the whole range reads as zeros. In a mapping of huge
// pages the pages are huge ones: returning part of one splits it, and its
// 512 small pages then fault back one at a time.
void release_pages(void* p, size_t bytes, bool zero_edges);
// The pages release_pages returns at p: kHugePage inside a mapping of huge
// pages, the system's page elsewhere.
size_t release_grain(const void* p);

// The counter of the innermost live CountAllocations on this thread, or null.
const std::shared_ptr<MemoryCounter>& current_memory_counter();

}  // namespace cohort
