// The grid's report files: results.jsonl (one object per point, cohort_* and
// pytorch_* fields side by side), results.csv, report.md, and PNGs drawn by
// bench/plot_report.py (Debian's python3-matplotlib, Agg backend).
#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <ostream>
#include <set>
#include <tuple>

#include "bench/peer.h"
#include "core/error.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using Key = std::tuple<std::string, int, int, int>;  // model, batch, repeat, threads setting

// The grid's threads setting, not the resolved count: with 0 (cores / ranks)
// the 1-worker point runs 2 threads and the 2-worker points 1, one series.
Key key_of(const ordered_json& p) {
  return {p.value("model", std::string()), p.value("batch", 0), p.value("repeat", 0),
          p.value("threads_setting", p.value("threads_per_rank", 1))};
}

bool has_num(const ordered_json& p, const std::string& k) {
  return p.contains(k) && p[k].is_number();
}

std::string num(const ordered_json& p, const std::string& k, const char* f = "%.1f") {
  if (!has_num(p, k)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, p[k].get<double>());
  return buf;
}

std::string pct(const ordered_json& p, const std::string& k) {
  if (!has_num(p, k)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * p[k].get<double>());
  return buf;
}

}  // namespace

void derive_metrics(std::vector<ordered_json>& points) {
  for (const std::string pre : {"cohort_", "pytorch_"}) {
    std::map<Key, double> base;
    for (auto& p : points)
      if (p.value("workers", 0) == 1 && has_num(p, pre + "images_per_second"))
        base[key_of(p)] = p[pre + "images_per_second"].get<double>();
    for (auto& p : points) {
      auto it = base.find(key_of(p));
      if (it == base.end() || !has_num(p, pre + "images_per_second") || it->second <= 0) {
        p.erase(pre + "speedup");
        p.erase(pre + "efficiency");
        continue;
      }
      const double s = p[pre + "images_per_second"].get<double>() / it->second;
      p[pre + "speedup"] = s;
      p[pre + "efficiency"] = s / p.value("workers", 1);
    }
  }
  for (auto& p : points) {
    if (has_num(p, "cohort_images_per_second") && has_num(p, "pytorch_images_per_second") &&
        p["pytorch_images_per_second"].get<double>() > 0)
      p["ratio"] = p["cohort_images_per_second"].get<double>() /
                   p["pytorch_images_per_second"].get<double>();
    else
      p.erase("ratio");
  }
}

std::vector<ordered_json> read_results(const std::string& dir) {
  const fs::path path = fs::path(dir) / "results.jsonl";
  std::ifstream in(path);
  COHORT_INPUT_CHECK(in, "bench report: cannot read ", path.string());
  std::vector<ordered_json> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(ordered_json::parse(line));
    } catch (const std::exception&) {
      throw InputError("bench report: " + path.string() + " line " + std::to_string(n) +
                       " is not JSON");
    }
  }
  COHORT_INPUT_CHECK(!out.empty(), "bench report: ", path.string(), " holds no points");
  return out;
}

void write_results_jsonl(const std::string& dir, const std::vector<ordered_json>& points) {
  const fs::path path = fs::path(dir) / "results.jsonl";
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    for (auto& p : points) out << p.dump() << "\n";
  }
  fs::rename(tmp, path);
}

void write_results_csv(const std::string& dir, const std::vector<ordered_json>& points) {
  // Columns: the union of scalar fields, in first-seen order.
  std::vector<std::string> cols;
  std::set<std::string> seen;
  for (auto& p : points)
    for (auto& [k, v] : p.items())
      if (!v.is_structured() && seen.insert(k).second) cols.push_back(k);
  std::ofstream out(fs::path(dir) / "results.csv");
  for (size_t i = 0; i < cols.size(); ++i) out << (i ? "," : "") << cols[i];
  out << "\n";
  for (auto& p : points) {
    for (size_t i = 0; i < cols.size(); ++i) {
      if (i) out << ",";
      if (!p.contains(cols[i]) || p[cols[i]].is_null()) continue;
      const auto& v = p[cols[i]];
      if (v.is_string()) {
        std::string s = v.get<std::string>();
        if (s.find_first_of(",\"") != std::string::npos) {
          std::string q = "\"";
          for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
          s = q + "\"";
        }
        out << s;
      } else {
        out << v.dump();
      }
    }
    out << "\n";
  }
}

