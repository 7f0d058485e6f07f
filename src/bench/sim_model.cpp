#include "bench/sim_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "parallel/shards.h"
#include "parallel/stages.h"
#include "parallel/zero_replica.h"

namespace cohort::sim {

namespace {

// One rank's timeline under one plan; `busy` is each rank's own compute
// (for the host contention estimate).
struct Timeline {
  Prediction p;
  std::vector<double> busy;
  double slowed = 0;  // the compute's own slow-down where the plan finds it (pipelines)
};

// The topology as the cores see it: every message a copy at the intra-host
// link's pace (what a rank's own cores spend on it, whatever the wire), or
// between namespace hosts, the kernel's TCP work where measured (inter_cpu).
Topology copying(const Topology& t) {
  Topology c = t;
  c.inter = t.inter_cpu ? *t.inter_cpu : t.intra;
  c.inter_one_way = t.inter_cpu ? t.inter_cpu : t.intra_one_way;
  c.inter_exchange.reset();
  return c;
}

// What each message costs the cores while ranks contend (f): a copy in
// shared memory is the same work however long it waits for a core (from
// the unslowed links). TCP's work between namespace hosts grows with the
// contention (from the slowed ones) for ranks that poll between its pieces
// (dp): cifar-resnet50's dp ring on 4 hosts at 10 Gbit/s spent 0.35 s of
// kernel time a rank a step (session 49: 0.10 of a core in the compute
// thread, 0.07 in the communication thread, 2.05 s steps), the unshaped
// pace 0.10, x2.30 of it 0.23. Ranks that nap (ZeRO, comm::idle) do its
// unshaped work only: gpt2's ZeRO-3 on 4 hosts at 10 Gbit/s spent 1.7 s a
// rank a step against 1.9 at the unshaped pace, where x3.9 of it (the
// slowed pace, feeding the contention that slows it) priced the step 22%
// slow in run 41.
Topology cores_work(const Plan& plan, const Topology& t, const Topology& slowed) {
  Topology c = copying(t);
  const bool polls = plan.parallel != "zero";
  if (polls && slowed.inter_cpu) c.inter = *slowed.inter_cpu, c.inter_one_way = slowed.inter_cpu;
  return c;
}

// Every rank on one machine: one host, or namespace hosts of one machine.
bool one_machine(const Topology& t, const Plan& plan) {
  return t.hosts <= std::max(1, plan.hosts_per_machine);
}

// Ranks that share one machine's cores.
int ranks_per_machine(const Plan& plan, const Topology& t) {
  return t.ranks_per_host * std::min(t.hosts, std::max(1, plan.hosts_per_machine));
}

// More ranks than a machine's cores (known only where --cores is given).
bool ranks_outnumber_cores(const Plan& plan, const Topology& t) {
  return plan.cores > 0 && ranks_per_machine(plan, t) > plan.cores;
}

// Collectives between hosts that wait in MPI's blocking calls (dp's, not
// ZeRO's napping ones): the links' pace beside compute applies to these.
bool polling_between_hosts(const Plan& plan, const Topology& t) {
  return t.hosts >= 2 && plan.parallel != "zero";
}

// The links as they are while the ranks compute beside a collective
// (Topology::inter_loaded, measured with one computation beside each
// rank), where that was measured and applies: between hosts, for
// collectives that wait in MPI's blocking calls as `bench comm`'s do (dp).
// With more ranks than cores too (session 49, 4 namespace hosts on 2
// vCPUs, 16 MiB ring with 4 computations beside: x1.18 its idle length at
// 1 Gbit/s, x2.6 at 10; training's buckets beside backward there: x1.2 and
// x2.5-3). ZeRO's waits nap (comm::wait_yielding) and run at their own
// pace: on 2 namespace hosts at 10 Gbit/s (run 19) cifar-resnet50's ZeRO-1,
// the same bytes as dp's ring in reduce-scatters and gathers, took 892 ms
// a step where dp's ring took 989 (one rank alone: 769).
std::optional<Topology> under_load(const Plan& plan, const Topology& t) {
  if (!t.inter_loaded || !polling_between_hosts(plan, t)) return std::nullopt;
  Topology l = t;
  l.inter = t.inter_loaded->ring;
  l.inter_one_way = t.inter_loaded->one_way;
  l.inter_exchange = t.inter_loaded->exchange;
  l.inter_loaded.reset();
  return l;
}

// Between hosts of one machine whose ranks outnumber its cores (4 namespace
// hosts on 2 vCPUs), where no loaded link was measured: a collective that
// overlaps compute advances at crowded_pace.
bool crowded_between_hosts(const Plan& plan, const Topology& t) {
  return !t.inter_loaded && polling_between_hosts(plan, t) && ranks_outnumber_cores(plan, t);
}

// A compute and a communication thread per rank are more threads than the
// machine's cores (known only where --cores is given).
bool threads_outnumber_cores(const Plan& plan, const Topology& t) {
  return plan.cores > 0 && 2 * ranks_per_machine(plan, t) > plan.cores;
}

// When a collective begun at `begin` ends, taking `loaded` seconds at the
// pace it has while compute runs (until `until`) and `idle` seconds alone:
// it advances at the loaded pace until then, at the idle one after.
double finish(double begin, double until, double loaded, double idle) {
  if (begin >= until) return begin + idle;
  if (begin + loaded <= until) return begin + loaded;
  return until + (1 - (until - begin) / loaded) * idle;
}

std::vector<int64_t> param_offsets(const Profile& p) {
  std::vector<int64_t> off = {0};
  for (const auto& l : p.layers) off.push_back(off.back() + l.params);
  return off;
}

// Gradient buckets as data parallelism cuts them: from the end of the
// arena, bucket_mb each; {begin, end} in elements.
std::vector<std::pair<int64_t, int64_t>> buckets(int64_t n, double bucket_mb) {
  const int64_t per = f32_elements_in_mib(bucket_mb);
  std::vector<std::pair<int64_t, int64_t>> b;
  for (int64_t end = n; end > 0; end -= per) b.push_back({std::max<int64_t>(0, end - per), end});
  return b;
}

// When backward (starting at `start`, layers in reverse, times x f) has
// finished each layer.
std::vector<double> backward_done(const Profile& p, double start, double f) {
  std::vector<double> done(p.layers.size());
  double t = start;
  for (size_t i = p.layers.size(); i-- > 0;) {
    t += p.layers[i].backward * f;
    done[i] = t;
  }
  return done;
}

// The time by which the whole range [b, e) has been produced: when the
// lowest layer overlapping it is done.
double range_ready(const std::vector<int64_t>& off, const std::vector<double>& done, int64_t b,
                   int64_t e) {
  for (size_t i = 0; i + 1 < off.size(); ++i)
    if (off[i + 1] > b && off[i] < e) return done[i];
  return done.empty() ? 0 : done.front();
}

// A bucket's collective: elements [b, e) of an arena of `n`, `bytes` an
// element on the wire.
using CollectiveTime = std::function<double(const Topology&, const Group&, int64_t b, int64_t e,
                                            int64_t n, Algo, double bytes)>;

double allreduce_range(const Topology& t, const Group& g, int64_t b, int64_t e, int64_t, Algo a,
                       double bytes) {
  return allreduce_time(t, g, bytes * double(e - b), a);
}

// ZeRO 1-3: reduce_scatter_range over the blocks the bucket falls in, each
// part sent from gradient pages released after the last step's reduction
// and refilled by this backward (f32 gradients; bf16 ones are staged on
// huge pages): the kernel's first read of them, Profile::send_refilled.
double zero_send_refilled(const Profile& p, const Plan& plan) {
  return plan.grad_bytes == 4 ? p.send_refilled_for(4.0 * double(p.params())) : 0.0;
}

CollectiveTime reduce_scatter_range(double send_refilled) {
  return [send_refilled](const Topology& t, const Group& g, int64_t b, int64_t e, int64_t n, Algo,
                         double bytes) {
    return shard_reduce_scatter_time(t, g, block_parts(b, e, n, g.count, bytes), send_refilled);
  };
}

// The algorithm a gradient all-reduce runs: with bf16 on the wire `auto`
// is the ring, the one that keeps bf16 there (parallel/grad_reduce.h).
Algo gradient_algo(const Plan& plan) {
  return plan.grad_bytes == 2 && plan.algo == Algo::kAuto ? Algo::kRing : plan.algo;
}

// ZeRO 1-2's all-gather of the stepped shards: f32 weights in whole blocks,
// or, where the rank holds a bf16 copy (zero_replica.h), 2 bytes a
// parameter in 2 MB pieces.
double zero_gather_time(const Plan& plan, const Topology& t, const Group& g, int64_t params) {
  const DType compute = plan.activation_bytes == 2 ? DType::kBF16 : DType::kF32;
  if (!zero_holds_bf16_copy(plan.zero_stage, compute, g.count))
    return shard_allgather_time(t, g, 4.0 * double(params), 0);
  return shard_allgather_time(t, g, 2.0 * double(params), 2.0 * 16 * kShardSegment);
}

// dp and ZeRO 1-2: forward, backward with each bucket's collective queued
// as backward produces it (dp's at the loaded links' pace while backward
// runs, where measured: under_load), then the optimizer (x opt_share) and an
// all-gather of the updated parameters when the optimizer is sharded.
// `work`: what a bucket's collective costs the cores, where not `reduce`
// on `cpu` (ZeRO's: without the kernel's copy of refilled pages, which
// runs after backward on the link's clock, not beside the compute).
Prediction data_parallel(const Profile& p, const Plan& plan, const Topology& t, const Topology& cpu,
                         const Group& g, double f, const CollectiveTime& reduce, Algo algo,
                         double opt_share, bool gather_after, bool reduce_every_micro,
                         const CollectiveTime* work = nullptr) {
  const double fwd = p.forward() * f, bwd = p.backward() * f;
  const auto off = param_offsets(p);
  const auto bk = buckets(p.params(), plan.bucket_mb);
  const std::optional<Topology> loaded = under_load(plan, t);
  const bool crowded = crowded_between_hosts(plan, t);
  double clock = 0, exposed = 0, moved = 0;
  for (int micro = 0; micro < plan.accumulate; ++micro) {
    const bool reduce_now = reduce_every_micro || micro + 1 == plan.accumulate;
    const double start = clock + fwd;
    const double end = start + bwd;
    clock = end;
    if (!reduce_now) continue;
    const auto done = backward_done(p, start, f);
    double free = start;
    for (const auto& [b, e] : bk) {
      const double ready = plan.overlap ? range_ready(off, done, b, e) : end;
      const double idle = reduce(t, g, b, e, p.params(), algo, plan.grad_bytes);
      const double begin = std::max(free, ready);
      const double cores = (work ? *work : reduce)(cpu, g, b, e, p.params(), algo, plan.grad_bytes);
      free = loaded    ? finish(begin, end, reduce(*loaded, g, b, e, p.params(), algo, plan.grad_bytes),
                                idle)
             : crowded ? finish(begin, end, crowded_pace(idle, cores, f), idle)
                       : begin + idle;
      moved += cores;
    }
    exposed += std::max(0.0, free - end);
    clock = std::max(end, free);
  }
  const double opt = p.optimizer * f * opt_share;
  const double gather = gather_after ? zero_gather_time(plan, t, g, p.params()) : 0;
  Prediction r;
  r.compute = (fwd + bwd) * plan.accumulate + opt;
  r.comm = exposed + gather;
  r.step = r.compute + r.comm;
  // The reductions overlap backward; the gather after the step does not.
  r.copies = one_machine(t, plan) && plan.overlap ? moved : 0;
  return r;
}

// ZeRO stage 3 (parallel/zero_layers.h): each unit's parameters gathered
// before it runs, forward and backward (the last unit stays between them).
// A unit is a layer, or each leaf of a layer larger than a bucket. As a unit
// starts, the gathers of the units after it are queued until they hold
// --prefetch-mb (at least the next one's); with one unit of lookahead
// (before session 23), after a leaf with no compute to speak of (a norm
// between two convolutions) the next gather was exposed whole
// (cifar-resnet50 on 2 hosts at 1 Gbit/s: the gather queue idled 0.70-0.74
// s of a 3.0 s step, where whole layers of lookahead left it 0.37 idle and
// under-predicted the step 11-15%, runs 10-16). Gradient buckets are
// reduce-scattered on the same queue; each rank steps its shard, nothing
// gathered after. The gathers and
// reduce-scatters follow the arena's blocks as parallel/shards.cpp does: a
// unit inside one rank's block is sent whole by that rank to every other.
// Each gather lands in pages released after the unit's last use: refilling
// them (Profile::refill) is the rank's own CPU work, on its compute's clock.
// Where a machine's ranks, each a compute and a communication thread, are
// more threads than its cores, every queued transfer also waits for the
// peer's communication thread, polling as comm::idle does, to notice it
// from beside a compute thread (Profile::transfer_wait). mnist-large's
// ZeRO-3 x2 on 2 vCPUs (session 29's timeline): 11 gathers took the queue
// thread 92-94 ms of a 172 ms step, a copy and refill of ~3 ms each, and
// the compute waited 32-43 ms for them. The scheduler's slice (handover,
// 3.94 ms on every guest) priced run 41's ZeRO-3 rows 16-24% slow; the
// engine's own wait there read 1.85 ms (session 49).
struct Zero3Unit {
  int64_t begin = 0, end = 0;  // parameters, as arena offsets
  double forward = 0, backward = 0;  // seconds, unslowed
};

// The units in forward order. A leaf's share of its layer's time is its
// share of the parameters (a convolution's or a matmul's work is its
// weights times the positions it slides over, the same for the leaves of
// one layer at one resolution; a norm's is next to nothing).
std::vector<Zero3Unit> zero3_units(const Profile& p, double bucket_mb) {
  std::vector<Zero3Unit> units;
  int64_t begin = 0;
  for (const LayerCost& l : p.layers) {
    if (l.params <= f32_elements_in_mib(bucket_mb) || l.leaves.size() < 2) {
      units.push_back({begin, begin + l.params, l.forward, l.backward});
      begin += l.params;
      continue;
    }
    for (int64_t n : l.leaves) {
      const double share = double(n) / double(l.params);
      units.push_back({begin, begin + n, l.forward * share, l.backward * share});
      begin += n;
    }
  }
  return units;
}

// A ZeRO-3 rank's two clocks: its compute and its communication queue, each
// interval kept. What a queued message costs the cores slows the compute
// only for the share of it that overlaps the rank's computing: the rest
// falls in the waits, when the rank's core has nothing else to do.
class Zero3Clocks {
 public:
  // Queues an op of `wire` seconds, not before `at`; returns its end.
  double queue(double at, double wire, double cores) {
    const double b = std::max(free_, at);
    free_ = b + wire;
    ops_.push_back({b, free_, cores});
    return free_;
  }
  // Computes `secs` from `start` (the unit's inputs and parameters ready).
  double compute(double start, double secs) {
    spans_.push_back({start, start + secs, 0});
    computed_ += secs;
    return start + secs;
  }
  double free() const { return free_; }
  double computed() const { return computed_; }  // the compute's seconds, all told
  // The cores' work on messages that overlaps computing.
  double overlapping() const {
    double sum = 0;
    size_t c = 0;
    for (const Span& op : ops_) {
      while (c < spans_.size() && spans_[c].end <= op.begin) ++c;
      double over = 0;
      for (size_t k = c; k < spans_.size() && spans_[k].begin < op.end; ++k)
        over += std::min(op.end, spans_[k].end) - std::max(op.begin, spans_[k].begin);
      if (op.end > op.begin) sum += op.cores * std::max(0.0, over) / (op.end - op.begin);
    }
    return sum;
  }

