#include "parallel/shards.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "comm/kernels.h"
#include "core/memory.h"

namespace cohort {

namespace {

constexpr int kShardTag = 125;  // clear of pipeline (110-111), ps (120-121), resume (130)
constexpr int64_t kAlign = 16;   // floats: one 64-byte line

int mod(int a, int p) { return ((a % p) + p) % p; }

// Block k's part of [b, e).
std::pair<int64_t, int64_t> clip(const ShardLayout& l, int k, int64_t b, int64_t e) {
  const int64_t lo = std::max(b, l.begin(k)), hi = std::min(e, l.end(k));
  return {lo, std::max(lo, hi)};
}

// Across hosts a message goes in pieces of kNetPiece bytes, every piece
// posted at once. Over TCP, OpenMPI moved one message of 1 MiB or more at
// about half the link's rate: cifar-resnet50's ZeRO-1 all-gather on 2
// namespace hosts at 1 Gbit/s (47 MB each way) took 808-821 ms whole, 765-807
// in 1-2 MiB pieces, 415-445 in 256 KiB ones, posted at once or one exchange
// at a time (gpt2's 248 MB blocks ran at the link's rate either way; at 10
// Gbit/s no difference). Inside a host a whole block is one single copy
// (8 ms there, 23-25 in 256 KiB pieces).
constexpr size_t kNetPiece = size_t(kShardSegment) * 4;

// Which of a rank's ring links cross hosts: to `dst` (its sends) and from
// `src` (its receives). Both ends of a link see the same answer, so a
// message and its receive are cut alike.
struct Crossing {
  bool send = false, recv = false;
};

Crossing crossing(comm::Communicator& c, int dst, int src) {
  const auto& host = c.host_layout().host_of;
  const int me = c.rank();
  return {host[size_t(dst)] != host[size_t(me)], host[size_t(src)] != host[size_t(me)]};
}

void post_pieces(std::vector<std::unique_ptr<comm::Request>>& reqs, comm::Communicator& c,
                 const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src,
                 Crossing x) {
  const size_t rp = x.recv ? kNetPiece : std::max<size_t>(rbytes, 1);
  const size_t sp = x.send ? kNetPiece : std::max<size_t>(sbytes, 1);
  char* in = static_cast<char*>(rbuf);
  const char* out = static_cast<const char*>(sbuf);
  for (size_t off = 0; off < rbytes; off += rp)
    reqs.push_back(c.irecv(in + off, std::min(rp, rbytes - off), src, kShardTag));
  for (size_t off = 0; off < sbytes; off += sp)
    reqs.push_back(c.isend(out + off, std::min(sp, sbytes - off), dst, kShardTag));
}

// Posts the receive and the send (in pieces where a link crosses hosts),
// then waits for all without holding a core (comm::wait_yielding): with
// more ranks than cores (4 on 2) a blocking MPI wait spins in sched_yield
// against the very rank whose copy it awaits (measured: gpt2 at 4 ranks
// spent 11 of its 15 s steps so). An empty side is skipped, as the ring
// does, so sends and receives pair up.
void exchange(comm::Communicator& c, const void* sbuf, size_t sbytes, int dst, void* rbuf,
              size_t rbytes, int src, Crossing x = {}) {
  std::vector<std::unique_ptr<comm::Request>> reqs;
  post_pieces(reqs, c, sbuf, sbytes, dst, rbuf, rbytes, src, x);
  for (auto& r : reqs) comm::wait_yielding(c, *r);
}

}  // namespace

ShardLayout::ShardLayout(int64_t elements, int ranks, int64_t first)
    : n_(elements), first_(first), ranks_(ranks) {
  const int64_t per = (elements - first + ranks - 1) / ranks;
  step_ = std::max<int64_t>(kAlign, (per + kAlign - 1) / kAlign * kAlign);
}

namespace {

// Ring reduce-scatter over the blocks' parts of [b, e) of `at_b` (element i
// at at_b[i - b]): at step s rank r passes on part r-s (holding s+1
// contributions) and folds the part r-s-1 it receives into its own with
// add(acc, received, n), acc = acc + received, as comm/ring.cpp does.
template <typename T, typename Add>
void reduce_scatter_parts(comm::Communicator& c, const ShardLayout& l, T* at_b, int64_t b,
                          int64_t e, T* scratch, Add add) {
  const int p = c.size(), r = c.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const auto [sb, se] = clip(l, mod(r - s, p), b, e);
    const auto [rb, re] = clip(l, mod(r - s - 1, p), b, e);
    for (int64_t off = 0; off < std::max(se - sb, re - rb); off += kShardSegment) {
      const int64_t sn = std::clamp<int64_t>(se - sb - off, 0, kShardSegment);
      const int64_t rn = std::clamp<int64_t>(re - rb - off, 0, kShardSegment);
      exchange(c, at_b + (sb - b) + off, size_t(sn) * sizeof(T), right, scratch,
               size_t(rn) * sizeof(T), left);
      add(at_b + (rb - b) + off, scratch, rn);
    }
  }
}

}  // namespace

