#include "parallel/elastic.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "parallel/hosts.h"
#include "parallel/launch.h"

namespace cohort {

namespace fs = std::filesystem;

void check_elastic_flags(const ElasticConfig& c, const std::set<std::string>& given) {
  const bool elastic = given.count("--elastic") > 0;
  for (const char* f : {"--min-workers", "--max-workers", "--hostfile", "--host-discovery-script",
                        "--max-restarts", "--cooldown"})
    COHORT_INPUT_CHECK(elastic || !given.count(f), f, " needs --elastic");
  if (!elastic) return;
  COHORT_INPUT_CHECK(given.count("--min-workers"), "--elastic needs --min-workers M");
  COHORT_INPUT_CHECK(given.count("--max-workers"), "--elastic needs --max-workers N");
  COHORT_INPUT_CHECK(c.min_workers >= 1, "--min-workers must be at least 1, got ", c.min_workers);
  COHORT_INPUT_CHECK(c.min_workers <= c.max_workers, "--min-workers ", c.min_workers,
                     " is more than --max-workers ", c.max_workers);
  COHORT_INPUT_CHECK(c.max_restarts >= 0, "--max-restarts must be 0 or more, got ", c.max_restarts);
  COHORT_INPUT_CHECK(c.cooldown_s >= 0, "--cooldown must be 0 or more seconds, got ", c.cooldown_s);
  const int sources = int(given.count("--workers")) + int(given.count("--hostfile")) +
                      int(given.count("--host-discovery-script"));
  COHORT_INPUT_CHECK(sources <= 1,
                     "--elastic takes one of --workers, --hostfile, --host-discovery-script");
  if (given.count("--workers"))
    COHORT_INPUT_CHECK(c.workers >= c.min_workers && c.workers <= c.max_workers, "--workers ",
                       c.workers, " is outside --min-workers ", c.min_workers,
                       " .. --max-workers ", c.max_workers);
  if (!c.hostfile.empty())
    COHORT_INPUT_CHECK(fs::is_regular_file(c.hostfile), "--hostfile ", c.hostfile,
                       ": no such file");
  if (!c.discovery_script.empty())
    COHORT_INPUT_CHECK(access(c.discovery_script.c_str(), X_OK) == 0, "--host-discovery-script ",
                       c.discovery_script, ": not an executable file");
}

CommitSeen newest_commit(const std::string& dir) {
  static const std::regex name_re(R"(commit-(\d{12})\.safetensors)");
  CommitSeen seen;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::smatch m;
    const std::string name = it->path().filename().string();
    if (!std::regex_match(name, m, name_re) || std::stoll(m[1]) <= seen.updates) continue;
    const auto written = fs::last_write_time(it->path(), ec);
    if (ec) continue;
    seen.updates = std::stoll(m[1]);
    seen.age_s = std::chrono::duration<double>(fs::file_time_type::clock::now() - written).count();
  }
  return seen;
}

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point kT0 = Clock::now();
double now_s() { return std::chrono::duration<double>(Clock::now() - kT0).count(); }

volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

