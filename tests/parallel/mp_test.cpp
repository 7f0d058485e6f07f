// Model parallelism under real ranks: K stages end with the single-process
// weights; bad stage plans are refused with the flag named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using testing_support::checkpoint_rel_diff;
using testing_support::run;

const std::string kTrain = testing_support::equality_train_command() + " --batch 32";

class ModelParallelEquality : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ModelParallelEquality, MatchesTheSingleProcess) {
  const auto [model, k] = GetParam();
  const fs::path d = fs::temp_directory_path() / ("cohort_mp_" + model + std::to_string(k));
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string single = (d / "s.safetensors").string(), mp = (d / "m.safetensors").string();
  std::string out;
  ASSERT_EQ(run(kTrain + " --model " + model + " --save " + single, &out), 0) << out;
  ASSERT_EQ(run(kTrain + " --model " + model + " --parallel mp --workers " + std::to_string(k) +
                    " --stages " + std::to_string(k) + " --save " + mp, &out), 0)
      << out;
  EXPECT_LE(checkpoint_rel_diff(mp, single), 1e-5);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Stages, ModelParallelEquality,
                         ::testing::Values(std::make_tuple("mnist-small", 2),
                                           std::make_tuple("mnist-small", 3),
                                           std::make_tuple("mnist-large", 3)));

TEST(ModelParallel, BadStagePlansNameTheFlag) {
  std::string out;
  EXPECT_NE(run(kTrain + " --model lenet --parallel mp --workers 2 --stages 2 --split 0", &out),
            0);
  EXPECT_NE(out.find("--split"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run(kTrain + " --model mnist-small --parallel mp --workers 5 --stages 5", &out), 0);
  EXPECT_NE(out.find("--stages"), std::string::npos) << out;
}

}  // namespace
}  // namespace cohort
