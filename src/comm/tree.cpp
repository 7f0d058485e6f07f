// Tree all-reduce over point-to-point: recursive halving (reduce-scatter) then
// recursive doubling (allgather), Rabenseifner's algorithm as in Thakur,
// Rabenseifner & Gropp (2005): 2 log2 P steps instead of the ring's 2(P-1),
// the same bytes per rank. Small vectors use plain recursive doubling (log2 P
// steps, whole vector each). A non-power-of-two world first folds: of the
// first 2r ranks (r = P - 2^k) each even rank hands its vector to the odd one
// after it and sits out, and gets the result back at the end.
#include "comm/communicator.h"
#include "comm/kernels.h"

namespace cohort::comm {

using detail::Blocks;
using detail::f32_bytes;
using detail::kSegmentFloats;

namespace {

// At or below 2 KiB the whole vector is exchanged each step: fewer steps,
// and it still travels eagerly (OpenMPI's shared-memory eager limit is 4 KiB
// with headers; past it every message pays a rendezvous round trip, which
// made whole-vector exchanges of 4 KiB slower than halving).
constexpr int64_t kDoublingMaxFloats = 512;

// Over the 2^k ranks left after the fold; `real` maps a virtual rank to its
// communicator rank.
// Across hosts (`network`) each exchange keeps segments in flight both ways,
// as the ring's steps do (comm/kernels.h): one at a time, two namespace hosts
// at 1 Gbit/s ran at line rate or 1.5x slower from run to run.
template <typename Real>
void halving_doubling(Communicator& c, float* data, int64_t n, ReduceOp op, int vrank, int p2,
                      Real real, bool network) {
  const Blocks blk(n, p2);
  int lo = 0, hi = p2;  // the blocks this rank still reduces
  for (int mask = p2 / 2; mask >= 1; mask /= 2) {
    const int peer = real(vrank ^ mask);
    const int mid = lo + (hi - lo) / 2;
    const bool lower = (vrank & mask) == 0;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    const float* give = data + blk.begin(give_lo);
    float* keep = data + blk.begin(keep_lo);
    const int64_t ng = blk.count_of(give_lo, give_hi), nk = blk.count_of(keep_lo, keep_hi);
    (network ? detail::reduce_step_windowed : detail::reduce_step)(c, give, ng, keep, nk, peer,
                                                                   peer, kTreeTag);
    lo = keep_lo;
    hi = keep_hi;
  }
  // This rank now owns block vrank, complete.
  if (op == ReduceOp::kAverage) detail::scale(data + blk.begin(lo), 1.0f / c.size(), blk.count(lo));
  for (int mask = 1; mask < p2; mask *= 2) {
    const int peer = real(vrank ^ mask);
    const bool lower = (vrank & mask) == 0;
    const int width = hi - lo;
    const int plo = lower ? hi : lo - width, phi = plo + width;
    if (network)
      detail::move_windowed(c, data + blk.begin(lo), blk.count_of(lo, hi), data + blk.begin(plo),
                            blk.count_of(plo, phi), peer, peer, kTreeTag);
    else
      detail::exchange(c, data + blk.begin(lo), f32_bytes(blk.count_of(lo, hi)), peer,
                       data + blk.begin(plo), f32_bytes(blk.count_of(plo, phi)), peer, kTreeTag);
    lo = std::min(lo, plo);
    hi = std::max(hi, phi);
  }
}

template <typename Real>
void recursive_doubling(Communicator& c, float* data, int64_t n, ReduceOp op, int vrank, int p2,
                        Real real) {
  for (int mask = 1; mask < p2; mask *= 2) {
    const int peer = real(vrank ^ mask);
    detail::reduce_step(c, data, n, data, n, peer, peer, kTreeTag);
  }
  if (op == ReduceOp::kAverage) detail::scale(data, 1.0f / c.size(), n);
}

}  // namespace

void tree_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op) {
  const int p = c.size(), r = c.rank();
  if (p == 1 || n == 0) return;
  const bool network = c.spans_hosts();  // every rank asks, folded ones too
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int extra = p - p2;
  // Fold: ranks below 2*extra pair up; the odd one of each pair carries on.
  int vrank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      for (int64_t off = 0; off < n; off += kSegmentFloats)
        c.send(data + off, f32_bytes(std::min(kSegmentFloats, n - off)), r + 1, kTreeTag);
      vrank = -1;
    } else {
      float* tmp = detail::scratch(std::min(n, kSegmentFloats));
      for (int64_t off = 0; off < n; off += kSegmentFloats) {
        const int64_t k = std::min(kSegmentFloats, n - off);
        c.recv(tmp, f32_bytes(k), r - 1, kTreeTag);
        detail::add_into(data + off, tmp, k);
      }
      vrank = r / 2;
    }
  } else {
    vrank = r - extra;
  }
  if (vrank >= 0) {
    auto real = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
    if (n <= kDoublingMaxFloats || n < p2 * detail::kAlignFloats)
      recursive_doubling(c, data, n, op, vrank, p2, real);
    else
      halving_doubling(c, data, n, op, vrank, p2, real, network);
  }
  // Unfold: the sitting-out ranks get the finished vector.
  if (r < 2 * extra) {
    if (r % 2 == 0)
      c.recv(data, f32_bytes(n), r + 1, kTreeTag);
    else
      c.send(data, f32_bytes(n), r - 1, kTreeTag);
  }
}

}  // namespace cohort::comm
