// The cost model's communication half (`cohort simulate`): an alpha-beta
// figure per link class (inside a host, between hosts) and the time of each
// collective cohort runs, from its algorithm's message schedule (ring,
// Rabenseifner's tree, hierarchical), for N = hosts x ranks_per_host ranks
// laid out host by host (ranks r and r+1 share a host unless r+1 starts the
// next one).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cohort::sim {

// One link class: a message of b bytes takes alpha + b / bytes_per_s.
struct Link {
  double alpha = 0;           // seconds per message
  double bytes_per_s = 1e30;  // bandwidth
  double time(double bytes) const { return alpha + bytes / bytes_per_s; }
};

// "BW,LATENCY": BW in Gbit/s unless suffixed (Gbit, Mbit, GB, MB: bytes),
// LATENCY in microseconds unless suffixed (ns, us, ms, s). InputError naming
// `flag` for anything else.
Link parse_link(const std::string& flag, const std::string& value);
std::string describe_link(const Link& l);  // "10 Gbit/s, 5 us"

struct Topology {
  int hosts = 1;
  int ranks_per_host = 1;
  Link intra, inter;  // per direction while both directions carry (a ring's steps)
  // One-way messages (a pipeline's activations, a parameter server's
  // pushes, ZeRO's owner-to-rank gathers), where measured apart
  // (`bench comm`'s one-way column); unset: the same as intra, inter.
  std::optional<Link> intra_one_way, inter_one_way;
  // Pairwise exchanges between hosts (the tree's steps: both directions of
  // a link carry data at once), where measured apart (`bench comm`'s tree
  // column); unset: inter.
  std::optional<Link> inter_exchange;
  // What a message between hosts costs the cores when the hosts are
  // namespaces of one machine (the kernel's TCP work on the ranks' own
  // cores: `bench comm` over unshaped links); unset: intra's copy rate.
  std::optional<Link> inter_cpu;
  // The links between hosts as `bench comm` measured them while a
  // single-thread computation ran on every core (--calibrate-loaded): a
  // message then waits until the scheduler gives the receiving thread a
  // core, about a tick (4 ms) for a 256 KiB one between namespace hosts at
  // 10 Gbit/s where it takes 0.1 ms idle. For collectives that overlap the
  // ranks' compute (under_load in sim_model.cpp); unset: the idle links.
  struct Links {
    Link ring;
    std::optional<Link> one_way, exchange;
  };
  std::optional<Links> inter_loaded;
  int size() const { return hosts * ranks_per_host; }
  int host_of(int rank) const { return rank / ranks_per_host; }
  // The link between two ranks: intra on one host, inter otherwise.
  const Link& between(int a, int b) const { return host_of(a) == host_of(b) ? intra : inter; }
  // The same for a message one way, and for a pairwise exchange.
  const Link& one_way(int a, int b) const {
    const auto& o = host_of(a) == host_of(b) ? intra_one_way : inter_one_way;
    return o ? *o : between(a, b);
  }
  const Link& exchange(int a, int b) const {
    return host_of(a) != host_of(b) && inter_exchange ? *inter_exchange : between(a, b);
  }
};

// A group of ranks taking part in a collective: `count` ranks, consecutive
// members `stride` world ranks apart starting at `first` (dp: stride 1;
// hybrid's stage groups: stride K).
struct Group {
  int first = 0, count = 1, stride = 1;
  int rank(int i) const { return first + i * stride; }
};

enum class Algo { kRing, kTree, kHierarchical, kAuto };
Algo parse_algo(const std::string& name);  // InputError naming --allreduce
const char* algo_name(Algo a);

// Seconds for one all-reduce of `bytes` over `g` (auto: what cohort's
// choose_algorithm picks for that size and group).
double allreduce_time(const Topology& t, const Group& g, double bytes, Algo algo);
// Ring reduce-scatter or all-gather: (n-1) steps of bytes/n each.
double ring_half_time(const Topology& t, const Group& g, double bytes);
// MPI_Bcast of `bytes` over `g`: a binomial tree, ceil(log2 n) rounds of
// the whole message over the slowest link.
double broadcast_time(const Topology& t, const Group& g, double bytes);
// The slowest link a ring over `g` crosses (a ring of two: the exchange
// figure), and the slowest one a message one way between two of `g` crosses.
const Link& ring_link(const Topology& t, const Group& g);
const Link& one_way_link(const Topology& t, const Group& g);

