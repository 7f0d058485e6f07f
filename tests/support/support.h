// Shared by the tests that run the cohort binary: run a command (mpirun
// allowed as root) and compare two checkpoints; and the message of an Error.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace cohort::testing_support {

// `cohort train` as the equality tests run it: synthetic data, one epoch of
// 256 images, SGD lr 0.01 with momentum, one thread, jsonl. SGD at lr 0.01:
// a larger step can flip a ReLU or max-pool decision that sits within
// rounding of its threshold, which any change of summation order (data
// parallelism too) then amplifies; see docs/DESIGN.md.
std::string equality_train_command();

// Runs `cmd` with stderr folded into *out (if given); returns its exit code.
int run(const std::string& cmd, std::string* out = nullptr);

// A command's exit code and its stdout and stderr together.
struct CommandResult {
  int code;
  std::string out;
};
CommandResult run_command(const std::string& cmd);

// Runs `cmd` and expects exit code 2 and exactly one line naming `culprit`.
void expect_one_line_error(const std::string& cmd, const std::string& culprit);

// ||a - b|| / ||b|| over n values.
double rel_l2(const float* a, const float* b, int64_t n);

// max |a - b| / max |b| over every tensor of checkpoint b (its optimizer
// state too, from the shard files where it lists them), found by name in a.
double checkpoint_rel_diff(const std::string& a, const std::string& b);

// Names of the tensors of checkpoint a whose bits differ from (or are missing
// in) b, plus the run metadata that differs (epoch, updates, optimizer, its
// steps, loss scale); empty when the files hold the same run.
std::string checkpoint_differences(const std::string& a, const std::string& b);

// The last line of `out` that parses as a JSON object (null if none).
nlohmann::json last_json(const std::string& out);

// Runs `body` under /usr/bin/python3 with torch imported and, from
// sys.argv[1], `t` (name -> torch tensor, F32, BF16 or I64) and `meta` (the metadata):
// the safetensors file read by the spec, as safetensors.torch.load_file
// does (Debian has no python3-safetensors). `args` follow the file's path.
// Fails the test where python3 or torch is missing, or the script fails.
void expect_pytorch_script(const std::string& dir, const std::string& file,
                           const std::string& body, const std::string& args = "");

// The message of the cohort::Error that f throws, or "(no error)".
std::string error_of(const std::function<void()>& f);

}  // namespace cohort::testing_support
