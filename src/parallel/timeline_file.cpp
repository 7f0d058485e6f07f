#include "parallel/timeline_file.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "core/atomic_file.h"
#include "core/timeline.h"

namespace cohort {

namespace {

constexpr int kClockTag = 130, kEventsTag = 131;
constexpr int kPings = 8;

// Rank 0's side of the pings to rank r: {offset, round trip} of the
// shortest round trip, in ns.
std::pair<int64_t, int64_t> ping(comm::Communicator& c, int r) {
  int64_t best_rtt = INT64_MAX, offset = 0;
  for (int k = 0; k < kPings; ++k) {
    const int64_t sent = timeline::now_ns();
    int64_t theirs = 0;
    c.send(&sent, sizeof sent, r, kClockTag);
    c.recv(&theirs, sizeof theirs, r, kClockTag);
    const int64_t back = timeline::now_ns();
    if (back - sent < best_rtt) {
      best_rtt = back - sent;
      offset = theirs - (sent + (back - sent) / 2);
    }
  }
  return {offset, best_rtt};
}

std::string microseconds_list(const std::vector<int64_t>& ns) {
  std::string s = "[";
  for (size_t i = 0; i < ns.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(double(ns[i]) / 1000.0);
  }
  s += ']';
  return s;
}

}  // namespace

TimelineFile::TimelineFile(std::string path, comm::Communicator* comm)
    : path_(std::move(path)), comm_(comm) {
  timeline::name_thread("main");
  timeline::start();
  timeline::thread_lane();  // the main thread's lane is the process's first
  align_clocks();
}

TimelineFile::~TimelineFile() { timeline::stop(); }

// Rank 0 pings every rank, then tells each its offset and rank 0's start.
void TimelineFile::align_clocks() {
  if (!comm_ || comm_->size() == 1) {
    origin_ns_ = timeline::now_ns();
    offsets_ = rtts_ = {0};
    return;
  }
  comm::Communicator& c = *comm_;
  if (c.rank() == 0) {
    offsets_.assign(size_t(c.size()), 0);
    rtts_.assign(size_t(c.size()), 0);
    for (int r = 1; r < c.size(); ++r) std::tie(offsets_[size_t(r)], rtts_[size_t(r)]) = ping(c, r);
    origin_ns_ = timeline::now_ns();
    for (int r = 1; r < c.size(); ++r) {
      // Shifted only where the clocks differ by more than the measurement's error.
      const int64_t off = offsets_[size_t(r)];
      const int64_t msg[2] = {origin_ns_, std::llabs(off) > rtts_[size_t(r)] ? off : 0};
      c.send(msg, sizeof msg, r, kClockTag);
    }
    return;
  }
  for (int k = 0; k < kPings; ++k) {
    int64_t sent = 0;
    c.recv(&sent, sizeof sent, 0, kClockTag);
    const int64_t mine = timeline::now_ns();
    c.send(&mine, sizeof mine, 0, kClockTag);
  }
  int64_t msg[2] = {0, 0};
  c.recv(msg, sizeof msg, 0, kClockTag);
  origin_ns_ = msg[0] + msg[1];  // rank 0's start on this rank's clock
}

void TimelineFile::write() {
  timeline::stop();
  const int rank = comm_ ? comm_->rank() : 0, world = comm_ ? comm_->size() : 1;
  timeline::RenderOptions opt;
  opt.pid = rank + 1;  // Perfetto reserves pid 0 for the kernel's
  opt.origin_ns = origin_ns_;
  opt.process_name = "rank " + std::to_string(rank);
  const std::string mine = timeline::render(opt);
  if (const size_t dropped = timeline::dropped_count(); dropped > 0)
    std::fprintf(stderr, "cohort: note: --timeline %s: rank %d kept its first %zu events per thread "
                 "and dropped %zu more\n", path_.c_str(), rank, timeline::kMaxEventsPerThread, dropped);
  if (rank != 0) {
    const uint64_t n = mine.size();
    comm_->send(&n, sizeof n, 0, kEventsTag);
    comm_->send(mine.data(), n, 0, kEventsTag);
    return;
  }
  AtomicFile f(path_);
  const std::string head = "{\"traceEvents\":[\n";
  f.write(head.data(), head.size());
  f.write(mine.data(), mine.size());
  for (int r = 1; r < world; ++r) {
    uint64_t n = 0;
    comm_->recv(&n, sizeof n, r, kEventsTag);
    std::string theirs(n, '\0');
    comm_->recv(theirs.data(), n, r, kEventsTag);
    if (!theirs.empty()) f.write(",\n", 2);
    f.write(theirs.data(), theirs.size());
  }
  const std::string tail =
      "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\"steady_clock; ranks shifted by "
      "their offset to rank 0 where it exceeds the ping round trip\",\"clock_offset_us\":" +
      microseconds_list(offsets_) + ",\"ping_rtt_us\":" + microseconds_list(rtts_) + "}}\n";
  f.write(tail.data(), tail.size());
  f.commit();
}

}  // namespace cohort
