// Commits of a training run for elastic restarts (`--commit-every K`,
// `--checkpoint-dir D`, `--resume auto`). A commit is a run checkpoint
// (train/resume.h) named D/commit-<updates>.safetensors, with its optimizer
// shard files beside it under ZeRO. save_run_checkpoint writes it atomically:
// F's rename is the commit point, so a run killed at any moment leaves every
// earlier commit whole, and at worst temp files and orphan shards, which the
// next commit removes. The newest kCommitsKept are kept.
#pragma once
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "train/config.h"

namespace cohort {

constexpr int kCommitsKept = 2;

// --commit-every auto (the default under --elastic): about every
// kCommitSeconds of training, so a failure redoes ~5 s on average (beside a
// restart's ~3-4 s), and never so often that committing takes more than
// kCommitShare of the training time; the first commit comes after
// kCommitProbe updates, which time the step.
constexpr int64_t kCommitAuto = -1;
constexpr double kCommitSeconds = 10, kCommitShare = 0.01;
constexpr int64_t kCommitProbe = 3;

// When commits within an epoch fall: every K updates (--commit-every K:
// at the multiples of K), or as --commit-every auto says, from rank 0's
// clock (every rank takes its choice: the ranks step in lockstep, so a
// commit's collective save is where they agree).
class CommitPlan {
 public:
  // `every`: --commit-every (0: off); `updates`: the updates done so far.
  CommitPlan(int64_t every, int64_t updates);
  // An update ended, `seconds` of training after the one before (commits
  // excluded): whether a commit is due at `updates`.
  bool due(int64_t updates, double seconds);
  // A due commit was taken (in `commit_s` seconds; 0: skipped, the epoch's
  // last step) at `updates`: plans the next. Collective under auto.
  void next(int64_t updates, double commit_s, comm::Communicator* comm);
  // The interval in force (updates; 0: auto, not chosen yet).
  int64_t every() const { return every_; }

 private:
  bool auto_ = false;
  int64_t every_ = 0, next_ = 0;  // next_: the update the next commit falls at (0: none)
  double seconds_ = 0;            // training timed, commits excluded
  int64_t timed_ = 0;             // updates timed
};

// Under the elastic supervisor (parallel/elastic.h), rank 0 keeps the update
// it has reached in a small shared file (the path in `env`), so the
// supervisor can say how many steps a failure made it redo.
class ProgressBeacon {
 public:
  ProgressBeacon(const char* env, bool writer);
  ~ProgressBeacon();
  ProgressBeacon(const ProgressBeacon&) = delete;
  ProgressBeacon& operator=(const ProgressBeacon&) = delete;
  void set(int64_t updates) {
    if (slot_) *slot_ = updates;
  }

 private:
  volatile int64_t* slot_ = nullptr;
};

// D/commit-<updates, 12 digits>.safetensors.
std::string commit_path(const std::string& dir, int64_t updates);

// Creates D where missing; InputError naming --checkpoint-dir where it is a
// file or cannot be created. Every rank calls it (each judges alike).
void prepare_commit_dir(const std::string& dir);

// The newest complete commit in D ("" where none): the highest-numbered
// commit file whose header reads as a run checkpoint; newer ones that do not
// read are passed over with a notice and, where `print` (rank 0), removed,
// so they never count among the commits kept. Temp files and orphan shard
// files never match a commit's name.
std::string newest_commit(const std::string& dir, bool print);

// --resume auto: rank 0 picks newest_commit and every rank takes its choice
// (collective where comm is non-null); "" with a one-line notice where D holds none.
std::string resolve_resume_auto(const std::string& dir, comm::Communicator* comm);

// Removes from D everything a commit left that is not one of the newest
// `keep` commits or their shard files: older commits, their shards, temp
// files and orphan shards of interrupted commits. Rank 0, between commits.
void prune_commits(const std::string& dir, int keep);

// Every commit file in D and what belongs to it (a run that starts afresh).
// Returns how many commits were removed.
int remove_commits(const std::string& dir);

}  // namespace cohort