 private:
  struct Span {
    double begin, end, cores;
  };
  std::vector<Span> ops_, spans_;
  double free_ = 0, computed_ = 0;
};

// The share of a rank's peers in `g` that live on other hosts (ranks
// spread evenly, as Topology places them).
double peers_away(const Topology& t, const Group& g) {
  if (g.count <= 1 || t.host_of(g.rank(0)) == t.host_of(g.rank(g.count - 1))) return 0;
  const int near = std::min(t.ranks_per_host, g.count) - 1;
  return double(g.count - 1 - near) / double(g.count - 1);
}

Prediction zero3(const Profile& p, const Plan& plan, const Topology& t, const Topology& cpu,
                 const Group& g, double f) {
  const auto units = zero3_units(p, plan.bucket_mb);
  const size_t n = units.size();
  std::vector<double> gather(n), fill(n), copy(n);
  const int64_t total = p.params();
  const double refill = p.refill_for(4.0 * double(total));  // the arena's pages
  const double handover = threads_outnumber_cores(plan, t) ? p.transfer_wait() : 0.0;
  const double sent = zero_send_refilled(p, plan);
  // A gather from another host lands in its released pages inside the
  // kernel's receive, on the queue thread, as fast as the link brings it
  // or the kernel refills them, whichever is slower; the compute then pays
  // its first read of what the kernel filled (Profile::read_received). On
  // a huge-page arena, or from a rank of the same host, the compute
  // refills them itself. `away`: the share of a rank's peers on other hosts.
  const double read = p.read_received_for(4.0 * double(total));
  const double away = read > 0 ? peers_away(t, g) : 0.0;
  for (size_t i = 0; i < n; ++i) {
    const auto parts = block_parts(units[i].begin, units[i].end, total, g.count, 4.0);
    const double bytes = 4.0 * double(units[i].end - units[i].begin);
    const double wire = shard_gather_time(t, g, parts);
    const double kernel_refill = refill * bytes * f * away;  // on the queue thread
    gather[i] = std::max(wire, kernel_refill) + handover;
    // The owner sends n-1 copies, every other rank takes one in: 2/n of the
    // owner's work per rank, on average. Each of the n-1 takers' kernels
    // also refills its released pages as the bytes arrive: cores' work as
    // much as the copies are.
    copy[i] = shard_gather_time(cpu, g, parts) * 2.0 / g.count +
              kernel_refill * (g.count - 1) / g.count;
    fill[i] = (refill * (1 - away) + read * away) * bytes * f;
  }
  // Backward writes each unit's gradients into pages returned after the
  // last reduction outside the rank's shard (ZeroLayers::return_reduced, as
  // at stages 1-2): zero_gradient_refill's share of the unit, a parameter.
  const double grad_fill =
      zero_gradient_refill(p, plan, g.count) * f / double(std::max<int64_t>(1, total));
  const double per_bucket = double(f32_elements_in_mib(plan.bucket_mb));
  const double budget = double(f32_elements_in_mib(plan.prefetch_mb));
  Zero3Clocks z;
  double clock = 0;
  // Queues the gathers after unit i in the pass's order (step +1 or -1)
  // not yet queued, as ZeroLayers::prefetch does, at `at`.
  std::vector<bool> queued(n);
  std::vector<double> ready(n);
  const auto prefetch = [&](size_t i, int step, double at) {
    double ahead = 0;
    for (size_t j = i + size_t(step); j < n && ahead < budget; j += size_t(step)) {
      if (!queued[j]) ready[j] = z.queue(at, gather[j], copy[j]);
      queued[j] = true;
      ahead += double(units[j].end - units[j].begin);
    }
  };
  for (int micro = 0; micro < plan.accumulate; ++micro) {
    std::fill(queued.begin(), queued.end(), false);
    ready[0] = z.queue(clock, gather[0], copy[0]);
    queued[0] = true;
    for (size_t i = 0; i < n; ++i) {
      const double start = std::max(clock, ready[i]);
      prefetch(i, +1, start);
      clock = z.compute(start, fill[i] + units[i].forward * f);
    }
    std::fill(queued.begin(), queued.end(), false);
    queued[n - 1] = true;  // the last unit stays from its forward
    ready[n - 1] = 0;
    double bucket = 0;
    int64_t top = total;  // the bucket is [units[i].begin, top)
    for (size_t i = n; i-- > 0;) {
      const double start = std::max(clock, ready[i]);
      prefetch(i, -1, start);
      const double refilled = i + 1 < n ? fill[i] : 0.0;  // the last unit stayed
      const double grads = grad_fill * double(units[i].end - units[i].begin);
      clock = z.compute(start, refilled + grads + units[i].backward * f);
      bucket += double(units[i].end - units[i].begin);
      if (bucket >= per_bucket || (i == 0 && bucket > 0)) {
        const auto parts = block_parts(units[i].begin, top, total, g.count, plan.grad_bytes);
        z.queue(clock, shard_reduce_scatter_time(t, g, parts, sent) + handover,
                shard_reduce_scatter_time(cpu, g, parts));
        bucket = 0;
        top = units[i].begin;
      }
    }
  }
  const double opt = p.optimizer * f / g.count;
  Prediction r;
  r.compute = z.computed() + opt;
  r.step = std::max(clock, z.free()) + opt;
  r.comm = r.step - r.compute;
  r.copies = one_machine(t, plan) ? z.overlapping() : 0;
  return r;
}

// Parameter server: workers compute, push a range to every server and pull
// it back; a server's link from other hosts carries their ranges one after
// another, while workers on its own host copy theirs at once, each on its
// own core (there is no wire to share: gpt2 on one host, 2 workers, the
// timeline showed a worker's 497 MB push done in 30-38 ms). Sync: all, then
// one step; async: a worker's cycle, or the servers' capacity if that is
// less.
Prediction parameter_server(const Profile& p, const Plan& plan, const Topology& t, double f,
                            std::vector<double>& busy) {
  const int world = t.size(), workers = world - plan.servers;
  const double compute = (p.forward() + p.backward()) * f;
  const double shard = 4.0 * double(p.params()) / plan.servers;
  const double opt = p.optimizer * f / plan.servers;
  double exchange = 0;  // one direction, all workers, the slowest server
  for (int j = 0; j < plan.servers; ++j) {
    const int server = workers + j;
    double remote = 0, local = 0;
    for (int w = 0; w < workers; ++w) {
      const double one = t.one_way(w, server).time(shard);
      if (t.host_of(w) == t.host_of(server)) local = std::max(local, one);
      else remote += one;
    }
    exchange = std::max(exchange, std::max(remote, local));
  }
  Prediction r;
  r.samples = double(workers) * plan.batch;
  // Sync: before its step a server sums the workers' ranges, each read once
  // (serve_sync), at the host's one-way copy rate: gpt2 on one host, 2
  // workers, the server's sum and Adam took 336 ms against Adam's 139 alone
  // (this model: 200 + 154). Async applies each push alone: no sum.
  const Link& copy = t.intra_one_way ? *t.intra_one_way : t.intra;
  const double sum = plan.async ? 0 : workers * copy.time(shard);
  if (!plan.async) {
    r.compute = compute;
    r.comm = 2 * exchange + sum + opt;  // workers wait for the servers' step too
    r.step = r.compute + r.comm;
  } else {
    const double own = 2 * t.one_way(0, workers).time(shard) + opt;
    const double server = 2 * exchange + workers * opt;  // every push applied alone
    r.compute = compute;
    r.step = std::max(compute + own, server);
    r.comm = r.step - compute;
  }
  busy.assign(size_t(world), compute / r.step);
  for (int j = 0; j < plan.servers; ++j) busy[size_t(workers + j)] = (sum + opt) / r.step;
  return r;
}

// One stage's list of operations in its schedule's order: micro-batch m
// forward (+m+1) or backward (-(m+1)).
std::vector<int> stage_ops(int s, int k, int m, bool one_f_one_b) {
  std::vector<int> ops;
  if (!one_f_one_b) {
    for (int i = 0; i < m; ++i) ops.push_back(i + 1);
    for (int i = 0; i < m; ++i) ops.push_back(-(i + 1));
    return ops;
  }
  const int warmup = std::min(k - s - 1, m);
  for (int i = 0; i < warmup; ++i) ops.push_back(i + 1);
  for (int i = warmup; i < m; ++i) {
    ops.push_back(i + 1);
    ops.push_back(-(i - warmup + 1));
  }
  for (int i = m - warmup; i < m; ++i) ops.push_back(-(i + 1));
  return ops;
}

// A pipeline's operations: each stage's in its schedule's order
// (stage_ops), how long each takes, and, once run, when each ends.
struct Schedule {
  std::vector<std::vector<int>> ops;
  std::vector<std::vector<double>> time, end;
  double start(size_t s, size_t j) const { return end[s][j] - time[s][j]; }
};

Schedule make_schedule(const std::vector<double>& fwd, const std::vector<double>& bwd, int m,
                       bool one_f_one_b) {
  const int k = int(fwd.size());
  Schedule sc;
  for (int s = 0; s < k; ++s) {
    sc.ops.push_back(stage_ops(s, k, m, one_f_one_b));
    std::vector<double> t;
    for (int op : sc.ops.back()) t.push_back(op > 0 ? fwd[size_t(s)] : bwd[size_t(s)]);
    sc.time.push_back(t);
  }
  return sc;
}

// Runs the schedule: an operation starts when its stage is free and its
// input (the previous stage's activation, the next stage's gradient) has
// arrived; sends do not block. Fills sc.end; returns each stage's finish.
std::vector<double> run_schedule(Schedule& sc, const std::vector<double>& xfer, int m) {
  const size_t k = sc.ops.size();
  sc.end.assign(k, {});
  // f_end[s][i], b_end[s][i]: when stage s finished micro-batch i (-1: not yet).
  std::vector<std::vector<double>> f_end(k, std::vector<double>(size_t(m), -1)), b_end = f_end;
  std::vector<double> free(k, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < k; ++s) {
      while (sc.end[s].size() < sc.ops[s].size()) {
        const size_t j = sc.end[s].size();
        const int op = sc.ops[s][j];
        const size_t i = size_t(std::abs(op) - 1);
        double ready = 0;
        if (op > 0 && s > 0) {
          if (f_end[s - 1][i] < 0) break;
          ready = f_end[s - 1][i] + xfer[s - 1];
        } else if (op < 0 && s + 1 < k) {
          if (b_end[s + 1][i] < 0) break;
          ready = b_end[s + 1][i] + xfer[s];
        }
        free[s] = std::max(free[s], ready) + sc.time[s][j];
        (op > 0 ? f_end : b_end)[s][i] = free[s];
        sc.end[s].push_back(free[s]);
        progress = true;
      }
    }
  }
  return free;
}

// Ranks of each stage that share each machine's cores (rank = replica x
// stages + stage): [machine][stage].
std::vector<std::vector<int>> stage_ranks(const Plan& plan, const Topology& t, int k, int d) {
  const int per = std::max(1, plan.hosts_per_machine);
  std::vector<std::vector<int>> n(size_t((t.hosts + per - 1) / per), std::vector<int>(size_t(k), 0));
  for (int r = 0; r < k * d; ++r) ++n[size_t(t.host_of(r) / per)][size_t(r % k)];
  return n;
}

// Each operation's slow-down from the ranks computing beside it on its
// machine (a stage's replicas compute in lock-step), as it ran in sc: its
// span over the harmonic mean of 1 / slow_down over the span. Averaged over
// the step, 4 gpt2 ranks on 2 cores computed x1.0 (a hybrid 2x2's light
// stage idles most of the step), but a stage's backward measured x1.47
// where the other stage's overlapped it, and the step 15-18% over.
std::vector<std::vector<double>> crowding(const Schedule& sc, const Plan& plan,
                                          const std::vector<std::vector<int>>& ranks) {
  const size_t k = sc.ops.size();
  std::vector<double> cuts;  // every moment some operation starts or ends
  for (size_t s = 0; s < k; ++s)
    for (size_t j = 0; j < sc.ops[s].size(); ++j) cuts.push_back(sc.start(s, j)), cuts.push_back(sc.end[s][j]);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // busy[s][c]: whether stage s computes between cuts c and c+1.
  std::vector<std::vector<char>> busy(k, std::vector<char>(cuts.size(), 0));
  for (size_t s = 0; s < k; ++s)
    for (size_t j = 0; j < sc.ops[s].size(); ++j) {
      const auto a = std::lower_bound(cuts.begin(), cuts.end(), sc.start(s, j)) - cuts.begin();
      const auto b = std::lower_bound(cuts.begin(), cuts.end(), sc.end[s][j]) - cuts.begin();
      for (auto c = a; c < b; ++c) busy[s][size_t(c)] = 1;
    }
  std::vector<std::vector<double>> g(k);
  for (size_t s = 0; s < k; ++s)
    for (size_t j = 0; j < sc.ops[s].size(); ++j) {
      const double a = sc.start(s, j), b = sc.end[s][j];
      double worst = 1;
      for (const auto& on : ranks) {  // every machine that holds a rank of stage s
        if (on[s] == 0 || b <= a) continue;
        double work = 0;  // the span's progress: dt / slow_down
        for (size_t c = size_t(std::lower_bound(cuts.begin(), cuts.end(), a) - cuts.begin());
             c + 1 < cuts.size() && cuts[c] < b; ++c) {
          double together = 0;
          for (size_t o = 0; o < k; ++o) together += busy[o][c] ? on[o] : 0;
          work += (cuts[c + 1] - cuts[c]) / slow_down(plan, together);
        }
        worst = std::max(worst, (b - a) / work);
      }
      g[s].push_back(worst);
    }
  return g;
}

// The schedule run with each operation slowed by the ranks computing
// beside it (crowding), to a fixed point; base: the operations' times alone.
Schedule crowded_schedule(const Schedule& base, const std::vector<double>& xfer, int m,
                          const Plan& plan, const std::vector<std::vector<int>>& ranks) {
  Schedule sc = base;
  run_schedule(sc, xfer, m);
  if (plan.cores <= 0 && plan.contention.empty()) return sc;
  for (int it = 0; it < 40; ++it) {
    const auto g = crowding(sc, plan, ranks);
    double moved = 0;
    for (size_t s = 0; s < sc.ops.size(); ++s)
      for (size_t j = 0; j < sc.ops[s].size(); ++j) {
        const double next = 0.5 * (sc.time[s][j] + base.time[s][j] * g[s][j]);  // damped
        if (base.time[s][j] > 0) moved = std::max(moved, std::abs(next / base.time[s][j] - g[s][j]));
        sc.time[s][j] = next;
      }
    run_schedule(sc, xfer, m);
    if (moved < 1e-4) break;
  }
  return sc;
}

// Bytes of tied parameters a pipeline of k stages keeps in step (cohort
// syncs every tie once there is more than one stage).
double tied_bytes(const Profile& p, int k) {
  double b = 0;
  if (k > 1)
    for (const auto& tie : p.ties) b += 4.0 * double(tie.params);
  return b;
}

// mp, pp and hybrid: stages cut as cohort cuts them, the schedule run with
// and without the transfers (the difference is exposed communication, the
// rest of the idle time bubble), then hybrid's all-reduce of each stage's
// range over its replicas and each stage's optimizer step.
Timeline pipeline(const Profile& p, const Plan& plan, const Topology& t, double f) {
  const auto cuts = plan_cuts(p, plan);
  const int k = plan.stages, m = plan.parallel == "mp" ? 1 : plan.micro_batches;
  const int d = plan.parallel == "hybrid" ? plan.dp : 1;
  std::vector<double> fwd(size_t(k), 0), bwd(size_t(k), 0), xfer(size_t(k), 0), none(size_t(k), 0);
  std::vector<int64_t> params(size_t(k), 0);
  for (int s = 0; s < k; ++s) {
    for (size_t i = cuts[size_t(s)]; i < cuts[size_t(s) + 1]; ++i) {
      fwd[size_t(s)] += p.layers[i].forward;
      bwd[size_t(s)] += p.layers[i].backward;
      params[size_t(s)] += p.layers[i].params;
    }
    const double bytes = p.layers[cuts[size_t(s) + 1] - 1].out_bytes / 4 * plan.activation_bytes *
                         double(p.batch);
    if (s + 1 < k) xfer[size_t(s)] = t.one_way(s, s + 1).time(bytes);
  }
  // Compute slowed operation by operation by the ranks computing beside it
  // (crowded_schedule), not by the step's average load (f).
  const Schedule alone = make_schedule(fwd, bwd, m, plan.one_f_one_b);
  Schedule sc = crowded_schedule(alone, xfer, m, plan, stage_ranks(plan, t, k, d));
  std::vector<double> real, work;
  for (size_t s = 0; s < size_t(k); ++s) {
    real.push_back(sc.end[s].back());
    work.push_back(std::accumulate(sc.time[s].begin(), sc.time[s].end(), 0.0));
  }
  Schedule untimed = sc;
  const auto ideal = run_schedule(untimed, none, m);
  Timeline r;
  r.busy.assign(size_t(k * d), 0);
  // Tied parameters: every stage of a replica sums their gradient, after
  // its schedule, and receives the owner's stepped weights after the step
  // (Pipeline::sum_tied_grads, broadcast_tied_weights): both wait for all.
  // These collectives and hybrid's all-reduces run after the schedule, on
  // every rank of a machine at once: each lasts at least its copies' work
  // (copying()) slowed by all those ranks copying together (the slow-down
  // of the compute phase, f, already in t, taken back out).
  const Topology cpu = copying(t);
  const double crowd = slow_down(plan, double(std::min(k * d, ranks_per_machine(plan, t)))) / f;
  auto phase = [&](auto time) { return std::max(time(t), crowd * time(cpu)); };
  const double tied = tied_bytes(p, k);
  const Group pipe{0, k, 1};
  const double sum_tied =
      tied > 0 ? phase([&](const Topology& l) { return allreduce_time(l, pipe, tied, Algo::kAuto); })
               : 0.0;
  const double last = *std::max_element(real.begin(), real.end());
  double step = 0;
  int critical = 0;
  std::vector<double> ends(static_cast<size_t>(k));
  for (int s = 0; s < k; ++s) {
    const double reduce = phase([&](const Topology& l) {
      return allreduce_time(l, Group{s, d, k}, plan.grad_bytes * double(params[size_t(s)]),
                            gradient_algo(plan));
    });
    const double opt = p.optimizer * f * double(params[size_t(s)]) / double(std::max<int64_t>(1, p.params()));
    ends[size_t(s)] = (tied > 0 ? last + sum_tied : real[size_t(s)]) + reduce + opt;
    if (ends[size_t(s)] > step) step = ends[size_t(s)], critical = s;
  }
  if (tied > 0) step += phase([&](const Topology& l) { return broadcast_time(l, pipe, tied); });
  const int s = critical;
  const double compute = work[size_t(s)] +
                         p.optimizer * f * double(params[size_t(s)]) / double(std::max<int64_t>(1, p.params()));
  r.p.step = step;
  r.p.compute = compute;
  r.p.bubble = std::max(0.0, ideal[size_t(s)] - work[size_t(s)]);
  r.slowed = work[size_t(s)] / std::max(1e-30, m * (fwd[size_t(s)] + bwd[size_t(s)]));
  r.p.comm = std::max(0.0, step - compute - r.p.bubble);
  r.p.samples = double(plan.batch) * d;
  // A stage waits for its input politely (Pipeline's receives nap in
  // comm::wait_yielding), so it holds a core for its compute only.
  for (int rank = 0; rank < k * d; ++rank) {
    const int st = rank % k;
    r.busy[size_t(rank)] = work[size_t(st)] / step;
  }
  return r;
}

}  // namespace

