// `cohort train --resume` end to end: a run saved after epoch 1 and resumed to
// epoch 2 ends with the same bits, weights and optimizer state, as the run
// that was never interrupted: one process, dp on 2 ranks, and the strategies
// that split the optimizer state over ranks (mp, pp, ps, hybrid). Bad
// resumes are one line and exit code 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>

#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using Result = testing_support::CommandResult;
using testing_support::expect_one_line_error;
const auto& differences = testing_support::checkpoint_differences;

Result sh(const std::string& cmd) { return testing_support::run_command(cmd); }

const std::string kMpirun = "mpirun --oversubscribe --bind-to none --mca btl self,vader -np 2 ";

// 2,000 synthetic images a epoch in batches of 128 (16 updates), one thread:
// deterministic, so an uninterrupted and a resumed run can match bit for bit.
std::string train(const std::string& flags) {
  return std::string(COHORT_BIN) +
         " train --model mnist-small --data synthetic --limit 2000 --batch 128 --threads 1"
         " --log jsonl " +
         flags;
}

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("cohort_resume_cli_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs 2 epochs straight, and 1 epoch then --resume to 2, with `flags`
// (prefix: e.g. mpirun); expects the same final checkpoint and `updates`
// optimizer updates per epoch (optimizer steps too, unless `skips`: fp16
// steps skipped on overflow count as updates, not steps). Returns the dir.
fs::path expect_resume_matches(const std::string& name, const std::string& prefix,
                               const std::string& flags, int updates, bool skips = false) {
  fs::path d = temp_dir(name);
  const std::string full = (d / "full.safetensors").string();
  const std::string half = (d / "half.safetensors").string();
  const std::string resumed = (d / "resumed.safetensors").string();
  Result r = sh(prefix + train(flags + " --epochs 2 --save " + full));
  EXPECT_EQ(r.code, 0) << r.out;
  r = sh(prefix + train(flags + " --epochs 1 --save " + half));
  EXPECT_EQ(r.code, 0) << r.out;
  r = sh(prefix + train(flags + " --epochs 2 --resume " + half + " --save " + resumed));
  EXPECT_EQ(r.code, 0) << r.out;
  // The resumed run trained epoch 2 only.
  EXPECT_EQ(r.out.find("\"epoch\":1,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"event\":\"epoch\",\"epoch\":2,"), std::string::npos) << r.out;
  if (::testing::Test::HasFailure()) return d;
  const SafetensorsFile h = load_safetensors(half);
  EXPECT_EQ(h.metadata.at("epoch"), "1");
  EXPECT_EQ(h.metadata.at("updates"), std::to_string(updates));
  if (!skips) EXPECT_EQ(h.metadata.at("optimizer.steps"), std::to_string(updates));
  EXPECT_EQ(differences(resumed, full), "");
  EXPECT_EQ(differences(full, resumed), "");
  return d;
}

class ResumeCli : public ::testing::TestWithParam<const char*> {};

// Adam with a warm-up longer than an epoch (moments, bias correction and the
// schedule's position all matter), SGD with momentum and a step schedule
// (the rate drops 10x at epoch 2); AdamW under replicas; Adam at bf16. Not cosine: its
// length follows --epochs, so an --epochs 1 run is not the first half of an
// --epochs 2 one.
TEST_P(ResumeCli, ResumedRunEqualsTheUninterruptedRun) {
  const std::string name = "one" + std::to_string(std::hash<std::string>{}(GetParam()));
  fs::path d = expect_resume_matches(name, "", GetParam(), 16);
  // Control: --load takes the weights only, and the run it starts differs.
  if (!HasFailure()) {
    const std::string loaded = (d / "loaded.safetensors").string();
    Result r = sh(train(std::string(GetParam()) + " --epochs 1 --load " +
                        (d / "half.safetensors").string() + " --save " + loaded));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(differences(loaded, (d / "full.safetensors").string()), "");
  }
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, ResumeCli,
    ::testing::Values("--optimizer adam --lr 0.001 --warmup 20",
                      "--optimizer sgd --lr 0.01 --momentum 0.9 --lr-schedule step",
                      "--parallel replicas --replicas 2 --optimizer adamw --warmup 20",
                      // bf16 compute over f32 master weights: the checkpoint
                      // holds the masters, so resuming loses no bits.
                      "--precision bf16 --optimizer adam --lr 0.001 --warmup 20"));

// fp16 from a loss scale that overflows: the scaler halves its way down over
// both epochs, so the resumed run must continue from the saved scale, its
// hysteresis and its window count (a fresh scaler skipped 6 more steps and
// ended 9e-3 away). The pipeline keeps one scaler per stage, voting alike.
TEST(ResumeCliFp16, ResumedRunContinuesTheLossScale) {
  const std::string fp16 =
      " --precision fp16 --initial-scale-power 30 --hysteresis 1 --loss-scale-window 4"
      " --optimizer adam --lr 0.001";
  for (const std::string& flags : {fp16, fp16 + " --parallel pp --stages 2"}) {
    fs::path d = expect_resume_matches("fp16" + std::to_string(flags.size()), "", flags, 16, true);
    if (!HasFailure()) {
      const SafetensorsFile h = load_safetensors((d / "half.safetensors").string());
      ASSERT_TRUE(h.metadata.count("loss_scale")) << flags;
      EXPECT_NE(h.metadata.at("optimizer.steps"), "16") << "no step was skipped: " << flags;
    }
    fs::remove_all(d);
  }
}

TEST(ResumeCliDp, ResumedDataParallelRunEqualsTheUninterruptedRun) {
  fs::path d = expect_resume_matches("dp", kMpirun,
                                     "--parallel dp --deterministic --optimizer adam --warmup 12",
                                     8);  // 1,000 images per rank
  fs::remove_all(d);
}

// Stages and parameter servers each hold a range of the optimizer state:
// rank 0 gathers it for the save, and each rank restores its range.
struct Split {
  const char* name;
  const char* flags;
  int updates;
};

void PrintTo(const Split& s, std::ostream* os) { *os << s.flags; }

class ResumeCliSplit : public ::testing::TestWithParam<Split> {};

TEST_P(ResumeCliSplit, ResumedRunEqualsTheUninterruptedRun) {
  fs::path d = expect_resume_matches(GetParam().name, "", GetParam().flags, GetParam().updates);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ResumeCliSplit,
    ::testing::Values(
        Split{"mp", "--parallel mp --stages 2 --optimizer adam --warmup 20", 16},
        Split{"pp",
              "--parallel pp --stages 2 --micro-batches 4 --optimizer sgd --lr 0.01"
              " --momentum 0.9 --lr-schedule step",
              16},
        // Two servers hold the state; rank 0, a worker, holds none.
        Split{"ps", "--workers 3 --parallel ps --servers 2 --optimizer adam --warmup 20", 16},
        // Two replicas of each stage hold the same range: gathered once.
        Split{"hybrid", "--parallel hybrid --dp 2 --stages 2 --micro-batches 2 --optimizer adam",
              8}),
    [](const ::testing::TestParamInfo<Split>& p) { return std::string(p.param.name); });

TEST(ResumeCliErrors, BadResumesAreOneLineAndKeepTheFile) {
  fs::path d = temp_dir("errors");
  const std::string ck = (d / "adam.safetensors").string();
  Result r = sh(train("--epochs 1 --save " + ck));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto size = fs::file_size(ck);
  expect_one_line_error(train("--epochs 2 --optimizer sgd --resume " + ck), ck);
  expect_one_line_error(train("--epochs 1 --resume " + ck), "--epochs 1");
  expect_one_line_error(train("--epochs 2 --load " + ck + " --resume " + ck), "--resume");
  expect_one_line_error(train("--epochs 2 --resume " + (d / "none").string()),
                        (d / "none").string());
  EXPECT_EQ(fs::file_size(ck), size);
  fs::remove_all(d);
}

}  // namespace
}  // namespace cohort
