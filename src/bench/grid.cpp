// `cohort bench grid`: each point is one `cohort train --log jsonl` subprocess
// (mpirun for N > 1 through `--workers N`), optionally followed by the PyTorch
// peer's `train` on the same point. A progress bar with ETA goes to stderr.
#include "bench/grid.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "bench/flag_lists.h"
#include "bench/peer.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/run_log.h"
#include "bench/subprocess.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/error.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// A grid-file value as a comma string: a string, an integer, or a flat array
// of them. Anything else is refused by name; nested arrays too, which also
// keeps a file of 300,000 nested '[' from recursing off the stack.
static std::string as_list(const std::string& file, const char* key, const json& v) {
  auto item = [&](const json& e) {
    if (e.is_string()) return e.get<std::string>();
    if (e.is_number_integer()) return std::to_string(e.get<long long>());
    throw InputError("--grid: " + file + ": '" + key +
                     "' must be a string, an integer or a list of them");
  };
  if (!v.is_array()) return item(v);
  std::string s;
  for (auto& e : v) {
    if (!s.empty()) s += ',';
    s += item(e);
  }
  return s;
}

static fs::path grid_file(const std::string& grid) {
  fs::path p(grid);
  if (fs::exists(p) && fs::is_regular_file(p)) return p;
  fs::path named = fs::path(COHORT_SOURCE_DIR) / "bench" / "grids" / (grid + ".json");
  COHORT_INPUT_CHECK(fs::exists(named), "--grid: no grid file '", grid, "' (looked for ",
                     named.string(), ")");
  return named;
}

namespace {

// The grid file's values, as comma strings like the flags.
GridFlags read_grid_file(const std::string& grid) {
  const fs::path p = grid_file(grid);
  std::ifstream in(p);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw InputError("--grid: " + p.string() + " is not valid JSON");
  }
  COHORT_INPUT_CHECK(j.is_object(), "--grid: ", p.string(), " must hold a JSON object");
  GridFlags f;
  auto get = [&](const char* key, std::string& dst) {
    if (j.contains(key) && !j[key].is_null()) dst = as_list(p.string(), key, j[key]);
  };
  get("workers", f.workers);
  get("batch", f.batch);
  get("repeat", f.repeat);
  get("model", f.model);
  get("models", f.model);
  get("threads_per_rank", f.threads_per_rank);
  get("epochs", f.epochs);
  get("limit", f.limit);
  get("data", f.data);
  get("peer", f.peer);
  get("name", f.name);
  if (f.name.empty()) f.name = grid;
  return f;
}

// Every flag given replaces the grid file's value.
void apply_flags(GridFlags& f, const GridFlags& flags) {
  auto over = [](std::string& dst, const std::string& src) {
    if (!src.empty()) dst = src;
  };
  over(f.workers, flags.workers);
  over(f.batch, flags.batch);
  over(f.repeat, flags.repeat);
  over(f.model, flags.model);
  over(f.threads_per_rank, flags.threads_per_rank);
  over(f.epochs, flags.epochs);
  over(f.limit, flags.limit);
  over(f.data, flags.data);
  over(f.peer, flags.peer);
  over(f.name, flags.name);
  over(f.out, flags.out);
}

// "grid-YYYYmmdd-HHMMSS", local time.
std::string default_grid_name() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "grid-%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// The values parsed and checked; those not given keep GridSpec's defaults.
GridSpec parse_spec(const GridFlags& f) {
  GridSpec s;
  if (!f.workers.empty()) s.workers = parse_int_list(f.workers, "--workers");
  if (!f.batch.empty()) s.batch = parse_int_list(f.batch, "--batch");
  if (!f.repeat.empty()) s.repeat = parse_int_list(f.repeat, "--repeat");
  if (!f.threads_per_rank.empty())
    s.threads_per_rank = parse_int_list(f.threads_per_rank, "--threads-per-rank", 0);
  if (!f.model.empty()) s.models = parse_str_list(f.model);
  COHORT_INPUT_CHECK(!s.models.empty(), "--model: empty list");
  if (!f.epochs.empty()) s.epochs = parse_int_list(f.epochs, "--epochs").at(0);
  if (!f.limit.empty()) {
    // 0 is allowed: the whole training set.
    s.limit = f.limit == "0" ? 0 : parse_int_list(f.limit, "--limit").at(0);
  }
  if (!f.data.empty()) s.data = f.data;
  COHORT_INPUT_CHECK(s.data == "fashion-mnist" || s.data == "synthetic" || s.data == "mnist",
                     "--data: unknown dataset '", s.data, "' (valid: fashion-mnist, mnist, synthetic)");
  s.peer = f.peer == "none" ? "" : f.peer;
  COHORT_INPUT_CHECK(s.peer.empty() || s.peer == "pytorch", "--peer: unknown peer '", s.peer,
                     "' (valid: pytorch, none)");
  COHORT_INPUT_CHECK(s.peer.empty() || s.data != "mnist",
                     "--peer pytorch: --data must be fashion-mnist or synthetic");
  if (!f.out.empty()) s.out = f.out;
  s.name = f.name.empty() ? default_grid_name() : f.name;
  COHORT_INPUT_CHECK(s.name.find('/') == std::string::npos && s.name != "." && s.name != "..",
                     "--name: '", s.name, "' must be a plain folder name");
  return s;
}

}  // namespace