double zero_gradient_refill(const Profile& p, const Plan& plan, int world) {
  const double bytes = 4.0 * double(p.params());  // the gradient arena
  if (plan.grad_bytes == 2 && world > 1)
    return p.refill_for(bytes) * bytes + p.refill * 2.0 * double(p.params());
  return p.refill_for(bytes) * bytes * (world - 1) / world;
}

std::vector<size_t> plan_cuts(const Profile& p, const Plan& plan) {
  const size_t n = p.layers.size();
  COHORT_INPUT_CHECK(size_t(plan.stages) <= n, "--stages ", plan.stages, ": ", p.model,
                     " has only ", n, " layers to place");
  if (!plan.split.empty()) return split_cuts(plan.split, n, plan.stages);
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i)
    w[i] = plan.balance == "time" ? p.layers[i].forward + p.layers[i].backward
                                  : double(p.layers[i].params);
  return balance_cuts(w, plan.stages);
}

double crowded_pace(double idle, double cores, double f) { return idle + (f - 1) * cores; }

double polling_busy(double step, double copies) {
  return (step + std::min(copies, step)) / step;
}

double slow_down(const Plan& plan, double together) {
  // `together` cores' work on `cores` of them takes at least together/cores.
  const double floor = plan.cores > 0 ? std::max(1.0, together / plan.cores) : 1.0;
  const auto& c = plan.contention;
  if (c.empty()) return floor;
  // Points (1, 1), then the measured ones; the segment that holds `together`
  // (the last one beyond them).
  double k0 = 1, f0 = 1;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto [k, f] = c[i];
    if (together <= k || i + 1 == c.size())
      return std::max(floor, f0 + (f - f0) * (together - k0) / (k - k0));
    k0 = k, f0 = f;
  }
  return floor;
}

