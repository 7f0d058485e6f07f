// `cohort train --timeline FILE` under real ranks: the file parses as Chrome
// trace-event JSON with every rank's track, a forward and a backward span
// for every layer in every step, one all-reduce per bucket per step on each
// rank (queued, then reduced, after the backward that completed it and
// before the optimizer), pipeline sends before the matching receives end,
// parameter-server pushes and pulls; spans nest on each lane. A path that
// cannot be written is one line and exit 2, before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_support::run;

const std::string kTrain = testing_support::equality_train_command();
const std::vector<std::string> kLayers = {"conv1", "flatten", "fc1", "fc2"};  // mnist-small
constexpr double kEps = 0.01;  // microseconds: the file's ts and dur are rounded to 1 ns

struct Span {
  std::string name, cat;
  int rank = 0;
  int64_t tid = 0;
  double begin = 0, end = 0;
  json args;
};

struct Trace {
  std::vector<Span> spans;  // 'X' events
  std::vector<json> all;  // each with "rank" added, from its process's name
  // The 'X' spans of `rank` named `name` (optionally inside [lo, hi]).
  std::vector<Span> find(int rank, const std::string& name, double lo = -1e300,
                         double hi = 1e300) const {
    std::vector<Span> out;
    for (const Span& s : spans)
      if (s.rank == rank && s.name == name && s.begin >= lo - kEps && s.end <= hi + kEps)
        out.push_back(s);
    return out;
  }
  int count(int rank, const std::string& ph, const std::string& name) const {
    int n = 0;
    for (const json& e : all) n += e["rank"] == rank && e["ph"] == ph && e["name"] == name;
    return n;
  }
};

Trace read_trace(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  const json j = json::parse(f);  // throws (fails the test) unless it is JSON
  Trace t;
  t.all = j.at("traceEvents").get<std::vector<json>>();
  std::map<int, int> rank_of;  // pid -> rank, from the "rank N" process names
  for (const json& e : t.all)
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string name = e["args"]["name"];
      EXPECT_EQ(name.rfind("rank ", 0), 0u) << name;
      rank_of[e["pid"].get<int>()] = std::stoi(name.substr(5));
      EXPECT_GT(e["pid"].get<int>(), 0);  // Perfetto keeps pid 0 for the kernel
    }
  for (json& e : t.all) {
    const int pid = e["pid"];
    EXPECT_TRUE(rank_of.count(pid)) << e;
    e["rank"] = rank_of.count(pid) ? rank_of[pid] : -1;
    EXPECT_GT(e["tid"].get<int64_t>(), 0);
  }
  for (const json& e : t.all) {
    if (e["ph"] != "X") continue;
    Span s{e["name"], e["cat"], e["rank"], e["tid"], e["ts"], 0, e.value("args", json::object())};
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
    s.end = s.begin + e["dur"].get<double>();
    t.spans.push_back(s);
  }
  return t;
}

// Spans on one lane either nest or follow each other.
void expect_nested(const Trace& t) {
  std::map<int64_t, std::vector<Span>> lanes;  // tids are unique across ranks
  for (const Span& s : t.spans) lanes[s.tid].push_back(s);
  for (auto& [lane, spans] : lanes) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::vector<Span> open;
    for (const Span& s : spans) {
      while (!open.empty() && s.begin >= open.back().end - kEps) open.pop_back();
      if (!open.empty())
        EXPECT_LE(s.end, open.back().end + kEps)
            << s.name << " overlaps " << open.back().name << " on rank " << s.rank;
      open.push_back(s);
    }
  }
}

// Every rank has its process name, and each step every layer of `layers`
// runs forward and backward `times` times inside the step.
void expect_layers_every_step(const Trace& t, int rank, const std::vector<std::string>& layers,
                              int times, int steps) {
  const std::vector<Span> step = t.find(rank, "step");
  ASSERT_EQ(int(step.size()), steps) << "rank " << rank;
  for (const Span& s : step)
    for (const std::string& l : layers) {
      EXPECT_EQ(int(t.find(rank, "forward " + l, s.begin, s.end).size()), times) << l;
      EXPECT_EQ(int(t.find(rank, "backward " + l, s.begin, s.end).size()), times) << l;
    }
  EXPECT_EQ(t.count(rank, "M", "process_name"), 1);
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cohort_timeline_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// dp on 2 ranks, 4 steps of 32 per rank; 0.5 MiB buckets cut mnist-small's
// 1.6 MB of gradients into 4.
TEST(Timeline, DataParallelHasEveryLayerAndOneAllReducePerBucketPerStep) {
  TempDir d;
  const std::string file = (d.path / "dp.json").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch 32 --workers 2 --parallel dp --bucket-mb 0.5 --eval last"
                         " --test-limit 64 --timeline " + file, &out), 0) << out;
  const Trace t = read_trace(file);
  expect_nested(t);
  constexpr int kBuckets = 4, kSteps = 4;
  for (int rank = 0; rank < 2; ++rank) {
    expect_layers_every_step(t, rank, kLayers, 1, kSteps);
    EXPECT_EQ(int(t.find(rank, "data wait").size()), kSteps + 1);  // and the epoch's end
    EXPECT_EQ(int(t.find(rank, "evaluate").size()), 1);
    for (const Span& s : t.find(rank, "step")) {
      const std::vector<Span> queued = t.find(rank, "queued", s.begin, s.end);
      const std::vector<Span> reduced = t.find(rank, "allreduce", s.begin, s.end);
      ASSERT_EQ(int(reduced.size()), kBuckets) << "rank " << rank;
      ASSERT_EQ(int(queued.size()), kBuckets);
      const Span first = t.find(rank, "backward fc2", s.begin, s.end).at(0);
      const Span last = t.find(rank, "backward conv1", s.begin, s.end).at(0);
      const Span opt = t.find(rank, "optimizer", s.begin, s.end).at(0);
      std::set<int> buckets;
      for (size_t k = 0; k < reduced.size(); ++k) {
        const int b = reduced[k].args["bucket"];
        buckets.insert(b);
        const Span& q = queued[k];
        ASSERT_EQ(q.args["bucket"], b);
        EXPECT_EQ(q.tid, reduced[k].tid);  // one lane per bucket
        EXPECT_NEAR(q.end, reduced[k].begin, kEps);
        EXPECT_GE(q.begin, first.end - kEps);  // queued once backward completed it
        if (b == kBuckets - 1) EXPECT_GE(q.begin, last.end - kEps);  // conv1's bucket
        EXPECT_LE(reduced[k].end, opt.begin + kEps);
        EXPECT_GT(reduced[k].args["bytes"].get<int64_t>(), 0);
      }
      EXPECT_EQ(int(buckets.size()), kBuckets);
    }
  }
}

