// `cohort bench strategies`: one row per strategy, each a `cohort train --log
// jsonl` subprocess (or the PyTorch peer's `train`) at the same global batch G
// on the same CPUs; a row that fails is kept as "failed" with its one-line
// reason and the table goes on. Writes OUT/{results.jsonl,report.md,logs/}.
#include "bench/strategies.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cpus.h"
#include "bench/flag_lists.h"
#include "bench/peer.h"
#include "bench/progress.h"
#include "bench/run_log.h"
#include "bench/strategies_table.h"
#include "bench/subprocess.h"
#include "core/clock.h"
#include "core/error.h"
#include "nn/models/zoo.h"
#include "parallel/registry.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

void add_strategies_options(CLI::App& cmd, StrategiesConfig& cfg) {
  cmd.add_option("--model", cfg.model, "model to train with every strategy");
  cmd.add_option("--data", cfg.data, "synthetic | fashion-mnist | mnist | cifar10");
  cmd.add_option("--data-dir", cfg.data_dir, "folder holding the dataset files");
  cmd.add_option(
      "--batch", cfg.batch,
      "global batch of every row, split over data-parallel ranks (default 128; 64 for ResNets)");
  cmd.add_option("--limit", cfg.limit, "training images per epoch (default: by model)");
  cmd.add_option("--epochs", cfg.epochs);
  cmd.add_option("--peer", cfg.peer, "pytorch | none");
  cmd.add_option("--only", cfg.only, "comma list of rows (single, dp, mp, pytorch-ddp, ...)");
  cmd.add_option("--out", cfg.out, "results folder (default results/strategies-MODEL)");
  cmd.add_option("--balance", cfg.balance, "stage cuts of mp, pp, hybrid: params | time");
  cmd.add_option("--cores", cfg.cores, "CPUs a row's ranks share (default: this machine's)");
  cmd.add_option("--row-timeout", cfg.row_timeout, "seconds before a row is stopped as failed");
}

namespace {

// A row of the table, as its strategy family declares it (parallel/registry.h).
using Row = BenchRow;


// Enough images for two steady epochs, few enough to finish in minutes on 2
// vCPUs (a ResNet row also spends about a minute on its one 2,000-image test pass).
int default_limit(const std::string& model) {
  if (model == "mnist-small" || model == "lenet") return 8192;
  if (model == "mnist-large") return 2048;
  if (model.find("resnet") != std::string::npos) return 256;
  return 1024;
}

// 128, but ResNets train at 64: cohort's ResNet-50 peaks near 0.12 GB per image
// of batch at 32x32 (15 GB at 128), so rows of 2-4 ranks at 128 outgrow 24 GB.
int default_batch(const std::string& model) {
  return model.find("resnet") != std::string::npos ? 64 : 128;
}

// The flags that do not depend on the rows, checked.
void check_flags(const StrategiesConfig& cfg) {
  COHORT_INPUT_CHECK(cfg.balance == "params" || cfg.balance == "time",
                     "--balance: unknown choice '", cfg.balance, "' (valid: params, time)");
  nn::find_model(cfg.model);  // throws the zoo's one-line error naming --model
  COHORT_INPUT_CHECK(cfg.data == "synthetic" || cfg.data == "fashion-mnist" ||
                         cfg.data == "mnist" || cfg.data == "cifar10",
                     "--data: unknown dataset '", cfg.data,
                     "' (valid: synthetic, fashion-mnist, mnist, cifar10)");
  COHORT_INPUT_CHECK(cfg.epochs >= 1, "--epochs must be at least 1, got ", cfg.epochs);
  COHORT_INPUT_CHECK(cfg.limit >= -1, "--limit must be 0 (the whole set) or more, got ", cfg.limit);
  COHORT_INPUT_CHECK(cfg.cores >= 0, "--cores must be 0 (this machine's) or more, got ", cfg.cores);
  COHORT_INPUT_CHECK(cfg.row_timeout >= 1, "--row-timeout must be at least 1 s, got ",
                     cfg.row_timeout);
  COHORT_INPUT_CHECK(cfg.peer == "pytorch" || cfg.peer == "none", "--peer: unknown peer '",
                     cfg.peer, "' (valid: pytorch, none)");
}

// The rows --only names, in its order.
std::vector<Row> only_rows(const std::vector<Row>& rows, const StrategiesConfig& cfg) {
  std::vector<Row> picked;
  for (auto& name : parse_str_list(cfg.only)) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.name == name; });
    std::string valid;
    for (auto& r : rows) valid += (valid.empty() ? "" : ", ") + r.name;
    COHORT_INPUT_CHECK(it != rows.end(), "--only: unknown row '", name, "' (valid: ", valid, ")");
    COHORT_INPUT_CHECK(it->engine == "cohort" || cfg.peer == "pytorch", "--only ", name,
                       " needs --peer pytorch");
    picked.push_back(*it);
  }
  COHORT_INPUT_CHECK(!picked.empty(), "--only: empty list");
  return picked;
}

