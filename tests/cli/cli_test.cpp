// The `cohort` binary end to end: bad input gets one line naming the file or
// flag and exit code 2; the model list and a short real training run work.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/support.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  Result r;
  r.code = cohort::testing_support::run(std::string(COHORT_BIN) + " " + args, &r.out);
  return r;
}

// Exit code 2, exactly one line, and the line names `culprit`.
void expect_one_line_error(const std::string& args, const std::string& culprit) {
  cohort::testing_support::expect_one_line_error(std::string(COHORT_BIN) + " " + args, culprit);
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort_cli_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

TEST(Cli, ModelsListsEveryModelWithItsCount) {
  Result r = run("models");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("mnist-small        402442"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lenet               21840"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resnet152"), std::string::npos) << r.out;
}

TEST(Cli, UnknownModelAndDataset) {
  expect_one_line_error("train --model nosuch", "nosuch");
  expect_one_line_error("train --data nosuch", "nosuch");
  // Token streams are for token models; an image model names both flags.
  expect_one_line_error("train --model mnist-small --data text", "--data text");
  expect_one_line_error("train --model mnist-small --data tokens --data-path x.bin",
                        "--model mnist-small");
  expect_one_line_error("bench step --model nosuch", "nosuch");
}

TEST(Cli, BadFlags) {
  expect_one_line_error("train --epochs 0", "--epochs");
  expect_one_line_error("train --batch -1", "--batch");
  expect_one_line_error("train --log xml", "--log");
  expect_one_line_error("train --optimizer rmsprop", "--optimizer");
  expect_one_line_error("train --no-such-flag", "--no-such-flag");
  expect_one_line_error("train --eval sometimes", "--eval");
}

// Issue 14: flags that size threads or batches are bounded before anything
// is allocated; unused strategies' flags are still checked; an unknown
// subcommand is named.
TEST(Cli, ResourceFlagsAreBoundedAndUnusedFlagsChecked) {
  expect_one_line_error("train --threads 10000 --limit 100 --epochs 1", "--threads");
  expect_one_line_error("train --batch 99999999999999999999 --limit 100", "--batch");
  expect_one_line_error("train --batch 5000 --limit 100 --data synthetic", "--batch");
  expect_one_line_error("train --allreduce foo --limit 100 --batch 50", "--allreduce");
  expect_one_line_error("train --clip -1 --limit 100 --batch 50", "--clip");
  expect_one_line_error("train --limit -1 --data synthetic", "--limit");
  expect_one_line_error("train --parallel replicas --replicas 100000 --limit 2000", "--replicas");
  expect_one_line_error("frob", "frob");
  expect_one_line_error("train --seed -1 --limit 100 --batch 50", "--seed");
  expect_one_line_error("bench grid --grid smoke --out /proc/cohort_no_such_place", "--out");
  // Under --workers: one line, from rank 0, and no mpirun banner.
  expect_one_line_error("train --workers 2 --threads 1 --data-dir /nonexistent/fm", "/nonexistent/fm");
  expect_one_line_error("bench frob", "frob");
}

TEST(Cli, MissingDataDirectory) {
  expect_one_line_error("train --data-dir /nonexistent/fm", "/nonexistent/fm");
}

TEST(Cli, TruncatedIdxFile) {
  fs::path d = temp_dir("idx");
  // Header promises 100 images of 28x28 but holds 3 bytes of pixels.
  write(d / "train-images-idx3-ubyte", be32(0x803) + be32(100) + be32(28) + be32(28) + "abc");
  write(d / "train-labels-idx1-ubyte", be32(0x801) + be32(100) + std::string(100, '\1'));
  write(d / "t10k-images-idx3-ubyte", be32(0x803) + be32(1) + be32(28) + be32(28) +
                                          std::string(784, '\0'));
  write(d / "t10k-labels-idx1-ubyte", be32(0x801) + be32(1) + std::string(1, '\1'));
  expect_one_line_error("train --data-dir " + d.string(), "train-images-idx3-ubyte");
  fs::remove_all(d);
}

TEST(Cli, CorruptCifarFile) {
  fs::path d = temp_dir("cifar");
  write(d / "data_batch_1.bin", std::string(3073 + 5, '\0'));
  // --memory-check off: ResNet-50 at batch 128 (about 19 GB) is refused first on a smaller machine.
  expect_one_line_error("train --model resnet50 --memory-check off --data cifar10 --data-dir " +
                            d.string(),
                        "data_batch_1.bin");
  fs::remove_all(d);
}

TEST(Cli, CheckpointOfAnotherModelIsRefusedAndKept) {
  fs::path d = temp_dir("ckpt");
  const std::string ck = (d / "lenet.safetensors").string();
  Result r = run("train --model lenet --data synthetic --limit 256 --epochs 1 --batch 64 --save " +
              ck);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(ck));
  const auto size = fs::file_size(ck);
  expect_one_line_error("train --model mnist-small --data synthetic --limit 256 --load " + ck,
                        ck);
  expect_one_line_error("train --load " + (d / "missing.safetensors").string(),
                        "missing.safetensors");
  EXPECT_EQ(fs::file_size(ck), size);  // nothing already saved is lost
  // Resuming the right model works.
  r = run("train --model lenet --data synthetic --limit 256 --epochs 1 --batch 64 --load " + ck);
  EXPECT_EQ(r.code, 0) << r.out;
  fs::remove_all(d);
}

TEST(Cli, JsonlSummaryHoldsTheFieldsTheIssueNames) {
  Result r = run("train --model mnist-small --data synthetic --limit 512 --epochs 2 --log jsonl");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto pos = r.out.rfind("{\"event\":\"summary\"");
  ASSERT_NE(pos, std::string::npos) << r.out;
  const std::string last = r.out.substr(pos);
  for (const char* key : {"test_accuracy", "per_class_accuracy", "epoch_seconds",
                          "images_per_second", "parameters"})
    EXPECT_NE(last.find(key), std::string::npos) << key << " missing from " << last;
}

TEST(Cli, EvalLastTestsOnlyAfterTheLastEpoch) {
  Result r = run("train --model mnist-small --data synthetic --limit 256 --epochs 2 --log jsonl"
                 " --eval last");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto first = r.out.find("{\"event\":\"epoch\",\"epoch\":1");
  const auto second = r.out.find("{\"event\":\"epoch\",\"epoch\":2");
  ASSERT_NE(first, std::string::npos) << r.out;
  ASSERT_NE(second, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(first, second - first).find("test_accuracy"), std::string::npos);
  EXPECT_NE(r.out.substr(second).find("test_accuracy"), std::string::npos);
}

}  // namespace