// pp on 2 stages x 2 micro-batches: each stage's layers, every micro-batch;
// every activation sent before its receive ends on the next stage.
TEST(Timeline, PipelineStagesHaveTheirLayersAndSendsBeforeReceives) {
  TempDir d;
  const std::string file = (d.path / "pp.json").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch 32 --model mnist-small --parallel pp --stages 2"
                         " --micro-batches 2 --split 2 --eval none --timeline " + file, &out), 0)
      << out;
  const Trace t = read_trace(file);
  expect_nested(t);
  constexpr int kSteps = 8;
  expect_layers_every_step(t, 0, {"conv1", "flatten"}, 2, kSteps);
  expect_layers_every_step(t, 1, {"fc1", "fc2"}, 2, kSteps);
  EXPECT_TRUE(t.find(0, "forward fc1").empty());
  EXPECT_EQ(t.count(0, "b", "send activation"), 2 * kSteps);
  EXPECT_EQ(t.count(0, "e", "send activation"), 2 * kSteps);
  EXPECT_EQ(t.count(1, "b", "send gradient"), 2 * kSteps);
  EXPECT_EQ(int(t.find(0, "recv gradient").size()), 2 * kSteps);
  const std::vector<Span> recvs = t.find(1, "recv activation");
  ASSERT_EQ(int(recvs.size()), 2 * kSteps);
  std::vector<double> sends;
  for (const json& e : t.all)
    if (e["rank"] == 0 && e["ph"] == "b" && e["name"] == "send activation") sends.push_back(e["ts"]);
  std::sort(sends.begin(), sends.end());
  for (size_t k = 0; k < recvs.size(); ++k) EXPECT_LE(sends[k], recvs[k].end + kEps) << k;
  EXPECT_EQ(int(t.find(0, "optimizer").size()), kSteps);
  EXPECT_EQ(int(t.find(1, "optimizer").size()), kSteps);
}

// ps: 2 workers and a server; each worker pushes then pulls every step, the
// server receives the pushes, steps, and answers.
TEST(Timeline, ParameterServerHasPushesAndPulls) {
  TempDir d;
  const std::string file = (d.path / "ps.json").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch 32 --workers 3 --parallel ps --servers 1 --eval none"
                         " --timeline " + file, &out), 0) << out;
  const Trace t = read_trace(file);
  expect_nested(t);
  constexpr int kSteps = 4;
  for (int w = 0; w < 2; ++w) {
    expect_layers_every_step(t, w, kLayers, 1, kSteps);
    for (const Span& s : t.find(w, "step")) {
      const std::vector<Span> push = t.find(w, "push", s.begin, s.end);
      const std::vector<Span> pull = t.find(w, "pull", s.begin, s.end);
      ASSERT_EQ(push.size(), 1u);
      ASSERT_EQ(pull.size(), 1u);
      EXPECT_LE(push[0].end, pull[0].begin + kEps);
      EXPECT_GE(push[0].begin, t.find(w, "backward conv1", s.begin, s.end).at(0).end - kEps);
    }
  }
  EXPECT_EQ(int(t.find(2, "push").size()), kSteps);
  EXPECT_EQ(int(t.find(2, "optimizer").size()), kSteps);
  EXPECT_EQ(int(t.find(2, "pull").size()), kSteps);
  EXPECT_TRUE(t.find(2, "forward conv1").empty());
}

TEST(Timeline, UnwritablePathIsOneLineBeforeAnyWork) {
  TempDir d;
  const std::string bad = (d.path / "no-such-folder" / "t.json").string();
  testing_support::expect_one_line_error(kTrain + " --timeline " + bad, "--timeline");
  testing_support::expect_one_line_error(kTrain + " --workers 2 --timeline " + bad, bad);
  testing_support::expect_one_line_error(kTrain + " --timeline " + d.path.string(), "folder");
}

}  // namespace
}  // namespace cohort
