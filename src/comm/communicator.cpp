// The backend-independent half of the Communicator: algorithm names, the
// all-reduce dispatcher and its automatic choice, bf16 all-reduce, and the
// default reduce-scatter and allgather over the ring.
#include "comm/communicator.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

namespace cohort::comm {

Algorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "tree") return Algorithm::kTree;
  if (name == "mpi") return Algorithm::kMpi;
  if (name == "hierarchical") return Algorithm::kHierarchical;
  if (name == "auto") return Algorithm::kAuto;
  throw InputError("--allreduce: unknown algorithm '" + name +
                   "' (valid: ring, tree, mpi, hierarchical, auto)");
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kMpi: return "mpi";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

HostLayout layout_of(const std::vector<int>& ranks_per_host) {
  HostLayout l;
  for (size_t h = 0; h < ranks_per_host.size(); ++h)
    l.host_of.insert(l.host_of.end(), size_t(ranks_per_host[h]), int(h));
  l.hosts = int(ranks_per_host.size());
  l.max_per_host = *std::max_element(ranks_per_host.begin(), ranks_per_host.end());
  l.uniform = std::all_of(ranks_per_host.begin(), ranks_per_host.end(),
                          [&](int k) { return k == ranks_per_host[0]; });
  return l;
}

std::vector<int> parse_ranks_per_host(const std::string& spec, int world) {
  std::vector<int> counts;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ',');) {
    size_t used = 0;
    int k = 0;
    try {
      k = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    COHORT_INPUT_CHECK(used == part.size() && !part.empty() && k >= 1, "--ranks-per-host '",
                       spec, "': want R or R1,R2,... (positive rank counts)");
    counts.push_back(k);
  }
  COHORT_INPUT_CHECK(!counts.empty(), "--ranks-per-host is empty");
  if (counts.size() == 1) {  // R per host; the last host holds what is left
    const int r = counts[0];
    counts.clear();
    for (int left = world; left > 0; left -= r) counts.push_back(std::min(r, left));
  }
  COHORT_INPUT_CHECK(std::accumulate(counts.begin(), counts.end(), 0) == world,
                     "--ranks-per-host '", spec, "' places ",
                     std::accumulate(counts.begin(), counts.end(), 0), " ranks; the job has ",
                     world);
  return counts;
}

// Measured with the comm bench on the 2-vCPU development machines (shared
// memory, 2..5 ranks): on a power-of-two world halving-doubling is never
// slower than the ring (same bytes, log2 P steps instead of P-1; at 2 ranks
// the two are the same exchange). On other worlds its fold sends whole
// vectors, so the ring wins from about 1 MiB and the tree below 256 KiB.
//
// Across hosts (a network-namespace cluster, docs/BENCHMARKS.md, issue 19):
// with at least 2 hosts and 2 ranks on some host, the hierarchical
// all-reduce sends fewer bytes over the links than any flat algorithm, and
// won every measured run from 1 MiB up (2 hosts x 2 ranks at 1 Gbit/s); at
// 64-256 KiB it lost some runs to the flat algorithms' fewer steps.
constexpr size_t kHierMinBytes = 1 << 20;

bool choice_needs_layout(size_t bytes, int world) { return world >= 3 && bytes >= kHierMinBytes; }

Algorithm choose_algorithm(size_t bytes, int world, const HostLayout& layout) {
  constexpr size_t kTreeMaxBytes = 256 * 1024;
  if (choice_needs_layout(bytes, world) && layout.hosts >= 2 && layout.max_per_host >= 2)
    return Algorithm::kHierarchical;
  const bool power_of_two = (world & (world - 1)) == 0;
  if (power_of_two || bytes <= kTreeMaxBytes) return Algorithm::kTree;
  return Algorithm::kRing;
}

// A collective asked to reduce a dtype it has no kernel for.
static Error unsupported(const char* what, DType t, const char* built) {
  return Error(detail::concat(what, ": dtype ", dtype_name(t), " is not supported (", built, ")"));
}

void Communicator::allreduce(View data, int64_t n, ReduceOp op, Algorithm algo) {
  COHORT_CHECK(n >= 0, "allreduce of ", n, " elements");
  if (data.dtype != DType::kF32 && data.dtype != DType::kBF16)
    throw unsupported("allreduce", data.dtype, "reductions are built for f32 and bf16");
  if (size() == 1 || n == 0) return;  // a sum or mean over one rank is the vector itself
  algo = resolve(algo, dtype_bytes(data.dtype, n));
  if (data.dtype == DType::kBF16) return allreduce_bf16(data.as<BF16>(), n, op, algo);
  float* f = data.as<float>();
  switch (algo) {
    case Algorithm::kRing: ring_allreduce(*this, f, n, op); break;
    case Algorithm::kTree: tree_allreduce(*this, f, n, op); break;
    case Algorithm::kMpi: mpi_allreduce(f, n, op); break;
    case Algorithm::kHierarchical: hierarchical_allreduce(*this, f, n, op); break;
    case Algorithm::kAuto: break;
  }
}

Algorithm Communicator::resolve(Algorithm algo, size_t bytes) {
  if (algo != Algorithm::kAuto) return algo;
  // Small messages never go hierarchical: no need to find the layout for them.
  if (!choice_needs_layout(bytes, size())) return choose_algorithm(bytes, size());
  return choose_algorithm(bytes, size(), host_layout());
}

