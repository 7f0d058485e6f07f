// --parallel replicas (PyTorch's DataParallel: one process, replica threads)
// ends with the weights of the single-process run at the same batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

TEST(Replicas, MatchTheSingleProcessRun) {
  const fs::path d = fs::temp_directory_path() / "cohort_replicas";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string base = std::string(COHORT_BIN) +
                           " train --model mnist-small --data synthetic --epochs 1 --optimizer sgd"
                           " --lr 0.01 --momentum 0.9 --log jsonl --limit 512 --batch 32 --save ";
  const std::string single = (d / "single.safetensors").string();
  const std::string rep = (d / "replicas.safetensors").string();
  ASSERT_EQ(std::system((base + single + " > /dev/null").c_str()), 0);
  ASSERT_EQ(std::system((base + rep + " --parallel replicas --replicas 3 > /dev/null").c_str()), 0);
  EXPECT_LE(testing_support::checkpoint_rel_diff(rep, single), 1e-5);
  fs::remove_all(d);
}

// Issue 14: an epoch's last batch smaller than the replicas trains on fewer
// of them (was a failure mid-epoch), still as the single process does; and
// replicas are one process, so several ranks are refused.
TEST(Replicas, PartialLastBatchAndRanksRefused) {
  const fs::path d = fs::temp_directory_path() / "cohort_replicas_partial";
  fs::remove_all(d);
  fs::create_directories(d);
  // 100 images at batch 48: a last batch of 4 for 6 replicas.
  const std::string base = std::string(COHORT_BIN) +
                           " train --model mnist-small --data synthetic --epochs 1 --optimizer sgd"
                           " --lr 0.01 --log jsonl --limit 100 --batch 48 --threads 1 --save ";
  const std::string single = (d / "single.safetensors").string();
  const std::string rep = (d / "replicas.safetensors").string();
  ASSERT_EQ(std::system((base + single + " > /dev/null").c_str()), 0);
  ASSERT_EQ(std::system((base + rep + " --parallel replicas --replicas 6 > /dev/null").c_str()), 0);
  EXPECT_LE(testing_support::checkpoint_rel_diff(rep, single), 1e-5);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  auto r = testing_support::run_command(
      "mpirun --oversubscribe -np 2 " + std::string(COHORT_BIN) +
      " train --data synthetic --limit 100 --batch 50 --parallel replicas");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("runs in one process"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace
}  // namespace cohort
