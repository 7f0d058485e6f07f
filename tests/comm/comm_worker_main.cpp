// cohort_comm_worker: runs one named communicator scenario on every rank of an
// mpirun job and exits 0 when every check held; on a failure it prints one
// line naming the check and rank and exits 1 (mpirun then ends the job).
// tests/comm/comm_test.cpp launches it for world sizes 1..5.
//
//   cohort_comm_worker collectives [--big]   every collective, closed-form checks
//   cohort_comm_worker stall T RANK SLEEP    RANK sleeps SLEEP s before check_arrival(T)
//   cohort_comm_worker hierarchical          hierarchical all-reduce over pretended
//                                            host layouts (5 ranks: 2x2, 3+1, 2+2+1, ...)
//   cohort_comm_worker repeat ALGO BYTES N   N all-reduces of one algorithm, timed
//                                            (bytes on a link: scripts/cluster.sh + tc -s)
//   cohort_comm_worker phases BYTES N        the hierarchical all-reduce's three phases,
//                                            each timed (milliseconds, slowest rank)
//   cohort_comm_worker layout HOSTS          mpirun's layout has HOSTS equal hosts, and
//                                            the hierarchical all-reduce sums over them
//   cohort_comm_worker kill                  rank 1 SIGKILLs itself mid-run
//   cohort_comm_worker freeze RANK T         RANK SIGSTOPs itself at start-up (timeout T)
//   cohort_comm_worker bench [MAX_BYTES [SECONDS [pytorch|none [MIN_BYTES [TIMEOUT]]]]]
//                                            run_comm_bench until `cohort bench comm`
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "bench/comm_bench.h"
#include "comm/communicator.h"
#include "comm/kernels.h"
#include "comm/mpi/mpi_communicator.h"
#include "core/clock.h"
#include "parallel/shards.h"

