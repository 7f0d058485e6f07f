// Commits for elastic restarts: naming, finding the newest complete one,
// and keeping only the newest few (see commits.h).
#include "train/commits.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"

namespace cohort {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "commit-";
constexpr const char* kSuffix = ".safetensors";

// The updates count of a commit's file name, or -1 where `name` is not one
// (temp files "F.tmp.PID" and shards "F.optim-..." are not).
int64_t commit_number(const std::string& name) {
  const size_t p = std::char_traits<char>::length(kPrefix);
  const size_t s = std::char_traits<char>::length(kSuffix);
  if (name.size() <= p + s || name.compare(0, p, kPrefix) != 0 ||
      name.compare(name.size() - s, s, kSuffix) != 0)
    return -1;
  const std::string digits = name.substr(p, name.size() - p - s);
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// The commits in D, newest first.
std::vector<int64_t> list_commits(const std::string& dir) {
  std::vector<int64_t> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t n = commit_number(e.path().filename().string());
    if (n >= 0) found.push_back(n);
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

void notice(bool print, const std::string& line) {
  if (print) std::fprintf(stderr, "cohort: note: %s\n", line.c_str());
}

}  // namespace

std::string commit_path(const std::string& dir, int64_t updates) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012lld%s", kPrefix, static_cast<long long>(updates),
                kSuffix);
  return (fs::path(dir) / name).string();
}

void prepare_commit_dir(const std::string& dir) {
  COHORT_INPUT_CHECK(!dir.empty(), "--checkpoint-dir must not be empty");
  std::error_code ec;
  fs::create_directories(dir, ec);  // an existing folder is no error; a racing rank's neither
  COHORT_INPUT_CHECK(fs::is_directory(dir), "--checkpoint-dir ", dir,
                     fs::exists(dir) ? " is a file, not a folder"
                                     : " cannot be created: " + ec.message());
}

std::string newest_commit(const std::string& dir, bool print) {
  for (int64_t n : list_commits(dir)) {
    const std::string path = commit_path(dir, n);
    std::string why;
    try {
      const SafetensorsIndex index = index_safetensors(path);  // the header and the file's size
      if (index.metadata.count("epoch") && index.metadata.count("updates")) return path;
      why = "is not a run checkpoint";
    } catch (const std::exception& e) {
      why = "does not read (" + one_line(e.what()) + ")";
    }
    // Removed, so that it never counts among the commits kept.
    notice(print, "--resume auto: " + path + " " + why + "; passed over and removed");
    if (print) std::remove(path.c_str());
  }
  return "";
}

std::string resolve_resume_auto(const std::string& dir, comm::Communicator* comm) {
  const bool root = !comm || comm->rank() == 0;
  int64_t chosen = -1;  // the commit's number, so every rank opens the same file
  if (root) {
    const std::string path = newest_commit(dir, true);
    if (!path.empty()) chosen = commit_number(fs::path(path).filename().string());
  }
  if (comm) comm->broadcast(&chosen, sizeof chosen, 0);
  if (chosen < 0) {
    notice(root, "--resume auto: no commit in " + dir + "; starting afresh");
    return "";
  }
  return commit_path(dir, chosen);
}

void prune_commits(const std::string& dir, int keep) {
  std::vector<int64_t> commits = list_commits(dir);
  if (commits.size() > size_t(keep)) commits.resize(size_t(keep));
  std::vector<std::string> kept;
  for (int64_t n : commits) kept.push_back(fs::path(commit_path(dir, n)).filename().string());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, std::char_traits<char>::length(kPrefix), kPrefix) != 0) continue;
    const bool keep_it = std::any_of(kept.begin(), kept.end(), [&](const std::string& k) {
      return name == k || name.compare(0, k.size() + 7, k + ".optim-") == 0;
    });
    if (!keep_it) fs::remove(e.path(), ec);  // best effort
  }
}

int remove_commits(const std::string& dir) {
  const int n = int(list_commits(dir).size());
  prune_commits(dir, 0);
  return n;
}

CommitPlan::CommitPlan(int64_t every, int64_t updates) {
  auto_ = every == kCommitAuto;
  every_ = auto_ ? 0 : every;
  if (every_ > 0) next_ = (updates / every_ + 1) * every_;
  if (auto_) next_ = updates + kCommitProbe;
}

bool CommitPlan::due(int64_t updates, double seconds) {
  seconds_ += seconds;
  ++timed_;
  return next_ > 0 && updates >= next_;
}

void CommitPlan::next(int64_t updates, double commit_s, comm::Communicator* comm) {
  if (!auto_) {
    next_ = (updates / every_ + 1) * every_;
    return;
  }
  const double step_s = std::max(1e-6, seconds_ / double(std::max<int64_t>(timed_, 1)));
  double k = std::max(std::ceil(kCommitSeconds / step_s), std::ceil(commit_s / (kCommitShare * step_s)));
  int64_t every = int64_t(std::min(k, 1e12));
  if (comm) comm->broadcast(&every, sizeof every, 0);
  every_ = std::max<int64_t>(1, every);
  next_ = updates + every_;
}

ProgressBeacon::ProgressBeacon(const char* env, bool writer) {
  const char* path = std::getenv(env);
  if (!writer || !path || !*path) return;
  const int fd = ::open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0) return;  // only a report's detail: the run goes on without it
  if (::ftruncate(fd, sizeof(int64_t)) == 0) {
    void* p = ::mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) slot_ = static_cast<volatile int64_t*>(p);
  }
  ::close(fd);
}

ProgressBeacon::~ProgressBeacon() {
  if (slot_) ::munmap(const_cast<int64_t*>(slot_), sizeof(int64_t));
}

}  // namespace cohort