// A /proc file's bytes; empty where the process is gone. (std::ifstream
// throws from underflow when read() fails with ESRCH, which a rank that
// exits between the open and the read gives: the chaos test's seed
// 3378115798 took the supervisor down so in session 30.)
std::string read_proc(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

// /proc/<pid>/stat's state letter and parent ('\0' where the process is gone).
struct ProcStat {
  char state = 0;
  pid_t ppid = 0;
};
ProcStat proc_stat(pid_t pid) {
  const std::string s = read_proc("/proc/" + std::to_string(pid) + "/stat");
  const auto close = s.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(s.substr(close + 1));
  ProcStat st;
  rest >> st.state >> st.ppid;
  return st;
}

// The MPI rank of a process mpirun started (-1 if not one).
int mpi_rank_of(pid_t pid) {
  const std::string env = read_proc("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
  for (size_t at = 0; at < env.size(); at = env.find('\0', at) + 1) {
    if (env.compare(at, key.size(), key) == 0) return std::atoi(env.c_str() + at + key.size());
    if (env.find('\0', at) == std::string::npos) break;
  }
  return -1;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (proc_stat(pid).ppid == parent) out.push_back(pid);
  }
  return out;
}

// A rank of the running job, as the supervisor sees it in /proc.
struct RankProc {
  pid_t pid = 0;
  double gone_at = -1, stopped_at = -1;
  double stalled_at = -1;  // stopped for a second or more: kept once set
};

// One lost rank: which, where, how, and when it was noticed.
struct Failure {
  int rank = -1;
  std::string how;
  double at = 0;
};

// One mpirun job and what its output and /proc said about it.
struct Job {
  pid_t pid = -1;  // mpirun, leader of the job's process group
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  std::map<int, RankProc> ranks;
  double training_at = -1;   // its start event: training again
  int64_t grow_after = -2;   // more slots seen: grow once a commit newer than this is written
  bool finishing = false;    // its last epoch's line seen: its commit would end the run
  std::string summary;  // the job's summary line (jsonl)
  int signal_rank = -1, signal_no = 0;  // mpirun: "process rank R ... exited on signal S"
  std::vector<int> named_stalled;       // the heartbeat or the arrival check named them
  std::string stopped_for;              // the supervisor ended the job: why
  int status = 0;
};

class Supervisor {
 public:
  Supervisor(const ElasticConfig& c, std::vector<std::string> args, std::string commit_dir,
             bool own_dir)
      : c_(c), args_(std::move(args)), commit_dir_(std::move(commit_dir)), own_dir_(own_dir) {
    progress_path_ = commit_dir_ + ".progress";
  }
  int run();

 private:
  void start_job(int world);
  void watch(Job& job);
  void handle_line(Job& job, const std::string& line, bool err);
  void scan_ranks(Job& job);
  void end_job(Job& job, const std::string& why);
  void reap(Job& job);
  std::vector<Failure> failures(const Job& job) const;
  std::vector<HostSlots> discover(bool must);
  std::vector<std::string> launch_args() const;
  void watch_hosts(Job& job);
  int wait_for_slots(int world);
  int64_t progress() const;
  void print_summary(const Job& job);

  ElasticConfig c_;
  std::vector<std::string> args_;
  HostPool pool_;
  std::vector<std::string> rank_hosts_;
  std::string commit_dir_;     // the job's --checkpoint-dir: restarts resume with auto
  bool own_dir_ = false;       // the supervisor's own, removed after a run that finished
  std::string progress_path_;  // rank 0's update count (kElasticProgress)
  std::map<int, int64_t> epoch_images_;  // the last epoch line's images, by epoch
  Job job_;
  double last_discovery_ = -1e9;
  nlohmann::ordered_json restarts_ = nlohmann::ordered_json::array();
  double pending_failure_at_ = -1;  // the last failure, until the next job trains
};

std::vector<HostSlots> Supervisor::discover(bool must) {
  FILE* p = popen(c_.discovery_script.c_str(), "r");
  std::string text;
  if (p) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  }
  const int rc = p ? pclose(p) : -1;
  COHORT_INPUT_CHECK(!must || rc == 0, "--host-discovery-script ", c_.discovery_script,
                     " failed (status ", rc, ")");
  if (rc != 0) return {};
  return parse_discovery(text, c_.discovery_script);
}

// The first job runs the command as given (a new run clears the folder's
// commits; --resume auto continues a supervisor that died); restarts
// continue from the newest commit.
std::vector<std::string> Supervisor::launch_args() const {
  if (restarts_.empty()) return args_;
  std::vector<std::string> a = without_flags(args_, {"--resume"});
  a.insert(a.end(), {"--resume", "auto"});
  return a;
}

// The update rank 0 reached (-1: unknown), from the job's beacon file.
int64_t Supervisor::progress() const {
  int64_t updates = -1;
  const int fd = open(progress_path_.c_str(), O_RDONLY);
  if (fd >= 0 && pread(fd, &updates, sizeof updates, 0) != sizeof updates) updates = -1;
  if (fd >= 0) close(fd);
  return updates;
}

