// The cost model (`cohort simulate`): a training step's time under each of
// cohort's strategies, from a compute profile (sim_profile.h) and the
// communication model (sim_comm.h), following the strategies' real message
// schedules: dp's buckets cut from the end of the arena and reduced one at a
// time as backward produces them, the pipeline's GPipe and 1F1B orders, the
// parameter server's pushes and pulls, ZeRO's reduce-scatters, gathers and
// stage 3's prefetched per-layer gathers.
#pragma once
#include <string>
#include <vector>

#include "bench/sim_comm.h"
#include "bench/sim_profile.h"
#include "parallel/defaults.h"

namespace cohort::sim {

// The strategy and its flags, as `cohort train` takes them.
struct Plan {
  std::string parallel = "dp";  // none | dp | ps | mp | pp | hybrid | zero
  Algo algo = Algo::kAuto;
  double bucket_mb = kDefaultBucketMb;
  bool overlap = true;
  int stages = 2, micro_batches = 4;
  bool one_f_one_b = true;
  std::string split;               // stage cut points ("3,7"); empty: balanced
  std::string balance = "params";  // params | time
  int dp = 1;                      // hybrid's replicas
  int servers = 1;
  bool async = false;
  int zero_stage = 1;
  double prefetch_mb = kDefaultPrefetchMb;  // stage 3: parameters gathered ahead (--prefetch-mb)
  int64_t batch = 128;  // per rank (dp, zero, ps workers); per pipeline (mp, pp, hybrid)
  int accumulate = 1;
  double activation_bytes = 4;  // per element sent between stages (bf16: 2)
  // Per gradient element summed over ranks (--grad-dtype bf16: 2; dp,
  // ZeRO's reduce-scatters, hybrid's replicas): the arena stays f32 and
  // buckets are cut in f32 elements, so a bucket sends half its bytes.
  double grad_bytes = 4;
  double cores = 0;             // compute units per host that ranks share (0: one per rank)
  bool busy_wait = false;       // ranks poll in blocking MPI calls: waiting holds a core
  // Hosts that are one machine's network namespaces (scripts/cluster.sh):
  // their ranks share that machine's cores (contention counts them
  // together), and the messages between them are copies by those cores.
  int hosts_per_machine = 1;
  // Measured slow-down at k ranks computing at once on a host ({k, factor},
  // rising k; interpolated linearly, 1 at one rank, extrapolated at the last
  // slope). With `cores` too, never below k / cores: k single-thread ranks'
  // work cannot finish sooner on that many cores.
  std::vector<std::pair<double, double>> contention;
};

// One optimizer step, the parts summing to `step` (seconds).
struct Prediction {
  double step = 0;
  double compute = 0;  // the critical rank's own work
  double comm = 0;     // communication not hidden behind compute
  double bubble = 0;   // pipeline idle time
  // Ranks in lockstep waiting, each step, for the slowest one's compute
  // (lockstep_wait()).
  double wait = 0;
  double data = 0;     // input not prefetched (synthetic: 0)
  double samples = 0;  // samples the job trains on per step
  double contention = 1;  // compute slow-down from ranks sharing a host's cores
  // Seconds of communication inside one machine that run while the ranks
  // compute (overlapped collectives, hidden or not), at the intra-host
  // link's pace: the copies and sums are done by the ranks' own cores (the
  // kernel's, for TCP between namespaces), so they count as busy time for
  // the contention estimate (dp, ZeRO).
  double copies = 0;
  double rate() const { return samples / step; }
};

// The length of a dp bucket's collective between namespace hosts whose
// ranks outnumber the machine's cores, while the ranks compute (f: their
// contention): its `cores` seconds of the cores' work wait for a core as
// the compute does (f times as long), the wire's share of its `idle`
// length does not. Session 49's
// timelines, 4 hosts on 2 vCPUs: at 1 Gbit/s, where the wire sets the
// pace, cifar-resnet50's dp buckets beside backward took x1.0-1.5 of
// their idle length (mean x1.2) and gpt2's 357-380 ms against 332-395
// after backward; at 10 Gbit/s, where TCP's work does, gpt2's took
// 197-256 ms against 77-102 after. The idle length slowed x f (session
// 37's rule, from gpt2's first bucket at 1 Gbit/s on family 25: 819 ms
// against ~330) priced cifar-resnet50's 1 Gbit/s rows 13-18% slow.
double crowded_pace(double idle, double cores, double f);

// Cores a rank keeps busy on average when it polls in blocking MPI calls
// (dp on namespace hosts, --busy-wait), from its step's parts (seconds): a
// core all step, plus the messages' work on the cores (`copies`, at most
// the step). Its communication thread does not hold a core of its own
// while a collective is in flight: cifar-resnet50's dp ring on 2 namespace
// hosts at 1 Gbit/s (session 49; collectives in flight 794 ms of a 1.13 s
// step) kept 1.0 cores a rank busy, 0.68-0.71 for its compute thread and
// 0.31-0.33 for its communication thread, where a thread spinning through
// the collectives (runs 7-9's bound) would have made it 1.34 and priced
// the step 17% slow (run 41).
double polling_busy(double step, double copies);

// ZeRO 1-2's pages written afresh each step (Profile::refill): the gradient
// pages outside the shard, returned after each bucket's reduction; with
// bf16 on the wire (and more than one rank) the whole f32 arena, each part
// returned once it is staged at 2 bytes (the shard's sums are kept at bf16),
// and the staging buffers, a mapping on huge pages per bucket
// (ZeroLayers::start_stage).
double zero_gradient_refill(const Profile& p, const Plan& plan, int world);

// The compute slow-down when `together` ranks of a host compute at once.
double slow_down(const Plan& plan, double together);

// E[max of k independent standard normal draws]: 0 for one, 1/sqrt(pi)
// for two, 3/(2 sqrt(pi)) for three, ~1.03 for four, ~3.2 for 1024.
double expected_max_normal(int k);

// Ranks whose steps end in one barrier (a collective every rank waits for):
// dp's and ZeRO's world, hybrid's replicas of a stage, the sync parameter
// server's workers; 1 for async workers, mp and pp, whose stages pass
// micro-batches along (a slow pass delays the others through the schedule,
// not through one barrier: not modelled).
int lockstep_ranks(const Plan& plan, int world);

// The seconds `k` ranks in lockstep lose each step to the slowest one, over
// one rank's `compute`, when a rank's step varies from one step to the next
// with relative standard deviation `spread` (Profile::step_spread),
// independently across ranks: compute x spread x expected_max_normal(k).
// Measured on a shared 2-vCPU guest (session 44, mnist-large, dp ring x2):
// the faster rank waited 9-23 ms of a ~210 ms step.
double lockstep_wait(double compute, double spread, int k);

// Whether a rank waiting in a blocking MPI call holds its share of the
// cores: --busy-wait, or a lone rank on each of several namespace hosts of
// one machine, which waits behind TCP with mpi_yield_when_idle, polling
// between its yields. Measured on a 4-host cluster on 2 cores: 2 ranks
// computing while 2 wait in MPI_Recv took 8.3 s for 4.1 s of work while
// each host's daemon led a session (a scheduling group of its own under
// Linux's autogroup), 5.1 s with autogroup off, 4.1 s with the 4 ranks on
// one host. scripts/cluster.sh now keeps the daemons in mpirun's session;
// cifar-resnet50's dp ring on 4 hosts at 1 Gbit/s, whose waits this rule
// prices, ran the same either way (best 2548 against 2656 ms). Waits that nap
// (comm::wait_yielding: ZeRO 2-3, pipeline receives) never hold a core.
bool waits_hold_cores(const Plan& plan, const Topology& t);

// Ranks a plan runs on (its --stages x --dp, or the topology's size).
int ranks_needed(const Plan& plan, int world);

// InputError naming the flag for a plan that cannot run on `world` ranks.
void check_plan(const Plan& plan, int world);

// The profile's batch must be the rows one rank computes at once: the
// per-rank batch, or a pipeline's micro-batch (it is rescaled otherwise).
Prediction predict(const Profile& p, const Plan& plan, const Topology& t);

// predict() for one rank alone with the same per-rank (or per-pipeline)
// batch: the baseline of scaling efficiency.
Prediction predict_single(const Profile& p, const Plan& plan);

// Stage boundaries cohort would cut (--split, else --balance over the
// layers' parameter counts or times).
std::vector<size_t> plan_cuts(const Profile& p, const Plan& plan);

// Rows one rank computes at once under `plan` (batch, or batch / micro-batches).
int64_t rows_per_pass(const Plan& plan);

}  // namespace cohort::sim
