// The grid's report: derived metrics (speed-up, scaling efficiency, ratio to
// the peer), results.csv, report.md, and PNG plots via bench/plot_report.py.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort {

// Adds speed-up vs the 1-worker point of the same (model, batch, repeat,
// threads), scaling efficiency ips_N / (N * ips_1) and cohort/peer ratio.
void derive_metrics(std::vector<nlohmann::ordered_json>& points);
std::vector<nlohmann::ordered_json> read_results(const std::string& dir);
void write_results_jsonl(const std::string& dir, const std::vector<nlohmann::ordered_json>& points);
void write_results_csv(const std::string& dir, const std::vector<nlohmann::ordered_json>& points);
void write_report_md(const std::string& dir, const std::vector<nlohmann::ordered_json>& points);
// Runs bench/plot_report.py DIR; false (with a note on stderr) if it cannot.
bool draw_plots(const std::string& dir);
// `cohort bench report DIR`: derive, then rewrite csv, report.md and plots.
void rebuild_report(const std::string& dir);

}  // namespace cohort