namespace {

using namespace cohort;
using namespace cohort::comm;

constexpr Algorithm kAlgorithms[] = {Algorithm::kRing, Algorithm::kTree, Algorithm::kMpi,
                                     Algorithm::kHierarchical, Algorithm::kAuto};

template <typename... Args>
void check(bool ok, const Args&... what) {
  if (!ok) throw Error(cohort::detail::concat("check failed: ", what...));
}

// (rank+1)*(i%7): small integers, so every f32 (and bf16) sum is exact and
// the sum over ranks is (i%7) * sum(rank+1).
float value(int rank, int64_t i) { return float((rank + 1) * (i % 7)); }

// All ranks hold bitwise rank 0's vector (replicas must not drift apart).
void check_identical(Communicator& c, const void* data, size_t bytes, const std::string& what) {
  std::vector<char> root(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  c.broadcast(root.data(), bytes, 0);
  check(std::memcmp(root.data(), data, bytes) == 0, what, ": differs from rank 0's bits");
}

// `members` are the world ranks taking part; sum(rank+1) over them.
void check_allreduce(Communicator& c, int world_rank, int members_sum, int64_t n, Algorithm a,
                     ReduceOp op, bool identical) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(world_rank, i);
  c.allreduce(v.data(), n, op, a);
  const std::string what = cohort::detail::concat(algorithm_name(a), op == ReduceOp::kSum ? " sum" : " mean",
                                          " of ", n, " floats on ", c.size(), " ranks");
  for (int64_t i = 0; i < n; ++i) {
    const double want = double(i % 7) * members_sum / (op == ReduceOp::kSum ? 1 : c.size());
    const double got = v[size_t(i)];
    if (std::abs(got - want) > (op == ReduceOp::kSum ? 0 : 1e-6 * want))
      check(false, what, ": element ", i, " is ", got, ", want ", want);
  }
  if (identical) check_identical(c, v.data(), v.size() * 4, what);
}

void check_bf16(Communicator& c, int64_t n, Algorithm a, ReduceOp op) {
  const int p = c.size(), r = c.rank();
  const std::string what = cohort::detail::concat("bf16 ", algorithm_name(a), " of ", n, " on ", p);
  // Exact integers first: bf16 holds every integer up to 256 exactly.
  std::vector<BF16> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = to_bf16(value(r, i));
  c.allreduce(v.data(), n, op, a);
  const double div = op == ReduceOp::kSum ? 1 : p;
  for (int64_t i = 0; i < n; ++i) {
    const double want = double(i % 7) * p * (p + 1) / 2 / div;
    check(std::abs(from_bf16(v[size_t(i)]) - want) <= want / 128, what, ": element ", i, " is ",
          from_bf16(v[size_t(i)]), ", want ", want);
  }
  // Then fractions, within bf16's precision (8 bits, a few roundings).
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = to_bf16(0.1f * float(r + 1) + 0.01f * float(i % 100));
  c.allreduce(v.data(), n, op, a);
  for (int64_t i = 0; i < n; ++i) {
    const double want = (0.1 * p * (p + 1) / 2 + 0.01 * double(i % 100) * p) / div;
    check(std::abs(from_bf16(v[size_t(i)]) - want) <= 0.02 * want, what, " (fractions): element ",
          i, " is ", from_bf16(v[size_t(i)]), ", want ", want);
  }
  check_identical(c, v.data(), v.size() * 2, what);
}

// ring_allreduce_f32_bf16_wire over values bf16 cannot hold (every rounding
// shows), past one 2 MB piece too, against the ring's closed form: block k
// starts as rank k's value rounded, and each next rank adds its own rounded
// value to the rounded partial sum, in f32; the owner (rank k-1) scales and
// rounds. On one rank nothing is sent and nothing rounded.
float wire_value(int rank, int64_t i) {
  return 0.3f * float(rank + 1) + 0.001f * float(i % 997) - 1.0f / float(1 + i % 13);
}

void check_f32_bf16_wire(Communicator& c, int64_t n, ReduceOp op) {
  const int p = c.size();
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = wire_value(c.rank(), i);
  ring_allreduce_f32_bf16_wire(c, v.data(), n, op);
  const auto rounded = [](float x) { return from_bf16(to_bf16(x)); };
  const cohort::comm::detail::Blocks blk(n, p);
  int64_t i = 0;
  for (int k = 0; k < p; ++k)
    for (; i < blk.end(k); ++i) {
      float want = wire_value(k, i);
      if (p > 1) {
        for (int j = 1; j < p; ++j) want = rounded(wire_value((k + j) % p, i)) + rounded(want);
        if (op == ReduceOp::kAverage) want *= 1.0f / float(p);
        want = rounded(want);
      }
      check(v[size_t(i)] == want, "f32 on a bf16 wire of ", n, " on ", p, ": element ", i, " is ",
            v[size_t(i)], ", want ", want);
    }
  check_identical(c, v.data(), v.size() * 4, "f32 on a bf16 wire");
}

void check_reduce_scatter_allgather(Communicator& c, int64_t count) {
  const int p = c.size(), r = c.rank();
  std::vector<float> src(static_cast<size_t>(count * p)), dst(static_cast<size_t>(count));
  for (int64_t j = 0; j < count * p; ++j) src[size_t(j)] = value(r, j);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    c.reduce_scatter(src.data(), dst.data(), count, op);
    for (int64_t i = 0; i < count; ++i) {
      const double want = double((r * count + i) % 7) * p * (p + 1) / 2 / (op == ReduceOp::kSum ? 1 : p);
      check(std::abs(dst[size_t(i)] - want) <= 1e-6 * want, "reduce_scatter of ", count,
            " per rank: element ", i, " is ", dst[size_t(i)], ", want ", want);
    }
  }
  std::vector<float> mine(static_cast<size_t>(count)), all(static_cast<size_t>(count * p));
  for (int64_t i = 0; i < count; ++i) mine[size_t(i)] = float(r * 1000 + i % 1000);
  c.allgather(mine.data(), all.data(), count);
  for (int q = 0; q < p; ++q)
    for (int64_t i = 0; i < count; ++i)
      check(all[size_t(q * count + i)] == float(q * 1000 + i % 1000), "allgather of ", count,
            ": rank ", q, "'s element ", i, " is ", all[size_t(q * count + i)]);
}

