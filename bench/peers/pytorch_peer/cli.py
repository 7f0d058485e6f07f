"""The peer's command line: parse, check, size the thread pools, then run.

Checks come first and import no torch, so bad input fails fast (message on
stderr, exit 2); the thread variables are set before commands.py imports torch.
"""

import argparse

from .common import die, require_at_least, set_thread_env
from .models import check_dims, check_model, is_token_model

FASHION_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's fashion-mnist data


def add_model_commands(sub):
    p = sub.add_parser("count", help="print trainable parameter count")
    p.add_argument("--model", required=True)
    add_dims(p)

    p = sub.add_parser("step", help="time training steps on synthetic data")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    add_precision(p)
    add_dims(p)

    p = sub.add_parser("grads", help="gradients of mean cross-entropy loss")
    p.add_argument("--model", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--batch-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    add_precision(p)
    add_dims(p)

    p = sub.add_parser("hf-export", help="cohort's GPT-2 weights as a Hugging Face "
                       "GPT-2 model.safetensors")
    p.add_argument("--model", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--no-attn-bias", action="store_true",
                   help="leave out the h.{i}.attn.bias causal-mask buffers that "
                   "the Hub's gpt2 files carry (newer save_pretrained omits them)")
    add_dims(p)


def add_tv_export_command(sub):
    p = sub.add_parser("tv-export", help="torchvision models with random weights, a batch "
                       "and its logits, for cohort's torchvision tests")
    p.add_argument("--out", required=True, help="folder for the safetensors files")
    p.add_argument("--models", default="", help="MODEL:SIZE[:SIZE...],... to export")
    p.add_argument("--names", default="", help="MODEL,...: state dict names and shapes only")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)


def add_dims(p):
    p.add_argument("--vocab", type=int, default=0,
                   help="token models: vocabulary size (default: the model's)")
    p.add_argument("--seq", type=int, default=0,
                   help="token models: context length, and step's sequence length "
                   "(default: the model's)")


def add_allreduce_command(sub):
    p = sub.add_parser("allreduce-bench",
                       help="time gloo all_reduce of float32 tensors")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--sizes", required=True, help="bytes, comma-separated")
    p.add_argument("--iters", type=int, default=20,
                   help="iterations per timed batch (the most, with --seconds)")
    p.add_argument("--repeats", type=int, default=5,
                   help="timed batches; the fastest counts")
    p.add_argument("--seconds", type=float, default=0,
                   help="if > 0, size batches to about this much time per size")


def add_train_command(sub):
    p = sub.add_parser("train", help="train like `cohort train` and time epochs")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--data", default="fashion-mnist")
    p.add_argument("--data-dir", default=FASHION_DIR)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pipe-stages", type=int, default=1,
                   help="> 1: train through Pipe (GPipe) with this many partitions")
    p.add_argument("--micro-batches", type=int, default=4,
                   help="Pipe's chunks per batch (with --pipe-stages)")
    add_precision(p)


def add_precision(p):
    p.add_argument("--precision", default="fp32",
                   help="fp32 | bf16: bf16 runs forward and loss under CPU autocast")


def check_precision(args):
    if args.precision == "fp16":
        die("--precision fp16: the peer's CPU autocast is bf16 only, as in PyTorch 1.13 "
            "(use fp32 or bf16)")
    if args.precision not in ("fp32", "bf16"):
        die("--precision: unknown choice '%s' (valid: fp32, bf16)" % args.precision)


def check_step(args):
    check_model(args.model)
    check_dims(args)
    check_precision(args)
    require_at_least(args, ("batch", "threads", "steps", "world"))
    require_at_least(args, ("warmup",), low=0)
    return args.threads


def check_train(args):
    check_model(args.model)
    if is_token_model(args.model):
        die("train takes image models; time %s with step" % args.model)
    check_precision(args)
    require_at_least(args, ("batch", "threads", "epochs", "world", "repeat",
                            "pipe_stages", "micro_batches"))
    require_at_least(args, ("limit",), low=0)
    if args.pipe_stages > 1 and args.world > 1:
        die("--pipe-stages runs in one process (Pipe); it does not combine with --world")
    if args.pipe_stages > 1 and args.precision != "fp32":
        # Pipe runs partitions on its own threads, where autocast (thread-local) is off.
        die("--pipe-stages runs in fp32 only (Pipe's threads run outside autocast)")
    if args.pipe_stages > 1 and args.batch % args.micro_batches:
        die("--micro-batches %d does not divide --batch %d" % (args.micro_batches, args.batch))
    return args.threads


def check_allreduce(args):
    if args.world < 2:
        die("--world must be >= 2 (got %d)" % args.world)
    if args.iters < 1 or args.repeats < 1:
        die("--iters and --repeats must be >= 1")
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x]
    except ValueError:
        die("--sizes: expected comma-separated byte counts, got '%s'" % args.sizes)
    if not sizes or min(sizes) < 1:
        die("--sizes: expected positive byte counts, got '%s'" % args.sizes)
    args.sizes = sizes
    return 1


def check_grads(args):
    check_model(args.model)
    check_dims(args)
    check_precision(args)
    return max(1, args.threads)


def check_count(args):
    check_model(args.model)
    check_dims(args)
    return 1


def check_hf_export(args):
    check_model(args.model)
    if not is_token_model(args.model):
        die("hf-export takes GPT-2 models, not %s" % args.model)
    check_dims(args)
    return 1


def check_tv_export(args):
    require_at_least(args, ["batch", "threads"])
    return args.threads


# command -> its checks, which return the intra-op threads it runs with
CHECKS = {"count": check_count, "step": check_step, "grads": check_grads,
          "allreduce-bench": check_allreduce, "train": check_train,
          "hf-export": check_hf_export, "tv-export": check_tv_export}


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch peer for cohort")
    sub = ap.add_subparsers(dest="cmd")
    sub.required = True
    add_model_commands(sub)
    add_allreduce_command(sub)
    add_train_command(sub)
    add_tv_export_command(sub)
    args = ap.parse_args(argv)
    set_thread_env(CHECKS[args.cmd](args))
    from . import commands  # imports torch, so only now
    commands.COMMANDS[args.cmd](args)
