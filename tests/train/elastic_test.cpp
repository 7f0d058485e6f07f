// Commits for elastic restarts end to end (`--commit-every`, `--checkpoint-dir`,
// `--resume auto`, `--global-batch`): a run stopped within an epoch and
// resumed from its newest commit ends with the same bits as the run that was
// never stopped; dp stopped and resumed at 4, 3, 2 and 4 ranks with one
// global batch ends within float tolerance of it, with every sample taken
// once per epoch; leftovers of an interrupted commit are passed over; bad
// input is one line and exit code 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing_support::checkpoint_differences;
using testing_support::expect_one_line_error;
using Result = testing_support::CommandResult;
Result sh(const std::string& cmd) { return testing_support::run_command(cmd); }

// The dp runs' launcher (world size appended).
const std::string kMpirun = "mpirun --oversubscribe --bind-to none --mca btl self,vader -np ";

// 1,200 synthetic images an epoch in batches of 100 (12 updates), one thread.
std::string train(const std::string& flags, int epochs = 2) {
  return std::string(COHORT_BIN) +
         " train --model mnist-small --data synthetic --limit 1200 --batch 100 --threads 1"
         " --log jsonl --eval none --optimizer adam --lr 0.001 --warmup 20 --epochs " +
         std::to_string(epochs) + " " + flags;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort_elastic_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The commit files in d, sorted.
std::vector<std::string> commits(const fs::path& d) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The "images" of each epoch line of out, by epoch.
std::map<int, int64_t> epoch_images(const std::string& out) {
  std::map<int, int64_t> images;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"event\":\"epoch\"", 0) != 0) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    images[j["epoch"].get<int>()] = j["images"].get<int64_t>();
  }
  return images;
}

// Stopped after step 7 (commits at updates 3 and 6) or step 14 (the epoch-end
// commit at 12, then none), then resumed: the same bits as never stopped, and
// each epoch line counts its 1,200 images.
TEST(Elastic, StoppedAndResumedRunEqualsTheUninterruptedRun) {
  fs::path d = temp_dir("single");
  const std::string full = (d / "full.safetensors").string();
  Result r = sh(train("--save " + full));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{1, 1200}, {2, 1200}}));
  for (int stop : {7, 14}) {
    const fs::path dir = d / ("commits" + std::to_string(stop));
    const std::string commit_flags = " --commit-every 3 --checkpoint-dir " + dir.string();
    r = sh(train(commit_flags + " --stop-after-steps " + std::to_string(stop)));
    ASSERT_EQ(r.code, 0) << r.out;
    const std::vector<std::string> kept =
        stop == 7 ? std::vector<std::string>{"commit-000000000003.safetensors",
                                             "commit-000000000006.safetensors"}
                  : std::vector<std::string>{"commit-000000000009.safetensors",
                                             "commit-000000000012.safetensors"};
    EXPECT_EQ(commits(dir), kept) << "the newest 2 commits are kept";
    const std::string resumed = (d / ("resumed" + std::to_string(stop) + ".safetensors")).string();
    r = sh(train(commit_flags + " --resume auto --save " + resumed));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(checkpoint_differences(resumed, full), "") << "stopped after step " << stop;
    if (stop == 7)
      EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{1, 1200}, {2, 1200}}));
    else
      EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{2, 1200}}));
  }
  fs::remove_all(d);
}