void check_p2p(Communicator& c, size_t bytes) {
  const int p = c.size(), r = c.rank(), right = (r + 1) % p, left = (r + p - 1) % p;
  auto pattern = [](int from, size_t i) { return char((from * 31 + i * 7) & 0x7f); };
  std::vector<char> out(bytes), in(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = pattern(r, i);
  // Odd ranks receive first, so blocking sends of any size cannot all wait;
  // alone, a rank sends to itself, which needs both sides posted at once.
  if (p == 1) {
    c.sendrecv(out.data(), bytes, right, in.data(), bytes, left, 7);
  } else if (r % 2 == 0) {
    c.send(out.data(), bytes, right, 7);
    c.recv(in.data(), bytes, left, 7);
  } else {
    c.recv(in.data(), bytes, left, 7);
    c.send(out.data(), bytes, right, 7);
  }
  for (size_t i = 0; i < bytes; ++i)
    check(in[i] == pattern(left, i), "send/recv of ", bytes, " bytes from rank ", left, ": byte ", i);
  // Nonblocking: everyone to everyone at once.
  std::vector<std::vector<char>> got(static_cast<size_t>(p), std::vector<char>(bytes));
  std::vector<std::unique_ptr<Request>> reqs;
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    reqs.push_back(c.irecv(got[size_t(q)].data(), bytes, q, 8));
    reqs.push_back(c.isend(out.data(), bytes, q, 8));
  }
  for (size_t k = 0; k < reqs.size(); ++k)
    if (k % 2 == 0) {
      while (!reqs[k]->test()) std::this_thread::yield();
    } else {
      reqs[k]->wait();
    }
  for (int q = 0; q < p; ++q)
    for (size_t i = 0; q != r && i < bytes; ++i)
      check(got[size_t(q)][i] == pattern(q, i), "irecv of ", bytes, " bytes from rank ", q, ": byte ", i);
}

void check_broadcast_barrier(Communicator& c) {
  const int root = c.size() - 1;
  for (size_t bytes : {size_t(1), size_t(7919 * 4 + 3)}) {
    std::vector<char> v(bytes, c.rank() == root ? 0 : 1);
    if (c.rank() == root)
      for (size_t i = 0; i < bytes; ++i) v[i] = char(i * 13 + 5);
    c.broadcast(v.data(), bytes, root);
    for (size_t i = 0; i < bytes; ++i)
      check(v[i] == char(i * 13 + 5), "broadcast of ", bytes, " bytes from rank ", root, ": byte ", i);
  }
  // Nobody leaves the barrier before the last rank enters it.
  Timer t;
  if (c.rank() == root) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c.barrier();
  check(c.size() == 1 || t.seconds() > 0.15, "barrier returned after ", t.seconds(),
        " s while rank ", root, " slept 0.2 s");
}

void check_split(Communicator& world) {
  const int p = world.size(), r = world.rank();
  // Even and odd ranks, ordered by descending world rank.
  auto half = world.split(r % 2, -r);
  check(half != nullptr, "split returned no communicator");
  int expect_size = 0, members_sum = 0, expect_rank = 0;
  for (int q = 0; q < p; ++q) {
    if (q % 2 != r % 2) continue;
    ++expect_size;
    members_sum += q + 1;
    if (q > r) ++expect_rank;
  }
  check(half->size() == expect_size && half->rank() == expect_rank, "split: rank ", r,
        " got rank ", half->rank(), " of ", half->size(), ", want ", expect_rank, " of ", expect_size);
  check(half->timeout() == world.timeout(), "split did not carry the timeout");
  for (Algorithm a : kAlgorithms)
    for (int64_t n : {int64_t(1), int64_t(7919)})
      check_allreduce(*half, r, members_sum, n, a, ReduceOp::kSum, false);
  // A negative color joins nothing.
  auto none = world.split(r == 0 ? -1 : 0, r);
  check((r == 0) == (none == nullptr), "split with color -1 on rank 0");
  if (none) check(none->size() == p - 1, "split without rank 0 has ", none->size(), " ranks");
}

// A receive nobody sends to must end in a CommError naming peer and tag, and
// leave the communicator usable for the rest (the receive is cancelled).
void check_recv_timeout(Communicator& c) {
  if (c.size() < 2) return;
  c.set_timeout(0.2);
  if (c.rank() == 0) {
    float x = 0;
    Timer t;
    try {
      c.recv(&x, sizeof x, 1, 99);
      check(false, "recv from rank 1 with no sender returned");
    } catch (const CommError& e) {
      const std::string want = "rank 0: recv from rank 1 (tag 99) timed out after 0.2 s";
      check(e.what() == want, "timeout message '", e.what(), "', want '", want, "'");
      check(t.seconds() < 2, "recv timed out after ", t.seconds(), " s, not 0.2 s");
    }
  }
  c.set_timeout(0);
  c.barrier();
}