int64_t rows_per_pass(const Plan& plan) {
  const bool pipe = plan.parallel == "pp" || plan.parallel == "hybrid";
  return pipe ? std::max<int64_t>(1, plan.batch / plan.micro_batches) : plan.batch;
}

int ranks_needed(const Plan& plan, int world) {
  if (plan.parallel == "none") return 1;
  if (plan.parallel == "mp" || plan.parallel == "pp") return plan.stages;
  if (plan.parallel == "hybrid") return plan.stages * plan.dp;
  return world;
}

void check_plan(const Plan& plan, int world) {
  static const char* kNames[] = {"none", "dp", "ps", "mp", "pp", "hybrid", "zero"};
  COHORT_INPUT_CHECK(std::find(std::begin(kNames), std::end(kNames), plan.parallel) != std::end(kNames),
                     "--parallel: unknown strategy '", plan.parallel,
                     "' (valid: none, dp, ps, mp, pp, hybrid, zero)");
  COHORT_INPUT_CHECK(plan.batch >= 1, "--batch must be at least 1, got ", plan.batch);
  COHORT_INPUT_CHECK(plan.accumulate >= 1, "--accumulate must be at least 1, got ", plan.accumulate);
  COHORT_INPUT_CHECK(plan.bucket_mb > 0, "--bucket-mb must be positive, got ", plan.bucket_mb);
  COHORT_INPUT_CHECK(plan.stages >= 1, "--stages must be at least 1, got ", plan.stages);
  COHORT_INPUT_CHECK(plan.micro_batches >= 1, "--micro-batches must be at least 1, got ",
                     plan.micro_batches);
  COHORT_INPUT_CHECK(plan.dp >= 1, "--dp must be at least 1, got ", plan.dp);
  COHORT_INPUT_CHECK(plan.zero_stage >= 1 && plan.zero_stage <= 3, "--zero-stage must be 1, 2 or 3, got ",
                     plan.zero_stage);
  COHORT_INPUT_CHECK(plan.cores >= 0, "--cores must be at least 0, got ", plan.cores);
  COHORT_INPUT_CHECK(plan.hosts_per_machine >= 1, "--hosts-per-machine must be at least 1, got ",
                     plan.hosts_per_machine);
  double last_k = 1;
  for (const auto& [k, f] : plan.contention) {
    COHORT_INPUT_CHECK(k > last_k && f >= 1, "--contention: give rising K:FACTOR pairs, K > 1, "
                       "FACTOR >= 1 (e.g. 2:1.9,4:3.6)");
    last_k = k;
  }
  COHORT_INPUT_CHECK(plan.balance == "params" || plan.balance == "time",
                     "--balance: unknown choice '", plan.balance, "' (valid: params, time)");
  const int need = ranks_needed(plan, world);
  COHORT_INPUT_CHECK(need == world || plan.parallel == "none", "--parallel ", plan.parallel, " needs ",
                     need, " ranks (--stages x --dp); --hosts x --ranks-per-host gives ", world);
  if (plan.parallel == "ps")
    COHORT_INPUT_CHECK(plan.servers >= 1 && plan.servers < world, "--servers ", plan.servers,
                       " must leave at least one worker of ", world, " ranks");
  const bool sums_gradients = plan.parallel == "dp" || plan.parallel == "zero" ||
                              (plan.parallel == "hybrid" && plan.dp > 1);
  COHORT_INPUT_CHECK(plan.grad_bytes == 4 || sums_gradients,
                     "--grad-dtype bf16 acts on gradients summed over ranks: --parallel dp or zero, "
                     "or hybrid with --dp 2 or more (got --parallel ", plan.parallel, ")");
}

