// Shared by the tests that run the cohort binary: run a command (mpirun
// allowed as root) and compare two checkpoints; and the message of an Error.
#pragma once
#include <functional>
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

// max |a - b| / max |b| over every tensor of checkpoint b, found by name in a.
double checkpoint_rel_diff(const std::string& a, const std::string& b);

// The message of the cohort::Error that f throws, or "(no error)".
std::string error_of(const std::function<void()>& f);

}  // namespace cohort::testing_support