// The data-parallel strategy all-reduces on a background thread while the
// main thread goes on; here the main thread exchanges point-to-point
// messages on a copy of the communicator meanwhile.
void check_concurrent(Communicator& c) {
  auto copy = c.split(0, c.rank());
  const int p = c.size(), r = c.rank();
  std::exception_ptr error;
  std::thread background([&] {
    try {
      for (int i = 0; i < 10; ++i)
        check_allreduce(c, r, p * (p + 1) / 2, 300007, Algorithm::kRing, ReduceOp::kSum, false);
    } catch (...) {
      error = std::current_exception();
    }
  });
  for (int i = 0; i < 10; ++i) check_p2p(*copy, 4096);
  background.join();
  if (error) std::rethrow_exception(error);
}

void run_collectives(Communicator& c, bool big) {
  const int p = c.size(), r = c.rank();
  const int all_sum = p * (p + 1) / 2;
  auto say = [&](const std::string& s) {
    if (r == 0) std::printf("ok %s\n", s.c_str());
  };
  // timeout 0 takes MPI's blocking calls; a timeout takes the polled path.
  for (double timeout : {0.0, 60.0}) {
    c.set_timeout(timeout);
    const std::string mode = timeout > 0 ? " (timeout)" : "";
    for (Algorithm a : kAlgorithms)
      for (int64_t n : {int64_t(0), int64_t(1), int64_t(3), int64_t(7919), int64_t(300007)})
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage})
          check_allreduce(c, r, all_sum, n, a, op, n >= 7919);
    say("allreduce ring/tree/mpi/hierarchical/auto x sum/mean x n=0,1,3,7919,300007" + mode);
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(7919), int64_t(100003)})
      check_reduce_scatter_allgather(c, count);
    say("reduce_scatter, allgather" + mode);
    for (size_t bytes : {size_t(0), size_t(5), size_t(1 << 20)}) check_p2p(c, bytes);
    say("send/recv, isend/irecv" + mode);
    check_broadcast_barrier(c);
    say("broadcast from rank " + std::to_string(p - 1) + ", barrier" + mode);
    check_split(c);
    say("split" + mode);
    c.check_arrival("collectives");
    say("check_arrival" + mode);
  }
  c.set_timeout(0);
  check_recv_timeout(c);
  say("recv timeout");
  if (mpi_thread_multiple()) {
    check_concurrent(c);
    say("allreduce on a background thread beside p2p on the main thread");
  }
  for (Algorithm a : kAlgorithms)
    for (int64_t n : {int64_t(1), int64_t(7919)})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) check_bf16(c, n, a, op);
  say("bf16 allreduce");
  for (int64_t n : {int64_t(1), int64_t(7919), int64_t(16 * 65536) * c.size() + 77})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) check_f32_bf16_wire(c, n, op);
  say("f32 gradients on a bf16 wire");
  if (big) {
    const int64_t n = int64_t(16) << 20;
    for (Algorithm a : kAlgorithms) check_allreduce(c, r, all_sum, n, a, ReduceOp::kSum, false);
    check_allreduce(c, r, all_sum, n, Algorithm::kAuto, ReduceOp::kAverage, true);
    say("allreduce of 16M floats");
  }
}

// The hierarchical all-reduce over one pretended layout: a fresh copy of
// `group` (the layout is fixed on first use) told its ranks sit on hosts of
// `counts` ranks. `world_rank`: this rank in the job; `members_sum`: the sum
// of world_rank+1 over the group.
void check_layout(Communicator& group, int world_rank, int members_sum,
                  const std::vector<int>& counts, double timeout) {
  auto c = group.split(0, group.rank());
  c->set_ranks_per_host(counts);
  c->set_timeout(timeout);
  const HostLayout& l = c->host_layout();
  check(l.hosts == int(counts.size()), "layout has ", l.hosts, " hosts");
  // The ring and the tree keep segments in flight across hosts (spans_hosts).
  check(c->spans_hosts() == (counts.size() > 1), "spans_hosts on ", counts.size(), " hosts");
  for (Algorithm a : {Algorithm::kHierarchical, Algorithm::kRing, Algorithm::kTree})
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(3), int64_t(7919), int64_t(300007)})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage})
        check_allreduce(*c, world_rank, members_sum, n, a, op, n >= 3);
  // bf16 views widen to f32 for it; the closed form holds within bf16 rounding.
  for (int64_t n : {int64_t(1), int64_t(7919)})
    check_bf16(*c, n, Algorithm::kHierarchical, ReduceOp::kSum);
  // auto picks it for large vectors when 2+ hosts hold 2+ ranks somewhere.
  const bool hier = l.hosts >= 2 && l.max_per_host >= 2 && c->size() >= 3;
  check((choose_algorithm(1 << 20, c->size(), l) == Algorithm::kHierarchical) == hier,
        "auto's pick for 1 MiB on ", counts.size(), " hosts");
  check_allreduce(*c, world_rank, members_sum, 1 << 18, Algorithm::kAuto, ReduceOp::kSum, true);
}

