// Principle 5 at reduced precision: every strategy at --precision bf16 (and
// dp at fp16) ends with the weights of the single process at the same
// precision and global batch, to that precision's rounding; and a pipeline
// whose loss scale starts at 2^40 skips the overflowing steps on every stage
// together, as the single process does, and still learns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "bench/grid.h"
#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using testing_support::checkpoint_rel_diff;
using testing_support::run;

// Synthetic data, 256 images, SGD lr 0.01: clear of the ReLU/max-pool chaos
// (docs/DESIGN.md, "Equality and chaos").
const std::string kTrain = testing_support::equality_train_command() + " --model mnist-small";

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("cohort_precision_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct Case {
  std::string name, precision, flags;
  int batch;         // per rank or pipeline replica; the single process runs 32
  double tolerance;  // of checkpoint_rel_diff, a few times the measured value
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.precision << " " << c.flags; }

class PrecisionEquality : public ::testing::TestWithParam<Case> {};

TEST_P(PrecisionEquality, MatchesTheSingleProcessAtThatPrecision) {
  const Case& c = GetParam();
  const fs::path d = fresh_dir(c.name);
  const std::string single = (d / "s.safetensors").string(), par = (d / "p.safetensors").string();
  const std::string precision = " --precision " + c.precision;
  std::string out;
  ASSERT_EQ(run(kTrain + precision + " --batch 32 --save " + single, &out), 0) << out;
  out.clear();
  ASSERT_EQ(run(kTrain + precision + " --batch " + std::to_string(c.batch) + " " + c.flags +
                    " --save " + par,
                &out),
            0)
      << out;
  const auto s = last_summary(out);
  EXPECT_EQ(s["precision"], c.precision) << out;
  EXPECT_EQ(s["global_batch"].get<int>(), 32) << out;
  const double diff = checkpoint_rel_diff(par, single);
  std::printf("%s at %s: %.3g of the single process (tolerance %.3g)\n", c.flags.c_str(),
              c.precision.c_str(), diff, c.tolerance);
  EXPECT_LE(diff, c.tolerance) << c.flags;
  fs::remove_all(d);
}

// checkpoint_rel_diff is max |a - b| over the largest |b| in the file,
// momentum buffers included. Measured (8 steps of batch 32):
INSTANTIATE_TEST_SUITE_P(
    Strategies, PrecisionEquality,
    ::testing::Values(
        Case{"dp_bf16", "bf16", "--workers 2 --parallel dp", 16, 1e-2},
        Case{"replicas_bf16", "bf16", "--parallel replicas --replicas 2", 32, 1e-2},
        Case{"mp_bf16", "bf16", "--workers 2 --parallel mp --stages 2", 32, 1e-2},
        Case{"pp_bf16", "bf16", "--parallel pp --stages 2 --micro-batches 2", 32, 1e-2},
        Case{"hybrid_bf16", "bf16", "--parallel hybrid --dp 2 --stages 2 --micro-batches 2", 16,
             1e-2},
        Case{"dp_fp16", "fp16", "--workers 2 --parallel dp", 16, 1e-2}),
    [](const auto& info) { return info.param.name; });

// Real data (Fashion-MNIST, 2,048 images at batch 64: 32 steps), so that
// learning shows. From 2^40 with hysteresis 1 the scale halves on each
// overflowing step until the gradients fit fp16; the stages vote, so both
// skip the same steps, and the run skips as many as the single process.
TEST(PrecisionPipeline, Fp16OverflowsAreSkippedOnEveryStage) {
  const fs::path d = fresh_dir("pp_overflow");
  const std::string cmd = std::string(COHORT_BIN) +
                          " train --model mnist-small --limit 2048 --batch 64 --epochs 1"
                          " --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --log jsonl"
                          " --precision fp16 --initial-scale-power 40 --hysteresis 1 --save ";
  const std::string single = (d / "s.safetensors").string(), pp = (d / "p.safetensors").string();
  std::string out;
  ASSERT_EQ(run(cmd + single, &out), 0) << out;
  const auto one = last_summary(out);
  out.clear();
  ASSERT_EQ(run(cmd + pp + " --parallel pp --stages 2 --micro-batches 2", &out), 0) << out;
  const auto two = last_summary(out);
  ASSERT_TRUE(two.contains("loss_scale")) << out;
  const auto& ls = two["loss_scale"];
  const int skipped = ls["skipped"].get<int>();
  EXPECT_GT(skipped, 0) << out;
  EXPECT_LT(skipped, 32) << out;
  EXPECT_EQ(ls["steps"].get<int>(), 32);
  EXPECT_TRUE(ls["dynamic"].get<bool>());
  EXPECT_EQ(ls["scale"].get<double>(), std::ldexp(1.0, 40 - skipped));
  EXPECT_EQ(skipped, one["loss_scale"]["skipped"].get<int>());
  const double diff = checkpoint_rel_diff(pp, single);
  std::printf("pp fp16 from 2^40: %d skipped, accuracy %.3f (single %.3f), %.3g of the single "
              "process\n",
              skipped, two["test_accuracy"].get<double>(), one["test_accuracy"].get<double>(),
              diff);
  EXPECT_GE(two["test_accuracy"].get<double>(), 0.5);
  EXPECT_LE(diff, 1e-2);
  fs::remove_all(d);
}

}  // namespace
}  // namespace cohort
