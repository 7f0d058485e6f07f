// Reading back a benchmark subprocess (`cohort train --log jsonl`, `cohort
// bench step`, the PyTorch peer's `train`): the summary line it printed, the
// figures the bench runners take from that summary, and the lines of its log
// that say why it failed. grid, strategies and tune all read runs this way.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

// The last {"event":"summary"} object in `out` (empty object if none).
nlohmann::json last_summary(const std::string& out);

// A training subprocess, run to its end and read back.
struct TrainRun {
  int rc = 0;
  double wall_seconds = 0;  // the whole subprocess: start-up, data, training, test pass
  nlohmann::json summary;   // last_summary of its stdout
  bool ok() const { return rc == 0 && !summary.empty(); }
};
// Runs argv through run_capture (its stderr appended to `log`) and reads its summary.
TrainRun run_training(const std::vector<std::string>& argv, const std::filesystem::path& log);

// A summary's mean step split (its step_seconds), in seconds.
struct StepSplit {
  double total = 0, compute = 0, communication = 0, data = 0;
};

// The figures of a summary that every bench runner keeps, however it lays them out.
struct SummaryFigures {
  nlohmann::json epoch_seconds;            // one per epoch; [] if not reported
  nlohmann::json epoch_images_per_second;  // one per epoch; [] if not reported
  std::optional<StepSplit> step;           // none if not reported
};
SummaryFigures summary_figures(const nlohmann::json& summary);

// What a subprocess's log says about how it ended. Empty lines and the
// "$ command" lines run_capture writes are skipped.
struct LogTail {
  std::string last;   // the last line
  std::string text;   // the last line that is neither output JSON nor mpirun's "---" banner
  std::string error;  // the last error line cohort, the peer or Python wrote
  std::string died;   // mpirun's last line naming a rank that died
  // Why the run failed: error, else died, else text.
  std::string failure() const;
};
LogTail read_log_tail(const std::filesystem::path& log);

}  // namespace cohort
