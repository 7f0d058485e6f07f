// What a training run prints: a progress bar per epoch (human), one line per
// epoch, accuracy per class at the end; or JSON lines (--log jsonl).
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort {

class Report {
 public:
  // enabled: false on ranks other than 0, which print nothing.
  Report(std::string mode, bool enabled = true, FILE* out = stdout);
  bool jsonl() const { return jsonl_; }
  void start(const nlohmann::ordered_json& info);
  // Redraws the bar (human, on a terminal only): step i of n.
  void progress(int epoch, int64_t step, int64_t steps, double loss, double images_per_s,
                double eta_s);
  void epoch(const nlohmann::ordered_json& e);
  // strategy_text: the strategy's own lines (its family's summary_text).
  void summary(const nlohmann::ordered_json& s, const std::vector<std::string>& class_names,
               const std::string& strategy_text = "");

 private:
  bool jsonl_;
  bool enabled_;
  bool tty_;
  FILE* out_;
};

}  // namespace cohort