namespace {

bool has_peer(const std::vector<ordered_json>& points) {
  bool peer = false;
  for (auto& p : points) peer |= p.contains("pytorch_images_per_second") || p.contains("pytorch_error");
  return peer;
}

// The title and how to read the tables.
void write_intro(std::ostream& md, const std::string& dir, const std::vector<ordered_json>& points) {
  const auto& f = points.front();
  md << "# cohort bench grid: " << fs::path(dir).filename().string() << "\n\n";
  md << points.size() << " point(s); data " << f.value("data", std::string("?")) << ", limit "
     << f.value("limit", 0) << " images, " << f.value("epochs", 0)
     << " epoch(s). `--batch` is per rank (global batch = batch x workers); images/s is the mean "
        "over all epochs; speed-up and efficiency are against the 1-worker point with the same "
        "model, batch, repeat and threads setting (efficiency = ips_N / (N x ips_1)).";
  if (f.value("threads_setting", -1) == 0)
    md << " Threads setting 0: every point fills the same machine (threads per rank = cores / "
          "ranks), so N workers share the cores the 1-worker point had alone, and N x ips_1 is an "
          "ideal this machine cannot reach: efficiency here shows what splitting one machine's "
          "work over N ranks keeps.";
  md << "\n\n";
}

// Wall time of the points' subprocesses (start-up, data, training, test pass), per engine.
void write_wall_time(std::ostream& md, const std::vector<ordered_json>& points) {
  double wall_cohort = 0, wall_peer = 0;
  for (auto& p : points) {
    wall_cohort += p.value("cohort_wall_seconds", 0.0);
    wall_peer += p.value("pytorch_wall_seconds", 0.0);
  }
  if (wall_cohort <= 0) return;
  char line[200];
  std::snprintf(line, sizeof line, "Wall time of the points: cohort %.1f min", wall_cohort / 60);
  md << line;
  if (wall_peer > 0) {
    std::snprintf(line, sizeof line, ", PyTorch %.1f min, together %.1f min",
                  wall_peer / 60, (wall_cohort + wall_peer) / 60);
    md << line;
  }
  md << " (each point's processes from start to exit).\n\n";
}

// A column of the point tables: its header, the point's field, that field's
// printf format (nullptr: a percentage), and whether only runs with the peer have it.
struct Column {
  const char* head;
  const char* key;
  const char* fmt;
  bool peer;
};

// One Markdown table, a row per point: model, batch, repeat, workers x
// threads, then `cols` (the peer's only where the grid ran the peer).
void write_table(std::ostream& md, const std::vector<ordered_json>& points, bool peer,
                 std::initializer_list<Column> cols) {
  md << "| model | batch | repeat | workers x threads | ";
  int ncol = 4;
  for (const Column& c : cols)
    if (peer || !c.peer) {
      md << c.head << " | ";
      ++ncol;
    }
  md << "\n|";
  for (int i = 0; i < ncol; ++i) md << "---|";
  md << "\n";
  for (auto& p : points) {
    md << "| " << p.value("model", std::string()) << " | " << p.value("batch", 0) << " | "
       << p.value("repeat", 0) << " | " << p.value("workers", 0) << " x "
       << p.value("threads_per_rank", 1) << " | ";
    for (const Column& c : cols)
      if (peer || !c.peer) md << (c.fmt ? num(p, c.key, c.fmt) : pct(p, c.key)) << " | ";
    md << "\n";
  }
}

void write_tables(std::ostream& md, const std::vector<ordered_json>& points, bool peer) {
  md << "## Throughput and scaling\n\n";
  write_table(md, points, peer,
              {{"cohort img/s", "cohort_images_per_second", "%.0f", false},
               {"PyTorch img/s", "pytorch_images_per_second", "%.0f", true},
               {"cohort/PyTorch", "ratio", "%.2fx", true},
               {"cohort speed-up", "cohort_speedup", "%.2fx", false},
               {"cohort eff.", "cohort_efficiency", nullptr, false},
               {"PyTorch speed-up", "pytorch_speedup", "%.2fx", true},
               {"PyTorch eff.", "pytorch_efficiency", nullptr, true}});
  md << "\n## First and second epoch\n\n";
  write_table(md, points, peer,
              {{"cohort epoch 1 s", "cohort_epoch1_seconds", "%.2f", false},
               {"cohort epoch 2 s", "cohort_epoch2_seconds", "%.2f", false},
               {"cohort epoch 1 img/s", "cohort_epoch1_ips", "%.0f", false},
               {"cohort epoch 2 img/s", "cohort_epoch2_ips", "%.0f", false},
               {"PyTorch epoch 1 s", "pytorch_epoch1_seconds", "%.2f", true},
               {"PyTorch epoch 2 s", "pytorch_epoch2_seconds", "%.2f", true}});
  md << "\n## Step time split (cohort, per step on rank 0), memory and accuracy\n\n";
  write_table(md, points, peer,
              {{"step ms", "cohort_step_ms", "%.2f", false},
               {"compute ms", "cohort_compute_ms", "%.2f", false},
               {"communication ms", "cohort_comm_ms", "%.2f", false},
               {"data ms", "cohort_data_ms", "%.2f", false},
               {"peak MB per rank", "cohort_peak_memory_mb", "%.0f", false},
               {"cohort accuracy", "cohort_test_accuracy", "%.4f", false},
               {"PyTorch accuracy", "pytorch_test_accuracy", "%.4f", true}});
}

void write_failures(std::ostream& md, const std::vector<ordered_json>& points) {
  bool errors = false;
  for (auto& p : points) errors |= p.contains("cohort_error") || p.contains("pytorch_error");
  if (!errors) return;
  md << "\n## Failed runs\n\n";
  for (auto& p : points) {
    for (const char* k : {"cohort_error", "pytorch_error"})
      if (p.contains(k))
        md << "- point " << p.value("point", 0) << " (" << p.value("model", std::string())
           << ", batch " << p.value("batch", 0) << ", repeat " << p.value("repeat", 0) << ", "
           << p.value("workers", 0) << " worker(s)): " << k << ": " << p[k].get<std::string>()
           << "\n";
  }
}

void write_plot_links(std::ostream& md) {
  md << "\n## Plots\n\n";
  for (const char* png : {"ips_vs_workers.png", "scaling.png", "epoch_time_vs_size.png",
                          "first_vs_second_epoch.png"})
    md << "![" << png << "](" << png << ")\n\n";
}

}  // namespace

