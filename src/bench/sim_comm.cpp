#include "bench/sim_comm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "parallel/shards.h"

namespace cohort::sim {

namespace {

// "12.5Gbit" -> (12.5, "Gbit"); InputError naming flag when no number leads.
std::pair<double, std::string> number_unit(const std::string& flag, const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    throw InputError(flag + ": '" + s + "' is not a number with an optional unit");
  }
  COHORT_INPUT_CHECK(std::isfinite(v) && v >= 0, flag, ": '", s, "' must be a finite value >= 0");
  return {v, s.substr(used)};
}

// The rounds of a binomial tree over n ranks: ceil(log2 n).
int rounds(int n) {
  int r = 0;
  while ((1 << r) < n) ++r;
  return r;
}

// Cohort's tree (comm/tree.cpp) exchanges whole vectors at or below this.
constexpr double kDoublingMaxBytes = 2048;
constexpr double kTreeMaxBytes = 256 * 1024;  // comm::choose_algorithm's switch to the ring

double tree_time(const Topology& t, const Group& g, double bytes) {
  const int p = g.count;
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  double total = 0;
  if (p2 < p) total += 2 * t.one_way(g.rank(0), g.rank(1)).time(bytes);  // fold and unfold
  // Step with partner distance m: halving sends bytes*m/p2, doubling the same
  // back; small vectors send everything in log2 p2 steps. Each step is an
  // exchange: the pair's link carries data both ways.
  for (int m = 1; m < p2; m *= 2) {
    const Link& l = t.exchange(g.rank(0), g.rank(std::min(m, p - 1)));
    if (bytes <= kDoublingMaxBytes)
      total += l.time(bytes);
    else
      total += 2 * l.time(bytes * m / p2);
  }
  return total;
}

double ring_time(const Topology& t, const Group& g, double bytes) {
  return 2 * ring_half_time(t, g, bytes);
}

// Horovod's hierarchical all-reduce: reduce-scatter inside each host, an
// all-reduce of each shard between hosts (the host's r rings share its
// link, so together they move bytes/H per step), all-gather inside.
double hierarchical_time(const Topology& t, const Group& g, double bytes) {
  const int first_host = t.host_of(g.rank(0)), last_host = t.host_of(g.rank(g.count - 1));
  const int h = last_host - first_host + 1;
  if (h == 1 || h == g.count) return ring_time(t, g, bytes);
  const int r = g.count / h;
  const Group inside{g.first, r, g.stride};
  const double intra = 2 * ring_half_time(t, inside, bytes);
  const double inter = 2.0 * (h - 1) * (t.inter.alpha + bytes / h / t.inter.bytes_per_s);
  return intra + inter;
}

}  // namespace

Link parse_link(const std::string& flag, const std::string& value) {
  const size_t comma = value.find(',');
  COHORT_INPUT_CHECK(comma != std::string::npos, flag, ": '", value,
                     "' is not BW,LATENCY (e.g. 10Gbit,5us)");
  auto [bw, bu] = number_unit(flag, value.substr(0, comma));
  auto [lat, lu] = number_unit(flag, value.substr(comma + 1));
  Link l;
  if (bu.empty() || bu == "Gbit")
    l.bytes_per_s = bw * 1e9 / 8;
  else if (bu == "Mbit")
    l.bytes_per_s = bw * 1e6 / 8;
  else if (bu == "GB")
    l.bytes_per_s = bw * 1e9;
  else if (bu == "MB")
    l.bytes_per_s = bw * 1e6;
  else
    throw InputError(flag + ": unknown bandwidth unit '" + bu + "' (valid: Gbit, Mbit, GB, MB)");
  COHORT_INPUT_CHECK(l.bytes_per_s > 0, flag, ": bandwidth must be positive");
  if (lu.empty() || lu == "us")
    l.alpha = lat * 1e-6;
  else if (lu == "ns")
    l.alpha = lat * 1e-9;
  else if (lu == "ms")
    l.alpha = lat * 1e-3;
  else if (lu == "s")
    l.alpha = lat;
  else
    throw InputError(flag + ": unknown latency unit '" + lu + "' (valid: ns, us, ms, s)");
  return l;
}

std::string describe_link(const Link& l) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3g Gbit/s, %.3g us", l.bytes_per_s * 8 / 1e9, l.alpha * 1e6);
  return buf;
}

Algo parse_algo(const std::string& name) {
  if (name == "ring") return Algo::kRing;
  if (name == "tree") return Algo::kTree;
  if (name == "hierarchical") return Algo::kHierarchical;
  if (name == "auto") return Algo::kAuto;
  throw InputError("--allreduce: unknown algorithm '" + name +
                   "' (valid: ring, tree, hierarchical, auto)");
}

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::kRing: return "ring";
    case Algo::kTree: return "tree";
    case Algo::kHierarchical: return "hierarchical";
    case Algo::kAuto: return "auto";
  }
  return "?";
}

