// Starting ranks on this machine with mpirun: the command and environment
// that `--workers N` execs into, and that the elastic supervisor
// (parallel/elastic.h) forks for each of its jobs.
#pragma once
#include <string>
#include <vector>

namespace cohort {

// Set by the launcher for its ranks: only rank 0 prints an InputError.
constexpr const char* kLaunchedByWorkers = "COHORT_LAUNCHED_BY_WORKERS";
// Set by the elastic supervisor for its jobs' ranks: the file where rank 0
// keeps the update it reached (train/commits.h's ProgressBeacon); a rank
// that sees it dies with its parent (mpirun, which dies with the supervisor).
constexpr const char* kElasticProgress = "COHORT_ELASTIC_PROGRESS";

// Asks the kernel to SIGKILL this process when its parent dies (and exits
// at once where the parent is already gone): an elastic job's mpirun and
// ranks do not outlive a supervisor killed with SIGKILL.
void die_with_parent();

// `mpirun ... -np workers <this binary> args...` (args: the cohort command
// line without the program name and without --workers).
std::vector<std::string> mpirun_command(const std::vector<std::string>& args, int workers);

// Sets this process's environment for its mpirun children: kLaunchedByWorkers,
// mpirun's consent to run as root, and passive OpenMP waiting when
// workers x threads oversubscribe the CPUs (a note on stderr says so), and
// yielding MPI waits when workers x (threads + a communication thread) do.
void prepare_mpirun_environment(int workers, int threads);

// Drops `--name value` and `--name=value` for each name in `flags` (and bare
// `--name` for those in `switches`) from args.
std::vector<std::string> without_flags(const std::vector<std::string>& args,
                                       const std::vector<std::string>& flags,
                                       const std::vector<std::string>& switches = {});

}  // namespace cohort
