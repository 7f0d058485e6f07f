#!/usr/bin/python3
"""Projects the published scaling curves with `cohort simulate` (docs/SCALING.md).

    /usr/bin/python3 scripts/project_scaling.py [OUT]   (default docs/results/simulate)

For each study: a compute file from cohort's own per-layer FLOPs (`--compute
flops:RATE --save-compute`) of the zoo's ImageNet model (torchvision's
architecture at 224x224, its own classifier), at the study's node FLOP
rate; then `cohort simulate --sweep` over the study's
ranks with its link figures. Writes OUT/<study>/{compute.json,sweep.json,
efficiency.png} and OUT/projection.md with the published points beside.
"""

import json
import os
import subprocess
import sys

BIN = os.environ.get("COHORT", "build/cohort")

# name, zoo model, ImageNet forward GFLOP (2 x multiply-adds) and parameters,
# classifier params at 1000 classes, rate GFLOP/s per rank (effective),
# batch per rank, ranks per host, inter link, intra link, ranks, published
# (ranks -> efficiency), assumptions.
STUDIES = [
    dict(name="resnet152-cpu", model="resnet152", gflop=23.1, classifier=2048 * 1000 + 1000,
         rate=1400, batch=64, per_host=1, link="100Gbit,2us", intra="80Gbit,1us",
         ranks=[1, 2, 4, 8, 16, 32, 64, 128], published={128: 125.0 / 128},
         note="CPU-cluster study: 2-socket Xeon nodes (1.4 TFLOP/s effective assumed), "
              "100 Gbit/s fabric, one rank per node, batch 64 per node"),
    dict(name="resnet101-horovod", model="resnet101", gflop=15.6, classifier=2048 * 1000 + 1000,
         rate=5500, batch=64, per_host=4, link="25Gbit,10us", intra="10GB,5us",
         ranks=[1, 4, 8, 16, 32, 64, 128, 256, 512], published={512: 0.90},
         note="Horovod: P100 GPUs, 4 per server (5.5 TFLOP/s effective assumed), "
              "25 GbE RoCE between servers, batch 64 per GPU"),
    dict(name="vgg16-horovod", model="vgg16", gflop=31.0,
         classifier=25088 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 1000 + 1000,
         rate=5500, batch=64, per_host=4, link="25Gbit,10us", intra="10GB,5us",
         ranks=[1, 4, 8, 16, 32, 64, 128, 256, 512], published={512: 0.68},
         note="Horovod: as ResNet-101; VGG-16's 123.6 M classifier parameters (fc6-fc8) "
              "included as the model has them"),
]


def run(args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), p.stderr[-600:]))
    return p.stdout


def compute_file(study, folder):
    """The zoo's ImageNet model (torchvision's architecture, 224x224) at the
    study's rate: its own layers, FLOPs and classifier. Returns the path and
    its forward FLOPs against the published figure (a check: 1.0 +- a few %)."""
    path = os.path.join(folder, "compute.json")
    run([BIN, "simulate", "--model", study["model"], "--parallel", "none", "--batch",
         str(study["batch"]), "--compute", "flops:%g" % study["rate"], "--save-compute", path])
    with open(path) as f:
        prof = json.load(f)
    ours = sum(l["flops"] for l in prof["layers"])
    return path, ours / (study["gflop"] * 1e9)


def main(out):
    lines = ["| study | ranks | published efficiency | cohort simulate: ring | tree | "
             "hierarchical | ring, no overlap |", "|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    curves = []
    for s in STUDIES:
        folder = os.path.join(out, s["name"])
        os.makedirs(folder, exist_ok=True)
        path, scale = compute_file(s, folder)
        common = [BIN, "simulate", "--model", s["model"], "--parallel", "dp", "--batch",
                  str(s["batch"]), "--compute", path, "--ranks-per-host", str(s["per_host"]),
                  "--link", s["link"], "--intra", s["intra"], "--bucket-mb", "25"]
        sweep = json.loads(run(common + ["--sweep", ",".join(map(str, s["ranks"])),
                                         "--out", folder]).splitlines()[-1])
        eff = {a: {r["ranks"]: r["efficiency"] for r in rows} for a, rows in sweep["curves"].items()}
        top = s["ranks"][-1]
        noov_sweep = json.loads(run(common + ["--allreduce", "ring", "--no-overlap", "--sweep",
                                              ",".join(map(str, s["ranks"]))]).splitlines()[-1])
        eff["ring, no overlap"] = {r["ranks"]: r["efficiency"]
                                   for r in noov_sweep["curves"]["ring"]}
        noov = eff["ring, no overlap"][top]
        curves.append((s, eff))
        pub = s["published"].get(top)
        lines.append("| %s | %d | %s | %.3f | %.3f | %.3f | %.3f |" % (
            s["name"], top, "%.2f" % pub if pub else "-", eff["ring"][top], eff["tree"][top],
            eff["hierarchical"][top], noov))
        notes.append("- %s: %s; cohort's %s (ImageNet architecture, 224x224) has %.2fx the "
                     "published forward FLOPs." % (s["name"], s["note"], s["model"], scale))
        print(lines[-1], file=sys.stderr)
    with open(os.path.join(out, "projection.md"), "w") as f:
        f.write("\n".join(lines) + "\n\n" + "\n".join(notes) + "\n")
    plot(out, curves)


def plot(out, curves):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    styles = {"ring": ("#1f5fa8", "o", "-"), "tree": ("#e07000", "s", "--"),
              "hierarchical": ("#2a8a3a", "^", "-."), "ring, no overlap": ("#8a2a7a", "D", ":")}
    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.8), sharey=True)
    for ax, (s, eff) in zip(axes, curves):
        for name, pts in eff.items():
            colour, marker, line = styles[name]
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], color=colour, marker=marker, linestyle=line,
                    label=name, markersize=4)
        for r, e in s["published"].items():
            ax.scatter([r], [e], color="black", marker="*", s=120, zorder=5, label="published")
        ax.set_xscale("log", base=2)
        ax.set_xticks(s["ranks"])
        ax.set_xticklabels([str(r) for r in s["ranks"]], fontsize=7)
        ax.set_ylim(0, 1.1)
        ax.set_title("%s (%d per host)" % (s["name"], s["per_host"]), fontsize=9)
        ax.set_xlabel("ranks")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("scaling efficiency")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "projection.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/simulate")
