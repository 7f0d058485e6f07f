#!/usr/bin/python3
"""Validates `cohort simulate --grad-dtype bf16` against runs made here
(scripts/validate_grad_dtype.sh): gradients summed over ranks at 2 bytes an
element (DeepSpeed's communication_data_type) where the wire is what costs.

For each model (MODELS, default gpt2 and cifar-resnet50): its compute
profile and the host's contention (as scripts/validate_simulate.py measures
them: `simulate --save-compute`, CONT_REPS rounds of one rank alone against
2 and 4 at once, the profile anchored to one rank alone's best), then, on a
namespace cluster of HOSTS (2) hosts at RATE (1gbit), dp ring, ZeRO-1 and
ZeRO-3 with f32 and with bf16 gradients, alternated in CLUSTER_REPS (2)
rounds, best kept, each predicted as the frozen harness predicts its cluster
rows (the link fitted from that cluster's `bench comm`, the profile scaled
by the machine's drift beside the runs).

Writes OUT/validation.md and OUT/validation.json (OUT:
docs/results/simulate/grad-dtype)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_simulate as vs  # noqa: E402

DTYPES = ["fp32", "bf16"]
STRATEGIES = [("dp ring", ["--parallel", "dp", "--allreduce", "ring"]),
              ("zero-1", ["--parallel", "zero", "--zero-stage", "1"]),
              ("zero-3", ["--parallel", "zero", "--zero-stage", "3"])]


def configs():
    """(name, flags, batch multiplier): each strategy at each gradient dtype."""
    return [("%s, %s gradients" % (name, dtype), flags + ["--grad-dtype", dtype], 1)
            for name, flags in STRATEGIES for dtype in DTYPES]


def anchored_profile(model, inputs):
    """The model's profile in inputs/<model>.json scaled to one rank alone's
    best step, and the contention curve: what cluster_predict reads."""
    mflags, batch, steps = vs.MODELS[model]
    curve, alones, _ = vs.contention(model, mflags, batch, steps)
    alone = max(alones)
    prof = vs.profile_file(inputs, model)
    vs.save_profile(model, mflags, batch, prof)
    anchor = vs.anchor_profile(model, mflags, prof, batch, curve,
                               os.path.join(inputs, "comm.jsonl"), alone)
    print("%s: one alone %.2f samples/s, --contention %s, profile x%.2f"
          % (model, alone, curve, anchor), file=sys.stderr)
    return {"contention": curve, "cores": vs.CORES, "alone": alone, "anchor": anchor,
            "best": {"single": alone}, "runs": {"single": alones}}


def main(out_dir):
    hosts = int(os.environ.get("HOSTS", "2"))
    vs.CLUSTER_RATES = [os.environ.get("RATE", "1gbit")]
    vs.CLUSTER_HOSTS = [hosts]
    vs.CLUSTER_CONFIGS = {hosts: configs()}
    vs.CLUSTER_REPS = os.environ.get("CLUSTER_REPS", "2")
    inputs = os.path.join(out_dir, "inputs")
    os.makedirs(inputs, exist_ok=True)
    vs.host_comm(os.path.join(inputs, "comm.jsonl"))
    measured = {m: anchored_profile(m, inputs)
                for m in os.environ.get("MODELS", "gpt2,cifar-resnet50").split(",")}
    with open(os.path.join(inputs, "measured.json"), "w") as f:
        json.dump(measured, f, indent=1)
    runs = vs.cluster_measure(inputs, measured)
    rows = vs.cluster_predict(runs, measured, inputs)
    with open(os.path.join(out_dir, "validation.json"), "w") as f:
        json.dump({"measured": measured, "rows": rows}, f, indent=1)
    vs.write_table(out_dir, rows)


if __name__ == "__main__":
    if not vs.cluster_available():
        sys.exit("validate_grad_dtype: needs the namespace cluster (scripts/cluster.sh check)")
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/simulate/grad-dtype")
