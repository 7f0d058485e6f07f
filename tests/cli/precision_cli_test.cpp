// Mixed precision from the command line: a bf16 run saves its f32 master
// weights, which load at any precision; bad precision flags are one line and
// exit code 2, naming the flag. (Resuming a bf16 run: tests/cli/resume_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::expect_one_line_error;
using testing_support::run_command;

const std::string kTrain = std::string(COHORT_BIN) +
                           " train --model mnist-small --data synthetic --limit 256 --batch 64"
                           " --epochs 1 --threads 1 --log jsonl";

// The JSON header of a safetensors file (u64 LE length, then the header).
nlohmann::json safetensors_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  f.read(header.data(), std::streamsize(n));
  return nlohmann::json::parse(header);
}

TEST(PrecisionCli, Bf16RunSavesF32MasterWeightsThatLoadAtAnyPrecision) {
  const fs::path d = fs::temp_directory_path() / "cohort_precision_cli_ckpt";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string ck = (d / "bf16.safetensors").string();
  auto r = run_command(kTrain + " --precision bf16 --save " + ck);
  ASSERT_EQ(r.code, 0) << r.out;

  // Every tensor, weights and optimizer state, is stored as F32.
  const nlohmann::json header = safetensors_header(ck);
  int tensors = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry["dtype"], "F32") << name;
    ++tensors;
  }
  EXPECT_GT(tensors, 0);
  // And they are the masters, not their bf16 roundings: the low 16 bits of
  // the updated weights are in use (a bf16 value has them all zero).
  const SafetensorsFile file = load_safetensors(ck);
  const Tensor* w = file.find("fc1.weight");
  ASSERT_NE(w, nullptr);
  int64_t beyond_bf16 = 0;
  for (int64_t i = 0; i < w->numel(); ++i) {
    uint32_t u;
    std::memcpy(&u, w->f32() + i, 4);
    beyond_bf16 += (u & 0xffffu) != 0;
  }
  EXPECT_GT(beyond_bf16, w->numel() / 2) << "fc1.weight looks rounded to bf16";

  for (const char* p : {"fp32", "bf16", "fp16"}) {
    r = run_command(kTrain + " --precision " + p + " --load " + ck);
    EXPECT_EQ(r.code, 0) << "--load at " << p << "\n" << r.out;
  }
  fs::remove_all(d);
}

TEST(PrecisionCli, BadPrecisionFlagsNameTheFlag) {
  expect_one_line_error(kTrain + " --precision fp8", "--precision");
  expect_one_line_error(kTrain + " --grad-dtype fp16", "--grad-dtype");
  expect_one_line_error(kTrain + " --workers 3 --parallel ps --precision fp16", "--precision fp16");
  expect_one_line_error(kTrain + " --precision fp16 --min-loss-scale 0", "--min-loss-scale");
  expect_one_line_error(kTrain + " --precision fp16 --hysteresis 0", "--hysteresis");
  expect_one_line_error(kTrain + " --precision fp16 --loss-scale -1", "--loss-scale");
}

}  // namespace
}  // namespace cohort
