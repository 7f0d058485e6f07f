"""The peer's one training loop, and the ranks of `step` and `train` that run it.

A step is zero_grad, forward, mean cross-entropy, backward, Adam(lr=1e-3,
eps=1e-7), as `cohort train`; with --precision bf16 forward and loss run under
CPU autocast (amp.py). Token models (gpt2*) step on random ids, every position
a target; train takes image models only. With world > 1 the model is wrapped in DDP over
dist.py's gloo group; with --pipe-stages in stages.py's Pipe.
"""

import itertools
import os
import resource
import time

import torch
import torch.distributed as dist
from torch.distributed import rpc
from torch.nn.parallel import DistributedDataParallel

from .amp import autocast, mean_cross_entropy
from .common import die, log
from .freeze import freeze
from .data import batches, epoch_order, load_train_data, random_images, random_tokens
from .models import MNIST, build_model, gpt2_config, input_shape, is_token_model
from .stages import make_pipe


def build_trainer(name, seed, ddp, vocab=0, seq=0):
    """(net, model): the seeded net, and model, the net under DDP if ddp."""
    torch.manual_seed(seed)  # same init on every rank (DDP also broadcasts)
    net = build_model(name, vocab, seq)
    net.train()
    return net, (DistributedDataParallel(net) if ddp else net)


def adam(model, params=None):
    return torch.optim.Adam(model.parameters() if params is None else params, lr=1e-3, eps=1e-7)


def run_steps(model, opt, data, precision, pipe=False):
    """One step per (x, y) in data. Returns (last loss, seconds taking the
    batches, seconds in the steps, steps). Under DDP the gradient all-reduce
    runs inside backward, so it counts as step time."""
    loss, data_s, compute_s, steps = None, 0.0, 0.0, 0
    it = iter(data)
    while True:
        t1 = time.perf_counter()
        xy = next(it, None)
        if xy is None:
            return loss, data_s, compute_s, steps
        t2 = time.perf_counter()
        opt.zero_grad()
        with autocast(precision):
            out = model(xy[0])
            loss = mean_cross_entropy(out.local_value() if pipe else out, xy[1])
        loss.backward()
        opt.step()
        data_s += t2 - t1
        compute_s += time.perf_counter() - t2
        steps += 1


def peak_rss_mb():
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synthetic_batch(a, rank):
    """One random batch of a["batch"] images, or of sequences of a["seq"] tokens."""
    g = torch.Generator().manual_seed(a["seed"] * 1000 + rank + 1)
    if is_token_model(a["model"]):
        _, _, _, vocab, t = gpt2_config(a["model"], a["vocab"], a["seq"])
        return random_tokens(a["batch"], t, vocab, g)
    shape = input_shape(a["model"])
    if a.get("image_size"):
        shape = (shape[0], a["image_size"], a["image_size"])
    return random_images(a["batch"], shape, g)


def step_rank(rank, world, a, results):
    """`step`: a["steps"] timed steps on one synthetic batch, after a["warmup"];
    puts (rank, seconds, peak RSS in MiB) on results."""
    ddp = world > 1
    net, _ = build_trainer(a["model"], a["seed"], False, a["vocab"], a["seq"])
    trainable = freeze(net, a.get("freeze", "none"))  # before DDP sees which need gradients
    model = DistributedDataParallel(net) if ddp else net
    opt = adam(model, trainable)
    x, y = synthetic_batch(a, rank)
    run_steps(model, opt, itertools.repeat((x, y), a["warmup"]), a["precision"])
    if ddp:
        dist.barrier()
    t0 = time.perf_counter()
    loss = run_steps(model, opt, itertools.repeat((x, y), a["steps"]), a["precision"])[0]
    elapsed = time.perf_counter() - t0
    if ddp:
        dist.barrier()
    log("rank %d: %d steps in %.3fs, last loss %.4f" % (rank, a["steps"], elapsed, float(loss)))
    results.put((rank, elapsed, peak_rss_mb()))


def test_accuracy(net, vx, vy, precision):
    # Not timed, and the other ranks are done: use every CPU, as cohort's
    # ranks share the test pass between them.
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    net.eval()
    correct = 0
    with torch.no_grad(), autocast(precision):
        for i in range(0, vx.shape[0], 1000):
            correct += int((net(vx[i:i + 1000]).argmax(1) == vy[i:i + 1000]).sum())
    return correct / vx.shape[0]


def train_rank(rank, world, a, results):
    """`train`: a["epochs"] epochs as `cohort train`; rank 0 puts the summary
    on results."""
    tx, ty, vx, vy = load_train_data(a["data"], a["limit"], a["data_dir"], a["model"])
    if a["data"] == "fashion-mnist" and input_shape(a["model"]) != MNIST:
        die("--model %s takes %s images but --data fashion-mnist has 1x28x28"
            % (a["model"], "x".join(map(str, input_shape(a["model"])))))
    net, model = build_trainer(a["model"], a["seed"], world > 1)
    pipe = a["pipe_stages"] > 1
    if pipe:
        model = make_pipe(a["model"], net, a["pipe_stages"], a["micro_batches"])
    try:
        run = train_epochs(model, adam(model), (tx, ty), rank, world, a, pipe)
        if rank == 0:
            run["test_accuracy"] = test_accuracy(net, vx, vy, a["precision"])
            results.put(summary(a, world, run))
    finally:
        if pipe:
            rpc.shutdown()


def train_epochs(model, opt, train_data, rank, world, a, pipe):
    """Times each epoch between barriers; totals for summary()."""
    tx, ty = train_data
    n = tx.shape[0] * a["repeat"]
    run = {"epoch_seconds": [], "epoch_ips": [], "data_s": 0.0, "compute_s": 0.0, "steps": 0}
    for epoch in range(a["epochs"]):
        order = epoch_order(n, tx.shape[0], rank, world, a["seed"] + epoch)
        model.train()
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        loss, data_s, compute_s, steps = run_steps(
            model, opt, batches(tx, ty, order, a["batch"]), a["precision"], pipe)
        if world > 1:
            dist.barrier()
        secs = time.perf_counter() - t0
        run["epoch_seconds"].append(secs)
        run["epoch_ips"].append(order.shape[0] * world / secs)
        run["data_s"] += data_s
        run["compute_s"] += compute_s
        run["steps"] += steps
        log("rank %d epoch %d: %.2fs, loss %.4f" % (rank, epoch + 1, secs, float(loss)))
    run["images"] = order.shape[0] * world * a["epochs"]
    return run


def summary(a, world, run):
    steps, data_s, compute_s = run["steps"], run["data_s"], run["compute_s"]
    return {
        "event": "summary", "peer": "pytorch", "torch": torch.__version__,
        "model": a["model"], "precision": a["precision"], "batch": a["batch"],
        "threads": a["threads"], "world_size": world, "global_batch": a["batch"] * world,
        "test_accuracy": run["test_accuracy"],
        "epoch_seconds": run["epoch_seconds"],
        "epoch_images_per_second": run["epoch_ips"],
        "images_per_second": run["images"] / sum(run["epoch_seconds"]),
        "peak_memory_mb": peak_rss_mb(),
        # Per step on rank 0. DDP reduces gradients inside backward, so its
        # communication is part of "compute" here.
        "step_seconds": {"total": (data_s + compute_s) / steps,
                         "compute": compute_s / steps, "data": data_s / steps},
        "communication_in_compute": world > 1,
        "pipeline": ({"stages": a["pipe_stages"], "micro_batches": a["micro_batches"],
                      "schedule": "gpipe", "checkpoint": "never"} if a["pipe_stages"] > 1 else None)}