GridSpec resolve_grid(const GridFlags& flags) {
  GridFlags f;  // file values, then overridden by the flags
  if (!flags.grid.empty()) f = read_grid_file(flags.grid);
  apply_flags(f, flags);
  return parse_spec(f);
}

namespace {

struct Point {
  std::string model;
  int batch, repeat, threads, workers;
  int threads_setting;  // as the grid gave it: 0 = cores / ranks
};

// Workers innermost (ascending) so each 1-worker baseline runs right before its scaling points.
std::vector<Point> grid_points(const GridSpec& spec) {
  std::vector<Point> points;
  std::vector<int> workers = spec.workers;
  std::sort(workers.begin(), workers.end());
  for (auto& m : spec.models)
    for (int b : spec.batch)
      for (int r : spec.repeat)
        for (int t : spec.threads_per_rank)
          for (int w : workers)  // 0 threads: fill the machine, cores / ranks
            points.push_back({m, b, r, t > 0 ? t : threads_per_rank(w), w, t});
  return points;
}

// ETA weight: images seen (repeat) x model cost, x2 with the peer.
double weight(const Point& p, const GridSpec& spec) {
  return double(p.repeat) * (p.model == "mnist-large" ? 8.0 : 1.0) * (spec.peer.empty() ? 1 : 2);
}

std::string label_of(const Point& pt) {
  char label[160];
  std::snprintf(label, sizeof label, "%s batch %d repeat %d: %d rank(s) x %d thread(s)",
                pt.model.c_str(), pt.batch, pt.repeat, pt.workers, pt.threads);
  return label;
}

std::string log_name(size_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "point-%03zu.log", i);
  return name;
}

// Point i's record before it runs: what it is.
ordered_json point_record(size_t i, const Point& pt, const GridSpec& spec) {
  return {{"point", i},          {"model", pt.model},     {"workers", pt.workers},
          {"batch", pt.batch},   {"repeat", pt.repeat},   {"threads_per_rank", pt.threads},
          {"threads_setting", pt.threads_setting},
          {"epochs", spec.epochs}, {"limit", spec.limit}, {"data", spec.data},
          {"global_batch", pt.batch * pt.workers},
          {"train_images", (long long)spec.limit * pt.repeat}};
}

std::vector<std::string> cohort_command(const Point& pt, const GridSpec& spec) {
  std::vector<std::string> args = {self_exe(), "train",     "--model",
                                   pt.model,   "--batch",   std::to_string(pt.batch),
                                   "--repeat", std::to_string(pt.repeat),
                                   "--epochs", std::to_string(spec.epochs),
                                   "--limit",  std::to_string(spec.limit),
                                   "--data",   spec.data,
                                   "--threads", std::to_string(pt.threads),
                                   "--log",    "jsonl",
                                   // One test pass, after the last epoch, as the peer does.
                                   "--eval",   "last"};
  if (pt.workers > 1) {
    args.push_back("--workers");
    args.push_back(std::to_string(pt.workers));
  }
  return args;
}

std::vector<std::string> peer_command(const Point& pt, const GridSpec& spec) {
  return {peer_python(), peer_script(), "train",
          "--model",     pt.model,      "--batch",
          std::to_string(pt.batch),     "--repeat",
          std::to_string(pt.repeat),    "--epochs",
          std::to_string(spec.epochs),  "--limit",
          std::to_string(spec.limit),   "--data",
          spec.data,     "--threads",   std::to_string(pt.threads),
          "--world",     std::to_string(pt.workers)};
}