// ZeRO's shard all-gathers (parallel/shards.cpp) over one pretended layout:
// links between hosts carry a block in 256 KiB pieces, links inside a host
// whole. Every rank ends holding every block: element i reads i (f32), its
// bf16 rounding (bf16 copy), on uneven blocks of ~1 MB each.
void check_shard_gather(Communicator& group, const std::vector<int>& counts) {
  auto c = group.split(0, group.rank());
  c->set_ranks_per_host(counts);
  const int r = c->rank();
  const int64_t n = 1234567;
  const ShardLayout l(n, c->size(), 7);  // a frozen prefix of 7
  std::vector<float> w(static_cast<size_t>(n), -1.0f);
  for (int64_t i = 0; i < n; ++i)
    if (i < l.first() || (i >= l.shard(r).first && i < l.shard(r).second)) w[size_t(i)] = float(i);
  std::vector<float> full = w;
  allgather_shards(*c, l, full.data());
  for (int64_t i = l.first(); i < n; ++i)
    check(full[size_t(i)] == float(i), "allgather_shards on ", counts.size(), " hosts: element ", i,
          " reads ", full[size_t(i)]);
  std::vector<BF16> low(static_cast<size_t>(n), to_bf16(-1.0f));
  allgather_bf16_shards(*c, l, low.data(), w.data());
  for (int64_t i = l.first(); i < n; ++i) {
    const bool own = i >= l.shard(r).first && i < l.shard(r).second;
    check(own || from_bf16(low[size_t(i)]) == from_bf16(to_bf16(float(i))),
          "allgather_bf16_shards on ", counts.size(), " hosts: element ", i);
  }
}

// ZeRO's reduce-scatter (parallel/shards.cpp) over one pretended layout, on
// one host or with its blocks' owners on different hosts. Rank r holds
// (r+1)*(i%7+1) at element i; over [b, e) (several blocks, then one block's
// inside) each rank's shard must read the sum p(p+1)/2*(i%7+1), in f32 and
// with bf16 on the wire (exact: every partial sum is an integer under 256).
void check_shard_reduce(Communicator& group, const std::vector<int>& counts, int64_t n) {
  auto c = group.split(0, group.rank());
  c->set_ranks_per_host(counts);
  const int r = c->rank(), p = c->size();
  const ShardLayout l(n, p, 7);
  const float total = float(p * (p + 1) / 2);
  auto own = [&](int64_t i) { return i >= l.shard(r).first && i < l.shard(r).second; };
  const std::pair<int64_t, int64_t> ranges[] = {{l.first(), n}, {l.begin(1) + 3, l.end(1) - 5}};
  for (auto [b, e] : ranges) {
    std::vector<float> g(static_cast<size_t>(n)), scratch(static_cast<size_t>(kShardSegment));
    std::vector<BF16> low(static_cast<size_t>(e - b)), bscratch(static_cast<size_t>(kShardSegment));
    for (int64_t i = 0; i < n; ++i) g[size_t(i)] = float((r + 1) * (i % 7 + 1));
    for (int64_t i = b; i < e; ++i) low[size_t(i - b)] = to_bf16(g[size_t(i)]);
    reduce_scatter_range(*c, l, g.data(), b, e, scratch.data());
    reduce_scatter_range_bf16(*c, l, low.data(), b, e, bscratch.data());
    for (int64_t i = b; i < e; ++i) {
      if (!own(i)) continue;
      const float want = total * float(i % 7 + 1);
      check(g[size_t(i)] == want, "reduce_scatter_range on ", counts.size(), " hosts: element ", i,
            " reads ", g[size_t(i)], ", not ", want);
      check(from_bf16(low[size_t(i - b)]) == want, "reduce_scatter_range_bf16 on ", counts.size(),
            " hosts: element ", i, " reads ", from_bf16(low[size_t(i - b)]));
    }
  }
}