// What the chosen rows ask of --batch and of the peer, checked.
void check_rows(const std::vector<Row>& rows, const StrategiesConfig& cfg) {
  COHORT_INPUT_CHECK(cfg.batch >= 1, "--batch must be at least 1, got ", cfg.batch);
  for (auto& r : rows) {
    const int unit = r.data_ranks * r.micro;
    COHORT_INPUT_CHECK(cfg.batch % unit == 0, "--batch ", cfg.batch, ": row ", r.name,
                       " splits it over ", r.data_ranks, " data-parallel rank(s) x ", r.micro,
                       " micro-batch(es), so it must be a multiple of ", unit);
  }
  bool peer_rows = false;
  for (auto& r : rows) peer_rows |= r.engine == "pytorch";
  if (peer_rows) {
    COHORT_INPUT_CHECK(
        cfg.data == "synthetic" || cfg.data == "fashion-mnist",
        "--peer pytorch: --data must be synthetic or fashion-mnist (or --peer none)");
    COHORT_INPUT_CHECK(peer_available(), "--peer pytorch: ", peer_python(),
                       " cannot import torch (or ", peer_script(), " is missing)");
  }
}

// The flags, checked; the rows to run, in table order.
std::vector<Row> select_rows(const StrategiesConfig& cfg) {
  check_flags(cfg);
  std::vector<Row> rows = StrategyRegistry().bench_rows();
  if (!cfg.only.empty()) {
    rows = only_rows(rows, cfg);
  } else if (cfg.peer == "none") {
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [](const Row& r) { return r.engine == "pytorch"; }),
               rows.end());
  }
  check_rows(rows, cfg);
  return rows;
}

// The command a row runs, wrapped in coreutils `timeout` so a stuck row ends.
std::vector<std::string> row_command(const Row& r, const StrategiesConfig& cfg, int limit,
                                     int threads) {
  const int batch = cfg.batch / r.data_ranks;
  std::vector<std::string> args = {"timeout", "--kill-after=20", std::to_string(cfg.row_timeout)};
  if (r.engine == "cohort") {
    args.push_back(self_exe());
    // One test pass at the end, as the peer does (epoch times exclude it either way).
    for (const char* a : {"train", "--log", "jsonl", "--eval", "last"}) args.push_back(a);
  } else {
    for (const std::string& a : {peer_python(), peer_script(), std::string("train")})
      args.push_back(a);
  }
  const std::vector<std::string> common = {"--model",   cfg.model,
                                           "--data",    cfg.data,
                                           "--epochs",  std::to_string(cfg.epochs),
                                           "--limit",   std::to_string(limit),
                                           "--batch",   std::to_string(batch),
                                           "--threads", std::to_string(threads)};
  args.insert(args.end(), common.begin(), common.end());
  if (!cfg.data_dir.empty()) {
    args.push_back("--data-dir");
    args.push_back(cfg.data_dir);
  }
  args.insert(args.end(), r.flags.begin(), r.flags.end());
  if (std::find(r.flags.begin(), r.flags.end(), "--stages") != r.flags.end()) {
    args.push_back("--balance");
    args.push_back(cfg.balance);
  }
  return args;
}