void Supervisor::start_job(int world) {
  job_ = Job{};
  rank_hosts_ = pool_.assign(world, now_s());
  std::vector<std::string> cmd = mpirun_command(launch_args(), world);
  int out[2], err[2];
  COHORT_CHECK(pipe(out) == 0 && pipe(err) == 0, "elastic: pipe: ", std::strerror(errno));
  const pid_t pid = fork();
  COHORT_CHECK(pid >= 0, "elastic: fork: ", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // the job's own group: ended as one, orphans included
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]), close(err[0]), close(out[1]), close(err[1]);
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
    die_with_parent();  // SIGKILL to the supervisor takes mpirun, and mpirun its ranks
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("mpirun", argv.data());
    std::fprintf(stderr, "cohort: --elastic: cannot run mpirun (%s); install openmpi-bin\n",
                 std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]), close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK), fcntl(err[0], F_SETFL, O_NONBLOCK);
  job_.pid = pid, job_.out_fd = out[0], job_.err_fd = err[0];
}

void Supervisor::handle_line(Job& job, const std::string& line, bool err) {
  static const std::regex signal_re(R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+))");
  static const std::regex heartbeat_re(R"(rank (\d+) stopped making progress)");
  static const std::regex arrival_re(R"(ranks? ([\d, ]+) did not reach)");
  std::smatch m;
  {
    if (job.signal_rank < 0 && std::regex_search(line, m, signal_re))
      job.signal_rank = std::stoi(m[1]), job.signal_no = std::stoi(m[2]);
    if (std::regex_search(line, m, heartbeat_re)) job.named_stalled.push_back(std::stoi(m[1]));
    if (std::regex_search(line, m, arrival_re)) {
      std::istringstream ids(std::regex_replace(m[1].str(), std::regex(","), " "));
      for (int r; ids >> r;) job.named_stalled.push_back(r);
    }
  }
  if (err) {
    std::fprintf(stderr, "%s\n", line.c_str());
    return;
  }
  const double t = now_s();
  bool hold = false;
  if (!line.empty() && line[0] == '{') {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string event = j.is_object() ? j.value("event", "") : "";
    if (event == "start" && job.training_at < 0) job.training_at = t;
    if (event == "epoch" && j.contains("images")) epoch_images_[j["epoch"]] = j["images"];
    if (event == "epoch" && c_.epochs > 0 && j.value("epoch", 0) >= c_.epochs) job.finishing = true;
    if (event == "summary") job.summary = line, hold = true;
  } else if (line.rfind("cohort train: model", 0) == 0 && job.training_at < 0) {
    job.training_at = t;
  }
  if (job.training_at == t && pending_failure_at_ >= 0) {
    restarts_.back()["recovery_seconds"] = std::round((t - pending_failure_at_) * 100) / 100;
    pending_failure_at_ = -1;
  }
  if (!hold) std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

void Supervisor::scan_ranks(Job& job) {
  const double t = now_s();
  if (int(job.ranks.size()) < int(rank_hosts_.size()))
    for (pid_t pid : children_of(job.pid)) {
      const int r = mpi_rank_of(pid);
      if (r >= 0 && !job.ranks.count(r)) job.ranks[r].pid = pid;
    }
  for (auto& [r, p] : job.ranks) {
    const ProcStat st = proc_stat(p.pid);
    if ((st.state == 0 || st.state == 'Z' || st.ppid != job.pid) && p.gone_at < 0) p.gone_at = t;
    if (st.state == 'T' && p.stopped_at < 0) p.stopped_at = t;
    if (st.state != 'T' && st.state != 0) p.stopped_at = -1;
    if (p.stopped_at >= 0 && t - p.stopped_at >= 1 && p.stalled_at < 0) p.stalled_at = p.stopped_at;
  }
}

void Supervisor::end_job(Job& job, const std::string& why) {
  if (job.stopped_for.empty()) job.stopped_for = why;
  // SIGCONT first: a stopped rank holds a SIGKILL until it runs.
  kill(-job.pid, SIGCONT);
  kill(-job.pid, SIGKILL);
  for (auto& [r, p] : job.ranks) kill(p.pid, SIGKILL);
}

// After mpirun: no rank of the job may outlive it. Ranks orphaned by mpirun
// come to this process (a child subreaper) and are reaped here.
void Supervisor::reap(Job& job) {
  kill(-job.pid, SIGCONT);
  kill(-job.pid, SIGKILL);
  for (auto& [r, p] : job.ranks) {
    const ProcStat st = proc_stat(p.pid);
    if (st.state != 0 && st.state != 'Z' && st.ppid == getpid()) kill(p.pid, SIGKILL);
  }
  for (pid_t pid : children_of(getpid())) kill(pid, SIGKILL);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  close(job.out_fd), close(job.err_fd);
}

