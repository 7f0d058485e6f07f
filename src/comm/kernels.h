// Inner loops shared by the collective algorithms: vectorized reductions, the
// block partition of a buffer over ranks, per-thread scratch buffers, and a
// point-to-point exchange that skips empty sides.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace cohort::comm::detail {

// Received data is staged in segments of this many floats: 256 KiB stays in
// the 1 MiB L2 while it is added, so only the vector itself streams through
// memory (measured fastest of 64 KiB .. 4 MiB at 2 and 4 ranks).
constexpr int64_t kSegmentFloats = 64 * 1024;
// Block boundaries are multiples of 16 floats (one 64-byte cache line).
constexpr int64_t kAlignFloats = 16;

// Bytes on the wire of n elements: the f32 kernels below, bf16 on the wire.
inline size_t f32_bytes(int64_t n) { return dtype_bytes(DType::kF32, n); }
inline size_t bf16_bytes(int64_t n) { return dtype_bytes(DType::kBF16, n); }

inline void add_into(float* __restrict dst, const float* __restrict src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

inline void scale(float* __restrict data, float s, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) data[i] *= s;
}

// n elements cut into `parts` contiguous blocks of aligned, near-equal size;
// trailing blocks may be short or empty when n is small.
class Blocks {
 public:
  Blocks(int64_t n, int parts) : n_(n) {
    const int64_t per = (n + parts - 1) / parts;
    step_ = (per + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  int64_t begin(int i) const { return std::min(n_, step_ * i); }
  int64_t end(int i) const { return std::min(n_, step_ * (i + 1)); }
  int64_t count(int i) const { return end(i) - begin(i); }
  // Blocks [a, b) as one range.
  int64_t begin_of(int a) const { return begin(a); }
  int64_t count_of(int a, int b) const { return begin(b) - begin(a); }

 private:
  int64_t n_, step_;
};

// A per-thread buffer of at least n floats (slot 0 or 1), reused across calls
// so a collective allocates nothing in steady state.
inline float* scratch(int64_t n, int slot = 0) {
  thread_local std::vector<float> buf[2];
  if (int64_t(buf[slot].size()) < n) buf[slot].resize(size_t(n));
  return buf[slot].data();
}

// Sends and receives whichever sides are non-empty. Both partners derive the
// sizes from the same partition, so they agree on which sides exist.
inline void exchange(Communicator& c, const void* sbuf, size_t sbytes, int dst, void* rbuf,
                     size_t rbytes, int src, int tag) {
  if (sbytes && rbytes)
    c.sendrecv(sbuf, sbytes, dst, rbuf, rbytes, src, tag);
  else if (sbytes)
    c.send(sbuf, sbytes, dst, tag);
  else if (rbytes)
    c.recv(rbuf, rbytes, src, tag);
}

// One step of a ring or tree (comm/ring.cpp), one 256 KiB exchange at a
// time: sends `send` (scount floats) to `right` while receiving rcount
// floats from `left`, each segment added into `acc` (acc[i] = acc[i] +
// received[i] on every rank, so partners compute the same operands).
void reduce_step(Communicator& c, const float* send, int64_t scount, float* acc, int64_t rcount,
                 int right, int left, int tag);
// The ring's steps across hosts (comm/ring.cpp): several 256 KiB segments
// in flight each way at once (receives 4 ahead, sends 8), so both
// directions of a link stay busy. As a step one exchange at a time: send `scount` floats to
// `right` while receiving `rcount` from `left`, added into `acc` (acc[i] =
// acc[i] + received[i], the operand order of the unwindowed step) or moved
// into `recv`. right == left (two ranks, or a tree's partner) is allowed.
void reduce_step_windowed(Communicator& c, const float* send, int64_t scount, float* acc,
                          int64_t rcount, int right, int left, int tag);
void move_windowed(Communicator& c, const float* send, int64_t scount, float* recv,
                   int64_t rcount, int right, int left, int tag);

inline int mod(int a, int m) { return ((a % m) + m) % m; }

}  // namespace cohort::comm::detail
