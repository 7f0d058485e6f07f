// GPT-2 under every strategy that applies: data parallelism, ZeRO-2, replicas,
// pipelines cut between transformer blocks (the output projection tied to
// wte on another stage: its gradient summed over the pipeline, its values
// sent back after the step) and hybrid, each ending with the weights of the
// single process on the same global batch (principle 5).
#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::checkpoint_rel_diff;
using testing_support::run;

// Real text (the default corpus), 128 windows of 32 bytes, SGD: 8 steps of 16.
const std::string kTrain = std::string(COHORT_BIN) +
                           " train --model gpt2-tiny --seq 32 --data text --limit 128 --epochs 1"
                           " --optimizer sgd --lr 0.05 --momentum 0.9 --threads 1 --log jsonl"
                           " --eval last";

struct Case {
  std::string name, flags;
  int batch;  // per rank or pipeline replica
  double tolerance;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.flags; }

class Gpt2Strategies : public ::testing::TestWithParam<Case> {};

TEST_P(Gpt2Strategies, MatchTheSingleProcess) {
  const Case& c = GetParam();
  const fs::path d = fs::temp_directory_path() / ("cohort_gpt2_" + c.name);
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string single = (d / "s.safetensors").string(), par = (d / "p.safetensors").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --batch 16 --save " + single, &out), 0) << out;
  out.clear();
  ASSERT_EQ(run(kTrain + " --batch " + std::to_string(c.batch) + " " + c.flags + " --save " + par,
                &out),
            0)
      << out;
  const double diff = checkpoint_rel_diff(par, single);
  std::printf("gpt2-tiny %s: %.3g of the single process\n", c.flags.c_str(), diff);
  EXPECT_LE(diff, c.tolerance) << c.flags;
  fs::remove_all(d);
}

// Measured: see the printed lines; tolerances a few times above them.
INSTANTIATE_TEST_SUITE_P(
    Strategies, Gpt2Strategies,
    ::testing::Values(Case{"dp", "--workers 2 --parallel dp", 8, 1e-5},
                      Case{"zero3", "--workers 2 --parallel zero --zero-stage 3", 8, 1e-5},
                      Case{"replicas", "--parallel replicas --replicas 2", 16, 1e-5},
                      Case{"pp", "--parallel pp --stages 2 --micro-batches 2", 16, 1e-5},
                      Case{"pp3", "--parallel pp --stages 3 --micro-batches 4", 16, 1e-5},
                      Case{"hybrid", "--parallel hybrid --dp 2 --stages 2 --micro-batches 2", 8,
                           1e-5}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace cohort
