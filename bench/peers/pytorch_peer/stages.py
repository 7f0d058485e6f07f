"""Pipeline stages for `train --pipe-stages`: the model's units (nets.py) cut
as cohort cuts them, run by PyTorch 1.13's GPipe (torch.distributed.pipeline.sync.Pipe).
"""

import os

import torch.nn as nn
from torch.distributed import rpc
from torch.distributed.pipeline.sync import Pipe

from .common import die, log
from .dist import free_port


def cut_points(counts, stages):
    """Where each of `stages` stages starts, then len(counts): layers with
    `counts` parameters cut where the running total passes s/K of the total,
    keeping at least one layer per stage. The same rule as --balance params in
    cut_stages() of src/parallel/stages.cpp; keep the two in step."""
    total, running, cuts = float(sum(counts)), 0.0, [0]
    for i, c in enumerate(counts):
        if len(cuts) == stages:
            break
        running += c
        left, needed = len(counts) - (i + 1), stages - len(cuts)
        if left < needed:
            break
        if running >= total * len(cuts) / stages or left == needed:
            cuts.append(i + 1)
    return cuts + [len(counts)]


def make_pipe(name, net, stages, micro_batches):
    """net's units in `stages` partitions, as a Pipe of `micro_batches` chunks.
    Pipe runs in one process and needs the RPC framework (rpc.shutdown() when
    done); on CPU every partition shares one worker thread, so partitions take
    turns rather than overlap."""
    units = net.units()
    if stages > len(units):
        die("--pipe-stages %d: %s has only %d layers to place" % (stages, name, len(units)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    rpc.init_rpc("pipe", rank=0, world_size=1)
    cuts = cut_points([sum(p.numel() for p in u.parameters()) for u in units], stages)
    parts = [nn.Sequential(*units[cuts[k]:cuts[k + 1]]) for k in range(stages)]
    log("pipe: %d partitions at layers %s, %d micro-batches" % (stages, cuts, micro_batches))
    return Pipe(nn.Sequential(*parts), chunks=micro_batches, checkpoint="never")
