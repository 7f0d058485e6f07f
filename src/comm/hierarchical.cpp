// Hierarchical all-reduce (Horovod's hierarchical allreduce; NCCL's split of
// intra- and inter-node rings): the links inside a host (shared memory) are
// far faster than the one between hosts, so only one phase crosses the
// network, and it carries each byte once per host, not once per rank.
//
// Every host holds L ranks (uniform), H hosts, n floats:
//   1. ring reduce-scatter inside the host: local rank l ends with block
//      (l+1) % L of the host's sum (n/L floats);
//   2. ring all-reduce of that block among the H ranks with local index l
//      (one per host): every rank uses the network, each with n/L floats;
//   3. ring allgather inside the host.
// A host's link carries 2(H-1)/H * n each way. A flat ring over P = H*L ranks
// in rank order crosses each host boundary with a stream of 2(P-1)/P * n, so
// at 2 hosts x 2 ranks the link carries 1.5n flat and 1n here.
//
// Hosts of unequal size (3+1) have no common block partition, so the host's
// lowest rank leads: the host's sum is reduce-scattered and gathered to it,
// the leaders all-reduce the whole vector over the network (a ring), and each
// broadcasts the result inside its host. The link carries the same bytes.
//
// Either way each element is summed once, by one rank, and copied after, so
// every rank ends with bitwise the same vector (replicas stay identical).
#include "comm/communicator.h"
#include "comm/kernels.h"

namespace cohort::comm {

namespace {

// All-reduce over `c` as the ring's two halves, dividing by `world` (the
// whole job's size, not c's) for kAverage.
// Across hosts, so with segments in flight (comm/ring.cpp's `network`).
void ring_over(Communicator& c, float* data, int64_t n, ReduceOp op, int world) {
  ring_reduce_scatter_inplace(c, data, n, op, world, true);
  ring_allgather_inplace(c, data, n, true);
}

void by_slices(Hierarchy& h, float* data, int64_t n, ReduceOp op, int world) {
  Communicator& local = *h.local;
  ring_reduce_scatter_inplace(local, data, n, ReduceOp::kSum, 1);
  const detail::Blocks blk(n, local.size());
  const int own = (local.rank() + 1) % local.size();
  ring_over(*h.cross, data + blk.begin(own), blk.count(own), op, world);
  ring_allgather_inplace(local, data, n);
}

void by_leaders(Hierarchy& h, float* data, int64_t n, ReduceOp op, int world) {
  Communicator& local = *h.local;
  const int l = local.rank(), size = local.size();
  ring_reduce_scatter_inplace(local, data, n, ReduceOp::kSum, 1);
  // Each owner hands its finished block (l+1) % size to the leader, local rank 0.
  const detail::Blocks blk(n, size);
  if (l == 0) {
    for (int q = 1; q < size; ++q) {
      const int b = (q + 1) % size;
      if (blk.count(b) > 0) local.recv(data + blk.begin(b), detail::f32_bytes(blk.count(b)), q, kHierTag);
    }
    ring_over(*h.cross, data, n, op, world);
  } else {
    const int b = (l + 1) % size;
    if (blk.count(b) > 0) local.send(data + blk.begin(b), detail::f32_bytes(blk.count(b)), 0, kHierTag);
  }
  local.broadcast(data, detail::f32_bytes(n), 0);
}

}  // namespace

void hierarchical_allreduce(Communicator& c, float* data, int64_t n, ReduceOp op) {
  if (c.size() == 1 || n == 0) return;
  Hierarchy& h = c.hierarchy();
  if (h.layout.uniform)
    by_slices(h, data, n, op, c.size());
  else
    by_leaders(h, data, n, op, c.size());
}

}  // namespace cohort::comm