void Supervisor::watch(Job& job) {
  const double stall_limit = (c_.timeout > 0 ? std::max(2.0, c_.timeout / 2) : 25.0) + 10;
  bool done = false;
  while (!done) {
    pollfd fds[2] = {{job.out_fd, POLLIN, 0}, {job.err_fd, POLLIN, 0}};
    poll(fds, 2, 50);
    const pid_t r = waitpid(job.pid, &job.status, WNOHANG);
    done = r == job.pid;
    // Drain what is there (all of it once mpirun is gone).
    for (int i = 0; i < 2; ++i) {
      std::string& buf = i ? job.err_buf : job.out_buf;
      char chunk[65536];
      for (ssize_t n; (n = read(i ? job.err_fd : job.out_fd, chunk, sizeof chunk)) > 0;) {
        buf.append(chunk, size_t(n));
        for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1))
          handle_line(job, buf.substr(0, nl), i == 1);
      }
    }
    if (done) break;
    if (g_signal) {
      end_job(job, "signal");
      continue;
    }
    scan_ranks(job);
    const double t = now_s();
    for (auto& [rank, p] : job.ranks) {
      // mpirun ends the job when a rank dies or aborts; should it not, the
      // supervisor does (a lost rank), as for a rank stopped past the limit.
      if (p.gone_at >= 0 && t - p.gone_at > 10) end_job(job, "a rank was lost");
      if (p.stopped_at >= 0 && t - p.stopped_at > stall_limit) end_job(job, "a rank stalled");
    }
    if (job.stopped_for.empty()) watch_hosts(job);
  }
  reap(job);
}

// A host gone from discovery: its ranks are dropped at once. More slots (new
// hosts, or ones back from a cool-down): the job grows at its next commit,
// so the restart redoes nothing; not once its last epoch ended (that
// commit ends the run: a job grown from it would have nothing to train).
void Supervisor::watch_hosts(Job& job) {
  const double t = now_s();
  const int world = int(rank_hosts_.size());
  if (!c_.discovery_script.empty() && t - last_discovery_ >= c_.discovery_interval_s) {
    last_discovery_ = t;
    const auto seen = discover(false);
    if (!seen.empty()) pool_.update(seen);
    if (!seen.empty() && !pool_.fits(rank_hosts_, t)) return end_job(job, "hosts changed");
  }
  if (job.finishing || world >= c_.max_workers || pool_.available(t) <= world) return;
  const int64_t newest = newest_commit(commit_dir_).updates;
  if (job.grow_after == -2) job.grow_after = newest;
  else if (newest > job.grow_after) end_job(job, "more slots");
}

// Fewer slots than --min-workers: waits for failed slots (or hosts) to come
// back from their cool-down, where any will. Returns the world to run.
int Supervisor::wait_for_slots(int world) {
  for (double back; world < c_.min_workers && !g_signal && (back = pool_.next_return(now_s())) >= 0;) {
    std::fprintf(stderr, "cohort elastic: %d slot(s) free, fewer than --min-workers %d; "
                 "waiting %.1f s for slots to return\n", world, c_.min_workers, back - now_s());
    while (now_s() < back && !g_signal) poll(nullptr, 0, 50);
    world = std::min(c_.max_workers, pool_.available(now_s()));
  }
  return world;
}

