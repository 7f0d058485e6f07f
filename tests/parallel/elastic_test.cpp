// `cohort train --elastic` end to end, with real ranks and real signals: a
// rank killed mid-run, or stopped, is dropped and the run finishes on the
// ranks left, from its last checkpoint; --max-restarts 0 gives up in one
// line; bad elastic flags are one line and exit code 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "parallel/elastic.h"
#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// mnist-small on Fashion-MNIST (learnable, unlike --data synthetic's random
// labels, so the accuracy says whether the resumed run trained), one thread
// a rank, checkpoints per epoch.
std::string elastic_train(const std::string& flags) {
  return std::string(COHORT_BIN) +
         " train --elastic --model mnist-small --data fashion-mnist --batch 32 --threads 1"
         " --eval last --test-limit 1000 --log jsonl " +
         flags;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A command running in the background, its output in a file; its ranks carry
// COHORT_TEST_TAG=tag in their environment (mpirun passes it on), so the test
// finds them among other tests' ranks.
class Background {
 public:
  Background(const std::string& cmd, const std::string& name)
      : tag_(std::to_string(::getpid()) + "_" + name),
        out_(fs::temp_directory_path() / ("cohort_elastic_test_" + tag_ + ".log")) {
    pid_ = fork();
    if (pid_ == 0) {
      setenv("COHORT_TEST_TAG", tag_.c_str(), 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      const std::string full = cmd + " > " + out_.string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", full.c_str(), nullptr);
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    fs::remove(out_);
  }
  std::string out() const { return read_file(out_); }
  // Waits until the output holds `text`; false after `seconds`.
  bool wait_for(const std::string& text, double seconds) const {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (out().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // The pid of this command's MPI rank `rank` (0 if none is running).
  pid_t rank_pid(int rank) const {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.empty() || !isdigit(static_cast<unsigned char>(name[0]))) continue;
      std::string env = read_file(e.path() / "environ");
      for (char& c : env)
        if (c == '\0') c = '\n';
      env = "\n" + env;
      if (env.find("\nCOHORT_TEST_TAG=" + tag_ + "\n") != std::string::npos &&
          env.find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos)
        return std::atoi(name.c_str());
    }
    return 0;
  }
  // Waits for the command's exit code (-1 after `seconds`).
  int wait(double seconds) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  // Whether a process of this command is still alive (an orphaned rank).
  bool any_rank_left() const {
    for (int r = 0; r < 8; ++r)
      if (rank_pid(r)) return true;
    return false;
  }

 private:
  std::string tag_;
  fs::path out_;
  pid_t pid_ = -1;
  int code_ = -1;
};

// Sends `sig` to rank `rank` once the output holds `text` and `file` (if
// given: the checkpoint) exists.
void signal_rank_after(const Background& job, const std::string& text, const fs::path& file,
                       int rank, int sig) {
  ASSERT_TRUE(job.wait_for(text, 40)) << job.out();
  for (int i = 0; i < 400 && !file.empty() && !fs::exists(file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const pid_t pid = job.rank_pid(rank);
  ASSERT_GT(pid, 0) << job.out();
  kill(pid, sig);
}

fs::path checkpoint_path(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("cohort_elastic_test_" + std::to_string(::getpid()) + "_" + name + ".safetensors");
  fs::remove(p);
  return p;
}

// Under the commit contract (--commit-every, --checkpoint-dir, --resume auto
// added by the supervisor, --global-batch held at any world).
TEST(ElasticSupervisor, KilledRankIsDroppedAndTheRunFinishes) {
  const fs::path dir = checkpoint_path("kill").replace_extension("");
  Background job(elastic_train("--min-workers 2 --max-workers 4 --workers 4 --limit 12000 "
                               "--epochs 4 --timeout 10 --global-batch 96 --commit-every 20 "
                               "--checkpoint-dir " + dir.string()),
                 "kill");
  signal_rank_after(job, "\"epoch\":1,", "", 2, SIGKILL);
  const int code = job.wait(60);
  const std::string out = job.out();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("rank 2 (host localhost) died on signal 9 (Killed)"), std::string::npos) << out;
  EXPECT_NE(out.find("restart 1 at 3 ranks (was 4), from update"), std::string::npos) << out;
  const nlohmann::json s = testing_support::last_json(out);
  ASSERT_TRUE(s.contains("elastic")) << out;
  const auto& restarts = s["elastic"]["restarts"];
  ASSERT_EQ(restarts.size(), 1u) << out;
  EXPECT_EQ(restarts[0]["world"], 3);
  EXPECT_EQ(restarts[0]["failed"][0]["rank"], 2);
  EXPECT_GE(restarts[0]["resumed_from_update"].get<int>(), 120);  // epoch 1: 125 updates
  EXPECT_LT(restarts[0]["recovery_seconds"].get<double>(), 10.0) << out;
  EXPECT_EQ(s["world_size"], 3);
  EXPECT_EQ(s["global_batch"], 96);
  EXPECT_GT(s["test_accuracy"].get<double>(), 0.75) << out;  // 0.885 measured
  EXPECT_FALSE(job.any_rank_left());
  fs::remove_all(dir);
}

TEST(ElasticSupervisor, StoppedRankIsFoundWithinTheTimeout) {
  Background job(elastic_train("--min-workers 2 --max-workers 3 --workers 3 --limit 9000 "
                               "--epochs 3 --timeout 4"),
                 "stop");
  signal_rank_after(job, "\"event\":\"start\"", "", 1, SIGSTOP);
  const auto stopped = Clock::now();
  ASSERT_TRUE(job.wait_for("cohort elastic: rank 1", 20)) << job.out();
  // The heartbeat's limit is half of --timeout: 2 s, then the abort.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - stopped).count(), 10.0);
  const int code = job.wait(60);
  const std::string out = job.out();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("rank 1 (host localhost) stalled"), std::string::npos) << out;
  EXPECT_NE(out.find("restart 1 at 2 ranks (was 3)"), std::string::npos) << out;
  EXPECT_FALSE(job.any_rank_left());
}

TEST(ElasticSupervisor, MaxRestartsZeroGivesUpInOneLine) {
  Background job(elastic_train("--min-workers 1 --max-workers 2 --workers 2 --limit 24000 "
                               "--epochs 2 --max-restarts 0"),
                 "giveup");
  signal_rank_after(job, "\"event\":\"start\"", "", 1, SIGKILL);
  const int code = job.wait(40);
  const std::string out = job.out();
  EXPECT_EQ(code, 1) << out;
  std::istringstream lines(out);
  int mentions = 0;
  for (std::string l; std::getline(lines, l);)
    mentions += l.find("cohort: elastic:") != std::string::npos;
  EXPECT_EQ(mentions, 1) << out;
  EXPECT_NE(out.find("rank 1 (host localhost) died on signal 9 (Killed)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--max-restarts 0 reached"), std::string::npos) << out;
  EXPECT_FALSE(job.any_rank_left());
}

// A discovery script whose hosts change: b leaves (its ranks are dropped),
// then returns (the job grows back to --max-workers at once).
TEST(ElasticSupervisor, DiscoveredHostsLeaveAndReturn) {
  const fs::path dir = checkpoint_path("discovery").replace_extension("");
  fs::create_directories(dir);
  const fs::path hosts = dir / "hosts", script = dir / "discover.sh";
  std::ofstream(hosts) << "a:2\nb:2\n";
  std::ofstream(script) << "#!/bin/sh\ncat " << hosts.string() << "\n";
  fs::permissions(script, fs::perms::owner_all);
  Background job(elastic_train("--min-workers 2 --max-workers 4 --host-discovery-script " +
                               script.string() + " --limit 24000 --epochs 4 --timeout 10"),
                 "discovery");
  ASSERT_TRUE(job.wait_for("\"world_size\":4", 30)) << job.out();
  std::ofstream(hosts) << "a:2\n";
  ASSERT_TRUE(job.wait_for("restart 1 at 2 ranks (was 4)", 20)) << job.out();
  ASSERT_TRUE(job.wait_for("\"world_size\":2", 20)) << job.out();
  std::ofstream(hosts) << "a:2\nb:2\n";
  ASSERT_TRUE(job.wait_for("restart 2 at 4 ranks (was 2)", 20)) << job.out();
  const int code = job.wait(60);
  const std::string out = job.out();
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json s = testing_support::last_json(out);
  ASSERT_EQ(s["elastic"]["restarts"].size(), 2u) << out;
  EXPECT_EQ(s["elastic"]["restarts"][0]["cause"], "hosts changed");
  EXPECT_EQ(s["elastic"]["restarts"][1]["cause"], "more slots");
  EXPECT_EQ(s["world_size"], 4);
  EXPECT_FALSE(job.any_rank_left());
  fs::remove_all(dir);
}

// The commit a restart resumes from (--resume auto's): the highest-numbered
// commit file; shards and temp files beside it are not commits.
TEST(ElasticSupervisor, NewestCommitIsTheHighestNumbered) {
  const fs::path dir = checkpoint_path("commits").replace_extension("");
  fs::create_directories(dir);
  EXPECT_EQ(newest_commit(dir.string()).updates, -1);
  for (const char* name : {"commit-000000000004.safetensors", "commit-000000000012.safetensors",
                           "commit-000000000040.safetensors.optim-g1-0-of-2.safetensors",
                           "commit-000000000040.safetensors.tmp", "notes.txt"})
    std::ofstream(dir / name) << "x";
  const CommitSeen seen = newest_commit(dir.string());
  EXPECT_EQ(seen.updates, 12);
  EXPECT_GE(seen.age_s, 0);
  EXPECT_LT(seen.age_s, 30);
  fs::remove_all(dir);
}

TEST(ElasticSupervisor, BadFlagsAreOneLine) {
  using testing_support::expect_one_line_error;
  const std::string t = std::string(COHORT_BIN) + " train --data synthetic --limit 64 ";
  expect_one_line_error(t + "--elastic --min-workers 3 --max-workers 2", "--min-workers 3");
  expect_one_line_error(t + "--min-workers 2", "--min-workers needs --elastic");
  expect_one_line_error(t + "--max-restarts 1", "--max-restarts needs --elastic");
  expect_one_line_error(t + "--elastic --max-workers 2", "--min-workers");
  expect_one_line_error(t + "--elastic --min-workers 1", "--max-workers");
  expect_one_line_error(t + "--elastic --min-workers 1 --max-workers 2 --workers 3", "--workers 3");
  expect_one_line_error(t + "--elastic --min-workers 1 --max-workers 2 --hostfile /nonexistent",
                        "--hostfile");
}

}  // namespace
}  // namespace cohort
