// `cohort bench tune`: every candidate (P processes x T threads each, batch B
// per process) is one `cohort bench step --workers P --threads T --batch B`
// subprocess, so each runs in fresh processes as a user's job would. They are
// compared on the whole job's images/s (bench step counts every rank's
// images): the CPU-cluster study's question, one process with T threads
// against P processes with T/P threads each.
#include "bench/tune.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/cpus.h"
#include "bench/flag_lists.h"
#include "bench/run_log.h"
#include "bench/subprocess.h"
#include "core/error.h"
#include "nn/models/zoo.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

void add_tune_options(CLI::App& cmd, TuneConfig& cfg) {
  cmd.add_option("--model", cfg.model, "model to tune");
  cmd.add_option("--processes", cfg.processes, "data-parallel processes, comma list (1,2,4)");
  cmd.add_option("--threads", cfg.threads, "threads per process, comma list (1,2)");
  cmd.add_option("--batch", cfg.batch, "batch per process, comma list (32,64,128,256)");
  cmd.add_option("--steps", cfg.steps, "timed training steps per candidate");
  cmd.add_option("--warmup", cfg.warmup, "untimed steps before them");
  cmd.add_option("--rounds", cfg.rounds,
                 "measure every candidate this many times, round by round, and keep its best");
  cmd.add_option("--cpus", cfg.cpus,
                 "largest processes x threads tried (default: the CPUs this process may use)");
}

