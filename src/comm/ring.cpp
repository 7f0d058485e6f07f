// Ring all-reduce (Patarasuk & Yuan): a reduce-scatter in which each block
// travels once around the ring collecting every rank's contribution, then an
// allgather that passes the finished blocks on. Each rank sends 2(P-1)/P of
// the vector, the bandwidth optimum. Received partial sums are staged in
// L2-sized segments so the add reads them from cache, not memory.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/kernels.h"

namespace cohort::comm {

using detail::bf16_bytes;
using detail::Blocks;
using detail::f32_bytes;
using detail::kSegmentFloats;
using detail::mod;

namespace detail {

// Receives block `rb` from the left in segments and adds each into `acc`
// (its own copy of that block), while sending `send` (count `scount`) to the
// right in the same segments. acc[i] = acc[i] + received[i] on every rank, so
// the order of operands is the same wherever a block is reduced.
void reduce_step(Communicator& c, const float* send, int64_t scount, float* acc, int64_t rcount,
                 int right, int left, int tag) {
  float* tmp = detail::scratch(std::min(rcount, kSegmentFloats));
  for (int64_t off = 0; off < std::max(scount, rcount); off += kSegmentFloats) {
    const int64_t s = std::clamp<int64_t>(scount - off, 0, kSegmentFloats);
    const int64_t r = std::clamp<int64_t>(rcount - off, 0, kSegmentFloats);
    detail::exchange(c, send + off, f32_bytes(s), right, tmp, f32_bytes(r), left, tag);
    detail::add_into(acc + off, tmp, r);
  }
}

// Across hosts: as reduce_step, but with kWindow segments in flight each way,
// so the link never waits for this rank to be scheduled between segments.
// Measured on a namespace cluster (2 hosts, 1 Gbit/s, 2 vCPUs under load):
// one exchange at a time ran a link at about 68% of its rate. Two ranks
// exchanging with each other (one TCP connection carrying both directions)
// ran at line rate or exactly 1.5x slower from run to run, one exchange at a
// time; windowed, always at line rate (docs/SCALING.md, session 36).
constexpr int64_t kWindow = 4;
// Sends ahead of the receives: 2 MiB each way, not a whole block's (a 32 MiB
// block is 128 sends). At 10 Gbit/s on 2 namespace hosts a 64 MiB
// hierarchical all-reduce read 66-70 ms, against 69-81 with every send
// posted at once (3 runs each, turn about; 1 Gbit/s: line rate either way).
constexpr int64_t kSendWindow = 8;

namespace {

// Posts segment i of `send` (scount floats) to `to` onto `sends`, if it exists.
void isend_segment(Communicator& c, std::vector<std::unique_ptr<Request>>& sends,
                   const float* send, int64_t scount, int64_t i, int to, int tag) {
  const int64_t off = i * kSegmentFloats;
  if (off < scount)
    sends.push_back(c.isend(send + off, f32_bytes(std::min(kSegmentFloats, scount - off)), to, tag));
}

}  // namespace

void reduce_step_windowed(Communicator& c, const float* send, int64_t scount, float* acc,
                          int64_t rcount, int right, int left, int tag) {
  const int64_t nseg = (std::max(scount, rcount) + kSegmentFloats - 1) / kSegmentFloats;
  float* tmp = detail::scratch(kWindow * kSegmentFloats, 1);
  std::vector<std::unique_ptr<Request>> recvs(static_cast<size_t>(nseg)), sends;
  auto rlen = [&](int64_t i) { return std::clamp<int64_t>(rcount - i * kSegmentFloats, 0, kSegmentFloats); };
  auto slot = [&](int64_t i) { return tmp + (i % kWindow) * kSegmentFloats; };
  auto post_recv = [&](int64_t i) {
    if (rlen(i) > 0) recvs[size_t(i)] = c.irecv(slot(i), f32_bytes(rlen(i)), left, tag);
  };
  auto post_send = [&](int64_t i) { isend_segment(c, sends, send, scount, i, right, tag); };
  for (int64_t i = 0; i < std::min(kWindow, nseg); ++i) post_recv(i);
  for (int64_t i = 0; i < std::min(kSendWindow, nseg); ++i) post_send(i);
  for (int64_t i = 0; i < nseg; ++i) {
    if (recvs[size_t(i)]) {
      recvs[size_t(i)]->wait();
      detail::add_into(acc + i * kSegmentFloats, slot(i), rlen(i));
      recvs[size_t(i)].reset();  // its slot is free again
    }
    if (i + kWindow < nseg) post_recv(i + kWindow);
    if (i + kSendWindow < nseg) post_send(i + kSendWindow);
  }
  for (auto& r : sends) r->wait();
}

// Sends `scount` floats right and receives `rcount` from the left, every
// receive posted at once (straight into place: no add), the sends windowed.
void move_windowed(Communicator& c, const float* send, int64_t scount, float* recv,
                   int64_t rcount, int right, int left, int tag) {
  std::vector<std::unique_ptr<Request>> recvs, sends;
  for (int64_t off = 0; off < rcount; off += kSegmentFloats)
    recvs.push_back(c.irecv(recv + off, f32_bytes(std::min(kSegmentFloats, rcount - off)), left, tag));
  auto post_send = [&](int64_t i) { isend_segment(c, sends, send, scount, i, right, tag); };
  // Every receive is posted, so each send completes as the link carries it.
  const int64_t nsend = (scount + kSegmentFloats - 1) / kSegmentFloats;
  for (int64_t i = 0; i < std::min(kSendWindow, nsend); ++i) post_send(i);
  for (int64_t i = 0; i < nsend; ++i) {
    sends[size_t(i)]->wait();
    post_send(i + kSendWindow);
  }
  for (auto& r : recvs) r->wait();
}

}  // namespace detail

void ring_reduce_scatter_inplace(Communicator& c, float* data, int64_t n, ReduceOp op,
                                 int divide_by, bool network) {
  const int p = c.size(), r = c.rank();
  const Blocks blk(n, p);
  const int own = (r + 1) % p;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // At step s rank r passes on block r-s, which holds s+1 contributions, and
  // adds its own into block r-s-1. After p-1 steps it owns block r+1, complete.
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    (network ? detail::reduce_step_windowed : detail::reduce_step)(c, data + blk.begin(sb), blk.count(sb),
                                                   data + blk.begin(rb), blk.count(rb), right,
                                                   left, kRingTag);
  }
  if (op == ReduceOp::kAverage)
    detail::scale(data + blk.begin(own), 1.0f / float(divide_by), blk.count(own));
}

