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
