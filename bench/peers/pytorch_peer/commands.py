"""The peer's commands, run after cli.py has checked the arguments and sized
the thread pools. Each prints one JSON line on stdout (grads and hf-export
write a file).
"""

import json

import torch

from . import dist
from .allreduce import allreduce_rank
from .common import die
from .grads import write_grads
from .hfexport import hf_export
from .models import build_model, count_params, gpt2_config, gpt2_shapes, is_token_model
from .train import step_rank, train_rank
from .tvexport import tv_export


def emit(record):
    print(json.dumps(record), flush=True)


def cmd_count(args):
    torch.manual_seed(0)
    record = {"model": args.model}
    if is_token_model(args.model):
        # Shapes only (meta tensors): gpt2-large would take 3 GB to count.
        model = build_model(args.model, args.vocab, args.seq, device="meta")
        got = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
        if got != gpt2_shapes(args.model, args.vocab, args.seq):
            die("gpt2.py and models.gpt2_shapes disagree on %s's parameters" % args.model, code=1)
        _, _, _, record["vocab"], record["seq"] = gpt2_config(args.model, args.vocab, args.seq)
    else:
        model = build_model(args.model)
    record["parameters"] = count_params(model)
    emit(record)


def cmd_step(args):
    a = {k: getattr(args, k) for k in ("model", "batch", "threads", "steps", "warmup", "seed",
                                         "precision", "vocab", "seq")}
    reports = dist.run_ranks(step_rank, args.world, a)
    if reports is None:
        return  # a launched rank other than 0: rank 0 reports
    if len(reports) != args.world:
        die("only %d of %d ranks reported a time" % (len(reports), args.world), code=1)
    elapsed = max(r[1] for r in reports)
    samples = args.world * args.batch * args.steps  # images, or sequences
    record = {"peer": "pytorch", "torch": torch.__version__, "model": args.model,
              "precision": args.precision, "batch": args.batch, "threads": args.threads,
              "world": args.world, "steps": args.steps, "images_per_second": samples / elapsed,
              "seconds_per_step": elapsed / args.steps,
              # Each rank's own peak resident set, the largest of them.
              "peak_memory_mb": max(r[2] for r in reports)}
    if is_token_model(args.model):
        _, _, _, vocab, seq = gpt2_config(args.model, args.vocab, args.seq)
        record.update({"vocab": vocab, "seq": seq, "sequences_per_second": samples / elapsed,
                       "tokens_per_second": samples * seq / elapsed})
    emit(record)


def cmd_allreduce(args):
    a = {"threads": 1, "sizes": args.sizes, "iters": args.iters,
         "repeats": args.repeats, "seconds": args.seconds}
    results = dist.run_ranks(allreduce_rank, args.world, a)
    if results is None:
        return  # a launched rank other than 0: rank 0 reports
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
    if results is None:
        return  # a launched rank other than 0: rank 0 reports
    if not results:
        die("rank 0 reported no summary", code=1)
    emit(results[0])


COMMANDS = {"count": cmd_count, "step": cmd_step, "grads": write_grads,
            "allreduce-bench": cmd_allreduce, "train": cmd_train, "hf-export": hf_export,
            "tv-export": tv_export}
