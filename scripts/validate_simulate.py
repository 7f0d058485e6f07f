#!/usr/bin/python3
"""Validates `cohort simulate` against runs made here (scripts/validate_simulate.sh).

For each model: measure its per-layer compute profile once (cohort simulate
--save-compute, best of 8 passes per layer, one thread), the host's
contention (2 and 4 single-process `bench step` runs at once against one
alone: --contention) and the shared-memory link (`bench comm`:
--calibrate); scale the profile so that one rank's prediction is its
measured step (the anchor); then for each configuration run `cohort bench
step` (ps: `cohort train`, second epoch) REPS times, alternating
configurations, keep the best rate, and predict it. Each run `cohort bench step` REPS times, alternating
configurations, and keep the best rate; predict the same configuration from
the saved profile and tabulate predicted vs measured step time.

Writes OUT/validation.md, OUT/validation.json and OUT/predicted_vs_measured.png.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("COHORT", "build/cohort")
REPS = int(os.environ.get("REPS", "2"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

# model -> (extra model flags, per-rank batch, bench steps)
MODELS = {
    "mnist-large": ([], 32, 6),
    "resnet50": ([], 8, 4),
    "gpt2": (["--seq", "64"], 2, 3),
}
# (name, ranks, strategy flags, batch multiplier: pipelines take the whole batch)
CONFIGS = [
    ("single", 1, ["--parallel", "none"], 1),
    ("dp ring x2", 2, ["--parallel", "dp", "--allreduce", "ring"], 1),
    ("dp tree x4", 4, ["--parallel", "dp", "--allreduce", "tree"], 1),
    ("ps sync 2w+1s", 3, ["--parallel", "ps", "--servers", "1", "--ps-mode", "sync"], 1),
    ("pp 2 stages, 4 micro (1f1b)", 2,
     ["--parallel", "pp", "--stages", "2", "--micro-batches", "4", "--schedule", "1f1b"], 4),
    ("hybrid 2x2 (gpipe)", 4,
     ["--parallel", "hybrid", "--stages", "2", "--dp", "2", "--micro-batches", "2",
      "--schedule", "gpipe"], 2),
    ("zero-1 x2", 2, ["--parallel", "zero", "--zero-stage", "1"], 1),
    ("zero-3 x2", 2, ["--parallel", "zero", "--zero-stage", "3"], 1),
]


def run(args, env=ENV, timeout=900):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr[-800:]))
    return p.stdout


def last_json(out):
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in: " + out[-400:])


def train_rate(model, mflags, batch, steps, ranks, flags):
    """`cohort train --log jsonl`: the second epoch's images/s (the first warms up).
    Used for ps, whose rank 0 `bench step` cannot validate."""
    data = ["--data", "text"] if mflags else ["--data", "synthetic"]
    workers = ranks - int(flags[flags.index("--servers") + 1])
    args = [BIN, "train", "--model", model, *mflags, *data, "--limit",
            str(workers * batch * steps), "--batch", str(batch), "--epochs", "2", "--threads", "1",
            "--log", "jsonl", "--eval", "none", "--workers", str(ranks), *flags]
    epochs = [json.loads(l) for l in run(args).splitlines()
              if l.startswith("{") and '"event":"epoch"' in l]
    return epochs[-1]["images_per_second"]


def bench_step(model, mflags, batch, steps, ranks, flags):
    if "ps" in flags:
        return train_rate(model, mflags, batch, steps, ranks, flags)
    args = [BIN, "bench", "step", "--model", model, *mflags, "--batch", str(batch),
            "--threads", "1", "--steps", str(steps), "--warmup", "2"]
    if ranks > 1:
        args += ["--workers", str(ranks)]
    if flags[:2] != ["--parallel", "none"] or ranks > 1:
        args += flags
    return last_json(run(args))["images_per_second"]


def contention(model, mflags, batch, steps):
    """k single-process runs at once against one alone (k = 2, 4): the
    slow-down of each, best of REPS: the --contention curve."""
    args = [BIN, "bench", "step", "--model", model, *mflags, "--batch", str(batch),
            "--threads", "1", "--steps", str(steps), "--warmup", "2"]
    alone, together = 0.0, {2: 0.0, 4: 0.0}
    for _ in range(REPS):
        alone = max(alone, last_json(run(args))["images_per_second"])
        for k in together:
            ps = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True) for _ in range(k)]
            rates = [last_json(p.communicate()[0])["images_per_second"] for p in ps]
            together[k] = max(together[k], sum(rates) / k)
    return ",".join("%d:%.3f" % (k, max(1.0, alone / r)) for k, r in together.items()), alone


def simulate(model, mflags, profile, ranks, flags, batch, cores, comm_file):
    args = [BIN, "simulate", "--model", model, *mflags, "--compute", profile, "--batch",
            str(batch), "--hosts", "1", "--ranks-per-host", str(ranks), "--contention", cores,
            "--calibrate", comm_file, "--busy-wait", *flags]
    return last_json(run(args))


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="cohort_validate_")
    comm_file = os.path.join(tmp, "comm.jsonl")
    with open(comm_file, "w") as f:
        f.write(run([BIN, "bench", "comm", "--workers", "2", "--peer", "none", "--max-bytes",
                     str(16 << 20), "--seconds", "0.03"]))
    only = os.environ.get("MODELS", ",".join(MODELS)).split(",")
    rows = []
    started = time.time()
    for model in only:
        mflags, batch, steps = MODELS[model]
        cores, alone = contention(model, mflags, batch, steps)
        print("%s: one alone %.2f samples/s; --contention %s" % (model, alone, cores),
              file=sys.stderr)
        # Every configuration's rank computes `batch` rows at once (pipelines
        # take batch x micro-batches), so one profile serves them all.
        prof = os.path.join(tmp, "%s.json" % model)
        run([BIN, "simulate", "--model", model, *mflags, "--parallel", "none", "--batch",
             str(batch), "--threads", "1", "--save-compute", prof])
        best = {}
        for _ in range(REPS):  # alternate configurations, keep each one's best
            for name, ranks, flags, mult in CONFIGS:
                try:
                    ips = bench_step(model, mflags, batch * mult, steps, ranks, flags)
                except RuntimeError as e:
                    print("  %s: %s" % (name, e), file=sys.stderr)
                    continue
                best[name] = max(best.get(name, 0.0), ips)
        # Anchor: scale the layer times so that one rank's predicted step is
        # its measured one (the profile's best-of-8 per layer misses the
        # step's own overheads and the load other processes put here).
        single = simulate(model, mflags, prof, 1, ["--parallel", "none"], batch, cores, comm_file)
        key = "tokens_per_s" if "tokens_per_s" in single else "images_per_s"
        per = 64 if key == "tokens_per_s" else 1
        anchor = (single[key] / per) / best["single"]
        with open(prof) as f:
            pj = json.load(f)
        for l in pj["layers"]:
            l["forward_s"] *= anchor
            l["backward_s"] *= anchor
        pj["optimizer_s"] *= anchor
        with open(prof, "w") as f:
            json.dump(pj, f)
        print("%s: profile x%.2f to match one rank's measured step" % (model, anchor), file=sys.stderr)
        for name, ranks, flags, mult in CONFIGS:
            if name not in best:
                continue
            pred = simulate(model, mflags, prof, ranks, flags, batch * mult, cores, comm_file)
            key = "tokens_per_s" if "tokens_per_s" in pred else "images_per_s"
            per = 64 if key == "tokens_per_s" else 1
            p_ips = pred[key] / per
            m_ips = best[name]
            samples = p_ips * pred["step_ms"] / 1e3
            row = {"model": model, "config": name, "ranks": ranks,
                   "measured_step_ms": 1e3 * samples / m_ips, "predicted_step_ms": pred["step_ms"],
                   "predicted": {k: pred[k] for k in ("compute_ms", "comm_ms", "bubble_ms",
                                                      "contention")},
                   "cores": cores, "anchor": anchor}
            row["error"] = row["predicted_step_ms"] / row["measured_step_ms"] - 1
            rows.append(row)
            print("  %-30s measured %9.1f ms  predicted %9.1f ms  (%+.1f%%)"
                  % (name, row["measured_step_ms"], row["predicted_step_ms"], 100 * row["error"]),
                  file=sys.stderr)
    with open(os.path.join(out_dir, "validation.json"), "w") as f:
        json.dump({"reps": REPS, "seconds": time.time() - started, "rows": rows}, f, indent=1)
    write_table(out_dir, rows)
    plot(out_dir, rows)
    shutil.rmtree(tmp, ignore_errors=True)


def write_table(out_dir, rows):
    with open(os.path.join(out_dir, "validation.md"), "w") as f:
        f.write("| model | configuration | ranks | measured step ms | predicted step ms | "
                "error | predicted compute / comm / bubble ms | slow-down | --contention | anchor |\n")
        f.write("|---|---|---:|---:|---:|---:|---|---:|---|---:|\n")
        for r in rows:
            p = r["predicted"]
            f.write("| %s | %s | %d | %.1f | %.1f | %+.1f%% | %.1f / %.1f / %.1f | x%.2f | %s | "
                    "x%.2f |\n"
                    % (r["model"], r["config"], r["ranks"], r["measured_step_ms"],
                       r["predicted_step_ms"], 100 * r["error"], p["compute_ms"], p["comm_ms"],
                       p["bubble_ms"], p["contention"], r["cores"], r["anchor"]))
        within = sum(1 for r in rows if abs(r["error"]) <= 0.15)
        f.write("\n%d of %d configurations within 15%%.\n" % (within, len(rows)))


def plot(out_dir, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 5))
    colours = {"mnist-large": "#1f5fa8", "resnet50": "#e07000", "gpt2": "#2a8a3a"}
    for model in colours:
        pts = [r for r in rows if r["model"] == model]
        if pts:
            ax.scatter([r["measured_step_ms"] for r in pts], [r["predicted_step_ms"] for r in pts],
                       color=colours[model], label=model)
    lo = min(min(r["measured_step_ms"], r["predicted_step_ms"]) for r in rows) * 0.7
    hi = max(max(r["measured_step_ms"], r["predicted_step_ms"]) for r in rows) * 1.4
    ax.plot([lo, hi], [lo, hi], color="#888888", linestyle=":", label="predicted = measured")
    ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="#888888",
                    alpha=0.12, label="within 15%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step time (ms, best of %d)" % REPS)
    ax.set_ylabel("predicted step time (ms)")
    ax.set_title("cohort simulate vs cohort bench step, 1-4 ranks on this machine", fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "predicted_vs_measured.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/simulate")
