// Many hosts on one machine (scripts/cluster.sh, the ctest label `cluster`):
// the cluster comes up with what it promises and goes down leaving nothing;
// then every strategy runs across "hosts" (network namespaces, TCP over
// tc-shaped links between them, shared memory within one) and ends with the
// single process's weights, as the one-host tests require, with its ranks
// where the plan put them and its traffic on the links. Skips, naming the
// reason, where the machine cannot build namespaces (no root, no ip netns).
#include "support/cluster.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/grid.h"
#include "support/support.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

using testing_support::checkpoint_rel_diff;
using testing_support::Cluster;
using testing_support::CommandResult;
using testing_support::job_map;
using testing_support::run_command;

// 8 steps of 32 images (tests/support: SGD lr 0.01, synthetic, one thread).
const std::string kTrain = testing_support::equality_train_command() + " --model mnist-small";
constexpr int64_t kSteps = 8, kGlobalBatch = 32;
constexpr int64_t kGradBytes = 402442 * 4;  // mnist-small's f32 gradients

#define SKIP_WITHOUT_CLUSTER()                                      \
  do {                                                              \
    const std::string why = testing_support::cluster_unavailable(); \
    if (!why.empty()) GTEST_SKIP() << why;                          \
  } while (0)

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Lines of `cmd`'s output that mention `name` (empty if none).
std::string mentions(const std::string& cmd, const std::string& name) {
  return run_command(cmd + " 2>&1 | grep -F -- '" + name + "' || true").out;
}

// A fresh folder for one test's checkpoints, and the single process's run
// in it at the global batch (s.safetensors).
class ClusterRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cohort_cluster_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / (name + ".st")).string(); }

  void run_single() {
    CommandResult r = run_command(kTrain + " --batch " + std::to_string(kGlobalBatch) + " --save " +
                                  path("single"));
    ASSERT_EQ(r.code, 0) << r.out;
  }

  // Runs `flags` on the cluster (mpirun_args place the ranks), saves to
  // path(name); returns mpirun's output, with the job map.
  std::string run_on(const Cluster& c, const std::string& mpirun_args, int64_t batch,
                     const std::string& flags, const std::string& name) {
    CommandResult r = c.run(mpirun_args, kTrain + " --batch " + std::to_string(batch) + " " +
                                             flags + " --save " + path(name));
    EXPECT_EQ(r.code, 0) << mpirun_args << " " << flags << "\n" << r.out;
    return r.out;
  }

  // The run saved as `name` ended with the single process's weights.
  void expect_single_weights(const std::string& name, const std::string& what) {
    EXPECT_LE(checkpoint_rel_diff(path(name), path("single")), 1e-5) << what;
  }

  fs::path dir_;
};

using HostRanks = std::map<std::string, std::vector<int>>;

// --- the script ------------------------------------------------------------

TEST(ClusterScript, ComesUpAsPromisedAndGoesDownLeavingNothing) {
  SKIP_WITHOUT_CLUSTER();
  const std::string hosts_before = slurp("/etc/hosts");
  std::string name;
  {
    Cluster c(2, 2, "10gbit");
    ASSERT_TRUE(c.up()) << c.up_output();
    name = c.name();
    const std::string netns = run_command("ip netns list").out;
    EXPECT_NE(netns.find(c.host(0)), std::string::npos) << netns;
    EXPECT_NE(netns.find(c.host(1)), std::string::npos) << netns;
    EXPECT_NE(run_command("ip -d link show " + name + "-br").out.find("bridge"), std::string::npos);
    // Both ends of each link shaped: the bridge side (what the host
    // receives) and the host's eth0 (what it sends).
    for (int i = 0; i < 2; ++i) {
      const std::string in =
          run_command("tc qdisc show dev " + name + "-v" + std::to_string(i)).out;
      const std::string out =
          run_command("ip netns exec " + c.host(i) + " tc qdisc show dev eth0").out;
      EXPECT_NE(in.find("tbf"), std::string::npos) << in;
      EXPECT_NE(in.find("rate 10Gbit"), std::string::npos) << in;
      EXPECT_NE(out.find("rate 10Gbit"), std::string::npos) << out;
      const std::string addr = run_command("ip netns exec " + c.host(i) + " ip -4 -o addr").out;
      EXPECT_NE(addr.find("127.0.0.1"), std::string::npos) << addr;  // loopback up
      EXPECT_NE(addr.find("10.213."), std::string::npos) << addr;
    }
    // mpirun starts ranks in the hosts, each under its own host name.
    CommandResult r = c.run("-np 2 --map-by node", "hostname");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(job_map(r.out), (HostRanks{{c.host(0), {0}}, {c.host(1), {1}}})) << r.out;
    EXPECT_NE(r.out.find("\n" + c.host(0) + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n" + c.host(1) + "\n"), std::string::npos) << r.out;
  }
  // Namespaces, bridge, veths and their qdiscs, state: all gone.
  EXPECT_EQ(mentions("ip netns list", name + "-"), "");
  EXPECT_EQ(mentions("ip -o link show", name + "-"), "");
  EXPECT_EQ(mentions("tc qdisc show", name + "-"), "");
  EXPECT_FALSE(fs::exists("/run/cohort-cluster/" + name));
  EXPECT_EQ(slurp("/etc/hosts"), hosts_before);
}

TEST(ClusterScript, AFailedUpLeavesNothing) {
  SKIP_WITHOUT_CLUSTER();
  // tc refuses a zero rate after the bridge and the first namespace exist.
  CommandResult r = run_command(testing_support::cluster_script() + " up 2 --rate 0gbit");
  EXPECT_NE(r.code, 0) << r.out;
  const size_t at = r.out.find("building ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string name = r.out.substr(at + 9, r.out.find('\n', at) - at - 9);
  EXPECT_EQ(mentions("ip netns list", name + "-"), "");
  EXPECT_EQ(mentions("ip -o link show", name + "-"), "");
  EXPECT_FALSE(fs::exists("/run/cohort-cluster/" + name));
}

// --- the strategies across hosts ---------------------------------------------

// 2 hosts x 1 rank and 2 hosts x 2 ranks (vader within a host, TCP between):
// both end on the single process's weights at the global batch, and every
// step's all-reduce crossed the links: each host must receive the other's
// whole gradient sum, so at least 2 x 8 x 1.6 MB went over them.
TEST_F(ClusterRun, DataParallelAcrossHosts) {
  SKIP_WITHOUT_CLUSTER();
  Cluster c(2, 2);
  ASSERT_TRUE(c.up()) << c.up_output();
  run_single();
  const int64_t before = c.link_bytes();
  std::string out = run_on(c, "-np 2 --map-by node", 16, "--parallel dp", "dp2x1");
  EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0}}, {c.host(1), {1}}})) << out;
  EXPECT_GE(c.link_bytes() - before, 2 * kSteps * kGradBytes);
  expect_single_weights("dp2x1", "dp, 2 hosts x 1 rank");
  out = run_on(c, "-np 4", 8, "--parallel dp --bucket-mb 0.5", "dp2x2");
  EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0, 1}}, {c.host(1), {2, 3}}})) << out;
  EXPECT_NE(out.find("\"world_size\":4"), std::string::npos) << out;
  expect_single_weights("dp2x2", "dp, 2 hosts x 2 ranks");
}