// ZeRO's collectives over the arena's blocks, as parallel/shards.cpp runs
// them: `parts[k]` is the bytes of the range [b, e) that fall in rank k's
// block (ShardLayout: g.count contiguous blocks of the arena).
// reduce_scatter_range: a ring over the parts, p-1 steps each as long as
// the largest part (a range inside one block takes p-1 whole hops, one way:
// at the one-way rate; parts in several blocks at the ring's). Across
// hosts, from pages just refilled, a step takes at least the sender's
// kernel read of a part (`send_refilled` seconds a byte, Profile) and then
// its TCP work on it (inter_cpu, where measured).
double shard_reduce_scatter_time(const Topology& t, const Group& g,
                                 const std::vector<double>& parts, double send_refilled = 0);
// ZeRO-1/2's all-gather of the stepped shards, `bytes` in all: p-1 steps,
// each rank sending a whole block to the next while receiving one, one
// message each way (allgather_shards: at the one-way rate, both directions
// streaming at once); with `piece` > 0 the first step goes in pieces that
// much apart, one exchange at a time (allgather_bf16_shards, rounding each:
// at the ring's rate).
double shard_allgather_time(const Topology& t, const Group& g, double bytes, double piece);
// gather_range: each owner sends its part to every other rank at once (its
// uplink carries p-1 copies) and each rank receives every part it lacks
// (its downlink carries them): the busier of the two, plus one latency, at
// the one-way rate.
double shard_gather_time(const Topology& t, const Group& g, const std::vector<double>& parts);
// The bytes of elements [b, e) in each of `ranks` blocks of an arena of
// `elements`, cut as parallel/shards.h's ShardLayout cuts it, at
// `elem_bytes` an element (4: f32 weights and gradients; 2: bf16 gradients).
std::vector<double> block_parts(int64_t b, int64_t e, int64_t elements, int ranks,
                                double elem_bytes);

// alpha/beta fitted (t = a + b * bytes: a from the smallest size, b from
// the slope to the size nearest at_bytes, the largest where at_bytes <= 0)
// to a `cohort bench comm` JSON line's ring column: alpha = a / 2(N-1), bandwidth =
// 2(N-1)/N / b. InputError naming the file for a line without sizes.
Link fit_ring(const nlohmann::json& bench_comm, const std::string& file,
              double at_bytes = 0);
// The same fit to the one-way column (p2p_us: t = alpha + bytes / bandwidth
// directly); nullopt for a line without it (older `bench comm` output).
std::optional<Link> fit_one_way(const nlohmann::json& bench_comm, const std::string& file,
                                double at_bytes = 0);
// The same fit to the tree column where the world is a power of two (its
// steps are pairwise exchanges: small messages log2 N of them, large ones
// 2(N-1)/N of the bytes each way); nullopt otherwise.
std::optional<Link> fit_exchange(const nlohmann::json& bench_comm, const std::string& file,
                                 double at_bytes = 0);
// Several `bench comm` lines of the same sizes as one: each size's time per
// column the median over the lines. Exchanges over the namespace cluster's
// shaped links run in two modes (80 or 120 MB/s at 1 Gbit/s, by message
// size and from one run to the next), so one run can catch the rarer one.
// InputError naming the file for lines of other worlds or sizes.
nlohmann::json median_bench_comm(const std::vector<nlohmann::json>& lines, const std::string& file);
// The same with each size's fastest time per column: for a transfer that
// the cores bound on an otherwise idle machine (--calibrate-cpu, TCP
// between namespace hosts over unshaped links), where noise only slows it.
// Run 13's three such runs at 256 MiB: 0.89, 0.69, 1.05 GB/s against run
// 12's 1.61, 1.71, 1.54; the median priced every byte at twice its cost.
nlohmann::json fastest_bench_comm(const std::vector<nlohmann::json>& lines, const std::string& file);

}  // namespace cohort::sim
