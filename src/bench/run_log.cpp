#include "bench/run_log.h"

#include <fstream>

#include "bench/subprocess.h"
#include "core/clock.h"

namespace cohort {

using nlohmann::json;

json last_summary(const std::string& out) {
  return last_json_line(out, [](const json& j) {
    return j.value("event", "") == "summary" ||
           (j.contains("epoch_seconds") && !j.contains("event"));
  });
}

TrainRun run_training(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  TrainRun run;
  const Timer wall;
  const std::string out = run_capture(argv, log, &run.rc);
  run.wall_seconds = wall.seconds();
  run.summary = last_summary(out);
  return run;
}

SummaryFigures summary_figures(const json& s) {
  SummaryFigures f;
  f.epoch_seconds = s.value("epoch_seconds", json::array());
  f.epoch_images_per_second = s.value("epoch_images_per_second", json::array());
  if (s.contains("step_seconds")) {
    const json& st = s["step_seconds"];
    f.step = StepSplit{st.value("total", 0.0), st.value("compute", 0.0),
                       st.value("communication", 0.0), st.value("data", 0.0)};
  }
  return f;
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "cohort: ...", "pytorch_peer: error ...", or Python's "ValueError: ..." (a
// one-word head ending in Error or Exception).
bool is_error_line(const std::string& line) {
  const std::string head = line.substr(0, line.find(": "));
  const bool python = head.size() < line.size() && head.find(' ') == std::string::npos &&
                      (ends_with(head, "Error") || ends_with(head, "Exception"));
  return line.rfind("cohort:", 0) == 0 || line.rfind("pytorch_peer: error", 0) == 0 || python;
}

}  // namespace

LogTail read_log_tail(const std::filesystem::path& log) {
  std::ifstream in(log);
  LogTail tail;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("$ ", 0) == 0) continue;
    tail.last = line;
    if (line[0] == '{' || line[0] == '-') continue;
    tail.text = line;
    if (is_error_line(line)) tail.error = line;
    if (line.find("exited on signal") != std::string::npos) tail.died = line;
  }
  return tail;
}

std::string LogTail::failure() const {
  return !error.empty() ? error : !died.empty() ? died : text;
}

}  // namespace cohort