// Two workers on hosts 0 and 1, the server (the last rank) alone on host 2:
// sync ps sums as data parallelism does, so it ends on the single process's
// weights; each step every worker pushed its gradients to the server and
// pulled the weights back over the links (4 x 1.6 MB received per step).
TEST_F(ClusterRun, ParameterServerOnItsOwnHost) {
  SKIP_WITHOUT_CLUSTER();
  Cluster c(3, 1);
  ASSERT_TRUE(c.up()) << c.up_output();
  run_single();
  const int64_t before = c.link_bytes();
  const std::string out = run_on(c, "-np 3", 16, "--parallel ps --ps-mode sync --servers 1", "ps");
  EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0}}, {c.host(1), {1}}, {c.host(2), {2}}})) << out;
  EXPECT_GE(c.link_bytes() - before, 4 * kSteps * kGradBytes);
  expect_single_weights("ps", "sync ps, server on its own host");
}

// Model parallelism and a 1F1B pipeline with stage 0 on host 0 and stage 1 on
// host 1: activations and their gradients cross the link (at least the 10
// logits' worth per image, both ways, every step).
TEST_F(ClusterRun, StagesOnDifferentHosts) {
  SKIP_WITHOUT_CLUSTER();
  Cluster c(2, 1);
  ASSERT_TRUE(c.up()) << c.up_output();
  run_single();
  for (const std::string flags :
       {"--parallel mp --stages 2", "--parallel pp --stages 2 --micro-batches 4 --schedule 1f1b"}) {
    const std::string name = flags.find("mp") != std::string::npos ? "mp" : "pp";
    const int64_t before = c.link_bytes();
    const std::string out = run_on(c, "-np 2", kGlobalBatch, flags, name);
    EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0}}, {c.host(1), {1}}})) << out;
    EXPECT_GE(c.link_bytes() - before, 2 * kSteps * kGlobalBatch * 10 * 4) << flags;
    expect_single_weights(name, flags);
  }
}

// Hybrid, 2 replicas x 2 stages on 2 hosts x 2 slots (world rank r is stage
// r % 2 of replica r / 2). By slot: each host holds one whole pipeline and
// the replicas average over the link. By node: each host holds one stage of
// both replicas, so the pipeline crosses the link and the average does not.
TEST_F(ClusterRun, HybridPipelineWithinHostsOrAcrossThem) {
  SKIP_WITHOUT_CLUSTER();
  Cluster c(2, 2);
  ASSERT_TRUE(c.up()) << c.up_output();
  run_single();
  const std::string flags = "--parallel hybrid --dp 2 --stages 2 --micro-batches 2";
  std::string out = run_on(c, "-np 4 --map-by slot", 16, flags, "pipe_in_host");
  EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0, 1}}, {c.host(1), {2, 3}}})) << out;
  expect_single_weights("pipe_in_host", "hybrid, pipeline within each host");
  out = run_on(c, "-np 4 --map-by node", 16, flags, "pipe_across");
  EXPECT_EQ(job_map(out), (HostRanks{{c.host(0), {0, 2}}, {c.host(1), {1, 3}}})) << out;
  expect_single_weights("pipe_across", "hybrid, pipeline across hosts");
}

}  // namespace
}  // namespace cohort
