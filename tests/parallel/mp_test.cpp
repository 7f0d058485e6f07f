// Model parallelism under real ranks: K stages end with the single-process
// weights; bad stage plans are refused with the flag named.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

int run(const std::string& cmd, std::string* out = nullptr) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (f && std::fgets(buf, sizeof buf, f))
    if (out) *out += buf;
  const int status = f ? pclose(f) : -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string kTrain = std::string(COHORT_BIN) +
                           " train --data synthetic --epochs 1 --optimizer sgd --lr 0.01"
                           " --momentum 0.9 --log jsonl --limit 256 --batch 32 --threads 1";

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
  auto a = load_safetensors(single), b = load_safetensors(mp);
  double diff = 0, ref = 0;
  for (auto& t : a.tensors) {
    const Tensor* o = b.find(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    for (int64_t i = 0; i < t.tensor.numel(); ++i) {
      diff = std::max(diff, double(std::fabs(o->f32()[i] - t.tensor.f32()[i])));
      ref = std::max(ref, double(std::fabs(t.tensor.f32()[i])));
    }
  }
  EXPECT_LE(diff / ref, 1e-5);
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