void reduce_scatter_range(comm::Communicator& c, const ShardLayout& l, float* g, int64_t b,
                          int64_t e, float* scratch) {
  reduce_scatter_parts(c, l, g + b, b, e, scratch, comm::detail::add_into);
}

void reduce_scatter_range_bf16(comm::Communicator& c, const ShardLayout& l, BF16* buf, int64_t b,
                               int64_t e, BF16* scratch) {
  reduce_scatter_parts(c, l, buf, b, e, scratch, [](BF16* acc, const BF16* in, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc[i] = to_bf16(from_bf16(acc[i]) + from_bf16(in[i]));
  });
}

// At step s rank r passes on block r+1-s (its own first) and receives r-s.
void allgather_shards(comm::Communicator& c, const ShardLayout& l, void* base, size_t elem) {
  const int p = c.size(), r = c.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  if (p == 1) return;
  const Crossing x = crossing(c, right, left);
  char* w = static_cast<char*>(base);
  for (int s = 0; s < p - 1; ++s) {
    const int sb = mod(r + 1 - s, p), rb = mod(r - s, p);
    exchange(c, w + size_t(l.begin(sb)) * elem, size_t(l.end(sb) - l.begin(sb)) * elem, right,
             w + size_t(l.begin(rb)) * elem, size_t(l.end(rb) - l.begin(rb)) * elem, left, x);
  }
}

void allgather_bf16_shards(comm::Communicator& c, const ShardLayout& l, BF16* low, const float* w) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const Crossing x = crossing(c, right, left);
  constexpr int64_t kPiece = 16 * kShardSegment;  // 2 MB of bf16 converted at a time
  std::vector<BF16> piece(static_cast<size_t>(kPiece));
  // Step 0: the own block (r + 1) out, block r in, piece by piece.
  const int64_t sb = l.begin(mod(r + 1, p)), sn = l.end(mod(r + 1, p)) - sb;
  const int64_t rb = l.begin(r), rn = l.end(r) - rb;
  for (int64_t off = 0; off < std::max(sn, rn); off += kPiece) {
    const int64_t k = std::clamp<int64_t>(sn - off, 0, kPiece);
    const int64_t m = std::clamp<int64_t>(rn - off, 0, kPiece);
    f32_to_bf16(w + sb + off, piece.data(), size_t(k));
    exchange(c, piece.data(), size_t(k) * 2, right, low + rb + off, size_t(m) * 2, left, x);
  }
  for (int s = 1; s < p - 1; ++s) {
    const int send = mod(r + 1 - s, p), recv = mod(r - s, p);
    exchange(c, low + l.begin(send), size_t(l.end(send) - l.begin(send)) * 2, right,
             low + l.begin(recv), size_t(l.end(recv) - l.begin(recv)) * 2, left, x);
  }
}

namespace {

// Posts [b, e)'s pieces: the owner sends each to every rank that wants it
// (on one machine each receiver copies straight from the owner's memory).
void post_gather(comm::Communicator& c, const ShardLayout& l, float* w, int64_t b, int64_t e,
                 int root, std::vector<std::unique_ptr<comm::Request>>& pending) {
  for (int k = 0; k < l.ranks(); ++k) {
    const auto [lo, hi] = clip(l, k, b, e);
    if (hi <= lo) continue;
    const int owner = l.owner_of(k);
    const size_t bytes = size_t(hi - lo) * 4;
    if (c.rank() == owner) {
      for (int r = 0; r < c.size(); ++r)
        if (r != owner && (root < 0 || r == root))
          pending.push_back(c.isend(w + lo, bytes, r, kShardTag));
    } else if (root < 0 || c.rank() == root) {
      pending.push_back(c.irecv(w + lo, bytes, owner, kShardTag));
    }
  }
}

}  // namespace

// Every piece is posted first, then all are waited for.
void gather_range(comm::Communicator& c, const ShardLayout& l, float* w, int64_t b, int64_t e,
                  int root) {
  std::vector<std::unique_ptr<comm::Request>> pending;
  post_gather(c, l, w, b, e, root, pending);
  for (auto& p : pending) comm::wait_yielding(c, *p);
}

// One wait for them all: the token rows are ~100 short runs, and a wait per
// run napped in between (gpt2 zero-3 on 2 ranks: 84 -> 55 ms a step, the
// rest mostly the ranks' skew at the step's start).
void gather_ranges(comm::Communicator& c, const ShardLayout& l, float* w,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<std::unique_ptr<comm::Request>> pending;
  for (auto [b, e] : ranges) post_gather(c, l, w, b, e, -1, pending);
  for (auto& p : pending) comm::wait_yielding(c, *p);
}

void release_unowned(const ShardLayout& l, int rank, float* base, int64_t b, int64_t e,
                     bool zero) {
  const auto [sb, se] = l.shard(rank);
  const auto drop = [&](int64_t lo, int64_t hi) {
    if (hi > lo) release_pages(base + lo, size_t(hi - lo) * 4, zero);
  };
  b = std::max(b, l.first());
  drop(b, std::min(e, sb));
  drop(std::max(b, se), e);
}

}  // namespace cohort