// A commit interrupted before its rename leaves temp files and orphan shards
// under other names; one damaged after it (a truncated newest file) does not
// read. --resume auto passes over both and continues from the newest whole
// commit, to the same bits; the next commit clears the leftovers.
TEST(Elastic, ResumeAutoPassesOverPartialCommits) {
  fs::path d = temp_dir("partial");
  const fs::path dir = d / "commits";
  const std::string full = (d / "full.safetensors").string();
  Result r = sh(train("--save " + full));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string commit_flags = " --commit-every 3 --checkpoint-dir " + dir.string();
  r = sh(train(commit_flags + " --stop-after-steps 7"));
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path six = dir / "commit-000000000006.safetensors";
  {  // a newer commit cut short, as a crash without an atomic rename would leave it
    std::ifstream in(six, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir / "commit-000000000012.safetensors", std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  std::ofstream(dir / "commit-000000000009.safetensors.tmp.999999") << "partial";
  std::ofstream(dir / "commit-000000000009.safetensors.optim-g1-00-of-02.safetensors") << "x";
  const std::string resumed = (d / "resumed.safetensors").string();
  r = sh(train(commit_flags + " --resume auto --save " + resumed));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("commit-000000000012.safetensors does not read"), std::string::npos)
      << r.out;
  EXPECT_EQ(checkpoint_differences(resumed, full), "");
  // The run's own commits replaced everything else.
  EXPECT_EQ(commits(dir), (std::vector<std::string>{"commit-000000000021.safetensors",
                                                    "commit-000000000024.safetensors"}));
  fs::remove_all(d);
}

// Killed (SIGKILL) at moments spread over a run that commits at every update:
// whatever the moment, --resume auto finds a whole commit (or none) and
// finishes the run (to epoch 3: a killed run may have finished epoch 2).
TEST(Elastic, KilledAnywhereResumesFromAWholeCommit) {
  fs::path d = temp_dir("killed");
  const fs::path dir = d / "commits";
  const std::string flags = " --commit-every 1 --checkpoint-dir " + dir.string();
  for (int delay_ms : {150, 400, 700}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + train(flags + " --resume auto") + " >/dev/null 2>&1").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  Result r = sh(train(flags + " --resume auto", 3));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("passed over"), std::string::npos) << r.out;
  fs::remove_all(d);
}

// dp with --global-batch 12 (240 images: 20 updates an epoch) stopped and
// resumed at 4, 3, 2 and again 4 ranks, within epoch 1, across its end and
// within epoch 2: the weights and momentum of the uninterrupted 4-rank run
// to float tolerance (the ranks sum in another order), and every epoch line
// counts all 240 images.
TEST(Elastic, DataParallelResumedAtOtherWorldSizesMatches) {
  fs::path d = temp_dir("dp");
  const fs::path dir = d / "commits";
  auto dp = [&](int n, const std::string& flags) {
    return kMpirun + std::to_string(n) + " " + std::string(COHORT_BIN) +
           " train --model mnist-small --data synthetic --limit 240 --threads 1 --log jsonl"
           " --eval none --optimizer sgd --lr 0.01 --momentum 0.9 --epochs 2 --parallel dp"
           " --global-batch 12 --commit-every 5 --checkpoint-dir " +
           dir.string() + " " + flags;
  };
  const std::string full = (d / "full.safetensors").string();
  Result r = sh(dp(4, "--save " + full));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{1, 240}, {2, 240}}));
  // Steps 1-7 (commit 5); 6-13 (commit 10); 11-27 (commits 15, 20 at epoch 1's end, 25); 26-40.
  r = sh(dp(4, "--stop-after-steps 7"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = sh(dp(3, "--resume auto --stop-after-steps 8"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = sh(dp(2, "--resume auto --stop-after-steps 17"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{1, 240}}));
  const std::string resumed = (d / "resumed.safetensors").string();
  r = sh(dp(4, "--resume auto --save " + resumed));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(epoch_images(r.out), (std::map<int, int64_t>{{2, 240}}));
  EXPECT_LT(testing_support::checkpoint_rel_diff(resumed, full), 1e-5);
  EXPECT_EQ(load_safetensors(resumed).metadata.at("updates"), "40");
  fs::remove_all(d);
}

TEST(Elastic, BadInputIsOneLine) {
  fs::path d = temp_dir("bad");
  const std::string file = (d / "a-file").string();
  std::ofstream(file) << "not a folder";
  expect_one_line_error(train("--resume auto --checkpoint-dir " + file), file);
  expect_one_line_error(train("--commit-every 2 --checkpoint-dir " + file), file);
  expect_one_line_error(train("--commit-every -1"), "--commit-every");
  expect_one_line_error(train("--workers 4 --parallel dp --global-batch 10"), "--global-batch 10");
  fs::remove_all(d);
}

}  // namespace
}  // namespace cohort
