#include "bench/subprocess.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace cohort {

std::string self_exe() {
  // A rebuild during a long run replaces the file: run the new one at the same path.
  std::string path = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() &&
      path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return path;
}

static std::string quote(const std::string& a) {
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string run_capture(const std::vector<std::string>& argv, const std::filesystem::path& log,
                        int* rc) {
  std::string cmd;
  for (auto& a : argv) cmd += quote(a) + " ";
  {
    std::ofstream l(log, std::ios::app);
    l << "$ " << cmd << "\n";
  }
  cmd += "2>>" + quote(log.string());
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) throw Error("cannot start: " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int status = pclose(f);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ofstream(log, std::ios::app) << out;
  return out;
}

nlohmann::json last_json_line(const std::string& out,
                              const std::function<bool(const nlohmann::json&)>& want) {
  nlohmann::json last = nlohmann::json::object();
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty() || line[0] != '{') continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.is_object() && want(j)) last = j;
    } catch (const std::exception&) {
    }
  }
  return last;
}

}  // namespace cohort