// Copies the summary fields a point keeps, prefixed ("cohort_" / "pytorch_").
void take(ordered_json& p, const std::string& pre, const json& s) {
  const SummaryFigures f = summary_figures(s);
  const json& es = f.epoch_seconds;
  const json& ei = f.epoch_images_per_second;
  p[pre + "epoch1_seconds"] = es.size() > 0 ? es[0] : json();
  p[pre + "epoch2_seconds"] = es.size() > 1 ? es[1] : json();
  p[pre + "epoch1_ips"] = ei.size() > 0 ? ei[0] : json();
  p[pre + "epoch2_ips"] = ei.size() > 1 ? ei[1] : json();
  p[pre + "epoch_seconds"] = es;
  p[pre + "images_per_second"] = s.value("images_per_second", json());
  p[pre + "test_accuracy"] = s.value("test_accuracy", json());
  if (f.step) {
    p[pre + "step_ms"] = 1e3 * f.step->total;
    p[pre + "compute_ms"] = 1e3 * f.step->compute;
    p[pre + "comm_ms"] = 1e3 * f.step->communication;
    p[pre + "data_ms"] = 1e3 * f.step->data;
  }
  if (s.contains("peak_memory_mb")) p[pre + "peak_memory_mb"] = s["peak_memory_mb"];
  if (s.contains("world_size")) p[pre + "world_size"] = s["world_size"];
}

// Runs one engine on a point: its wall time and figures, or its error, go
// into p under `pre`. `who` names the run on stderr. False if it failed.
bool run_engine(ordered_json& p, const std::string& pre, const std::vector<std::string>& argv,
                const fs::path& log, const std::string& who) {
  const TrainRun run = run_training(argv, log);
  p[pre + "wall_seconds"] = run.wall_seconds;
  if (run.ok()) {
    take(p, pre, run.summary);
    return true;
  }
  p[pre + "error"] =
      "exit " + std::to_string(run.rc) + " (see logs/" + log.filename().string() + ")";
  std::fprintf(stderr, "grid: %s failed: exit %d, see %s\n", who.c_str(), run.rc, log.c_str());
  return false;
}

// Runs a point with cohort, then with the peer; returns how many of them failed.
int run_point(ordered_json& p, const Point& pt, const GridSpec& spec, const fs::path& log) {
  fs::remove(log);
  const std::string label = label_of(pt);
  int failed = run_engine(p, "cohort_", cohort_command(pt, spec), log, label) ? 0 : 1;
  if (!spec.peer.empty() &&
      !run_engine(p, "pytorch_", peer_command(pt, spec), log, "pytorch " + label))
    ++failed;
  return failed;
}

}  // namespace

int run_grid(const GridSpec& spec) {
  const fs::path dir = fs::path(spec.out) / spec.name;
  // An output that cannot be written is found now, not after the first point.
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  COHORT_INPUT_CHECK(!ec, "--out: cannot create ", (dir / "logs").string(), ": ", ec.message());
  check_writable("--out", (dir / "results.jsonl").string());
  if (!spec.peer.empty())
    COHORT_INPUT_CHECK(peer_available(), "--peer pytorch: ", peer_python(),
                       " cannot import torch (or ", peer_script(), " is missing)");
  const std::vector<Point> points = grid_points(spec);
  double total_w = 0, done_w = 0;
  for (auto& p : points) total_w += weight(p, spec);
  std::fprintf(stderr, "cohort bench grid: %zu point(s) -> %s\n", points.size(), dir.c_str());

  const Timer timer;
  std::vector<ordered_json> results;
  int failed = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    progress("grid", i, points.size(), done_w, total_w, timer.seconds(),
             "running " + label_of(points[i]));
    results.push_back(point_record(i, points[i], spec));
    failed += run_point(results.back(), points[i], spec, dir / "logs" / log_name(i));
    done_w += weight(points[i], spec);
    // Written after every point, so a stopped grid keeps what it measured.
    derive_metrics(results);
    write_results_jsonl(dir.string(), results);
  }
  progress("grid", points.size(), points.size(), done_w, total_w, timer.seconds(), "done");
  write_results_csv(dir.string(), results);
  write_report_md(dir.string(), results);
  draw_plots(dir.string());
  std::fprintf(stderr, "cohort bench grid: %zu point(s), %d failed; wrote %s/{results.jsonl,"
               "results.csv,report.md}\n", points.size(), failed, dir.c_str());
  return failed;
}

}  // namespace cohort
