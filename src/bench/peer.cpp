#include "bench/peer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace cohort {

std::string peer_python() {
  if (const char* p = std::getenv("COHORT_PEER_PYTHON")) return p;
  return "/usr/bin/python3";
}

std::string peer_script() { return std::string(COHORT_SOURCE_DIR) + "/bench/peers/pytorch_peer"; }

bool peer_available() {
  std::string cmd = peer_python() + " -c 'import torch' >/dev/null 2>&1";
  return std::filesystem::exists(peer_script()) && std::system(cmd.c_str()) == 0;
}

nlohmann::json run_peer(const std::vector<std::string>& args) {
  std::string cmd = peer_python() + " " + peer_script();
  for (auto& a : args) cmd += " '" + a + "'";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) throw Error("cannot start the PyTorch peer: " + cmd);
  std::string out, last;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int rc = pclose(f);
  size_t end = out.find_last_not_of(" \n\r");
  if (end != std::string::npos) {
    size_t begin = out.rfind('\n', end);
    last = out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
  }
  if (rc != 0) throw Error("PyTorch peer failed (exit " + std::to_string(rc) + "): " + cmd);
  if (last.empty() || last[0] != '{') return nlohmann::json::object();  // wrote files only
  return nlohmann::json::parse(last);
}

}  // namespace cohort
