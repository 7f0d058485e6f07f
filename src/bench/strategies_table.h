// The table of `cohort bench strategies` (Markdown, printed and in report.md)
// from the rows' records as results.jsonl holds them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort {

// What every row shared, for the report's header.
struct TableInfo {
  std::string model, data;
  int global_batch, limit, epochs, cores;
  std::string command, date;
  std::string load_before, load_after;  // 1-minute load averages around the run
};

// One Markdown table: a row per record, failed rows with their reason.
std::string strategies_table(const std::vector<nlohmann::ordered_json>& rows,
                             const TableInfo& info);
// report.md: header, the table, and how to read it.
std::string strategies_report(const std::vector<nlohmann::ordered_json>& rows,
                              const TableInfo& info, const std::string& table);

}  // namespace cohort