namespace {

struct Candidate {
  int processes, threads, batch;  // batch per process
  double ips = 0;                 // whole job: every rank's images per second
  std::string error;              // non-empty: the run failed
};

// The flags' lists, sorted, without repeats.
struct Space {
  std::vector<int> processes, threads, batch;
};

// Sorted, without repeats.
std::vector<int> int_set(const std::string& s, const std::string& flag) {
  std::vector<int> v = parse_int_list(s, flag);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Every (processes, threads, batch) whose processes x threads fits in `cpus`;
// the pairs that do not are named on stderr.
std::vector<Candidate> candidates(const Space& space, int cpus) {
  std::vector<Candidate> cands;
  std::string skipped;
  for (int p : space.processes)
    for (int t : space.threads) {
      if (p * t > cpus) {
        skipped += (skipped.empty() ? "" : ", ") + std::to_string(p) + "x" + std::to_string(t);
        continue;
      }
      for (int b : space.batch) cands.push_back({p, t, b, 0.0, ""});
    }
  COHORT_INPUT_CHECK(!cands.empty(),
                     "--processes/--threads: no pair has processes x threads <= ", cpus,
                     " CPU(s) (--cpus sets the budget)");
  if (!skipped.empty())
    std::fprintf(stderr, "tune: skipping processes x threads %s (more than %d CPU(s))\n",
                 skipped.c_str(), cpus);
  return cands;
}

// Runs the candidate once; keeps the best rate over rounds, or the first failure.
void measure(Candidate& c, const TuneConfig& cfg, const fs::path& log) {
  std::vector<std::string> args = {self_exe(),
                                   "bench",
                                   "step",
                                   "--model",
                                   cfg.model,
                                   "--batch",
                                   std::to_string(c.batch),
                                   "--threads",
                                   std::to_string(c.threads),
                                   "--steps",
                                   std::to_string(cfg.steps),
                                   "--warmup",
                                   std::to_string(cfg.warmup)};
  if (c.processes > 1) {
    args.push_back("--workers");
    args.push_back(std::to_string(c.processes));
  }
  int rc = 0;
  const std::string out = run_capture(args, log, &rc);
  const auto s = last_json_line(out, [](const auto& j) { return j.value("event", "") == "bench"; });
  const double ips = s.value("images_per_second", 0.0);
  if (rc == 0 && ips > 0) {
    c.ips = std::max(c.ips, ips);
    return;
  }
  c.ips = 0;
  c.error = "exit " + std::to_string(rc);
  const std::string why = read_log_tail(log).last;
  if (!why.empty()) c.error += ": " + why;
}

void print_table(const std::vector<Candidate>& cands, const std::string& model, int cpus,
                 const fs::path& logs) {
  const double best = cands.front().ips;
  std::printf("%s on %d CPU(s), fastest first (images/s of the whole job):\n", model.c_str(), cpus);
  std::printf("%10s %8s %6s %13s %11s %11s\n", "processes", "threads", "batch", "global batch",
              "images/s", "vs fastest");
  for (const Candidate& c : cands) {
    std::printf("%10d %8d %6d %13d ", c.processes, c.threads, c.batch, c.batch * c.processes);
    if (c.error.empty())
      std::printf("%11.0f %10.2fx\n", c.ips, c.ips / best);
    else
      std::printf("  failed: %s\n", c.error.c_str());
  }
  if (best > 0)
    std::printf("best: %d process(es) x %d thread(s), batch %d per process: %.0f images/s\n",
                cands.front().processes, cands.front().threads, cands.front().batch, best);
  if (!cands.back().error.empty()) std::printf("logs of the failed runs: %s\n", logs.c_str());
}

ordered_json to_json(const Candidate& c, double best) {
  ordered_json j = {{"processes", c.processes},
                    {"threads", c.threads},
                    {"batch", c.batch},
                    {"global_batch", c.batch * c.processes}};
  if (c.error.empty()) {
    j["images_per_second"] = c.ips;
    j["ratio"] = c.ips / best;
  } else {
    j["error"] = c.error;
  }
  return j;
}

// The flags, checked.
Space check_flags(const TuneConfig& cfg) {
  nn::find_model(cfg.model);  // throws the zoo's one-line error naming --model
  Space space{int_set(cfg.processes, "--processes"), int_set(cfg.threads, "--threads"),
              int_set(cfg.batch, "--batch")};
  COHORT_INPUT_CHECK(cfg.steps >= 1, "--steps must be at least 1, got ", cfg.steps);
  COHORT_INPUT_CHECK(cfg.warmup >= 1, "--warmup must be at least 1, got ", cfg.warmup);
  COHORT_INPUT_CHECK(cfg.rounds >= 1, "--rounds must be at least 1, got ", cfg.rounds);
  COHORT_INPUT_CHECK(cfg.cpus >= 0, "--cpus must be 0 (this machine's) or more, got ", cfg.cpus);
#if !COHORT_WITH_MPI
  COHORT_INPUT_CHECK(space.processes.back() == 1, "--processes ", space.processes.back(),
                     ": this build has no MPI (configure with -DCOHORT_MPI=ON)");
#endif
  return space;
}

// Measures every candidate that has not failed, cfg.rounds times. Round by
// round rather than candidate by candidate, so a burst of load from elsewhere
// on the machine costs one measurement of each, not all of one.
void run_rounds(std::vector<Candidate>& cands, const TuneConfig& cfg, const fs::path& logs) {
  for (int round = 1; round <= cfg.rounds; ++round)
    for (size_t i = 0; i < cands.size(); ++i) {
      Candidate& c = cands[i];
      if (!c.error.empty()) continue;
      const fs::path log = logs / ("candidate-" + std::to_string(i) + ".log");
      std::fprintf(stderr,
                   "tune [round %d/%d, %zu/%zu] %s: %d process(es) x %d thread(s), batch %d ... ",
                   round, cfg.rounds, i + 1, cands.size(), cfg.model.c_str(), c.processes,
                   c.threads, c.batch);
      std::fflush(stderr);
      measure(c, cfg, log);
      if (c.error.empty())
        std::fprintf(stderr, "%.0f images/s\n", c.ips);
      else
        std::fprintf(stderr, "failed (%s)\n", c.error.c_str());
    }
}

// The one JSON line of the result; `cands` fastest first.
ordered_json result_json(const std::vector<Candidate>& cands, const TuneConfig& cfg, int cpus,
                         const fs::path& logs) {
  const Candidate& top = cands.front();
  ordered_json best = nullptr;
  if (top.error.empty())
    best = {{"processes", top.processes},
            {"threads", top.threads},
            {"batch", top.batch},
            {"images_per_second", top.ips}};
  ordered_json all = ordered_json::array();
  for (const Candidate& c : cands) all.push_back(to_json(c, top.ips));
  ordered_json out = {{"event", "tune"},    {"model", cfg.model},   {"cpus", cpus},
                      {"steps", cfg.steps}, {"rounds", cfg.rounds}, {"best", best},
                      {"candidates", all}};
  if (!cands.back().error.empty()) out["logs"] = logs.string();
  return out;
}

}  // namespace

int run_tune(const TuneConfig& cfg) {
  const Space space = check_flags(cfg);
  const int cpus = cfg.cpus > 0 ? cfg.cpus : usable_cpus();
  std::vector<Candidate> cands = candidates(space, cpus);
  const fs::path logs = fs::temp_directory_path() / ("cohort-tune-" + std::to_string(getpid()));
  fs::create_directories(logs);
  run_rounds(cands, cfg, logs);

  // Fastest first; failed ones (ips 0) last, in the order they ran.
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate& a, const Candidate& b) { return a.ips > b.ips; });
  const bool any = cands.front().error.empty();
  const bool all_ok = cands.back().error.empty();
  print_table(cands, cfg.model, cpus, logs);
  std::printf("%s\n", result_json(cands, cfg, cpus, logs).dump().c_str());
  std::fflush(stdout);
  if (all_ok) fs::remove_all(logs);
  if (!any) {
    std::fprintf(stderr, "cohort: bench tune: every candidate failed (logs in %s)\n", logs.c_str());
    return 1;
  }
  return 0;
}

}  // namespace cohort
