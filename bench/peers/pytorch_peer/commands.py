"""The peer's commands, run after cli.py has checked the arguments and sized
the thread pools. Each prints one JSON line on stdout (grads writes a file).
"""

import json

import torch

from . import dist
from .allreduce import allreduce_rank
from .common import die
from .grads import write_grads
from .models import build_model, count_params
from .train import step_rank, train_rank


def emit(record):
    print(json.dumps(record), flush=True)


def cmd_count(args):
    torch.manual_seed(0)
    emit({"model": args.model, "parameters": count_params(build_model(args.model))})


def cmd_step(args):
    a = {k: getattr(args, k)
         for k in ("model", "batch", "threads", "steps", "warmup", "seed", "precision")}
    times = dict(dist.run_ranks(step_rank, args.world, a))
    if len(times) != args.world:
        die("only %d of %d ranks reported a time" % (len(times), args.world), code=1)
    elapsed = max(times.values())
    images = args.world * args.batch * args.steps
    emit({"peer": "pytorch", "torch": torch.__version__, "model": args.model,
          "precision": args.precision, "batch": args.batch, "threads": args.threads, "world": args.world,
          "steps": args.steps, "images_per_second": images / elapsed,
          "seconds_per_step": elapsed / args.steps})


def cmd_allreduce(args):
    a = {"threads": 1, "sizes": args.sizes, "iters": args.iters,
         "repeats": args.repeats, "seconds": args.seconds}
    results = dist.run_ranks(allreduce_rank, args.world, a)
    if not results:
        die("rank 0 reported no results", code=1)
    emit({"peer": "gloo", "torch": torch.__version__, "world": args.world,
          "results": results[0]})


def cmd_train(args):
    a = {k: getattr(args, k) for k in ("model", "batch", "repeat", "epochs", "limit", "data",
                                         "threads", "seed", "pipe_stages", "micro_batches",
                                         "precision")}
    a["data_dir"] = args.data_dir
    results = dist.run_ranks(train_rank, args.world, a)
    if not results:
        die("rank 0 reported no summary", code=1)
    emit(results[0])


COMMANDS = {"count": cmd_count, "step": cmd_step, "grads": write_grads,
            "allreduce-bench": cmd_allreduce, "train": cmd_train}