std::vector<Failure> Supervisor::failures(const Job& job) const {
  std::vector<Failure> out;
  // A rank stopped (SIGSTOP, or hung) is the cause, whatever ended the job.
  for (auto& [r, p] : job.ranks)
    if (p.stalled_at >= 0) out.push_back({r, "stalled (stopped, no heartbeat)", p.stalled_at});
  if (!out.empty()) return out;
  if (job.signal_rank >= 0) {
    auto it = job.ranks.find(job.signal_rank);
    const double at = it != job.ranks.end() && it->second.gone_at >= 0 ? it->second.gone_at : now_s();
    return {{job.signal_rank, detail::concat("died on signal ", job.signal_no, " (",
                                             strsignal(job.signal_no), ")"), at}};
  }
  for (int r : job.named_stalled)
    if (std::none_of(out.begin(), out.end(), [&](const Failure& f) { return f.rank == r; }))
      out.push_back({r, "stalled (named by the heartbeat)", now_s()});
  if (!out.empty()) return out;
  // The first ranks to go, while mpirun still ran. mpirun --quiet does not
  // say how, but exits with 128 + the signal that ended the first rank.
  const int code = WIFEXITED(job.status) ? WEXITSTATUS(job.status) : 0;
  // A job whose ranks ended by an error of their own (exit 1, 2: bad input,
  // a non-finite loss) lost no rank: restarting it would fail alike.
  if (code <= 128 || code >= 128 + NSIG) return out;
  const std::string how =
      detail::concat("died on signal ", code - 128, " (", strsignal(code - 128), ")");
  double first = 1e300;
  for (auto& [r, p] : job.ranks)
    if (p.gone_at >= 0) first = std::min(first, p.gone_at);
  for (auto& [r, p] : job.ranks)
    if (p.gone_at >= 0 && p.gone_at <= first + 0.15) out.push_back({r, how, p.gone_at});
  return out;
}

void Supervisor::print_summary(const Job& job) {
  double lost = 0;
  for (auto& r : restarts_) lost += r.value("recovery_seconds", 0.0) + r.value("redone_seconds", 0.0);
  lost = std::round(lost * 100) / 100;
  std::vector<int64_t> images;  // every epoch's samples, as its last line counted them
  for (auto& [epoch, n] : epoch_images_) images.push_back(n);
  if (c_.jsonl && !job.summary.empty()) {
    auto s = nlohmann::ordered_json::parse(job.summary, nullptr, false);
    if (s.is_object()) {
      s["elastic"] = {{"restarts", restarts_}, {"time_lost_seconds", lost},
                      {"epoch_images", images}};
      std::printf("%s\n", s.dump().c_str());
      return;
    }
  }
  if (!job.summary.empty()) std::printf("%s\n", job.summary.c_str());
  std::printf("cohort elastic: %zu restart(s), %.2f s lost\n", restarts_.size(), lost);
}

