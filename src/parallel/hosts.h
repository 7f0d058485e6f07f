// The hosts an elastic job may use (parallel/elastic.h), with their slots
// (ranks each may run). Hosts come from a hostfile's `host slots=K` lines or
// a discovery script's `host:K` lines; on this one machine every rank runs
// locally, and a host is the name its ranks are counted under. A failed
// rank's slot sits out a cool-down, then returns; a host that fails
// kMaxHostFailures times is left out whole for a cool-down (Horovod's
// blacklist), and then returns whole.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

constexpr int kMaxHostFailures = 2;

struct HostSlots {
  std::string name;
  int slots = 0;
};

// `host slots=K` lines (`host` alone: 1 slot; `#` comments). InputError
// naming the file and line where one cannot be read.
std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& path);
// `host:K` lines (`host` alone: 1 slot), as Horovod's discovery scripts print.
std::vector<HostSlots> parse_discovery(const std::string& text, const std::string& script);

class HostPool {
 public:
  explicit HostPool(double cooldown_s = 30) : cooldown_s_(cooldown_s) {}
  // Sets the hosts seen now: new ones join, listed ones take the slots given
  // (a host that returns after being removed starts afresh), missing ones go.
  void update(const std::vector<HostSlots>& seen);
  // Slots usable at time `now` (seconds): hosts not cooling down, less the
  // slots their failed ranks held.
  int available(double now) const;
  // The host of each of `world` ranks, filled host by host in order.
  std::vector<std::string> assign(int world, double now) const;
  // A rank on `host` failed at `now`: its slot sits out the cool-down, and a
  // host that failed kMaxHostFailures times cools down whole, unless that
  // leaves fewer than `keep` slots. Returns true if the host now cools down.
  bool fail(const std::string& host, double now, int keep);
  // Hosts cooling down at `now`, for reports.
  std::vector<std::string> cooling(double now) const;
  // Whether each host of `assigned` (one entry per rank) still offers at
  // `now` the slots its ranks take (false once discovery dropped a host).
  bool fits(const std::vector<std::string>& assigned, double now) const;
  // When the next slot or host cooling down at `now` returns (-1: none is).
  double next_return(double now) const;

 private:
  struct Host {
    std::string name;
    int slots = 0, failures = 0;
    double cool_until = 0;
    std::vector<double> lost_until;  // each failed slot's return
    bool listed = true;
  };
  int usable(const Host& h, double now) const {
    if (!h.listed || now < h.cool_until) return 0;
    const auto lost = std::count_if(h.lost_until.begin(), h.lost_until.end(),
                                    [&](double until) { return now < until; });
    return std::max(0, h.slots - int(lost));
  }
  double cooldown_s_;
  std::vector<Host> hosts_;
};

}  // namespace cohort
