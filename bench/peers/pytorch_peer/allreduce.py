"""`allreduce-bench`: gloo's all_reduce of float32 tensors, validated against a
closed form, then timed; the reference for cohort's communication benchmark.
"""

import time

import torch
import torch.distributed as dist

from .common import log


def check_sum(n, rank, world):
    """all_reduce of (rank+1)*(i%7) must equal (i%7)*world(world+1)/2 exactly.
    Returns the reduced n floats."""
    i7 = torch.arange(n, dtype=torch.int64) % 7
    t = (i7 * (rank + 1)).to(torch.float32)
    dist.all_reduce(t)
    want = (i7 * (world * (world + 1) // 2)).to(torch.float32)
    if not torch.equal(t, want):
        raise RuntimeError("gloo all_reduce of %d floats is wrong" % n)
    return t


def iters_for(t, a):
    """a["iters"], or with a["seconds"] fewer: rank 0 sizes the batches from
    one timed call, for all ranks."""
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.broadcast(one, 0)
    if a["seconds"] <= 0:
        return a["iters"]
    want_iters = int(a["seconds"] / a["repeats"] / max(one.item(), 1e-7))
    return max(1, min(a["iters"], want_iters))


def time_size(nbytes, rank, world, a):
    n = max(1, nbytes // 4)
    t = check_sum(n, rank, world)
    t.zero_()  # zeros keep the repeated sums finite
    dist.all_reduce(t)  # warm-up
    iters = iters_for(t, a)
    best = float("inf")
    for _ in range(a["repeats"]):  # the fastest batch counts
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        el = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(el, op=dist.ReduceOp.MAX)  # the slowest rank
        best = min(best, el.item())
    busbw = 2.0 * (world - 1) / world * n * 4 / best / 1e9
    if rank == 0:
        log("gloo: %d ranks, %d bytes: %.1f us, busbw %.3f GB/s"
            % (world, n * 4, best * 1e6, busbw))
    return {"bytes": n * 4, "seconds": best, "iters": iters, "busbw_gbps": busbw}


def allreduce_rank(rank, world, a, results):
    """One gloo rank (dist.run_ranks); rank 0 puts the list of sizes' results."""
    out = [time_size(nbytes, rank, world, a) for nbytes in a["sizes"]]
    if rank == 0:
        results.put(out)
