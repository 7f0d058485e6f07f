#include "core/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

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

double resident_mb() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20) : 0;
}

double window_peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return bool(out.flush());
}

namespace {

// The mappings of huge pages alive, as [begin, end) addresses: release_pages
// returns whole huge pages inside them. Never destroyed: a mapping may
// outlive static destruction.
struct HugeMappings {
  std::mutex mutex;
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
};
HugeMappings& huge_mappings() {
  static auto* m = new HugeMappings;
  return *m;
}

// `bytes` mapped at a multiple of `align` (a power of two, at least a page,
// or 1): the mapping over-allocated, its head and tail unmapped.
void* map_aligned(size_t bytes, size_t align) {
  const size_t over = align > 1 ? bytes + align : bytes;
  void* p = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    throw Error(detail::concat("out of host memory mapping ", bytes, " bytes"));
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = uintptr_t(p), a = (b + align - 1) & ~uintptr_t(align - 1);
  const uintptr_t end = (a + bytes + page - 1) / page * page, mapped = (b + over + page - 1) / page * page;
  if (a > b) munmap(p, a - b);
  if (mapped > end) munmap(reinterpret_cast<void*>(end), mapped - end);
  return reinterpret_cast<void*>(a);
}

}  // namespace

std::shared_ptr<void> allocate_pages(size_t bytes, PageSize size) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes < kHugePagesFrom && size == PageSize::kBySize) {
    void* p = map_aligned(bytes, 1);
    return std::shared_ptr<void>(p, [bytes](void* q) { munmap(q, bytes); });
  }
  // Transparent huge pages where the kernel offers them on request: ZeRO-3
  // refills each gathered layer's released pages every pass, and 2 MB pages
  // take 512x fewer faults (gpt2 zero-3, 2 ranks: 4.2M -> 0.63M faults,
  // epoch 16.6 -> 13.0 s).
  // Whole huge pages: a last partial one would fault in 4 KB pages, and a
  // buffer filled from its end (ZeroLayers' bf16 buckets) starts there.
  bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = map_aligned(bytes, kHugePage);
  madvise(p, bytes, MADV_HUGEPAGE);
  const uintptr_t b = uintptr_t(p);
  HugeMappings& m = huge_mappings();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.spans.emplace_back(b, b + bytes);
  }
  return std::shared_ptr<void>(p, [&m, bytes](void* q) {
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      const auto span = std::make_pair(uintptr_t(q), uintptr_t(q) + bytes);
      m.spans.erase(std::remove(m.spans.begin(), m.spans.end(), span), m.spans.end());
    }
    munmap(q, bytes);
  });
}

size_t release_grain(const void* p) {
  const uintptr_t a = uintptr_t(p);
  HugeMappings& m = huge_mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  for (auto [b, e] : m.spans)
    if (a >= b && a < e) return kHugePage;
  return size_t(sysconf(_SC_PAGESIZE));
}

void release_pages(void* p, size_t bytes, bool zero_edges) {
  if (bytes == 0) return;
  const uintptr_t page = release_grain(p);
  const uintptr_t b = uintptr_t(p), e = b + bytes;
  const uintptr_t ib = (b + page - 1) / page * page, ie = e / page * page;
  if (ib >= ie) {  // no whole page inside
    if (zero_edges) std::memset(p, 0, bytes);
    return;
  }
  if (zero_edges) {
    std::memset(p, 0, ib - b);
    std::memset(reinterpret_cast<void*>(ie), 0, e - ie);
  }
  COHORT_CHECK(madvise(reinterpret_cast<void*>(ib), ie - ib, MADV_DONTNEED) == 0,
               "madvise(MADV_DONTNEED) of ", ie - ib, " bytes failed");
}

}  // namespace cohort