const Link& ring_link(const Topology& t, const Group& g) {
  // A ring of two is a pairwise exchange: each link carries data both ways.
  if (g.count == 2) return t.exchange(g.rank(0), g.rank(1));
  const int h0 = t.host_of(g.rank(0)), h1 = t.host_of(g.rank(g.count - 1));
  return h0 == h1 ? t.intra : t.inter;
}

const Link& one_way_link(const Topology& t, const Group& g) {
  return t.one_way(g.rank(0), g.rank(g.count - 1));
}

double ring_half_time(const Topology& t, const Group& g, double bytes) {
  if (g.count <= 1) return 0;
  const Link& l = ring_link(t, g);
  return (g.count - 1) * l.time(bytes / g.count);
}

double broadcast_time(const Topology& t, const Group& g, double bytes) {
  return rounds(g.count) * one_way_link(t, g).time(bytes);
}

double shard_reduce_scatter_time(const Topology& t, const Group& g,
                                 const std::vector<double>& parts, double send_refilled) {
  if (g.count <= 1) return 0;
  const double largest = *std::max_element(parts.begin(), parts.end());
  // A range inside one block moves one way at each step (its owner's
  // neighbour sends, nobody sends back): the one-way rate, where a pair of
  // ranks exchanging parts both ways gets the exchange's.
  const bool one_block = std::count(parts.begin(), parts.end(), 0.0) + 1 == ptrdiff_t(parts.size());
  const double wire = (one_block ? one_way_link(t, g) : ring_link(t, g)).time(largest);
  // The kernel reads the refilled pages into the socket, then does its TCP
  // work on them (inter_cpu), both on the sender's core, while the link
  // drains what is ready: the slower of the cores and the wire sets the
  // step. mnist-large's ZeRO-1 on 2 namespace hosts (session 39's
  // timelines): 4 MB both ways in 13-15 ms at 10 Gbit/s once both ranks
  // were ready (the read 9 ms, the TCP work 3.2, the wire ~4.5; a plain
  // 8 MB all-reduce took 9), 35 ms at 1 Gbit/s (the wire).
  const bool crosses = t.host_of(g.rank(0)) != t.host_of(g.rank(g.count - 1));
  const double cores = crosses && send_refilled > 0
                           ? send_refilled * largest + (t.inter_cpu ? t.inter_cpu->time(largest) : 0)
                           : 0.0;
  return (g.count - 1) * std::max(wire, cores);
}

double shard_allgather_time(const Topology& t, const Group& g, double bytes, double piece) {
  if (g.count <= 1) return 0;
  const double block = bytes / g.count;
  if (piece <= 0 || piece >= block) return (g.count - 1) * one_way_link(t, g).time(block);
  const Link& l = ring_link(t, g);
  return std::ceil(block / piece) * l.alpha + block / l.bytes_per_s +
         (g.count - 2) * one_way_link(t, g).time(block);
}

double shard_gather_time(const Topology& t, const Group& g, const std::vector<double>& parts) {
  if (g.count <= 1) return 0;
  double total = 0, up = 0, least = parts.empty() ? 0 : parts.front();
  for (double b : parts) {
    total += b;
    up = std::max(up, (g.count - 1) * b);
    least = std::min(least, b);
  }
  const Link& l = one_way_link(t, g);
  return l.alpha + std::max(up, total - least) / l.bytes_per_s;
}

std::vector<double> block_parts(int64_t b, int64_t e, int64_t elements, int ranks,
                                double elem_bytes) {
  const ShardLayout layout(elements, ranks);  // ZeRO's own cut
  std::vector<double> parts(size_t(ranks), 0.0);
  for (int k = 0; k < ranks; ++k) {
    const int64_t lo = std::max(b, layout.begin(k)), hi = std::min(e, layout.end(k));
    if (hi > lo) parts[size_t(k)] = elem_bytes * double(hi - lo);
  }
  return parts;
}

double allreduce_time(const Topology& t, const Group& g, double bytes, Algo algo) {
  if (g.count <= 1 || bytes <= 0) return 0;
  if (algo == Algo::kAuto) {
    const bool power_of_two = (g.count & (g.count - 1)) == 0;
    algo = power_of_two || bytes <= kTreeMaxBytes ? Algo::kTree : Algo::kRing;
  }
  switch (algo) {
    case Algo::kTree: return tree_time(t, g, bytes);
    case Algo::kHierarchical: return hierarchical_time(t, g, bytes);
    default: return ring_time(t, g, bytes);
  }
}

