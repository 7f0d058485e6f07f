#!/usr/bin/python3
"""Draws the PNG plots of a `cohort bench grid` results folder.

    /usr/bin/python3 bench/plot_report.py results/NAME

Reads NAME/results.jsonl (written by cohort) and writes ips_vs_workers.png,
scaling.png, epoch_time_vs_size.png and first_vs_second_epoch.png beside it.
Needs Debian's python3-matplotlib; uses the Agg backend (no display).
"""

import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PEERS = (("cohort", "-", "o"), ("pytorch", "--", "s"))


def load(d):
    with open(os.path.join(d, "results.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def uniq(points, key):
    return sorted({p[key] for p in points})


def val(p, k):
    v = p.get(k)
    return v if isinstance(v, (int, float)) else None


def threads(p):
    """The grid's threads setting (0 = cores / ranks), else the resolved count."""
    return p.get("threads_setting", p.get("threads_per_rank", 1))


def tlabel(t):
    return "t%d" % t if t > 0 else "t=cores/ranks"


def series(points, x_key, y_key, **match):
    pts = [p for p in points if all((threads(p) if k == "threads" else p.get(k)) == v
                                    for k, v in match.items())]
    xy = sorted((p[x_key], val(p, y_key)) for p in pts if val(p, y_key) is not None)
    return [x for x, _ in xy], [y for _, y in xy]


def subplots(n):
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), squeeze=False)
    return fig, axes[0]


def has(points, peer):
    return any(val(p, peer + "_images_per_second") is not None for p in points)


def plot_over_workers(ax, points, m, field):
    """One line per batch, repeat, threads and peer: `field` against workers."""
    for b in uniq(points, "batch"):
        for r in uniq(points, "repeat"):
            for t in sorted({threads(p) for p in points}):
                for peer, ls, mk in PEERS:
                    x, y = series(points, "workers", peer + field, model=m, batch=b,
                                  repeat=r, threads=t)
                    if x:
                        ax.plot(x, y, ls, marker=mk, label="%s b%d r%d %s" % (peer, b, r, tlabel(t)))


def plot_ips_vs_workers(points, d):
    models = uniq(points, "model")
    fig, axes = subplots(len(models))
    for ax, m in zip(axes, models):
        plot_over_workers(ax, points, m, "_images_per_second")
        ax.set_title("%s: images/s vs workers" % m)
        ax.set_xlabel("workers (ranks)")
        ax.set_ylabel("images/s (mean over epochs)")
        ax.set_xticks(uniq(points, "workers"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "ips_vs_workers.png"), dpi=100)
    plt.close(fig)


def plot_scaling(points, d):
    models = uniq(points, "model")
    workers = uniq(points, "workers")
    fig, axes = subplots(len(models))
    for ax, m in zip(axes, models):
        ax.plot(workers, workers, "k:", label="ideal")
        plot_over_workers(ax, points, m, "_speedup")
        ax.set_title("%s: real vs ideal speed-up" % m)
        ax.set_xlabel("workers (ranks)")
        ax.set_ylabel("speed-up vs 1 worker")
        ax.set_xticks(workers)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "scaling.png"), dpi=100)
    plt.close(fig)


def plot_epoch_time_vs_size(points, d):
    models = uniq(points, "model")
    fig, axes = subplots(len(models))
    for ax, m in zip(axes, models):
        for w in uniq(points, "workers"):
            for b in uniq(points, "batch"):
                for t in sorted({threads(p) for p in points}):
                    for peer, ls, mk in PEERS:
                        # The last epoch: warm caches, no first-touch costs.
                        pts = [p for p in points if p["model"] == m and p["workers"] == w
                               and p["batch"] == b and threads(p) == t
                               and p.get(peer + "_epoch_seconds")]
                        xy = sorted((p["train_images"], p[peer + "_epoch_seconds"][-1])
                                    for p in pts)
                        if xy:
                            ax.plot([a for a, _ in xy], [c for _, c in xy], ls, marker=mk,
                                    label="%s %dw b%d %s" % (peer, w, b, tlabel(t)))
        ax.set_title("%s: epoch time vs dataset size" % m)
        ax.set_xlabel("training images per epoch (limit x repeat)")
        ax.set_ylabel("last epoch seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "epoch_time_vs_size.png"), dpi=100)
    plt.close(fig)


def plot_first_vs_second(points, d):
    peers = [p for p, _, _ in PEERS if has(points, p)]
    fig, axes = plt.subplots(len(peers), 1, figsize=(max(6, 0.45 * len(points) + 2), 3.6 * len(peers)),
                             squeeze=False)
    labels = ["%s\nb%d r%d %dx%d" % (p["model"].replace("mnist-", ""), p["batch"], p["repeat"],
                                    p["workers"], p.get("threads_per_rank", 1)) for p in points]
    xs = list(range(len(points)))
    for ax, peer in zip(axes[:, 0], peers):
        e1 = [val(p, peer + "_epoch1_seconds") or 0 for p in points]
        e2 = [val(p, peer + "_epoch2_seconds") or 0 for p in points]
        ax.bar([x - 0.2 for x in xs], e1, 0.4, label="epoch 1")
        ax.bar([x + 0.2 for x in xs], e2, 0.4, label="epoch 2")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylabel("seconds")
        ax.set_title("%s: first vs second epoch\n(model, batch, repeat, ranks x threads)" % peer, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "first_vs_second_epoch.png"), dpi=100)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_report.py RESULTS_DIR")
    d = sys.argv[1]
    points = [p for p in load(d) if "model" in p]
    if not points:
        sys.exit("plot_report.py: %s/results.jsonl holds no points" % d)
    plot_ips_vs_workers(points, d)
    plot_scaling(points, d)
    plot_epoch_time_vs_size(points, d)
    if any(has(points, p) for p, _, _ in PEERS):
        plot_first_vs_second(points, d)


if __name__ == "__main__":
    main()
