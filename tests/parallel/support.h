// Shared by the strategy tests: run a command (mpirun allowed as root) and
// compare two checkpoints.
#pragma once
#include <string>

namespace cohort::testing_support {

// Runs `cmd` with stderr folded into *out (if given); returns its exit code.
int run(const std::string& cmd, std::string* out = nullptr);

// max |a - b| / max |b| over every tensor of checkpoint b, found by name in a.
double checkpoint_rel_diff(const std::string& a, const std::string& b);

}  // namespace cohort::testing_support