namespace {

// t: the links as slowed by contention f; cpu: what each message costs the
// cores (cores_work()).
Timeline predict_once(const Profile& p, const Plan& plan, const Topology& t, const Topology& cpu,
                      double f) {
  const int world = t.size();
  const Group all{0, world, 1};
  Timeline r;
  const std::string& s = plan.parallel;
  if (s == "none") {
    r.p = data_parallel(p, plan, t, cpu, Group{0, 1, 1}, f, allreduce_range, plan.algo, 1, false, false);
    r.p.samples = double(plan.batch) * plan.accumulate;
  } else if (s == "dp") {
    r.p = data_parallel(p, plan, t, cpu, all, f, allreduce_range, gradient_algo(plan), 1, false,
                        false);
    r.p.samples = double(plan.batch) * plan.accumulate * world;
  } else if (s == "zero") {
    const CollectiveTime reduce = reduce_scatter_range(zero_send_refilled(p, plan));
    const CollectiveTime work = reduce_scatter_range(0);
    if (plan.zero_stage == 1)
      r.p = data_parallel(p, plan, t, cpu, all, f, reduce, Algo::kRing, 1.0 / world, true, false,
                          &work);
    else if (plan.zero_stage == 2)
      r.p = data_parallel(p, plan, t, cpu, all, f, reduce, Algo::kRing, 1.0 / world, true, true,
                          &work);
    else
      r.p = zero3(p, plan, t, cpu, all, f);
    if (plan.zero_stage < 3) {
      const double fill = zero_gradient_refill(p, plan, world) * f;
      r.p.compute += fill;
      r.p.step += fill;
    }
    r.p.samples = double(plan.batch) * plan.accumulate * world;
  } else if (s == "ps") {
    r.p = parameter_server(p, plan, t, f, r.busy);
    return r;
  } else {
    return pipeline(p, plan, t, f);
  }
  // Ranks that poll in MPI's blocking calls (dp's bucket reductions) hold a
  // core for the whole step, two while a collective overlaps compute
  // (polling_busy); ZeRO's shard collectives wait politely (stage 1 too
  // since its buckets became a reduce-scatter and a gather).
  const bool polls = plan.busy_wait && s != "zero";
  // dp and ZeRO ranks run in lock-step (each step ends in a collective), so
  // they compute at the same moments and wait at the same moments: while
  // computing, every rank holds a core, and its communication thread copies
  // on another one: busy can exceed one core. Ranks that poll hold theirs
  // through the waits too.
  const auto& q = r.p;
  const double busy = polls ? polling_busy(q.step, q.copies)
                            : (q.compute + std::min(q.copies, q.compute)) / q.compute;
  r.busy.assign(size_t(s == "none" ? 1 : world), busy);
  return r;
}

}  // namespace

