// Pipeline and hybrid parallelism under real ranks: both schedules end with
// the single-process weights at the same batch, 1F1B holds fewer activations
// than GPipe, and bad pipeline plans are refused before any rank starts.
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

const std::string kTrain = testing_support::equality_train_command();

struct Plan {
  std::string model, flags, name;
  int batch;  // per pipeline replica; the single process runs 32
};

void PrintTo(const Plan& p, std::ostream* os) { *os << p.flags; }

class PipelineEquality : public ::testing::TestWithParam<Plan> {};

TEST_P(PipelineEquality, MatchesTheSingleProcess) {
  const Plan& p = GetParam();
  const fs::path d = fs::temp_directory_path() / ("cohort_pp_" + p.name);
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string single = (d / "s.safetensors").string(), pp = (d / "p.safetensors").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch 32 --model " + p.model + " --save " + single, &out), 0) << out;
  out.clear();
  ASSERT_EQ(run(kTrain + " --batch " + std::to_string(p.batch) + " --model " + p.model + " " +
                    p.flags + " --save " + pp,
                &out),
            0)
      << out;
  EXPECT_LE(checkpoint_rel_diff(pp, single), 1e-5) << p.flags;
  const auto s = last_summary(out);
  ASSERT_TRUE(s.contains("pipeline")) << out;
  EXPECT_EQ(s["global_batch"].get<int>(), 32);
  const double bubble = s["pipeline"]["bubble_fraction"].get<double>();
  EXPECT_GE(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, PipelineEquality,
    ::testing::Values(
        Plan{"mnist-small", "--parallel pp --stages 2 --micro-batches 4 --schedule gpipe",
             "small_gpipe", 32},
        Plan{"mnist-small", "--parallel pp --stages 2 --micro-batches 4 --schedule 1f1b",
             "small_1f1b", 32},
        Plan{"mnist-large", "--parallel pp --stages 3 --micro-batches 2 --schedule 1f1b",
             "large_1f1b", 32},
        Plan{"mnist-small", "--parallel pp --stages 2 --micro-batches 2 --balance time",
             "small_time_balanced", 32},
        Plan{"mnist-small", "--parallel hybrid --dp 2 --stages 2 --micro-batches 2", "hybrid",
             16}),
    [](const auto& info) { return info.param.name; });

// The measured memory: 1F1B keeps at most K - s micro-batches in flight on
// stage s, GPipe all M; the ideal bubble is (K-1)/(M+K-1).
TEST(Pipeline, OneFOneBHoldsFewerActivationsThanGPipe) {
  std::string a, b;
  const std::string cmd = kTrain + " --batch 64 --model mnist-small --parallel pp --stages 2"
                                   " --micro-batches 8 --schedule ";
  ASSERT_EQ(run(cmd + "gpipe", &a), 0) << a;
  ASSERT_EQ(run(cmd + "1f1b", &b), 0) << b;
  const auto g = last_summary(a)["pipeline"], f = last_summary(b)["pipeline"];
  EXPECT_NEAR(g["ideal_bubble_fraction"].get<double>(), 1.0 / 9.0, 1e-9);
  for (int s = 0; s < 2; ++s) {
    const double gm = g["peak_activation_mb"][s].get<double>();
    const double fm = f["peak_activation_mb"][s].get<double>();
    EXPECT_GT(gm, 0.0);
    EXPECT_LT(fm, gm) << "stage " << s;
  }
  // Stage 0: 8 micro-batches in flight against 2.
  EXPECT_GT(g["peak_activation_mb"][0].get<double>(),
            3.0 * f["peak_activation_mb"][0].get<double>());
}

// Hybrid averages each stage's gradient range over its replicas; with
// --grad-dtype bf16 that range crosses the wire in bf16: near the f32 run,
// not on it (the tolerance of DataParallel.Bf16GradientsEndWithinBf16RoundingOfF32).
TEST(Pipeline, HybridReducesBf16Gradients) {
  const fs::path d = fs::temp_directory_path() / "cohort_pp_hybrid_bf16";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string f32 = (d / "f.safetensors").string(), bf16 = (d / "b.safetensors").string();
  const std::string cmd = kTrain + " --batch 16 --model mnist-small --parallel hybrid --dp 2"
                                   " --stages 2 --micro-batches 2 --save ";
  std::string out;
  ASSERT_EQ(run(cmd + f32, &out), 0) << out;
  ASSERT_EQ(run(cmd + bf16 + " --grad-dtype bf16", &out), 0) << out;
  const double diff = checkpoint_rel_diff(bf16, f32);
  EXPECT_GT(diff, 0.0) << "bit-equal to f32: bf16 never reached the wire";
  EXPECT_LE(diff, 3e-2);
  fs::remove_all(d);
}

TEST(Pipeline, BadPlansAreRefusedBeforeRanksStart) {
  struct Case {
    std::string flags, names;
  };
  const Case cases[] = {
      {"--parallel pp --stages 2 --micro-batches 3 --batch 32", "--micro-batches"},
      {"--parallel pp --stages 9 --batch 32", "--stages"},
      {"--parallel pp --stages 2 --split 0 --batch 32", "--split"},
      {"--parallel pp --stages 2 --schedule zigzag --batch 32", "--schedule"},
      {"--parallel hybrid --dp 2 --stages 2 --micro-batches 5 --batch 16", "--micro-batches"},
      {"--parallel pp --stages 2 --workers 3 --batch 32", "--stages"},
      {"--parallel pp --stages 2 --balance evenly --batch 32", "--balance"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(run(kTrain + " --model mnist-small " + c.flags, &out), 2) << c.flags;
    EXPECT_NE(out.find(c.names), std::string::npos) << c.flags << ": " << out;
    // One line, from the launcher: no rank started.
    EXPECT_EQ(out.find("mpirun"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace cohort