namespace {

// t = a + b * bytes through a column's smallest size and its reference
// size: latency from the smallest message, bandwidth from the size nearest
// `at_bytes` (log scale; the largest where at_bytes <= 0). A least squares
// over sizes 4 B .. 256 MiB would let the large ones decide alpha, and the
// shaped links' rate depends on the size (80 MB/s at 16 MiB, 120 at 256 MiB
// over 1 Gbit/s), so the bandwidth comes from messages like the ones priced.
std::pair<double, double> endpoints(const nlohmann::json& j, const std::string& column,
                                    const std::string& file, double at_bytes) {
  double x0 = 1e300, y0 = 0, x1 = -1, y1 = 0, best = 1e300;
  for (const auto& row : j["sizes"]) {
    COHORT_INPUT_CHECK(row.contains("bytes") && row.contains(column), file,
                       ": a size row lacks bytes or ", column);
    const double x = row["bytes"].get<double>(), y = row[column].get<double>() * 1e-6;
    if (x < x0) x0 = x, y0 = y;
    const double d = at_bytes > 0 ? std::abs(std::log(x / at_bytes)) : -x;
    if (d < best || (d == best && x > x1)) best = d, x1 = x, y1 = y;
  }
  return {y0, (y1 - y0) / (x1 - x0)};
}

void check_bench_comm(const nlohmann::json& j, const std::string& file) {
  COHORT_INPUT_CHECK(j.is_object() && j.contains("sizes") && j.contains("world") &&
                         j["sizes"].is_array() && j["sizes"].size() >= 2,
                     file, ": not a `cohort bench comm` line with two or more sizes");
  COHORT_INPUT_CHECK(j["world"].get<double>() >= 2, file, ": world must be at least 2");
}

}  // namespace

Link fit_ring(const nlohmann::json& j, const std::string& file, double at_bytes) {
  check_bench_comm(j, file);
  const double n = j["world"].get<double>();
  const auto [a, b] = endpoints(j, "ring_us", file, at_bytes);
  Link l;
  l.alpha = a / (2 * (n - 1));
  l.bytes_per_s = 2 * (n - 1) / n / b;
  return l;
}

std::optional<Link> fit_exchange(const nlohmann::json& j, const std::string& file, double at_bytes) {
  check_bench_comm(j, file);
  const int n = j["world"].get<int>();
  if ((n & (n - 1)) != 0 || !j["sizes"][0].contains("tree_us")) return std::nullopt;
  const auto [a, b] = endpoints(j, "tree_us", file, at_bytes);
  COHORT_INPUT_CHECK(b > 0, file, ": its tree times do not grow with the size");
  return Link{a / rounds(n), 2.0 * (n - 1) / n / b};
}

std::optional<Link> fit_one_way(const nlohmann::json& j, const std::string& file, double at_bytes) {
  check_bench_comm(j, file);
  if (!j["sizes"][0].contains("p2p_us")) return std::nullopt;
  const auto [a, b] = endpoints(j, "p2p_us", file, at_bytes);
  COHORT_INPUT_CHECK(b > 0, file, ": its one-way times do not grow with the size");
  return Link{a, 1 / b};
}

namespace {

// Each size's time per column from the lines' values of it, by `pick`.
nlohmann::json combine_bench_comm(const std::vector<nlohmann::json>& lines, const std::string& file,
                                  double (*pick)(std::vector<double>&)) {
  COHORT_INPUT_CHECK(!lines.empty(), file, ": no `cohort bench comm` JSON line");
  for (const auto& j : lines) check_bench_comm(j, file);
  nlohmann::json out = lines.front();
  for (const auto& j : lines)
    COHORT_INPUT_CHECK(j["world"] == out["world"] && j["sizes"].size() == out["sizes"].size(), file,
                       ": its `bench comm` lines differ in world or sizes");
  for (size_t i = 0; i < out["sizes"].size(); ++i) {
    auto& row = out["sizes"][i];
    for (auto& [key, value] : row.items()) {
      if (key.size() < 3 || key.compare(key.size() - 3, 3, "_us") != 0 || !value.is_number())
        continue;
      std::vector<double> v;
      for (const auto& j : lines) {
        const auto& other = j["sizes"][i];
        COHORT_INPUT_CHECK(other["bytes"] == row["bytes"], file,
                           ": its `bench comm` lines differ in sizes");
        if (other.contains(key) && other[key].is_number()) v.push_back(other[key].get<double>());
      }
      value = pick(v);
    }
  }
  return out;
}

double median_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double least_of(std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace

nlohmann::json median_bench_comm(const std::vector<nlohmann::json>& lines, const std::string& file) {
  return combine_bench_comm(lines, file, median_of);
}

nlohmann::json fastest_bench_comm(const std::vector<nlohmann::json>& lines, const std::string& file) {
  return combine_bench_comm(lines, file, least_of);
}

}  // namespace cohort::sim
