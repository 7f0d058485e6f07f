// Parameter server under real ranks: sync ends with data parallelism's
// weights, async bounds and reports its staleness and still learns
// Fashion-MNIST, and bad server plans are refused before any rank starts.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "bench/grid.h"
#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using testing_support::checkpoint_rel_diff;
using testing_support::run;

const std::string kTrain =
    testing_support::equality_train_command() + " --model mnist-small --batch 16";

class SyncParameterServer : public ::testing::TestWithParam<int> {};

TEST_P(SyncParameterServer, MatchesDataParallelism) {
  const int servers = GetParam();
  const fs::path d = fs::temp_directory_path() / ("cohort_ps_" + std::to_string(servers));
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string dp = (d / "dp.safetensors").string(), ps = (d / "ps.safetensors").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --workers 2 --parallel dp --save " + dp, &out), 0) << out;
  out.clear();
  ASSERT_EQ(run(kTrain + " --workers " + std::to_string(2 + servers) +
                    " --parallel ps --ps-mode sync --servers " + std::to_string(servers) +
                    " --save " + ps,
                &out),
            0)
      << out;
  EXPECT_LE(checkpoint_rel_diff(ps, dp), 1e-5);
  const auto s = last_summary(out);
  ASSERT_TRUE(s.contains("ps")) << out;
  EXPECT_EQ(s["ps"]["workers"].get<int>(), 2);
  EXPECT_EQ(s["global_batch"].get<int>(), 32);
  EXPECT_EQ(s["ps"]["staleness_max"].get<int>(), 0);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Servers, SyncParameterServer, ::testing::Values(1, 2));

// s = 0: every step waits for all workers, so a gradient can be at most one
// update per other worker old (2 workers: 1).
TEST(AsyncParameterServer, StalenessBoundHolds) {
  std::string out;
  ASSERT_EQ(run(kTrain + " --workers 3 --parallel ps --ps-mode async --staleness 0", &out), 0)
      << out;
  const auto ps = last_summary(out)["ps"];
  EXPECT_EQ(ps["mode"].get<std::string>(), "async");
  EXPECT_LE(ps["staleness_max"].get<int>(), 1);
  EXPECT_GE(ps["staleness_mean"].get<double>(), 0.0);
}

TEST(AsyncParameterServer, LearnsFashionMnist) {
  std::string out;
  ASSERT_EQ(run(std::string(COHORT_BIN) +
                    " train --model mnist-small --workers 3 --parallel ps --ps-mode async"
                    " --batch 32 --epochs 2 --threads 1 --log jsonl",
                &out),
            0)
      << out;
  const auto s = last_summary(out);
  EXPECT_GE(s["test_accuracy"].get<double>(), 0.88) << out;
  EXPECT_GT(s["ps"]["staleness_mean"].get<double>(), 0.0);  // measured, and not synchronous
}

TEST(ParameterServer, BadPlansAreRefusedBeforeRanksStart) {
  struct Case {
    std::string flags, names;
  };
  const Case cases[] = {
      {"--workers 2 --parallel ps --servers 2", "--servers"},
      {"--workers 3 --parallel ps --servers 5", "--servers"},
      {"--workers 3 --parallel ps --ps-mode sometimes", "--ps-mode"},
      {"--workers 3 --parallel ps --ps-mode async --staleness -3", "--staleness"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(run(kTrain + " " + c.flags, &out), 2) << c.flags;
    EXPECT_NE(out.find(c.names), std::string::npos) << c.flags << ": " << out;
    EXPECT_EQ(out.find("mpirun"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace cohort
