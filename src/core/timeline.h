// The timeline recorder (`--timeline FILE`; Horovod's timeline is the model):
// spans of what each thread of this process did — data wait, forward and
// backward per layer, each gradient bucket's queue and all-reduce, the
// optimizer, pipeline sends and receives, parameter-server pushes and pulls —
// as fixed-size events in a per-thread append buffer (no lock on the hot
// path), rendered at the end as Chrome trace-event JSON objects.
//
// Off (the default), every call site costs one predictable branch on on();
// nothing is allocated or timed. Names are static strings or intern()ed ones
// (kept for the life of the process), so an event holds pointers only.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::timeline {

namespace detail {
extern std::atomic<bool> g_on;
}

// Whether events are being recorded (relaxed: a flag set before the work).
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// steady_clock in ns: one clock for every process of a machine.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One recorded event. ph: 'X' a span on a lane, 'i' an instant, 'a' an async
// span (rendered as a Chrome 'b'/'e' pair: operations that overlap, such as
// non-blocking sends in flight).
struct Event {
  const char* name = nullptr;
  const char* cat = nullptr;
  int64_t begin_ns = 0, end_ns = 0;
  const char* id_name = nullptr;  // the arg `id` is shown under ("bucket", "micro_batch")
  int64_t id = -1;                // -1: none
  int64_t bytes = -1;             // -1: none
  int32_t lane = -1;              // -1: the recording thread's own
  char ph = 'X';
};

// Clears every buffer and starts (or stops) recording.
void start();
void stop();

// Names the calling thread's lane ("main", "allreduce"); call where the
// thread starts. Costs a thread_local store whether on or off.
void name_thread(const char* name);
// The id of a lane that is no thread (one row per gradient bucket, say),
// made on first use of the name.
int32_t lane(const std::string& name);
// The calling thread's lane id (made on first use).
int32_t thread_lane();
// A string that lives as long as the process (layer names).
const char* intern(const std::string& s);

// Appends e to the calling thread's buffer (only when on()). A thread keeps
// at most kMaxEventsPerThread (64 MiB of events); later ones are counted
// as dropped.
constexpr size_t kMaxEventsPerThread = size_t(1) << 20;
void record(const Event& e);
// Events dropped since start() because a buffer was full, all threads.
size_t dropped_count();

// A span over a scope on the calling thread's lane: begins in the
// constructor, is recorded in the destructor; nothing at all when off.
class Span {
 public:
  Span(const char* cat, const char* name, const char* id_name = nullptr, int64_t id = -1,
       int64_t bytes = -1) {
    if (!on()) return;
    e_.cat = cat;
    e_.name = name;
    e_.id_name = id_name;
    e_.id = id;
    e_.bytes = bytes;
    e_.begin_ns = now_ns();
  }
  ~Span() {
    if (e_.name == nullptr) return;
    e_.end_ns = now_ns();
    record(e_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Event e_;
};

// Where a process's events go in the merged file. Perfetto treats pid 0 and
// tid 0 as the kernel's and a tid as unique across processes, so a lane's
// tid is pid * kLanesPerProcess + lane.
constexpr int64_t kLanesPerProcess = 100000;
struct RenderOptions {
  int pid = 1;               // rank + 1
  int64_t origin_ns = 0;     // rank 0's start, on this process's clock: ts 0
  std::string process_name;  // "rank 3"
};

// This process's events (and its lanes' names) as Chrome trace-event JSON
// objects, comma-separated, without brackets: ts and dur in microseconds.
std::string render(const RenderOptions& opt);
// Events recorded so far, all threads (tests; call while no thread records).
size_t event_count();

}  // namespace cohort::timeline
