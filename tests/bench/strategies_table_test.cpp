// The strategies table from records: the peak-memory column shows the
// fullest rank's peak RSS (rank 0's where a run reported only that), beside
// epoch time and images/s, so ZeRO rows compare with dp's.
#include "bench/strategies_table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace cohort {
namespace {

using nlohmann::ordered_json;

ordered_json record(const char* name, int ranks) {
  return {{"name", name},         {"label", std::string("cohort ") + name},
          {"engine", "cohort"},   {"ranks", ranks},
          {"threads_per_rank", 1}, {"global_batch", 8},
          {"batch_per_rank", 8 / ranks}, {"status", "ok"},
          {"epoch_seconds", {2.5}}, {"images_per_second", 40.0}};
}

// The cells of the row whose first cell is `label`.
std::vector<std::string> cells(const std::string& table, const std::string& label) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + label + " |", 0) != 0) continue;
    std::vector<std::string> out;
    std::istringstream row(line.substr(1));
    for (std::string c; std::getline(row, c, '|');) out.push_back(c.substr(1, c.size() - 2));
    return out;
  }
  return {};
}

TEST(StrategiesTable, PeakMemoryIsTheFullestRanks) {
  ordered_json dp = record("dp", 2), zero = record("zero2", 2), peer = record("peer", 1);
  dp["peak_memory_mb"] = 410.0;
  dp["peak_memory_mb_per_rank"] = {410.0, 412.4};
  zero["peak_memory_mb"] = 300.0;
  zero["peak_memory_mb_per_rank"] = {300.0, 290.0};
  peer["peak_memory_mb"] = 123.0;  // no per-rank figures
  const TableInfo info{"gpt2-tiny", "text", 8, 64, 1, 2, "cohort bench strategies", "today", "", ""};
  const std::string t = strategies_table({dp, zero, peer}, info);
  ASSERT_NE(t.find("| images/s | utilization | vs single | cohort vs PyTorch | peak MB/rank |"),
            std::string::npos)
      << t;
  // strategy, ranks, threads, batch, epoch 1 s, images/s, utilization, vs single, vs PyTorch, MB
  EXPECT_EQ(cells(t, "cohort dp").at(4), "2.50") << t;
  EXPECT_EQ(cells(t, "cohort dp").at(5), "40.0") << t;
  EXPECT_EQ(cells(t, "cohort dp").at(9), "412") << t;
  EXPECT_EQ(cells(t, "cohort zero2").at(9), "300") << t;
  EXPECT_EQ(cells(t, "cohort peer").at(9), "123") << t;
}

}  // namespace
}  // namespace cohort
