// The backend-independent half of the Communicator: algorithm names, the
// all-reduce dispatcher and its automatic choice, bf16 all-reduce, and the
// default reduce-scatter and allgather over the ring.
#include "comm/communicator.h"

#include <sched.h>

#include <chrono>
#include <thread>
#include <vector>

namespace cohort::comm {

Algorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "tree") return Algorithm::kTree;
  if (name == "mpi") return Algorithm::kMpi;
  if (name == "auto") return Algorithm::kAuto;
  throw InputError("--allreduce: unknown algorithm '" + name + "' (valid: ring, tree, mpi, auto)");
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kMpi: return "mpi";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

// Measured with the comm bench on the 2-vCPU development machines (shared
// memory, 2..5 ranks): on a power-of-two world halving-doubling is never
// slower than the ring (same bytes, log2 P steps instead of P-1; at 2 ranks
// the two are the same exchange). On other worlds its fold sends whole
// vectors, so the ring wins from about 1 MiB and the tree below 256 KiB.
Algorithm choose_algorithm(size_t bytes, int world) {
  constexpr size_t kTreeMaxBytes = 256 * 1024;
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
  if (algo == Algorithm::kAuto) algo = choose_algorithm(dtype_bytes(data.dtype, n), size());
  if (data.dtype == DType::kBF16) return allreduce_bf16(data.as<BF16>(), n, op, algo);
  float* f = data.as<float>();
  switch (algo) {
    case Algorithm::kRing: ring_allreduce(*this, f, n, op); break;
    case Algorithm::kTree: tree_allreduce(*this, f, n, op); break;
    case Algorithm::kMpi: mpi_allreduce(f, n, op); break;
    case Algorithm::kAuto: break;
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
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void wait_yielding(const Communicator& c, Request& r) {
  if (c.timeout() > 0) return r.wait();  // polls politely too, and names a stalled peer
  for (int round = 0; !r.test(); ++round) idle(round);
}

}  // namespace cohort::comm
