// The timeline recorder in one process: spans from two threads and a lane of
// their own render as Chrome trace-event JSON that parses, with each thread's
// name, durations as timed, async pairs matched, names escaped; off records
// nothing.
#include "core/timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace cohort {
namespace {

nlohmann::json render_all(int pid) {
  timeline::RenderOptions o;
  o.pid = pid;
  o.process_name = "rank " + std::to_string(pid);
  return nlohmann::json::parse("[" + timeline::render(o) + "]");
}

// The metadata value `key` of the event named `what` on lane tid ("" if none).
std::string metadata(const nlohmann::json& events, const std::string& what, int64_t tid) {
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == what && e["tid"] == tid) return e["args"]["name"];
  return "";
}

TEST(TimelineRecorder, RecordsSpansOfEveryThreadAsChromeTraceEvents) {
  timeline::name_thread("main");
  timeline::start();
  const int main_lane = timeline::thread_lane();
  {
    timeline::Span outer("step", "step", "step", 1);
    timeline::Span inner("forward", timeline::intern("forward \"fc1\""), "layer", 2, 400);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  int worker_lane = -1;
  std::thread t([&] {
    timeline::name_thread("allreduce");
    worker_lane = timeline::thread_lane();
    timeline::Span s("allreduce", "allreduce", "bucket", 0, 1024);
  });
  t.join();
  timeline::Event async;
  async.name = "send activation";
  async.cat = "pipeline";
  async.ph = 'a';
  async.begin_ns = timeline::now_ns();
  async.end_ns = async.begin_ns + 5000;
  async.lane = timeline::lane("sends");
  timeline::record(async);
  timeline::stop();
  ASSERT_EQ(timeline::event_count(), 4u);
  {
    timeline::Span off("step", "step");  // recording stopped: nothing
  }
  EXPECT_EQ(timeline::event_count(), 4u);

  const nlohmann::json events = render_all(3);
  const int64_t base = 3 * timeline::kLanesPerProcess;  // tids are unique across processes
  EXPECT_EQ(metadata(events, "thread_name", base + main_lane), "main");
  EXPECT_EQ(metadata(events, "thread_name", base + worker_lane), "allreduce");
  EXPECT_EQ(metadata(events, "process_name", base), "rank 3");
  int spans = 0;
  std::vector<nlohmann::json> begins, ends;
  for (const auto& e : events) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (e["name"] == "forward \"fc1\"") {
      EXPECT_EQ(e["tid"], base + main_lane);
      EXPECT_GE(e["dur"].get<double>(), 2000.0);  // the 2 ms slept, in microseconds
      EXPECT_EQ(e["args"]["layer"], 2);
      EXPECT_EQ(e["args"]["bytes"], 400);
    }
    if (e["name"] == "allreduce") EXPECT_EQ(e["tid"], base + worker_lane);
    if (e["ph"] == "b") begins.push_back(e);
    if (e["ph"] == "e") ends.push_back(e);
  }
  EXPECT_EQ(spans, 3);
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(begins[0]["id"], ends[0]["id"]);
  EXPECT_NEAR(ends[0]["ts"].get<double>() - begins[0]["ts"].get<double>(), 5.0, 1e-3);
}

TEST(TimelineRecorder, StartClearsTheLastRecording) {
  timeline::start();
  { timeline::Span s("step", "step"); }
  timeline::stop();
  ASSERT_EQ(timeline::event_count(), 1u);
  timeline::start();
  timeline::stop();
  EXPECT_EQ(timeline::event_count(), 0u);
}

// A thread's buffer stops at kMaxEventsPerThread; the rest are counted.
TEST(TimelineRecorder, AFullBufferDropsAndCounts) {
  timeline::start();
  timeline::Event e;
  e.name = "step";
  for (size_t i = 0; i < timeline::kMaxEventsPerThread + 5; ++i) timeline::record(e);
  timeline::stop();
  EXPECT_EQ(timeline::event_count(), timeline::kMaxEventsPerThread);
  EXPECT_EQ(timeline::dropped_count(), 5u);
  timeline::start();
  timeline::stop();
  EXPECT_EQ(timeline::dropped_count(), 0u);
}

}  // namespace
}  // namespace cohort
