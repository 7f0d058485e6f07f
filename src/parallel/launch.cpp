#include "parallel/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/cpus.h"

namespace cohort {

void die_with_parent() {
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent || parent == 1) _exit(137);  // died before the request took
}

std::vector<std::string> mpirun_command(const std::vector<std::string>& args, int workers) {
  // --quiet: no banners around a rank's own one-line error.
  std::vector<std::string> cmd = {"mpirun", "--quiet", "--oversubscribe", "--bind-to", "none",
                                  "-np", std::to_string(workers),
                                  std::filesystem::read_symlink("/proc/self/exe").string()};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

void prepare_mpirun_environment(int workers, int threads) {
  // More OpenMP threads than CPUs (teams of 2 or more): a thread spinning at a barrier (libgomp's
  // default) holds the CPU its descheduled partner needs. Passive waiting
  // measured 785 -> 3,605 images/s for mnist-small at 2 ranks x 2 threads on
  // 2 vCPUs (and costs a third at 1 x 2, so only when oversubscribed).
  const int cpus = usable_cpus();
  if (threads > 1 && workers * threads > cpus && !std::getenv("OMP_WAIT_POLICY") &&
      !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    std::fprintf(stderr, "cohort: %d ranks x %d threads on %d CPUs: OMP_WAIT_POLICY=PASSIVE\n",
                 workers, threads, cpus);
  }
  // Every rank also runs a communication thread, and OpenMPI's blocking
  // calls spin while they wait unless the job is oversubscribed by slots:
  // with more threads than CPUs a spinning thread holds the CPU that the
  // rank it waits for needs. Yielding measured gpt2's dp step on 2 ranks of
  // 2 vCPUs 1348-1375 -> 1196-1209 ms (communication threads' CPU 374-424
  // -> 137-156 ticks over 12 steps).
  if (workers * (threads + 1) > cpus && !std::getenv("OMPI_MCA_mpi_yield_when_idle"))
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  // The ranks of one job read the same flags and files, so a bad input is
  // rank 0's one line to print (kLaunchedByWorkers).
  setenv(kLaunchedByWorkers, "1", 1);
  // mpirun refuses root without these; the user asked for ranks.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
}

std::vector<std::string> without_flags(const std::vector<std::string>& args,
                                       const std::vector<std::string>& flags,
                                       const std::vector<std::string>& switches) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool drop = false;
    for (const std::string& f : switches) drop = drop || a == f;
    for (const std::string& f : flags) {
      if (a == f) {
        drop = true;
        ++i;  // its value
        break;
      }
      if (a.rfind(f + "=", 0) == 0) drop = true;
    }
    if (!drop) out.push_back(a);
  }
  return out;
}

}  // namespace cohort