void write_report_md(const std::string& dir, const std::vector<ordered_json>& points) {
  std::ofstream md(fs::path(dir) / "report.md");
  const bool peer = has_peer(points);
  write_intro(md, dir, points);
  write_wall_time(md, points);
  write_tables(md, points, peer);
  write_failures(md, points);
  write_plot_links(md);
}

bool draw_plots(const std::string& dir) {
  const std::string script = std::string(COHORT_SOURCE_DIR) + "/bench/plot_report.py";
  const std::string py = "/usr/bin/python3";
  if (std::system((py + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) != 0) {
    std::fprintf(stderr, "bench report: %s cannot import matplotlib (apt install "
                 "python3-matplotlib); no plots drawn\n", py.c_str());
    return false;
  }
  const std::string cmd = py + " '" + script + "' '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench report: plotting failed: %s\n", cmd.c_str());
    return false;
  }
  return true;
}

void rebuild_report(const std::string& dir) {
  COHORT_INPUT_CHECK(fs::is_directory(dir), "bench report: ", dir, " is not a folder");
  auto points = read_results(dir);
  derive_metrics(points);
  write_results_jsonl(dir, points);
  write_results_csv(dir, points);
  write_report_md(dir, points);
  draw_plots(dir);
  std::fprintf(stderr, "bench report: %zu point(s); wrote %s/{results.csv,report.md}\n",
               points.size(), dir.c_str());
}

}  // namespace cohort