void ring_allgather_inplace(Communicator& c, float* data, int64_t n, bool network) {
  const int p = c.size(), r = c.rank();
  const Blocks blk(n, p);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // Finished blocks go around once, straight into place.
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r + 1 - s, p), rb = mod(r - s, p);
    if (network)
      detail::move_windowed(c, data + blk.begin(sb), blk.count(sb), data + blk.begin(rb), blk.count(rb),
                    right, left, kRingTag);
    else
      detail::exchange(c, data + blk.begin(sb), f32_bytes(blk.count(sb)), right,
                       data + blk.begin(rb), f32_bytes(blk.count(rb)), left, kRingTag);
  }
}

void ring_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op) {
  if (c.size() == 1 || n == 0) return;
  const bool network = c.spans_hosts();
  ring_reduce_scatter_inplace(c, data, n, op, c.size(), network);
  ring_allgather_inplace(c, data, n, network);
}

void ring_reduce_scatter(Communicator& c, const float* src, float* dst, int64_t count,
                         ReduceOp op) {
  const int p = c.size(), r = c.rank();
  if (count == 0) return;
  if (p == 1) {
    std::copy(src, src + count, dst);
    return;
  }
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // Only one block is in flight per rank, so dst doubles as the accumulator:
  // at step s rank r receives block r-s-2's partial sum, adds src's block and
  // passes it on; the last block it completes (s = p-2) is its own, r.
  std::copy(src + int64_t(mod(r - 1, p)) * count, src + int64_t(mod(r - 1, p) + 1) * count, dst);
  float* tmp = detail::scratch(std::min(count, kSegmentFloats));
  for (int s = 0; s < p - 1; ++s) {
    const float* mine = src + int64_t(mod(r - s - 2, p)) * count;
    for (int64_t off = 0; off < count; off += kSegmentFloats) {
      const int64_t k = std::min(kSegmentFloats, count - off);
      // dst's segment is sent before it is overwritten with the next sum.
      c.sendrecv(dst + off, f32_bytes(k), right, tmp, f32_bytes(k), left, kRingTag);
#pragma omp simd
      for (int64_t i = 0; i < k; ++i) dst[off + i] = tmp[i] + mine[off + i];
    }
  }
  if (op == ReduceOp::kAverage) detail::scale(dst, 1.0f / p, count);
}

