// Elastic training: `cohort train --elastic` runs a supervisor that does not
// train itself. It starts the ranks under mpirun (parallel/launch.h) as
// --workers does, watches them, and when one dies (a signal) or stalls (the
// ranks' heartbeat, comm/mpi/heartbeat.h, ends the job naming it; or the
// supervisor sees it stopped), ends what is left of the job (its process
// group, so no rank survives it) and starts it again with the ranks that are
// left, from the newest commit (train/commits.h; --commit-every auto unless
// given). Torchrun's --max-restarts bounds the retries; a failed rank's slot
// and a host that failed twice (parallel/hosts.h) cool down (Horovod's
// blacklist), and when more slots are free (discovery reports new hosts, or
// the cool-down ends) the job grows back at its next commit. Its ranks die
// with it (parent-death signals), even by SIGKILL.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace cohort {

struct ElasticConfig {
  bool enabled = false;  // --elastic
  int min_workers = 0, max_workers = 0;
  int workers = 0;  // --workers W: W ranks on one host (0: from the hosts)
  std::string hostfile, discovery_script;
  int max_restarts = 3;
  double timeout = 0;  // the train flags' --timeout (0: the heartbeat's default)
  int threads = 0;     // the train flags' --threads
  int epochs = 0;      // the train flags' --epochs: a job past its last epoch is not grown
  bool jsonl = false;  // --log jsonl: the summary line gets an "elastic" object
  double cooldown_s = 30;  // --cooldown: a failed slot (a host that failed twice) sits out this long
  double discovery_interval_s = 1;  // the discovery script runs this often (as Horovod)
};

// The newest commit in a --checkpoint-dir (train/commits.h names them
// commit-<updates, 12 digits>.safetensors): its updates (-1: none) and how
// many seconds ago it was written.
struct CommitSeen {
  int64_t updates = -1;
  double age_s = 0;
};
CommitSeen newest_commit(const std::string& dir);

// Checks the elastic flags before anything starts: InputError naming the
// flag. `given`: the train flags on the command line (--elastic among them
// or not); an elastic flag without --elastic is refused too.
void check_elastic_flags(const ElasticConfig& c, const std::set<std::string>& given);

// Supervises the job `train_args` describes (the cohort command line without
// the program name); returns the exit code: 0 when training finished, 1 when
// the restarts ran out or too few ranks were left (one line on stderr says
// which), or the job's own code when it failed without losing a rank.
int run_elastic(const ElasticConfig& c, const std::vector<std::string>& train_args);

}  // namespace cohort
