// ZeRO stages 1-3 under real ranks (mpirun): on N = 2, 3, 4 ranks they
// end with the weights of data parallelism on the same global batch (Adam;
// SGD with --accumulate and --clip; GPT-2 at bf16 and fp16), their
// checkpoints (F plus one optimizer shard per rank) resume in a single
// process and at another rank count, and survive a failed save, the
// summary reports the bytes each rank holds, and bad stages are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/grid.h"
#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::checkpoint_rel_diff;
using testing_support::run;

const std::string kMpirun = "mpirun --oversubscribe --bind-to none --mca btl self,vader -np ";

// Synthetic mnist-small as the equality tests run it, at a given optimizer.
std::string train(const std::string& optimizer, int64_t batch, int64_t limit, int epochs = 1) {
  const std::string opt = optimizer == "adam" ? " --optimizer adam --lr 0.001"
                                              : " --optimizer sgd --lr 0.01 --momentum 0.9";
  return std::string(COHORT_BIN) +
         " train --model mnist-small --data synthetic --threads 1 --log jsonl" + opt +
         " --epochs " + std::to_string(epochs) + " --batch " + std::to_string(batch) + " --limit " +
         std::to_string(limit);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("cohort_zero_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs `cmd --save path` and expects success; returns its output.
std::string save(const std::string& cmd, const std::string& path) {
  std::string out;
  EXPECT_EQ(run(cmd + " --save " + path, &out), 0) << cmd << "\n" << out;
  return out;
}

std::string zero_flags(int stage) {
  return " --parallel zero --zero-stage " + std::to_string(stage);
}

// Data parallelism summing the whole arena in one ring all-reduce: the
// order ZeRO's shards sum in (parallel/shards.h), so any difference is the
// strategy's, not the rounding of another summation order.
const std::string kDpRing = " --parallel dp --allreduce ring --bucket-mb 1000 --no-overlap";

// 8 steps of Adam at 16 images per rank, every stage against dp. Measured:
// bit-equal (0) on 2, 3 and 4 ranks, all three stages.
class ZeroEquality : public ::testing::TestWithParam<int> {};

TEST_P(ZeroEquality, MatchesDataParallelOnTheSameGlobalBatch) {
  const int n = GetParam();
  const fs::path d = fresh_dir("eq" + std::to_string(n));
  const std::string base = kMpirun + std::to_string(n) + " " + train("adam", 16, n * 16 * 8);
  const std::string dp = (d / "dp.st").string();
  save(base + kDpRing, dp);
  for (int stage : {1, 2, 3}) {
    const std::string z = (d / ("z" + std::to_string(stage) + ".st")).string();
    save(base + zero_flags(stage), z);
    const double diff = checkpoint_rel_diff(z, dp);
    std::printf("zero-%d adam on %d ranks: %.3g of dp\n", stage, n, diff);
    EXPECT_LE(diff, 1e-6) << "stage " << stage << " on " << n;
  }
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroEquality, ::testing::Values(2, 3, 4));

// --accumulate 2 with --clip (the norm summed over shards) on 3 ranks:
// uneven shards, SGD with momentum (on which clipping acts; Adam all but
// undoes a uniform scaling). Stages 2 and 3 reduce every micro-batch and add
// the next into the shard's sum, dp sums once: the order differs. Measured:
// stage 1 bit-equal, stages 2 and 3 within 6.5e-9.
TEST(Zero, AccumulationAndClippingMatchDataParallel) {
  const fs::path d = fresh_dir("acc_clip");
  auto p = [&](const std::string& name) { return (d / (name + ".st")).string(); };
  const std::string base = kMpirun + "3 " + train("sgd", 8, 3 * 8 * 2 * 6) + " --accumulate 2";
  save(base + kDpRing, p("dp_acc"));
  save(base + " --clip 0.05" + kDpRing, p("dp_both"));
  for (int stage : {1, 2, 3}) {
    const std::string z = p("z" + std::to_string(stage));
    save(base + " --clip 0.05" + zero_flags(stage), z);
    const double diff = checkpoint_rel_diff(z, p("dp_both"));
    std::printf("zero-%d --accumulate 2 --clip 0.05 on 3 ranks: %.3g of dp\n", stage, diff);
    EXPECT_LE(diff, 1e-6) << "stage " << stage;
  }
  EXPECT_GT(checkpoint_rel_diff(p("dp_both"), p("dp_acc")), 1e-3) << "--clip 0.05 never clipped";
  fs::remove_all(d);
}

// GPT-2 (lm_head tied to wte: stage 3 gathers the embedding's range for the
// head too) at bf16 and at fp16 with loss scaling, on 3 ranks: stages 2 and
// 3 against dp at the same precision. Measured: bit-equal.
TEST(Zero, TransformersAtMixedPrecisionMatchDataParallel) {
  const fs::path d = fresh_dir("gpt2");
  auto p = [&](const std::string& name) { return (d / (name + ".st")).string(); };
  const std::string base = kMpirun + "3 " + std::string(COHORT_BIN) +
                           " train --model gpt2-tiny --data text --threads 1 --log jsonl "
                           "--optimizer adam --lr 0.001 --epochs 1 --batch 4 --limit 72 "
                           "--test-limit 24";
  for (const std::string prec : {"bf16", "fp16"}) {
    const std::string flags = " --precision " + prec;
    save(base + flags + kDpRing, p("dp_" + prec));
    for (int stage : {2, 3}) {
      const std::string z = p("z" + std::to_string(stage) + prec);
      save(base + flags + zero_flags(stage), z);
      const double diff = checkpoint_rel_diff(z, p("dp_" + prec));
      std::printf("zero-%d gpt2-tiny %s on 3 ranks: %.3g of dp\n", stage, prec.c_str(), diff);
      EXPECT_LE(diff, 1e-6) << "stage " << stage << " " << prec;
    }
  }
  fs::remove_all(d);
}

// What each rank holds, on 4 ranks of gpt2-tiny with small buckets: Adam's
// state for its shard only (8 bytes a parameter); stage 1 the whole f32
// arenas; stage 2 its shard's gradients and one bucket; stage 3 also its
// shard's parameters and the layers gathered at once. Beside DeepSpeed's model.
TEST(Zero, SummaryReportsTheBytesEachRankHolds) {
  const std::string base = kMpirun + "4 " + std::string(COHORT_BIN) +
                           " train --model gpt2-tiny --data text --threads 1 --log jsonl "
                           "--optimizer adam --epochs 1 --batch 2 --limit 16 --test-limit 8 "
                           "--bucket-mb 0.05";
  for (int stage : {1, 2, 3}) {
    std::string out;
    ASSERT_EQ(run(base + zero_flags(stage), &out), 0) << out;
    const auto s = last_summary(out);
    ASSERT_TRUE(s.contains("zero")) << out;
    const auto& z = s["zero"];
    const double p = z["parameters"].get<double>(), all = 4 * p;
    const auto& held = z["held_bytes_per_rank"];
    ASSERT_EQ(held["parameters"].size(), 4u);
    double state = 0;
    for (const auto& b : held["optimizer_state"]) state += b.get<double>();
    EXPECT_EQ(state, 8 * p) << "stage " << stage << ": the shards' state tiles the arena";
    for (int r = 0; r < 4; ++r) {
      const double w = held["parameters"][r].get<double>(), g = held["gradients"][r].get<double>();
      EXPECT_EQ(w, stage == 3 ? w : all) << "stage " << stage;
      if (stage == 3) EXPECT_LT(w, 0.75 * all) << "rank " << r << " held most parameters";
      if (stage == 1) EXPECT_EQ(g, all);
      if (stage >= 2) EXPECT_LT(g, 0.75 * all) << "stage " << stage << " rank " << r;
      EXPECT_GT(held["activations"][r].get<double>(), 0);
      EXPECT_GT(held["training_peak_rss_mb"][r].get<double>(), 0);
    }
    EXPECT_EQ(z["deepspeed_model_bytes_per_rank"]["zero3"].get<double>(), 16.0 * p / 4);
  }
  // The text report's line (read by people).
  std::string cmd = base + zero_flags(3), text;
  cmd.replace(cmd.find("--log jsonl"), 11, "--log human");
  ASSERT_EQ(run(cmd, &text), 0) << text;
  EXPECT_NE(text.find("zero stage 3 on 4 ranks, rank 0 held at most"), std::string::npos) << text;
}

// The shard files beside checkpoint `f` (train/state_shards.h), by name.
std::vector<std::string> shard_files(const std::string& f) {
  std::vector<std::string> out;
  const std::string prefix = fs::path(f).filename().string() + ".optim-";
  for (const auto& e : fs::directory_iterator(fs::path(f).parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.is_regular_file())
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const std::string& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// PyTorch reads F by the safetensors spec (json + struct + torch.frombuffer,
// as safetensors.torch.load_file does; Debian has no python3-safetensors):
// the weights only, and a listing of shards that tile the parameters.
void expect_pytorch_reads(const std::string& f, const fs::path& dir) {
  testing_support::expect_pytorch_script(dir.string(), f, R"(
assert not any(k.startswith('optimizer.') for k in t), list(t)
shards = json.loads(meta['optimizer.shards'])
assert shards['parameters'] == sum(v.numel() for v in t.values()), shards
assert shards['files'][0]['begin'] == 0 and shards['files'][-1]['end'] == shards['parameters']
assert all(torch.isfinite(v).all() for v in t.values())
)");
}

// A ZeRO checkpoint is F (the weights, which PyTorch and --load read) and
// one file of optimizer state per rank, none gathered: a single process
// resumes it, and so do 3 ranks after 2 wrote it, each reading the slices
// of its own shard; both end where the uninterrupted single process does
// (fp32 summation order only; SGD, whose momentum buffer is the sharded
// state: a run that lost it would end far away). Measured: 2.7e-7 in one
// process, 4.1e-7 on 3 ranks. On the way: a save that fails on one rank
// leaves the previous F and its shards as they were, a save at another rank
// count replaces the old shards, and a truncated or missing shard is refused
// by name.
TEST(Zero, CheckpointResumesInOneProcessAndAtAnotherRankCount) {
  const fs::path d = fresh_dir("resume");
  auto p = [&](const std::string& name) { return (d / (name + ".st")).string(); };
  const std::string f = p("zero_epoch1");
  save(train("sgd", 24, 240, 2), p("single"));
  // Stage 3 writes it: rank 0 gathers the weights for F, each rank its state.
  save(kMpirun + "2 " + train("sgd", 12, 240) + zero_flags(3), f);
  const std::vector<std::string> two = {"zero_epoch1.st.optim-g1-00-of-02.safetensors",
                                        "zero_epoch1.st.optim-g1-01-of-02.safetensors"};
  EXPECT_EQ(shard_files(f), two);
  expect_pytorch_reads(f, d);
  std::string out;
  EXPECT_EQ(run(train("sgd", 24, 240) + " --load " + f, &out), 0) << out;
  save(train("sgd", 24, 240, 2) + " --resume " + f, p("resumed1"));

  // Rank 1 cannot write its shard of the next save (a folder holds its name):
  // the save fails, rank 0's new shard is removed, and F is as it was.
  const std::string before = read_bytes(f);
  fs::create_directory(d / "zero_epoch1.st.optim-g2-01-of-02.safetensors");
  const std::string resume_2 = train("sgd", 12, 240, 2) + zero_flags(2) + " --resume " + f;
  EXPECT_NE(run(kMpirun + "2 " + resume_2 + " --save " + f, &out), 0) << out;
  EXPECT_NE(out.find("kept as it was"), std::string::npos) << out;
  EXPECT_EQ(read_bytes(f), before);
  EXPECT_EQ(shard_files(f), two);

  // 3 ranks at stage 1 resume stage 3's file and save over it: 3 new shards,
  // the 2 old gone.
  save(kMpirun + "3 " + train("sgd", 8, 240, 2) + zero_flags(1) + " --resume " + f, f);
  EXPECT_EQ(shard_files(f), (std::vector<std::string>{
                                "zero_epoch1.st.optim-g2-00-of-03.safetensors",
                                "zero_epoch1.st.optim-g2-01-of-03.safetensors",
                                "zero_epoch1.st.optim-g2-02-of-03.safetensors"}));
  for (const std::string& name : {p("resumed1"), f}) {
    const double diff = checkpoint_rel_diff(name, p("single"));
    std::printf("%s: %.3g of the uninterrupted single process\n", name.c_str(), diff);
    EXPECT_LE(diff, 1e-5) << name;
  }

  // A shard that does not match F's listing is refused by name, before any step.
  const std::string shard = (d / "zero_epoch1.st.optim-g2-01-of-03.safetensors").string();
  const std::string resume_3 = train("sgd", 24, 240, 3) + " --resume " + f;
  fs::resize_file(shard, fs::file_size(shard) - 4);
  testing_support::expect_one_line_error(resume_3, shard);
  fs::remove(shard);
  testing_support::expect_one_line_error(resume_3, shard);
  fs::remove_all(d);
}

TEST(Zero, OtherStagesAreRefusedByName) {
  const std::string base = train("sgd", 16, 64) + " --parallel zero --zero-stage ";
  for (const char* bad : {"0", "4"})
    testing_support::expect_one_line_error(base + bad, "--zero-stage must be 1, 2 or 3");
  // Refused whichever strategy runs, before any rank starts.
  testing_support::expect_one_line_error(train("sgd", 16, 64) + " --zero-stage 7", "--zero-stage");
  testing_support::expect_one_line_error(base + "2 --grad-dtype bf16", "--grad-dtype bf16");
}

}  // namespace
}  // namespace cohort
