#include "parallel/hosts.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace cohort {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

int parse_slots(const std::string& v, const std::string& where) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  COHORT_INPUT_CHECK(used == v.size() && n >= 1, where, ": slots must be a whole number >= 1, got '",
                     v, "'");
  return n;
}

}  // namespace

std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& path) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    HostSlots h;
    words >> h.name;
    h.slots = 1;
    const std::string where = detail::concat("--hostfile ", path, " line ", n);
    for (std::string w; words >> w;) {
      COHORT_INPUT_CHECK(w.rfind("slots=", 0) == 0, where, ": expected 'host slots=K', got '", line,
                         "'");
      h.slots = parse_slots(w.substr(6), where);
    }
    out.push_back(h);
  }
  COHORT_INPUT_CHECK(!out.empty(), "--hostfile ", path, " lists no hosts");
  return out;
}

std::vector<HostSlots> parse_discovery(const std::string& text, const std::string& script) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line);
    if (line.empty()) continue;
    const auto colon = line.find(':');
    HostSlots h{trim(line.substr(0, colon)), 1};
    if (colon != std::string::npos)
      h.slots = parse_slots(trim(line.substr(colon + 1)),
                            detail::concat("--host-discovery-script ", script, " line ", n));
    out.push_back(h);
  }
  return out;
}

void HostPool::update(const std::vector<HostSlots>& seen) {
  for (Host& h : hosts_) {
    const auto it = std::find_if(seen.begin(), seen.end(),
                                 [&](const HostSlots& s) { return s.name == h.name; });
    if (it == seen.end()) {
      h.listed = false;
      continue;
    }
    if (!h.listed || it->slots != h.slots) h.lost_until.clear();  // back, or changed: afresh
    h.listed = true;
    h.slots = it->slots;
  }
  for (const HostSlots& s : seen)
    if (std::none_of(hosts_.begin(), hosts_.end(), [&](const Host& h) { return h.name == s.name; }))
      hosts_.push_back({s.name, s.slots});
}

int HostPool::available(double now) const {
  int n = 0;
  for (const Host& h : hosts_) n += usable(h, now);
  return n;
}

std::vector<std::string> HostPool::assign(int world, double now) const {
  std::vector<std::string> out;
  for (const Host& h : hosts_)
    for (int s = 0; s < usable(h, now) && int(out.size()) < world; ++s) out.push_back(h.name);
  return out;
}

bool HostPool::fail(const std::string& host, double now, int keep) {
  for (Host& h : hosts_) {
    if (h.name != host) continue;
    h.lost_until.push_back(now + cooldown_s_);
    if (++h.failures < kMaxHostFailures) return false;
    const int others = available(now) - usable(h, now);
    if (others < keep) return false;  // cooling it down would end the job
    h.cool_until = now + cooldown_s_;
    h.failures = 0;
    h.lost_until.clear();  // after the cool-down it returns whole
    return true;
  }
  return false;
}

std::vector<std::string> HostPool::cooling(double now) const {
  std::vector<std::string> out;
  for (const Host& h : hosts_)
    if (h.listed && now < h.cool_until) out.push_back(h.name);
  return out;
}

bool HostPool::fits(const std::vector<std::string>& assigned, double now) const {
  for (const Host& h : hosts_)
    if (std::count(assigned.begin(), assigned.end(), h.name) > usable(h, now)) return false;
  return std::all_of(assigned.begin(), assigned.end(), [&](const std::string& name) {
    return std::any_of(hosts_.begin(), hosts_.end(), [&](const Host& h) { return h.name == name; });
  });
}

double HostPool::next_return(double now) const {
  double next = -1;
  auto consider = [&](double t) {
    if (t > now && (next < 0 || t < next)) next = t;
  };
  for (const Host& h : hosts_) {
    if (!h.listed) continue;
    consider(h.cool_until);
    for (double t : h.lost_until) consider(t);
  }
  return next;
}

}  // namespace cohort