// A row's record before it runs: what it is.
ordered_json row_record(const Row& r, const StrategiesConfig& cfg, int limit, int threads) {
  ordered_json rec = {{"name", r.name},
                      {"label", r.label},
                      {"engine", r.engine},
                      {"ranks", r.ranks},
                      {"threads_per_rank", threads},
                      {"global_batch", cfg.batch},
                      {"batch_per_rank", cfg.batch / r.data_ranks},
                      {"model", cfg.model},
                      {"data", cfg.data},
                      {"limit", limit},
                      {"epochs", cfg.epochs}};
  if (r.engine == "cohort") rec["flags"] = r.flags;
  if (!r.note.empty()) rec["note"] = r.note;
  return rec;
}

// Why a run failed: timed out, or its exit status and the log's reason.
std::string row_error(const TrainRun& run, const StrategiesConfig& cfg, const fs::path& log) {
  const int rc = run.rc;
  const bool timed_out = rc == 124 || (rc == 137 && run.wall_seconds >= cfg.row_timeout);
  if (timed_out) return "timed out after " + std::to_string(cfg.row_timeout) + " s";
  return "exit " + std::to_string(rc) + (rc == 137 ? " (SIGKILL: out of memory?)" : "") + ": " +
         read_log_tail(log).failure();
}

// The summary's figures, into an ok row's record.
void add_summary(ordered_json& rec, const json& s, const StrategiesConfig& cfg) {
  const SummaryFigures f = summary_figures(s);
  const json& ei = f.epoch_images_per_second;
  rec["epoch_seconds"] = f.epoch_seconds;
  rec["epoch_images_per_second"] = ei;
  // The last epoch is the steady one (the first pays for warm-up).
  rec["images_per_second"] =
      ei.empty() ? s.value("images_per_second", 0.0) : ei.back().get<double>();
  rec["mean_images_per_second"] = s.value("images_per_second", 0.0);
  if (f.step) {
    rec["step_ms"] = {{"total", 1e3 * f.step->total},
                      {"compute", 1e3 * f.step->compute},
                      {"communication", 1e3 * f.step->communication},
                      {"data", 1e3 * f.step->data}};
    if (f.step->total > 0) rec["utilization"] = f.step->compute / f.step->total;
  }
  if (s.value("communication_in_compute", false)) rec["communication_in_compute"] = true;
  for (const char* k :
       {"peak_memory_mb", "peak_memory_mb_per_rank", "test_accuracy", "world_size", "torch"})
    if (s.contains(k) && !s[k].is_null()) rec[k] = s[k];
  if (s.contains("global_batch") && s["global_batch"] != cfg.batch)
    rec["reported_global_batch"] = s["global_batch"];
  for (const char* k : {"pipeline", "ps"})
    if (s.contains(k) && !s[k].is_null()) rec[k] = s[k];
}

// Runs one row; its record for results.jsonl.
ordered_json run_row(const Row& r, const StrategiesConfig& cfg, int limit, int cores,
                     const fs::path& dir) {
  const int threads = r.own_threads ? cores : threads_per_rank(r.ranks, cores);
  ordered_json rec = row_record(r, cfg, limit, threads);
  const fs::path log = dir / "logs" / (r.name + ".log");
  fs::remove(log);
  const TrainRun run = run_training(row_command(r, cfg, limit, threads), log);
  rec["wall_seconds"] = run.wall_seconds;
  if (!run.ok()) {
    rec["status"] = "failed";
    rec["error"] = row_error(run, cfg, log);
    return rec;
  }
  rec["status"] = "ok";
  add_summary(rec, run.summary, cfg);
  return rec;
}

// Ratios against cohort's single process and, on PyTorch rows, cohort's match;
// recs[i] is rows[i]'s record (recs may still be short of the last rows).
void add_ratios(std::vector<ordered_json>& recs, const std::vector<Row>& rows) {
  auto ips = [&](const std::string& name) {
    for (auto& r : recs)
      if (r["name"] == name && r["status"] == "ok") return r["images_per_second"].get<double>();
    return 0.0;
  };
  const double single = ips("single");
  for (size_t i = 0; i < recs.size(); ++i) {
    auto& r = recs[i];
    if (r["status"] != "ok") continue;
    const double mine = r["images_per_second"].get<double>();
    if (single > 0) r["vs_single"] = mine / single;
    const double match = rows[i].versus.empty() ? 0 : ips(rows[i].versus);
    if (match > 0 && mine > 0) {
      r["cohort_row"] = rows[i].versus;
      r["cohort_vs_pytorch"] = match / mine;
    }
  }
}

