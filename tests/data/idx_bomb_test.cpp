// Gzip bombs against the IDX reader (issue 14): a ~1 MB .gz whose header claims
// far more than it holds, or holds far more than a legitimate header needs,
// must be refused with one line naming the file and without memory growing
// with the decompressed size. Peak memory is measured on the real binary
// (`cohort train --data mnist`), per child, through wait4's rusage.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "data/data_test_util.h"
#include "data/idx.h"

extern char** environ;

namespace cohort {
namespace {

using testing::Bytes;
using testing::TempDir;

constexpr int64_t kMiB = int64_t(1) << 20;

Bytes read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// `head` gzipped, then `zero_mib` MiB of zeros as concatenated gzip members
// (zlib reads them as one stream): 1 GiB of zeros in ~1 MB, built in no time.
void write_gz_bomb(const TempDir& dir, const std::string& name, const Bytes& head,
                   int64_t zero_mib) {
  testing::write_gz(dir.file("zeros.gz"), Bytes(size_t(kMiB), 0));
  const Bytes member = read_all(dir.file("zeros.gz"));
  testing::write_gz(dir.file(name), head);
  std::ofstream f(dir.file(name), std::ios::binary | std::ios::app);
  for (int64_t i = 0; i < zero_mib; ++i)
    f.write(reinterpret_cast<const char*>(member.data()), std::streamsize(member.size()));
  ASSERT_TRUE(f.good());
}

// A data dir whose train images hold `count` 28x28 images per the header
// followed by 1 GiB of zeros; the labels file claims the same count but
// holds only two labels, so the headers agree and the bodies are what fails.
void write_bomb_dir(const TempDir& dir, uint32_t count) {
  write_gz_bomb(dir, "train-images-idx3-ubyte.gz", testing::idx_images(count, 28, 28, {}), 1024);
  testing::write_gz(dir.file("train-labels-idx1-ubyte.gz"), testing::idx_labels(count, {1, 2}));
}

struct Child {
  int code = -1;
  std::string out;       // stdout and stderr
  int64_t peak_rss = 0;  // bytes, this child only
};

// Runs `cohort args...` and measures its peak resident memory. posix_spawn
// shares our memory until the exec, and the exec carries our peak over to
// the child's ru_maxrss, so our own peak is reset first (clear_refs 5).
Child run_cohort(const std::vector<std::string>& args, const std::string& out_path) {
  std::ofstream("/proc/self/clear_refs") << "5";
  std::vector<std::string> argv_s = {COHORT_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  Child c;
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return c;
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  c.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  c.peak_rss = int64_t(ru.ru_maxrss) * 1024;
  std::ifstream f(out_path);
  std::stringstream ss;
  ss << f.rdbuf();
  c.out = ss.str();
  return c;
}

// The binary on `dir`: exit 2, one line naming `culprit`, and peak memory
// within 64 MiB of the same binary refusing a missing directory.
void expect_bounded_refusal(const TempDir& dir, const std::string& culprit) {
  const std::vector<std::string> train = {"train", "--data",    "mnist", "--epochs",
                                          "1",     "--threads", "1",     "--data-dir"};
  auto args = [&](const std::string& d) {
    auto a = train;
    a.push_back(d);
    return a;
  };
  Child base = run_cohort(args(dir.file("missing")), dir.file("base.out"));
  Child bomb = run_cohort(args(dir.str()), dir.file("bomb.out"));
  EXPECT_EQ(base.code, 2) << base.out;
  EXPECT_EQ(bomb.code, 2) << bomb.out;
  EXPECT_NE(bomb.out.find(culprit), std::string::npos) << bomb.out;
  EXPECT_EQ(std::count(bomb.out.begin(), bomb.out.end(), '\n'), 1) << bomb.out;
  EXPECT_LT(bomb.peak_rss - base.peak_rss, 64 * kMiB)
      << "peak " << bomb.peak_rss / kMiB << " MiB vs " << base.peak_rss / kMiB << " MiB";
  std::printf("gzip bomb: peak RSS %lld MiB (baseline %lld MiB)\n",
              (long long)(bomb.peak_rss / kMiB), (long long)(base.peak_rss / kMiB));
}

// The bomb: 1e8 images of 28x28 claimed (78 GB), 1 GiB of zeros present.
TEST(IdxBomb, ClaimBeyondWhatTheGzipCanHoldIsRefused) {
  TempDir dir;
  write_bomb_dir(dir, 100'000'000);
  expect_bounded_refusal(dir, "train-images-idx3-ubyte.gz");
  testing::expect_input_error([&] { read_idx_images(dir.file("train-images-idx3-ubyte.gz")); },
                              "train-images-idx3-ubyte.gz");
}

// A claim the file could hold (1.3e6 images, 1.02 GB) with 1 GiB of zeros
// behind it: found to be trailing data while streaming, nothing held.
TEST(IdxBomb, MoreDataThanClaimedIsRefusedWhileStreaming) {
  TempDir dir;
  write_bomb_dir(dir, 1'300'000);
  expect_bounded_refusal(dir, "train-images-idx3-ubyte.gz");
}

// Headers that disagree are refused before either body is read.
TEST(IdxBomb, ImageAndLabelCountsMustAgreeFirst) {
  TempDir dir;
  write_gz_bomb(dir, "train-images-idx3-ubyte.gz", testing::idx_images(1'300'000, 28, 28, {}),
                1024);
  testing::write_gz(dir.file("train-labels-idx1-ubyte.gz"), testing::idx_labels(2, {1, 2}));
  testing::expect_input_error([&] { load_idx_dir(dir.str(), "mnist"); },
                              "train-labels-idx1-ubyte.gz");
}

}  // namespace
}  // namespace cohort
