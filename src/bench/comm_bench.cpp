// `cohort bench comm`: for each message size, every algorithm is first
// checked against the closed form, then timed in batches sized to a budget;
// the fastest batch counts, each batch timed by its slowest rank. Bus
// bandwidth, 2(N-1)/N * bytes / time, is what every rank sends and receives
// in a bandwidth-optimal all-reduce, so sizes and world sizes compare. The
// peers run in the same job: MPI_Allreduce beside cohort's algorithms, then
// PyTorch's gloo: from rank 0 while the other ranks sleep, or, when the ranks
// span hosts, one gloo rank beside each cohort rank. A one-way column
// (p2p: rank 0 streaming to one peer) sits beside the all-reduces.
#include "bench/comm_bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <vector>

#include "bench/peer.h"
#include "core/clock.h"
#include "core/error.h"

namespace cohort {

#if COHORT_WITH_MPI

namespace {

using comm::Algorithm;
using comm::Communicator;
using comm::ReduceOp;

struct Column {
  const char* name;
  Algorithm algo;
};

// The timeout a column is measured under (see CommBenchConfig::timeout).
void use_timeout(Communicator& c, const Column& col, const CommBenchConfig& cfg) {
  c.set_timeout(col.algo == Algorithm::kMpi ? 0.0 : cfg.timeout);
}
// mpi is a peer's figure, measured here because it shares the job.
constexpr Column kColumns[] = {{"ring", Algorithm::kRing},
                               {"tree", Algorithm::kTree},
                               {"hierarchical", Algorithm::kHierarchical},
                               {"auto", Algorithm::kAuto},
                               {"mpi", Algorithm::kMpi}};

double max_over_ranks(Communicator& c, double v) {
  const float mine = float(v);
  std::vector<float> all(static_cast<size_t>(c.size()));
  c.allgather(&mine, all.data(), 1);
  return *std::max_element(all.begin(), all.end());
}

// A barrier that sleeps instead of spinning, so waiting ranks leave the CPUs
// to the peer that rank 0 runs meanwhile.
void quiet_barrier(Communicator& c) {
  const double saved = c.timeout();
  c.set_timeout(24 * 3600.0);
  c.barrier();
  c.set_timeout(saved);
}

void validate(Communicator& c, float* v, int64_t n, const Column& col) {
  const int p = c.size(), r = c.rank();
  for (int64_t i = 0; i < n; ++i) v[i] = float((r + 1) * (i % 7));
  c.allreduce(v, n, ReduceOp::kSum, col.algo);
  for (int64_t i = 0; i < n; ++i)
    if (v[i] != float((i % 7) * p * (p + 1) / 2))
      throw Error(detail::concat("bench comm: ", col.name, " all-reduce of ", n * 4,
                                 " bytes on ", p, " ranks is wrong at element ", i, " (", v[i],
                                 "); not timing it"));
}

// Calls per timed batch for a call of `one` seconds, and how many batches:
// batches sized to the budget; calls far over it (hundreds of MiB) are few
// and steady, so 3 batches do.
int batch_calls(double budget, double one) {
  return int(std::clamp(budget / std::max(one, 1e-7), 1.0, 1e5));
}
int batch_count(double budget, double slowest, const CommBenchConfig& cfg) {
  return slowest > 4 * budget ? std::min(cfg.repeats, 3) : cfg.repeats;
}

// Seconds per all-reduce for each column: the fastest of cfg.repeats
// batches, each batch's time the slowest rank's. The columns' batches take
// turns, so a burst of load from elsewhere on the machine hits them alike.
std::vector<double> time_columns(Communicator& c, float* v, int64_t n, const CommBenchConfig& cfg) {
  constexpr size_t kCols = std::size(kColumns);
  std::fill(v, v + n, 0.0f);  // zeros keep repeated sums finite
  const double budget = cfg.seconds / cfg.repeats;
  std::vector<int> iters(kCols);
  double slowest = 0;
  Timer t;
  for (size_t k = 0; k < kCols; ++k) {
    use_timeout(c, kColumns[k], cfg);
    c.barrier();
    t.reset();
    c.allreduce(v, n, ReduceOp::kSum, kColumns[k].algo);  // warm-up: scratch, pages
    double one = max_over_ranks(c, t.seconds());
    if (one < budget) {
      c.barrier();
      t.reset();
      for (int i = 0; i < 3; ++i) c.allreduce(v, n, ReduceOp::kSum, kColumns[k].algo);
      one = max_over_ranks(c, t.seconds() / 3);
    }
    iters[k] = batch_calls(budget, one);
    slowest = std::max(slowest, one);
  }
  const int repeats = batch_count(budget, slowest, cfg);
  std::vector<double> best(kCols, std::numeric_limits<double>::infinity());
  for (int rep = 0; rep < repeats; ++rep)
    for (size_t k = 0; k < kCols; ++k) {
      use_timeout(c, kColumns[k], cfg);
      c.barrier();
      t.reset();
      for (int i = 0; i < iters[k]; ++i) c.allreduce(v, n, ReduceOp::kSum, kColumns[k].algo);
      best[k] = std::min(best[k], max_over_ranks(c, t.seconds() / iters[k]));
    }
  return best;
}

// The one-way column: rank 0 streams messages to one peer, the first rank
// on another host (a link between hosts), else rank 1; what a pipeline's
// activations, a parameter server's pushes and ZeRO's owner-to-rank
// gathers cross, where a ring's steps send and receive at once.
constexpr int kOneWayTag = 77;

int one_way_peer(Communicator& c) {
  const comm::HostLayout& l = c.host_layout();
  for (int r = 1; r < c.size(); ++r)
    if (l.host_of[size_t(r)] != l.host_of[0]) return r;
  return 1;
}

// `iters` messages of `bytes` from rank 0 to `peer`, then a one-byte reply;
// seconds per message (every rank returns rank 0's figure).
double one_way_batch(Communicator& c, char* buf, int64_t bytes, int peer, int iters) {
  char ack = 0;
  c.barrier();
  Timer t;
  if (c.rank() == 0) {
    for (int i = 0; i < iters; ++i) c.send(buf, size_t(bytes), peer, kOneWayTag);
    c.recv(&ack, 1, peer, kOneWayTag);
  } else if (c.rank() == peer) {
    for (int i = 0; i < iters; ++i) c.recv(buf, size_t(bytes), 0, kOneWayTag);
    c.send(&ack, 1, 0, kOneWayTag);
  }
  return max_over_ranks(c, c.rank() == 0 ? t.seconds() / iters : 0.0);
}

// Checked first (the peer receives rank 0's pattern), then timed as the
// columns are: batches sized to the budget, the fastest counts.
double time_one_way(Communicator& c, float* v, int64_t bytes, const CommBenchConfig& cfg) {
  const int peer = one_way_peer(c);
  char* buf = reinterpret_cast<char*>(v);
  for (int64_t i = 0; i < bytes; ++i) buf[i] = c.rank() == 0 ? char(i % 251) : 0;
  one_way_batch(c, buf, bytes, peer, 1);
  int64_t bad = -1;
  if (c.rank() == peer)
    for (int64_t i = 0; i < bytes && bad < 0; ++i)
      if (buf[i] != char(i % 251)) bad = i;
  if (max_over_ranks(c, double(bad)) >= 0)
    throw Error(detail::concat("bench comm: a one-way message of ", bytes, " bytes to rank ",
                               peer, " arrived wrong; not timing it"));
  const double budget = cfg.seconds / cfg.repeats;
  const double one = one_way_batch(c, buf, bytes, peer, 1);
  const int iters = batch_calls(budget, one);
  double best = one;
  for (int rep = 0; rep < batch_count(budget, one, cfg); ++rep)
    best = std::min(best, one_way_batch(c, buf, bytes, peer, iters));
  return best;
}

double busbw_gbps(int world, int64_t bytes, double seconds) {
  return 2.0 * (world - 1) / world * double(bytes) / seconds / 1e9;
}

void check_config(const Communicator& c, const CommBenchConfig& cfg) {
  COHORT_INPUT_CHECK(cfg.timeout >= 0, "bench comm: timeout must be >= 0, got ", cfg.timeout);
  COHORT_INPUT_CHECK(c.size() >= 2,
                     "bench comm: needs at least 2 ranks (start it with mpirun -np N)");
  COHORT_INPUT_CHECK(cfg.min_bytes >= 1 && cfg.max_bytes >= cfg.min_bytes,
                     "bench comm: sizes must satisfy 1 <= min <= max, got ", cfg.min_bytes,
                     " .. ", cfg.max_bytes);
  COHORT_INPUT_CHECK(cfg.factor >= 2, "bench comm: size factor must be at least 2, got ",
                     cfg.factor);
  COHORT_INPUT_CHECK(cfg.repeats >= 1 && cfg.seconds > 0,
                     "bench comm: repeats and seconds must be positive");
  COHORT_INPUT_CHECK(cfg.peer.empty() || cfg.peer == "pytorch", "--peer: unknown peer '",
                     cfg.peer, "' (valid: pytorch)");
}

// Message sizes in bytes, whole floats: min_bytes, x factor, up to max_bytes.
std::vector<int64_t> message_sizes(const CommBenchConfig& cfg) {
  std::vector<int64_t> sizes;
  for (int64_t b = cfg.min_bytes; b <= cfg.max_bytes; b *= cfg.factor)
    sizes.push_back((b + 3) / 4 * 4);
  return sizes;
}

// One size's row: every column validated, then timed; rank 0 prints it.
nlohmann::ordered_json measure_size(Communicator& c, std::vector<float>& buf, int64_t bytes,
                                    const CommBenchConfig& cfg) {
  const int64_t n = bytes / 4;
  nlohmann::ordered_json row = {{"bytes", bytes}};
  for (const Column& col : kColumns) {
    use_timeout(c, col, cfg);
    validate(c, buf.data(), n, col);
  }
  const std::vector<double> secs = time_columns(c, buf.data(), n, cfg);
  for (size_t k = 0; k < secs.size(); ++k) {
    row[std::string(kColumns[k].name) + "_gbps"] = busbw_gbps(c.size(), bytes, secs[k]);
    row[std::string(kColumns[k].name) + "_us"] = secs[k] * 1e6;
  }
  const double one_way = time_one_way(c, buf.data(), bytes, cfg);
  row["p2p_gbps"] = double(bytes) / one_way / 1e9;  // bytes per second one way, not bus bandwidth
  row["p2p_us"] = one_way * 1e6;
  row["auto_runs"] =
      comm::algorithm_name(comm::choose_algorithm(size_t(bytes), c.size(), c.host_layout()));
  if (c.rank() == 0)
    std::fprintf(stderr,
                 "  %10lld B: ring %.3f  tree %.3f  hier %.3f  auto %.3f  mpi %.3f  one-way %.3f\n",
                 (long long)bytes, row["ring_gbps"].get<double>(),
                 row["tree_gbps"].get<double>(), row["hierarchical_gbps"].get<double>(),
                 row["auto_gbps"].get<double>(), row["mpi_gbps"].get<double>(),
                 row["p2p_gbps"].get<double>());
  return row;
}

// A TCP port free on this host now (for gloo's rendezvous on rank 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof a;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw Error("bench comm: no free TCP port for gloo's rendezvous");
  return ntohs(a.sin_port);
}

// Rank 0's host name and a port free on it, known to every rank.
std::pair<std::string, int> gloo_master(Communicator& c) {
  std::array<char, 256> host{};
  int port = 0;
  if (c.rank() == 0) {
    ::gethostname(host.data(), host.size() - 1);
    port = free_port();
  }
  c.broadcast(host.data(), host.size(), 0);
  c.broadcast(&port, sizeof port, 0);
  return {host.data(), port};
}

// gloo, measured after cohort. On one host rank 0 runs all of gloo's ranks
// on the same cores while the other ranks sleep. Across hosts every rank
// starts one gloo rank on its own host (the peer's launched mode: RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so gloo crosses the same links.
// Its JSON (null if not run); a failure goes to *error.
nlohmann::json run_gloo(Communicator& c, const CommBenchConfig& cfg,
                        const std::vector<int64_t>& sizes, bool across_hosts,
                        std::string* error) {
  nlohmann::json gloo;
  std::string csv;
  for (int64_t b : sizes) csv += (csv.empty() ? "" : ",") + std::to_string(b);
  if (across_hosts) {
    const auto [host, port] = gloo_master(c);
    ::setenv("RANK", std::to_string(c.rank()).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(c.size()).c_str(), 1);
    ::setenv("MASTER_ADDR", host.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  }
  if (c.rank() == 0 || across_hosts) {
    try {
      if (!peer_available()) throw Error("python3 with torch not found (" + peer_python() + ")");
      gloo = run_peer({"allreduce-bench", "--world", std::to_string(c.size()), "--sizes", csv,
                       "--iters", "100000", "--repeats", std::to_string(cfg.repeats),
                       "--seconds", std::to_string(cfg.seconds)});
    } catch (const Error& e) {
      *error = e.what();
      std::fprintf(stderr, "bench comm: rank %d: gloo peer not measured: %s\n", c.rank(),
                   e.what());
    }
  }
  if (across_hosts)
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
  quiet_barrier(c);
  return gloo;
}

// gloo's figures beside each row, and cohort's best against the best peer.
void add_peer_figures(nlohmann::ordered_json& rows, const nlohmann::json& gloo) {
  for (auto& row : rows) {
    double peer = row["mpi_gbps"].get<double>();
    row["gloo_gbps"] = nullptr;  // stays null when gloo was not measured
    if (gloo.contains("results"))
      for (auto& g : gloo["results"])
        if (g["bytes"].get<int64_t>() == row["bytes"].get<int64_t>()) {
          row["gloo_gbps"] = g["busbw_gbps"].get<double>();
          row["gloo_us"] = g["seconds"].get<double>() * 1e6;
          peer = std::max(peer, g["busbw_gbps"].get<double>());
        }
    const double best = std::max({row["ring_gbps"].get<double>(), row["tree_gbps"].get<double>(),
                                  row["hierarchical_gbps"].get<double>(),
                                  row["auto_gbps"].get<double>()});
    row["best_cohort_gbps"] = best;
    row["best_peer_gbps"] = peer;
    row["ratio"] = best / peer;
  }
}

// "2,2": ranks on each host, in host order.
std::string layout_text(const comm::HostLayout& l) {
  std::vector<int> counts(size_t(l.hosts), 0);
  for (int h : l.host_of) ++counts[size_t(h)];
  std::string s;
  for (int k : counts) {
    if (!s.empty()) s += ',';
    s += std::to_string(k);
  }
  return s;
}

void print_table(const nlohmann::ordered_json& rows) {
  std::fprintf(stderr, "\n%12s %8s %8s %8s %8s %8s %8s %8s %8s %7s %8s\n", "bytes", "ring", "tree",
               "hier", "auto", "mpi", "gloo", "cohort", "peer", "ratio", "one-way");
  for (auto& row : rows) {
    char gl[16] = "       -";
    if (row["gloo_gbps"].is_number())
      std::snprintf(gl, sizeof gl, "%8.3f", row["gloo_gbps"].get<double>());
    std::fprintf(stderr, "%12lld %8.3f %8.3f %8.3f %8.3f %8.3f %s %8.3f %8.3f %6.2fx %8.3f\n",
                 (long long)row["bytes"].get<int64_t>(), row["ring_gbps"].get<double>(),
                 row["tree_gbps"].get<double>(), row["hierarchical_gbps"].get<double>(),
                 row["auto_gbps"].get<double>(),
                 row["mpi_gbps"].get<double>(), gl, row["best_cohort_gbps"].get<double>(),
                 row["best_peer_gbps"].get<double>(), row["ratio"].get<double>(),
                 row["p2p_gbps"].get<double>());
  }
}

}  // namespace

nlohmann::ordered_json run_comm_bench(Communicator& c, const CommBenchConfig& cfg) {
  const int p = c.size();
  const bool root = c.rank() == 0;
  const double saved_timeout = c.timeout();
  check_config(c, cfg);
  if (!cfg.ranks_per_host.empty())
    c.set_ranks_per_host(comm::parse_ranks_per_host(cfg.ranks_per_host, p));
  c.prepare(Algorithm::kHierarchical);  // the layout and its splits, before any timing
  const comm::HostLayout& layout = c.host_layout();
  const std::vector<int64_t> sizes = message_sizes(cfg);
  std::vector<float> buf(static_cast<size_t>(sizes.back() / 4));

  if (root)
    std::fprintf(stderr,
                 "bench comm: %d ranks on %d hosts (%s), bus bandwidth GB/s = 2(N-1)/N * bytes "
                 "/ time\n",
                 p, layout.hosts, layout_text(layout).c_str());
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int64_t bytes : sizes) rows.push_back(measure_size(c, buf, bytes, cfg));
  c.set_timeout(saved_timeout);
  nlohmann::json gloo;
  std::string peer_error;
  // A pretended layout (--ranks-per-host) runs on one machine: gloo stays local.
  const bool across_hosts = cfg.ranks_per_host.empty() && layout.hosts >= 2;
  if (!cfg.peer.empty()) gloo = run_gloo(c, cfg, sizes, across_hosts, &peer_error);
  add_peer_figures(rows, gloo);

  nlohmann::ordered_json out = {{"event", "bench-comm"}, {"world", p},
                                {"hosts", layout.hosts},
                                {"ranks_per_host", layout_text(layout)},
                                {"seconds_per_size", cfg.seconds}, {"repeats", cfg.repeats},
                                {"timeout", cfg.timeout}, {"p2p_peer", one_way_peer(c)}};
  if (const char* btl = std::getenv("OMPI_MCA_btl")) out["btl"] = btl;
  if (!peer_error.empty()) out["peer_error"] = peer_error;
  out["sizes"] = rows;
  if (root) {
    print_table(rows);
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  }
  return out;
}

#else

nlohmann::ordered_json run_comm_bench(comm::Communicator&, const CommBenchConfig&) {
  throw InputError("bench comm: this cohort was built without MPI (COHORT_MPI=OFF)");
}

#endif

}  // namespace cohort