// The 1-minute load average, as /proc/loadavg gives it.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  in >> first;
  return first.empty() ? "unknown" : first;
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// Runs the rows in table order and counts those that failed. Every record so
// far is written after each row, so a stopped run keeps what it measured.
std::vector<ordered_json> run_rows(const std::vector<Row>& rows, const StrategiesConfig& cfg,
                                   int limit, int cores, const fs::path& dir, int* failed) {
  const Timer timer;
  std::vector<ordered_json> recs;
  for (size_t i = 0; i < rows.size(); ++i) {
    progress("strategies", i, rows.size(), double(i), double(rows.size()), timer.seconds(),
             "running " + rows[i].name);
    recs.push_back(run_row(rows[i], cfg, limit, cores, dir));
    if (recs.back()["status"] != "ok") {
      ++*failed;
      std::fprintf(stderr, "strategies: %s failed: %s\n", rows[i].name.c_str(),
                   recs.back()["error"].get<std::string>().c_str());
    }
    add_ratios(recs, rows);
    std::ofstream jl(dir / "results.jsonl");
    for (auto& r : recs) jl << r.dump() << "\n";
  }
  progress("strategies", rows.size(), rows.size(), 1, 1, timer.seconds(), "done");
  return recs;
}

// The command that repeats the run, for report.md.
std::string command_line(const StrategiesConfig& cfg, int limit) {
  return "cohort bench strategies --model " + cfg.model + " --data " + cfg.data + " --batch " +
         std::to_string(cfg.batch) + " --limit " + std::to_string(limit) + " --epochs " +
         std::to_string(cfg.epochs) + " --peer " + cfg.peer + " --balance " + cfg.balance +
         (cfg.only.empty() ? "" : " --only " + cfg.only);
}

// report.md, then the table and one JSON line on stdout.
void write_outputs(const std::vector<ordered_json>& recs, const TableInfo& info, int failed,
                   const fs::path& dir) {
  const std::string table = strategies_table(recs, info);
  std::ofstream(dir / "report.md") << strategies_report(recs, info, table);
  std::printf("%s", table.c_str());
  ordered_json ev = {{"event", "strategies"}, {"model", info.model},
                     {"data", info.data},      {"global_batch", info.global_batch},
                     {"limit", info.limit},    {"epochs", info.epochs},
                     {"cores", info.cores},    {"rows", recs},
                     {"failed", failed},       {"out", dir.string()}};
  std::printf("%s\n", ev.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int run_strategies(const StrategiesConfig& flags) {
  StrategiesConfig cfg = flags;
  if (cfg.batch == 0) cfg.batch = default_batch(cfg.model);
  const std::vector<Row> rows = select_rows(cfg);
  const int limit = cfg.limit >= 0 ? cfg.limit : default_limit(cfg.model);
  const int cores =
      cfg.cores > 0 ? cfg.cores : usable_cpus();
  const fs::path dir =
      cfg.out.empty() ? fs::path("results") / ("strategies-" + cfg.model) : fs::path(cfg.out);
  fs::create_directories(dir / "logs");
  std::fprintf(stderr,
               "cohort bench strategies: %s, global batch %d, %d images x %d epoch(s), "
               "%zu row(s) on %d CPU(s) -> %s\n",
               cfg.model.c_str(), cfg.batch, limit, cfg.epochs, rows.size(), cores, dir.c_str());

  const std::string load_before = load_average();
  int failed = 0;
  const std::vector<ordered_json> recs = run_rows(rows, cfg, limit, cores, dir, &failed);
  const TableInfo info{cfg.model, cfg.data,  cfg.batch,   limit,         cfg.epochs,
                       cores,     command_line(cfg, limit), now_utc(), load_before,
                       load_average()};
  write_outputs(recs, info, failed, dir);
  std::fprintf(stderr,
               "cohort bench strategies: %zu row(s), %d failed; wrote %s/{results.jsonl,"
               "report.md}\n",
               rows.size(), failed, dir.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace cohort