void run_hierarchical(Communicator& world) {
  const int p = world.size(), r = world.rank();
  // One machine: MPI puts every rank on one host.
  const HostLayout& real = world.host_layout();
  check(real.hosts == 1 && real.max_per_host == p, "mpirun on one machine: ", real.hosts,
        " hosts, at most ", real.max_per_host, " ranks on one");
  check_allreduce(world, r, p * (p + 1) / 2, 7919, Algorithm::kHierarchical, ReduceOp::kSum, true);
  if (p != 5) throw Error("the hierarchical scenario wants 5 ranks");
  const std::vector<std::vector<int>> of5 = {{2, 2, 1}, {3, 2}, {1, 1, 1, 1, 1}, {5}, {1, 4}};
  for (const auto& counts : of5) check_layout(world, r, 15, counts, 0);
  for (const auto& counts : of5) check_shard_gather(world, counts);
  for (const auto& counts : of5) check_shard_reduce(world, counts, 1234567);
  auto four = world.split(r < 4 ? 0 : -1, r);
  if (four) {
    const std::vector<std::vector<int>> of4 = {{2, 2}, {3, 1}, {4}, {1, 1, 1, 1}};
    for (const auto& counts : of4) check_layout(*four, r, 10, counts, 0);
    check_layout(*four, r, 10, {2, 2}, 60);  // the polled, deadline-checked path
    // Cross-host blocks of 12 segments: the network phase's window of 4
    // segments in flight is refilled as each arrives (comm/ring.cpp).
    auto big = four->split(0, r);
    big->set_ranks_per_host({2, 2});
    for (Algorithm a : {Algorithm::kHierarchical, Algorithm::kRing, Algorithm::kTree})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage})
        check_allreduce(*big, r, 10, 3000017, a, op, true);
  }
  // Two hosts of one rank: the ring's right and left are one peer, both
  // directions over one connection, the window refilled over 23 segments.
  auto two = world.split(r < 2 ? 0 : -1, r);
  if (two) {
    check_layout(*two, r, 3, {1, 1}, 0);
    auto big = two->split(0, r);
    big->set_ranks_per_host({1, 1});
    for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kAuto})
      check_allreduce(*big, r, 3, 3000017, a, ReduceOp::kSum, true);
    check_shard_reduce(*two, {1, 1}, 3000017);  // 23 segments a block
  }
  world.barrier();
  if (r == 0)
    std::printf("ok hierarchical, ring, tree over 2+2+1, 3+2, 5x1, 1x5, 1+4, 2x2, 3+1, 1x4, 4x1, 1x2; shard gathers and reduce-scatters over the 5, 1x2\n");
}

// The hierarchical all-reduce (equal hosts) phase by phase, a barrier between
// phases so each is timed alone: where its time goes across real hosts.
void run_phases(Communicator& world, int64_t bytes, int reps) {
  Hierarchy& h = world.hierarchy();
  const int64_t n = bytes / 4;
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  const comm::detail::Blocks blk(n, h.local->size());
  const int own = (h.local->rank() + 1) % h.local->size();
  double t[3] = {0, 0, 0};
  for (int i = 0; i < reps; ++i) {
    Timer clock;
    auto lap = [&](int k) {
      world.barrier();
      t[k] += clock.seconds();
      clock.reset();
    };
    world.barrier();
    clock.reset();
    ring_reduce_scatter_inplace(*h.local, v.data(), n, ReduceOp::kSum, 1);
    lap(0);
    ring_reduce_scatter_inplace(*h.cross, v.data() + blk.begin(own), blk.count(own), ReduceOp::kSum, 1,
                                true);
    ring_allgather_inplace(*h.cross, v.data() + blk.begin(own), blk.count(own), true);
    lap(1);
    ring_allgather_inplace(*h.local, v.data(), n);
    lap(2);
  }
  if (world.rank() == 0)
    std::printf("phases of %lld bytes on %d hosts: reduce-scatter in host %.1f ms, across hosts "
                "%.1f ms, allgather in host %.1f ms\n",
                (long long)bytes, h.layout.hosts, t[0] * 1e3 / reps, t[1] * 1e3 / reps,
                t[2] * 1e3 / reps);
}