int Supervisor::run() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  setenv(kElasticProgress, progress_path_.c_str(), 1);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  if (!c_.hostfile.empty()) {
    std::ifstream f(c_.hostfile);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    pool_ = HostPool(c_.cooldown_s);
    pool_.update(parse_hostfile(text, c_.hostfile));
  } else if (!c_.discovery_script.empty()) {
    pool_ = HostPool(c_.cooldown_s);
    pool_.update(discover(true));
    last_discovery_ = now_s();
  } else {
    pool_ = HostPool(c_.cooldown_s);
    pool_.update({{"localhost", c_.workers > 0 ? c_.workers : c_.max_workers}});
  }

  int world = std::min(c_.max_workers, pool_.available(now_s()));
  int failed_restarts = 0;
  int code = 1;
  while (true) {
    world = wait_for_slots(world);
    if (world < c_.min_workers) {
      std::fprintf(stderr, "cohort: elastic: %d slot(s) left, fewer than --min-workers %d\n", world,
                   c_.min_workers);
      break;
    }
    prepare_mpirun_environment(world, c_.threads);
    start_job(world);
    watch(job_);
    if (g_signal) {
      code = 128 + g_signal;
      break;
    }
    const bool ok = WIFEXITED(job_.status) && WEXITSTATUS(job_.status) == 0;
    if (ok && job_.stopped_for.empty()) {
      print_summary(job_);
      code = 0;
      break;
    }
    const double t = now_s();
    const int64_t reached = progress();
    nlohmann::ordered_json rec = {{"restart", restarts_.size() + 1}, {"world_before", world}};
    std::string what;
    double failed_at = t;
    if (job_.stopped_for == "hosts changed" || job_.stopped_for == "more slots") {
      what = job_.stopped_for == "more slots"
                 ? "more slots are free (new hosts, or back from a cool-down): grown at a commit"
                 : "the discovered hosts changed";
      rec["cause"] = job_.stopped_for;
    } else {
      const std::vector<Failure> lost = failures(job_);
      if (lost.empty()) {
        const int rc = WIFEXITED(job_.status) ? WEXITSTATUS(job_.status) : 1;
        if (rc != 2)
          std::fprintf(stderr, "cohort: elastic: the job failed (exit %d) without losing a rank; "
                       "not restarting\n", rc);
        code = rc == 0 ? 1 : rc;
        break;
      }
      nlohmann::ordered_json failed = nlohmann::ordered_json::array();
      for (const Failure& f : lost) {
        const std::string host = f.rank < int(rank_hosts_.size()) ? rank_hosts_[size_t(f.rank)] : "?";
        failed.push_back({{"rank", f.rank}, {"host", host}, {"how", f.how}});
        what += detail::concat(what.empty() ? "" : ", ", "rank ", f.rank, " (host ", host, ") ", f.how);
        if (pool_.fail(host, t, c_.min_workers))
          what += detail::concat(", host ", host, " cools down for ", c_.cooldown_s, " s");
        failed_at = std::min(failed_at, f.at);
      }
      rec["failed"] = failed;
      if (++failed_restarts > c_.max_restarts) {
        std::fprintf(stderr, "cohort: elastic: %s; --max-restarts %d reached, giving up\n",
                     what.c_str(), c_.max_restarts);
        break;
      }
    }
    if (!c_.discovery_script.empty()) {
      const auto seen = discover(false);
      if (!seen.empty()) pool_.update(seen);
    }
    world = wait_for_slots(std::min(c_.max_workers, pool_.available(t)));
    // --resume auto takes the newest commit: redone is the work since it.
    const CommitSeen last = newest_commit(commit_dir_);
    const int64_t from = std::max<int64_t>(0, last.updates);
    const double since_start = job_.training_at >= 0 ? failed_at - job_.training_at : 0;
    const double redone = std::max(0.0, last.updates >= 0 ? failed_at - (now_s() - last.age_s) : since_start);
    const int64_t steps = reached >= 0 ? std::max<int64_t>(0, reached - from) : 0;
    rec["world"] = world;
    rec["failed_at_update"] = reached;
    rec["resumed_from_update"] = from;
    rec["steps_redone"] = steps;
    rec["redone_seconds"] = std::round(redone * 100) / 100;
    // Of the recovery: the loss to the job's end (the rest is the new start).
    rec["ended_after_seconds"] = std::round((t - failed_at) * 100) / 100;
    restarts_.push_back(rec);
    pending_failure_at_ = failed_at;
    if (world >= c_.min_workers)
      std::fprintf(stderr, "cohort elastic: %s; restart %zu at %d ranks (was %d), from update %lld, "
                   "redoing %lld steps (%.1f s) of training\n", what.c_str(), restarts_.size(),
                   world, rec["world_before"].get<int>(), (long long)from, (long long)steps, redone);
  }
  fs::remove(progress_path_);
  // Its own folder goes once the run finished, or where it holds no commit
  // to resume (kept otherwise: --resume auto --checkpoint-dir continues it).
  if (own_dir_ && (code == 0 || newest_commit(commit_dir_).updates < 0)) fs::remove_all(commit_dir_);
  return code;
}

}  // namespace

int run_elastic(const ElasticConfig& c, const std::vector<std::string>& train_args) {
  // The supervisor's own flags are not the job's.
  std::vector<std::string> args =
      without_flags(train_args,
                    {"--workers", "--min-workers", "--max-workers", "--hostfile",
                     "--host-discovery-script", "--max-restarts", "--cooldown"},
                    {"--elastic"});
  // Restarts resume from commits: --commit-every auto unless given, into a
  // folder of the supervisor's own unless --checkpoint-dir is given.
  std::string dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--checkpoint-dir" && i + 1 < args.size()) dir = args[i + 1];
    if (args[i].rfind("--checkpoint-dir=", 0) == 0) dir = args[i].substr(17);
  }
  const bool has_every = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--commit-every" || a.rfind("--commit-every=", 0) == 0;
  });
  if (!has_every) args.insert(args.end(), {"--commit-every", "auto"});
  const bool own_dir = dir.empty();
  if (own_dir) {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    dir = (base / ("cohort-elastic-" + std::to_string(getpid()))).string();
    args.insert(args.end(), {"--checkpoint-dir", dir});
    std::fprintf(stderr, "cohort elastic: commits go to %s (should this supervisor die, continue "
                 "with --resume auto --checkpoint-dir %s)\n", dir.c_str(), dir.c_str());
  }
  Supervisor s(c, args, dir, own_dir);
  return s.run();
}

}  // namespace cohort