void Communicator::set_timeout(double seconds) {
  timeout_ = seconds;
  if (!hierarchy_) return;
  hierarchy_->local->set_timeout(seconds);
  hierarchy_->cross->set_timeout(seconds);
}

void Communicator::set_ranks_per_host(std::vector<int> counts) {
  std::lock_guard<std::mutex> lock(topology_mu_);
  COHORT_CHECK(!layout_, "set_ranks_per_host after the host layout was found");
  COHORT_CHECK(std::accumulate(counts.begin(), counts.end(), 0) == size(),
               "set_ranks_per_host: counts do not sum to ", size(), " ranks");
  ranks_per_host_ = std::move(counts);
}

const HostLayout& Communicator::host_layout() {
  std::lock_guard<std::mutex> lock(topology_mu_);
  if (layout_) return *layout_;
  if (!ranks_per_host_.empty()) {
    layout_ = std::make_unique<HostLayout>(layout_of(ranks_per_host_));
    return *layout_;
  }
  // Every rank learns every rank's host key; hosts are numbered in order of
  // their lowest rank, so the layout reads the same on all ranks.
  const int key = host_key();
  std::vector<int> keys(static_cast<size_t>(size()));
  ring_allgather(*this, &key, keys.data(), sizeof(int));
  std::map<int, int> index;
  std::vector<int> counts;
  std::vector<int> host_of;
  for (int k : keys) {
    auto [it, fresh] = index.emplace(k, int(counts.size()));
    if (fresh) counts.push_back(0);
    ++counts[size_t(it->second)];
    host_of.push_back(it->second);
  }
  HostLayout l = layout_of(counts);
  l.host_of = host_of;  // hosts' ranks need not be contiguous
  layout_ = std::make_unique<HostLayout>(std::move(l));
  return *layout_;
}

Hierarchy& Communicator::hierarchy() {
  const HostLayout& layout = host_layout();
  std::lock_guard<std::mutex> lock(topology_mu_);
  if (hierarchy_) return *hierarchy_;
  auto h = std::make_unique<Hierarchy>();
  h->layout = layout;
  h->local = split(layout.host_of[size_t(rank())], rank());
  h->cross = split(h->local->rank(), rank());
  h->local->set_timeout(timeout_);
  h->cross->set_timeout(timeout_);
  h->local->set_polite(polite_);
  h->cross->set_polite(polite_);
  hierarchy_ = std::move(h);
  return *hierarchy_;
}

void Communicator::prepare(Algorithm algo) {
  if (size() == 1 || algo == Algorithm::kMpi) return;
  const HostLayout& l = host_layout();  // the ring and tree ask spans_hosts()
  if (algo == Algorithm::kHierarchical) {
    hierarchy();
  } else if (algo == Algorithm::kAuto && size() >= 3) {
    if (l.hosts >= 2 && l.max_per_host >= 2) hierarchy();
  }
}

void Communicator::allreduce_bf16(BF16* data, int64_t n, ReduceOp op, Algorithm algo) {
  if (algo == Algorithm::kRing) {
    ring_allreduce_bf16(*this, data, n, op);
    return;
  }
  // The others reduce f32 on the wire: widen, reduce, round once.
  std::vector<float> wide(static_cast<size_t>(n));
  bf16_to_f32(data, wide.data(), size_t(n));
  allreduce(wide.data(), n, op, algo);
  f32_to_bf16(wide.data(), data, size_t(n));
}

void Communicator::reduce_scatter(ConstView src, View dst, int64_t count, ReduceOp op) {
  COHORT_CHECK(count >= 0, "reduce_scatter of ", count, " elements per rank");
  check_dtype("reduce_scatter", "dst", dst.dtype, src.dtype);
  if (src.dtype != DType::kF32) throw unsupported("reduce_scatter", src.dtype, "f32 only");
  ring_reduce_scatter(*this, src.as<float>(), dst.as<float>(), count, op);
}

void Communicator::allgather(ConstView src, View dst, int64_t count) {
  COHORT_CHECK(count >= 0, "allgather of ", count, " elements per rank");
  check_dtype("allgather", "dst", dst.dtype, src.dtype);
  ring_allgather(*this, src.data, dst.data, dtype_bytes(src.dtype, count));
}

void sum_metrics(Communicator& c, double* v, int n) {
  std::vector<float> f(v, v + n);  // counts and loss sums fit f32 well enough
  c.allreduce(f.data(), n, ReduceOp::kSum, Algorithm::kMpi);
  for (int i = 0; i < n; ++i) v[i] = f[size_t(i)];
}

void idle(int round) {
  if (round < 64) return;  // a message between local ranks lands within microseconds
  if (round < 256) {
    sched_yield();
    return;
  }
  // Naps grow with the wait: 50 us for the first ~2 ms, then up to 1 ms.
  const int naps = round - 256;
  const int us = naps < 40 ? 50 : naps < 100 ? 200 : 1000;
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void wait_yielding(const Communicator& c, Request& r) {
  if (c.timeout() > 0) return r.wait();  // polls politely too, and names a stalled peer
  for (int round = 0; !r.test(); ++round) idle(round);
}

}  // namespace cohort::comm