void ring_allgather(Communicator& c, const void* src, void* dst, size_t block_bytes) {
  const int p = c.size(), r = c.rank();
  if (block_bytes == 0) return;  // nothing to move (and the buffers may be null)
  char* out = static_cast<char*>(dst);
  std::memmove(out + size_t(r) * block_bytes, src, block_bytes);  // src may be that block
  if (p == 1) return;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    c.sendrecv(out + size_t(sb) * block_bytes, block_bytes, right, out + size_t(rb) * block_bytes,
               block_bytes, left, kRingTag);
  }
}

// Widened into the thread's scratch, reduced there, rounded back (widening
// and rounding again change no bit).
void ring_allreduce_bf16(Communicator& c, BF16* data, int64_t n, ReduceOp op) {
  if (c.size() == 1 || n == 0) return;
  float* acc = detail::scratch(n, 1);
  bf16_to_f32(data, acc, size_t(n));
  ring_allreduce_f32_bf16_wire(c, acc, n, op);
  f32_to_bf16(acc, data, size_t(n));
}

// bf16 on the wire, partial sums in f32, over f32 data in place: each value
// sent is rounded as it leaves (a block's first hop rounds the rank's own
// gradient, later ones the f32 partial sum), each received segment is added
// into the rank's own value rounded first, and the owner's rounded result is
// widened in place as it is sent. Two passes over the data where rounding it
// into a bf16 copy, widening that to f32, reducing and widening the result
// back made five.
void ring_allreduce_f32_bf16_wire(Communicator& c, float* data, int64_t n, ReduceOp op) {
  const int p = c.size(), r = c.rank();
  if (p == 1 || n == 0) return;
  const Blocks blk(n, p);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  thread_local std::vector<BF16> out, in;
  constexpr int64_t kPiece = 16 * kSegmentFloats;  // the all-gather's messages: 2 MB
  if (out.size() < size_t(kPiece)) out.resize(size_t(kPiece)), in.resize(size_t(kPiece));
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    const int64_t sc = blk.count(sb), rc = blk.count(rb);
    const float* send = data + blk.begin(sb);
    float* recv = data + blk.begin(rb);
    for (int64_t off = 0; off < std::max(sc, rc); off += kSegmentFloats) {
      const int64_t k = std::clamp<int64_t>(sc - off, 0, kSegmentFloats);
      const int64_t m = std::clamp<int64_t>(rc - off, 0, kSegmentFloats);
      f32_to_bf16(send + off, out.data(), size_t(k));
      detail::exchange(c, out.data(), bf16_bytes(k), right, in.data(), bf16_bytes(m), left,
                       kRingTag);
      float* acc = recv + off;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i)
        acc[i] = from_bf16(to_bf16(acc[i])) + from_bf16(in[size_t(i)]);
    }
  }
  const int own = (r + 1) % p;
  if (op == ReduceOp::kAverage) detail::scale(data + blk.begin(own), 1.0f / p, blk.count(own));
  // Step s sends block r+1-s (the own one first) and receives r-s; a block
  // received at step s-1 is sent at step s, rounded again: the same bits.
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r + 1 - s, p), rb = mod(r - s, p);
    const int64_t sc = blk.count(sb), rc = blk.count(rb);
    float* send = data + blk.begin(sb);
    float* recv = data + blk.begin(rb);
    for (int64_t off = 0; off < std::max(sc, rc); off += kPiece) {
      const int64_t k = std::clamp<int64_t>(sc - off, 0, kPiece);
      const int64_t m = std::clamp<int64_t>(rc - off, 0, kPiece);
      f32_to_bf16(send + off, out.data(), size_t(k));
      if (s == 0) bf16_to_f32(out.data(), send + off, size_t(k));  // the owner's result
      detail::exchange(c, out.data(), bf16_bytes(k), right, in.data(), bf16_bytes(m), left,
                       kRingTag);
      bf16_to_f32(in.data(), recv + off, size_t(m));
    }
  }
}

}  // namespace cohort::comm
