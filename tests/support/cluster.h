// A namespace cluster (scripts/cluster.sh) for the length of one test: H
// "hosts" with real TCP between them over tc-shaped links, and mpirun's
// arguments to start ranks in them. Tests that need one skip, naming the
// reason, where the machine cannot build it (no root, no `ip netns`).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/support.h"

namespace cohort::testing_support {

// Why this machine cannot build a cluster ("" if it can): cluster.sh check.
std::string cluster_unavailable();

// The cluster script's path in this checkout.
std::string cluster_script();

class Cluster {
 public:
  // `cluster.sh up hosts --slots slots --rate rate`; up() says whether it worked.
  Cluster(int hosts, int slots, const std::string& rate = "1gbit");
  ~Cluster();  // cluster.sh down
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  bool up() const { return !name_.empty(); }
  const std::string& name() const { return name_; }
  const std::string& up_output() const { return up_out_; }
  std::string host(int i) const { return name_ + "-h" + std::to_string(i); }
  int hosts() const { return hosts_; }

  // `cluster.sh run -- --display-map <mpirun_args> <cmd>`: mpirun prints the
  // job map (read it with job_map) before the ranks' output.
  CommandResult run(const std::string& mpirun_args, const std::string& cmd) const;

  // Bytes sent into the hosts over their links so far (the bridge-side veth
  // ends' tx counters, summed): what crossed the "network".
  int64_t link_bytes() const;

 private:
  int hosts_;
  std::string name_, up_out_;
};

// Host name -> the ranks mpirun placed there, from --display-map's output.
std::map<std::string, std::vector<int>> job_map(const std::string& out);

}  // namespace cohort::testing_support
