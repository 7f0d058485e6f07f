// Running benchmark subprocesses (`cohort train`, the PyTorch peer) from the
// bench runners: capture stdout, keep stderr in a log, read JSON lines back.
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort {

// This binary's path, to run `cohort train` as a subprocess.
std::string self_exe();
// Runs argv through the shell with stderr (and a copy of stdout) appended to
// `log`; returns stdout and sets *rc to the exit status (128: killed).
std::string run_capture(const std::vector<std::string>& argv, const std::filesystem::path& log,
                        int* rc);
// The last line of `out` that parses as a JSON object and passes `want`
// (an empty object if none does).
nlohmann::json last_json_line(const std::string& out,
                              const std::function<bool(const nlohmann::json&)>& want);

}  // namespace cohort
