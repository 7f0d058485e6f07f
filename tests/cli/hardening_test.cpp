// Issue 14's faults, each reproduced against the binary: outputs checked
// before any work, divergence never overwrites a good checkpoint, non-finite
// checkpoints refused by name, a FIFO refused at once, no temp files left.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/arena.h"
#include "core/atomic_file.h"
#include "nn/models/zoo.h"
#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::expect_one_line_error;
using testing_support::run_command;

const std::string kBin = COHORT_BIN;
const std::string kQuick = " --data synthetic --limit 256 --batch 64 --epochs 1 --threads 1";

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort_hardening_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Hardening, UnwritableSaveIsRefusedBeforeTraining) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_one_line_error(kBin + " train" + kQuick + " --save /nonexistent/dir/x.safetensors",
                        "--save");
  // Refused at start: the epoch (several seconds on 2 vCPUs) never ran.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  const fs::path d = fresh_dir("savedir");
  expect_one_line_error(kBin + " train" + kQuick + " --save " + d.string(), "folder");
}

TEST(Hardening, DivergenceStopsAndKeepsTheGoodCheckpoint) {
  const fs::path d = fresh_dir("diverge");
  const std::string good = (d / "good.safetensors").string();
  ASSERT_EQ(run_command(kBin + " train" + kQuick + " --save " + good).code, 0);
  const std::string before = bytes(good);
  auto r = run_command(kBin + " train" + kQuick + " --load " + good + " --save " + good +
                       " --lr 1e30 --optimizer sgd --momentum 0");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("kept as it was"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.find("step ") != std::string::npos || r.out.find("weight ") != std::string::npos)
      << r.out;
  EXPECT_EQ(bytes(good), before) << "the good checkpoint was overwritten";
}

TEST(Hardening, NonFiniteCheckpointIsRefusedByTensor) {
  const fs::path d = fresh_dir("nan");
  auto model = nn::make_model("mnist-small", 0);
  model->params().param(2).f32()[5] = std::numeric_limits<float>::quiet_NaN();  // fc1.weight
  const std::string path = (d / "nan.safetensors").string();
  save_checkpoint(path, "mnist-small", model->params(), &model->buffers(), {});
  expect_one_line_error(kBin + " train" + kQuick + " --load " + path, "fc1.weight");
}

TEST(Hardening, FifoIsRefusedNotWaitedOn) {
  const fs::path d = fresh_dir("fifo");
  const fs::path fifo = d / "ckpt.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error("timeout 20 " + kBin + " train" + kQuick + " --load " + fifo.string(),
                        fifo.string());
}

TEST(Hardening, UncommittedSavesLeaveNothingAndStaleTempsAreRemoved) {
  const fs::path d = fresh_dir("temps");
  const std::string target = (d / "x.safetensors").string();
  {
    AtomicFile f(target);
    f.write("abc", 3);
    // While it is written, the folder shows nothing: no kill can leave it behind.
    EXPECT_TRUE(fs::is_empty(d));
  }
  EXPECT_TRUE(fs::is_empty(d));
  // A dead writer's named temp file (from a file system without O_TMPFILE,
  // or the instant between link and rename) goes at the next save.
  std::ofstream(target + ".tmp.999999999") << "partial";
  {
    AtomicFile f(target);
    f.write("abc", 3);
    f.commit();
  }
  EXPECT_FALSE(fs::exists(target + ".tmp.999999999"));
  EXPECT_EQ(bytes(target), "abc");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace cohort
