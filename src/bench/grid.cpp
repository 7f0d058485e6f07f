// `cohort bench grid`: each point is one `cohort train --log jsonl` subprocess
// (mpirun for N > 1 through `--workers N`), optionally followed by the PyTorch
// peer's `train` on the same point. A progress bar with ETA goes to stderr.
#include "bench/grid.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cpus.h"
#include "bench/peer.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/subprocess.h"
#include "core/error.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::vector<int> parse_int_list(const std::string& s, const std::string& flag, int min) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    COHORT_INPUT_CHECK(used == item.size() && v >= min, flag, ": expected integers >= ", min,
                       ", got '", item, "'");
    out.push_back(v);
  }
  COHORT_INPUT_CHECK(!out.empty(), flag, ": empty list");
  return out;
}

std::vector<std::string> parse_str_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// A grid-file value: a JSON array, a number, or a comma string, as a comma string.
static std::string as_list(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  std::string s;
  if (v.is_array())
    for (auto& e : v) s += (s.empty() ? "" : ",") + as_list(e);
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

GridSpec resolve_grid(const GridFlags& flags) {
  GridFlags f;  // file values, then overridden by the flags
  if (!flags.grid.empty()) {
    fs::path p = grid_file(flags.grid);
    std::ifstream in(p);
    json j;
    try {
      j = json::parse(in);
    } catch (const std::exception& e) {
      throw InputError("--grid: " + p.string() + " is not valid JSON");
    }
    COHORT_INPUT_CHECK(j.is_object(), "--grid: ", p.string(), " must hold a JSON object");
    auto get = [&](const char* key, std::string& dst) {
      if (j.contains(key) && !j[key].is_null()) dst = as_list(j[key]);
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
    if (f.name.empty()) f.name = flags.grid;
  }
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
  s.name = f.name;
  if (s.name.empty()) {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "grid-%Y%m%d-%H%M%S", std::localtime(&t));
    s.name = buf;
  }
  COHORT_INPUT_CHECK(s.name.find('/') == std::string::npos && s.name != "." && s.name != "..",
                     "--name: '", s.name, "' must be a plain folder name");
  return s;
}

nlohmann::json last_summary(const std::string& out) {
  return last_json_line(out, [](const json& j) {
    return j.value("event", "") == "summary" ||
           (j.contains("epoch_seconds") && !j.contains("event"));
  });
}

namespace {

// Copies the summary fields a point keeps, prefixed ("cohort_" / "pytorch_").
void take(ordered_json& p, const std::string& pre, const json& s) {
  auto es = s.value("epoch_seconds", json::array());
  auto ei = s.value("epoch_images_per_second", json::array());
  p[pre + "epoch1_seconds"] = es.size() > 0 ? es[0] : json();
  p[pre + "epoch2_seconds"] = es.size() > 1 ? es[1] : json();
  p[pre + "epoch1_ips"] = ei.size() > 0 ? ei[0] : json();
  p[pre + "epoch2_ips"] = ei.size() > 1 ? ei[1] : json();
  p[pre + "epoch_seconds"] = es;
  p[pre + "images_per_second"] = s.value("images_per_second", json());
  p[pre + "test_accuracy"] = s.value("test_accuracy", json());
  if (s.contains("step_seconds")) {
    const auto& st = s["step_seconds"];
    p[pre + "step_ms"] = 1e3 * st.value("total", 0.0);
    p[pre + "compute_ms"] = 1e3 * st.value("compute", 0.0);
    p[pre + "comm_ms"] = 1e3 * st.value("communication", 0.0);
    p[pre + "data_ms"] = 1e3 * st.value("data", 0.0);
  }
  if (s.contains("peak_memory_mb")) p[pre + "peak_memory_mb"] = s["peak_memory_mb"];
  if (s.contains("world_size")) p[pre + "world_size"] = s["world_size"];
}

}  // namespace

int run_grid(const GridSpec& spec) {
  const fs::path dir = fs::path(spec.out) / spec.name;
  fs::create_directories(dir / "logs");
  const std::string self = self_exe();
  if (!spec.peer.empty())
    COHORT_INPUT_CHECK(peer_available(), "--peer pytorch: ", peer_python(),
                       " cannot import torch (or ", peer_script(), " is missing)");

  struct Point {
    std::string model;
    int batch, repeat, threads, workers;
    int threads_setting;  // as the grid gave it: 0 = cores / ranks
  };
  std::vector<Point> points;
  // Workers innermost (ascending) so each 1-worker baseline runs right before its scaling points.
  std::vector<int> workers = spec.workers;
  std::sort(workers.begin(), workers.end());
  for (auto& m : spec.models)
    for (int b : spec.batch)
      for (int r : spec.repeat)
        for (int t : spec.threads_per_rank)
          for (int w : workers)  // 0 threads: fill the machine, cores / ranks
            points.push_back({m, b, r, t > 0 ? t : threads_per_rank(w), w, t});

  // ETA weights: images seen (repeat) x model cost, x2 with the peer.
  auto weight = [&](const Point& p) {
    return double(p.repeat) * (p.model == "mnist-large" ? 8.0 : 1.0) * (spec.peer.empty() ? 1 : 2);
  };
  double total_w = 0, done_w = 0;
  for (auto& p : points) total_w += weight(p);
  std::fprintf(stderr, "cohort bench grid: %zu point(s) -> %s\n", points.size(), dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  std::vector<ordered_json> results;
  int failed = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& pt = points[i];
    char label[160];
    std::snprintf(label, sizeof label, "%s batch %d repeat %d: %d rank(s) x %d thread(s)",
                  pt.model.c_str(), pt.batch, pt.repeat, pt.workers, pt.threads);
    progress("grid", i, points.size(), done_w, total_w, elapsed(), std::string("running ") + label);
    char logname[32];
    std::snprintf(logname, sizeof logname, "point-%03zu.log", i);
    const fs::path log = dir / "logs" / logname;
    fs::remove(log);

    ordered_json p = {{"point", i},          {"model", pt.model},     {"workers", pt.workers},
                      {"batch", pt.batch},   {"repeat", pt.repeat},   {"threads_per_rank", pt.threads},
                      {"threads_setting", pt.threads_setting},
                      {"epochs", spec.epochs}, {"limit", spec.limit}, {"data", spec.data},
                      {"global_batch", pt.batch * pt.workers},
                      {"train_images", (long long)spec.limit * pt.repeat}};
    std::vector<std::string> args = {self,       "train",     "--model",
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
    int rc = 0;
    double started = elapsed();
    std::string out = run_capture(args, log, &rc);
    // Whole subprocess: start-up, data loading, training and the test pass.
    p["cohort_wall_seconds"] = elapsed() - started;
    json s = last_summary(out);
    if (rc != 0 || s.empty()) {
      p["cohort_error"] = "exit " + std::to_string(rc) + " (see logs/" + logname + ")";
      std::fprintf(stderr, "grid: %s failed: exit %d, see %s\n", label, rc, log.c_str());
      ++failed;
    } else {
      take(p, "cohort_", s);
    }
    if (!spec.peer.empty()) {
      std::vector<std::string> pargs = {peer_python(), peer_script(), "train",
                                        "--model",     pt.model,      "--batch",
                                        std::to_string(pt.batch),     "--repeat",
                                        std::to_string(pt.repeat),    "--epochs",
                                        std::to_string(spec.epochs),  "--limit",
                                        std::to_string(spec.limit),   "--data",
                                        spec.data,     "--threads",   std::to_string(pt.threads),
                                        "--world",     std::to_string(pt.workers)};
      started = elapsed();
      std::string pout = run_capture(pargs, log, &rc);
      p["pytorch_wall_seconds"] = elapsed() - started;
      json ps = last_summary(pout);
      if (rc != 0 || ps.empty()) {
        p["pytorch_error"] = "exit " + std::to_string(rc) + " (see logs/" + logname + ")";
        std::fprintf(stderr, "grid: pytorch %s failed: exit %d, see %s\n", label, rc, log.c_str());
        ++failed;
      } else {
        take(p, "pytorch_", ps);
      }
    }
    results.push_back(p);
    done_w += weight(pt);
    // Written after every point, so a stopped grid keeps what it measured.
    derive_metrics(results);
    write_results_jsonl(dir.string(), results);
  }
  progress("grid", points.size(), points.size(), done_w, total_w, elapsed(), "done");
  write_results_csv(dir.string(), results);
  write_report_md(dir.string(), results);
  draw_plots(dir.string());
  std::fprintf(stderr, "cohort bench grid: %zu point(s), %d failed; wrote %s/{results.jsonl,"
               "results.csv,report.md}\n", points.size(), failed, dir.c_str());
  return failed;
}

}  // namespace cohort