double expected_max_normal(int k) {
  if (k <= 1) return 0;
  // The integral of x k phi(x) Phi(x)^(k-1) over x, by the midpoint rule.
  const double h = 1e-3, lo = -12, hi = 12;
  double sum = 0;
  for (double x = lo + h / 2; x < hi; x += h) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * k * phi * std::pow(cdf, k - 1);
  }
  return sum * h;
}

int lockstep_ranks(const Plan& plan, int world) {
  const std::string& s = plan.parallel;
  if (s == "dp" || s == "zero") return world;
  if (s == "hybrid") return plan.dp;
  if (s == "ps" && !plan.async) return world - plan.servers;
  return 1;
}

double lockstep_wait(double compute, double spread, int k) {
  if (spread == 0) return 0;  // most profiles (files, FLOP rates): skip the integral
  return compute * spread * expected_max_normal(k);
}

bool waits_hold_cores(const Plan& plan, const Topology& t) {
  return plan.busy_wait || (plan.hosts_per_machine > 1 && t.hosts > 1 && t.ranks_per_host == 1);
}

Prediction predict(const Profile& prof, const Plan& given, const Topology& t) {
  check_plan(given, given.parallel == "none" ? 1 : t.size());
  Plan plan = given;
  plan.busy_wait = waits_hold_cores(given, t);
  const Profile p = prof.batch == rows_per_pass(plan) ? prof : prof.at_batch(rows_per_pass(plan));
  // Ranks that share a host's cores slow each other in proportion to how
  // much of the step they compute at once: iterate to a fixed point.
  double f = 1;
  Timeline tl;
  for (int it = 0; it < 40; ++it) {
    // Inside a host, messages are copies by the same cores: they slow alike.
    Topology slowed = t;
    auto slow = [f](Link& l) { l.alpha *= f, l.bytes_per_s /= f; };
    slow(slowed.intra);
    for (auto* l : {&slowed.intra_one_way, &slowed.inter_cpu})
      if (*l) slow(**l);
    tl = predict_once(p, plan, slowed, cores_work(plan, t, slowed), f);
    if (plan.cores <= 0 && plan.contention.empty()) break;
    double worst = 0;
    const int per_machine = std::max(1, plan.hosts_per_machine);
    for (int h = 0; h < t.hosts; h += per_machine) {
      double together = 0;  // ranks computing at once on this machine, on average
      for (size_t r = 0; r < tl.busy.size(); ++r)
        if (t.host_of(int(r)) / per_machine == h / per_machine) together += tl.busy[r];
      worst = std::max(worst, together);
    }
    const double next = 0.5 * (f + slow_down(plan, worst));  // damped
    if (std::abs(next - f) < 1e-4) break;
    f = next;
  }
  tl.p.contention = tl.slowed > 0 ? tl.slowed : f;
  const int k = lockstep_ranks(plan, plan.parallel == "none" ? 1 : t.size());
  tl.p.wait = lockstep_wait(tl.p.compute, p.step_spread, k);
  tl.p.step += tl.p.wait;
  return tl.p;
}

Prediction predict_single(const Profile& prof, const Plan& plan) {
  Plan one = plan;
  one.parallel = "none";
  one.cores = 0;
  one.grad_bytes = 4;  // one rank sums no gradients
  const int64_t rows = one.batch;
  const Profile p = prof.batch == rows ? prof : prof.at_batch(rows);
  Topology t;
  return predict(p, one, t);
}

}  // namespace cohort::sim