// Across real hosts (scripts/cluster.sh): the layout MPI reports, then the
// hierarchical all-reduce's closed forms over it, and auto's pick.
void run_layout(Communicator& world, int hosts) {
  const int p = world.size(), r = world.rank();
  const HostLayout& l = world.host_layout();
  check(l.hosts == hosts && l.uniform && l.max_per_host == p / hosts, "layout: ", l.hosts,
        " hosts of up to ", l.max_per_host, " ranks; want ", hosts, " of ", p / hosts);
  for (int64_t n : {int64_t(1), int64_t(7919), int64_t(300007), int64_t(3000017)})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage})
      check_allreduce(world, r, p * (p + 1) / 2, n, Algorithm::kHierarchical, op, true);
  check((choose_algorithm(1 << 20, p, l) == Algorithm::kHierarchical) == (p > hosts),
        "auto's pick for 1 MiB");
  if (r == 0) std::printf("ok layout of %d hosts, hierarchical sums\n", hosts);
}

// One rank arrives late at check_arrival; rank 0 must name it and the job end.
// A rank stopped by a signal beats no more: the heartbeat must name it.
void run_freeze(Communicator& c, int frozen, double timeout) {
  c.set_timeout(timeout);
  if (c.rank() == frozen) ::raise(SIGSTOP);
  c.barrier();
}

void run_stall(Communicator& c, double timeout, int late, double sleep_s) {
  c.set_timeout(timeout);
  c.check_arrival("warm-up");
  if (c.rank() == late) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  c.check_arrival("step 12");
}

// Rank 1 dies mid-run; the others keep reducing (with no timeout they would
// wait forever): mpirun must end the job and name the lost rank.
void run_kill(Communicator& c) {
  std::vector<float> v(1 << 16, 1.0f);
  for (int step = 0; step < 1000000; ++step) {
    if (step == 20 && c.rank() == 1) {
      std::fflush(stdout);
      raise(SIGKILL);
    }
    c.allreduce(v.data(), int64_t(v.size()), ReduceOp::kAverage, Algorithm::kRing);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  int rank = -1;
  try {
    auto world = mpi_world(&argc, &argv);
    rank = world->rank();
    if (scenario == "collectives") {
      run_collectives(*world, argc > 2 && std::string(argv[2]) == "--big");
    } else if (scenario == "stall" && argc == 5) {
      run_stall(*world, std::stod(argv[2]), std::stoi(argv[3]), std::stod(argv[4]));
    } else if (scenario == "freeze" && argc == 4) {
      run_freeze(*world, std::stoi(argv[2]), std::stod(argv[3]));
    } else if (scenario == "hierarchical") {
      run_hierarchical(*world);
    } else if (scenario == "repeat" && argc == 5) {
      std::vector<float> v(size_t(std::stoll(argv[3]) / 4), 0.0f);
      const Algorithm a = parse_algorithm(argv[2]);
      world->barrier();
      Timer t;
      for (int i = 0; i < std::stoi(argv[4]); ++i)
        world->allreduce(v.data(), int64_t(v.size()), ReduceOp::kSum, a);
      world->barrier();
      if (rank == 0)
        std::printf("%s %s bytes: %.1f ms per all-reduce\n", argv[2], argv[3],
                    t.seconds() * 1e3 / std::stoi(argv[4]));
    } else if (scenario == "phases" && argc == 4) {
      run_phases(*world, std::stoll(argv[2]), std::stoi(argv[3]));
    } else if (scenario == "layout" && argc == 3) {
      run_layout(*world, std::stoi(argv[2]));
    } else if (scenario == "kill") {
      run_kill(*world);
    } else if (scenario == "bench") {
      CommBenchConfig cfg;
      if (argc > 2) cfg.max_bytes = std::stoll(argv[2]);
      if (argc > 3) cfg.seconds = std::stod(argv[3]);
      if (argc > 4) cfg.peer = std::string(argv[4]) == "none" ? "" : argv[4];
      if (argc > 5) cfg.min_bytes = std::stoll(argv[5]);
      if (argc > 6) cfg.timeout = std::stod(argv[6]);
      run_comm_bench(*world, cfg);
    } else {
      throw Error("usage: cohort_comm_worker collectives [--big] | stall T RANK SLEEP | kill");
    }
    world->barrier();
    if (rank == 0) std::printf("PASS %s on %d ranks\n", scenario.c_str(), world->size());
  } catch (const std::exception& e) {
    // Leaving without MPI_Finalize makes mpirun stop the other ranks.
    std::fflush(stdout);
    std::fprintf(stderr, "comm_worker rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
