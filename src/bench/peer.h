// Runs the project's PyTorch peer (bench/peers/pytorch_peer/, a Python package run as a
// folder) and reads the JSON line it prints last, so cohort and PyTorch are measured in one run.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort {

// Debian's python3 with python3-torch; the one on PATH may lack torch.
std::string peer_python();
std::string peer_script();
bool peer_available();
// args: the subcommand and its flags. Returns its last stdout line as JSON (an
// empty object if it printed none). Throws Error naming the command on failure.
nlohmann::json run_peer(const std::vector<std::string>& args);

}  // namespace cohort
