#!/usr/bin/python3
"""Draws the PNG plots of a `cohort bench grid` results folder.

    /usr/bin/python3 bench/plot_report.py results/NAME

Reads NAME/results.jsonl (written by cohort) and writes ips_vs_workers.png,
scaling.png, epoch_time_vs_size.png and first_vs_second_epoch.png beside it.
Needs Debian's python3-matplotlib; uses the Agg backend (no display).

Every figure is small multiples: a panel per model (row) and batch (column).
Colour is the engine, the same in every figure; line style and marker tell
apart the grid's other settings (dataset size, workers, threads), whichever
vary in the run. Legends sit right of the panels, never over the data.
"""

import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

# (key prefix in results.jsonl, label, colour): one colour per engine.
ENGINES = (("cohort", "cohort", "#1f5fa8"), ("pytorch", "PyTorch", "#e07000"))
# (line style, marker) per value of the other settings; ":" is kept for "ideal".
STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), ((0, (6, 2, 1, 2, 1, 2)), "D"),
          ((0, (1, 1)), "v"), ((0, (8, 3)), "P"))
LEGEND_IN = 2.4  # inches right of the panels kept for the legends


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


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


# The settings a line or bar group can stand for: name -> (value of a point,
# title, label of a value, short label of a value for crowded axes).
SETTINGS = {
    "size": (lambda p: p["train_images"], "images per epoch",
             lambda v: "{:,} images/epoch".format(v), lambda v: "%gk img" % (v / 1000.0)),
    "workers": (lambda p: p["workers"], "workers",
                lambda v: plural(v, "worker"), lambda v: "%dw" % v),
    "threads": (threads, "threads per rank",
                lambda v: plural(v, "thread") + "/rank" if v > 0 else "threads = cores/ranks",
                lambda v: "t%d" % v if v > 0 else "t=c/r"),
}


class Variants:
    """The values that the named settings take together in a run; only the
    settings that vary count, so a run with one dataset size has no size lines."""

    def __init__(self, points, names):
        self.names = [n for n in names if len({SETTINGS[n][0](p) for p in points}) > 1]
        self.keys = sorted({self.key(p) for p in points})

    def key(self, p):
        return tuple(SETTINGS[n][0](p) for n in self.names)

    def title(self):
        return ", ".join(SETTINGS[n][1] for n in self.names)

    def label(self, key, short=False):
        if short:
            return "\n".join(SETTINGS[n][3](v) for n, v in zip(self.names, key))
        return ", ".join(SETTINGS[n][2](v) for n, v in zip(self.names, key))

    def style(self, key):
        return STYLES[self.keys.index(key) % len(STYLES)]

    def handles(self):
        """One legend line per variant; none when nothing varies."""
        if not self.names:
            return []
        return [Line2D([], [], color="0.35", linestyle=ls, marker=mk, label=self.label(k))
                for k in self.keys for ls, mk in [self.style(k)]]


def engines(points):
    return [e for e in ENGINES if any(val(p, e[0] + "_images_per_second") is not None
                                      for p in points)]


def panels(points, sharey):
    """(fig, axes grid, {(model, batch): ax}): a row per model, a column per
    batch; a model x batch the run lacks is left blank."""
    models, batches = uniq(points, "model"), uniq(points, "batch")
    w, h = 3.6 * len(batches) + LEGEND_IN, 2.9 * len(models) + 0.6
    fig, axes = plt.subplots(len(models), len(batches), figsize=(w, h), squeeze=False,
                             sharex=True, sharey=sharey)
    cells = {}
    for r, m in enumerate(models):
        for c, b in enumerate(batches):
            ax = axes[r][c]
            if not any(p["model"] == m and p["batch"] == b for p in points):
                ax.set_visible(False)
                continue
            cells[(m, b)] = ax
            ax.set_title("%s, batch %d" % (m, b), fontsize=10)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8, labelbottom=True)
    return fig, axes, cells


def finish(fig, axes, d, name, xlabel, ylabel, legends):
    """y from 0 (after all panels are drawn: they share limits), axis labels on
    the outer panels, legends (title, handles) to the right."""
    for ax in axes.flat:
        ax.set_ylim(bottom=0)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel, fontsize=9)
    for row in axes:
        row[0].set_ylabel(ylabel, fontsize=9)
    width = fig.get_size_inches()[0]
    fig.tight_layout(rect=(0, 0, 1 - LEGEND_IN / width, 1))
    top = 0.97
    for title, handles in legends:
        if not handles:
            continue
        leg = fig.legend(handles=handles, title=title, loc="upper left", fontsize=8,
                         title_fontsize=8, alignment="left", frameon=False,
                         bbox_to_anchor=(1 - (LEGEND_IN - 0.15) / width, top))
        fig.canvas.draw()
        box = leg.get_window_extent().transformed(fig.transFigure.inverted())
        top = box.y0 - 0.03
    fig.savefig(os.path.join(d, name), dpi=100)
    plt.close(fig)


def engine_handles(points):
    return [Line2D([], [], color=c, linewidth=2.5, label=l) for _, l, c in engines(points)]


def plot_lines(ax, pts, variants, x_of, y_of):
    """One line per engine and variant: y_of(p, engine) against x_of(p)."""
    for e, _, colour in engines(pts):
        for key in variants.keys:
            xy = sorted((x_of(p), y_of(p, e)) for p in pts
                        if variants.key(p) == key and y_of(p, e) is not None)
            if xy:
                ls, mk = variants.style(key)
                ax.plot([x for x, _ in xy], [y for _, y in xy], color=colour, linestyle=ls,
                        marker=mk, markersize=5, linewidth=1.6)


def plot_over_workers(points, d, name, field, ylabel, ideal):
    variants = Variants(points, ("size", "threads"))
    workers = uniq(points, "workers")
    fig, axes, cells = panels(points, sharey=True if ideal else "row")
    for (m, b), ax in cells.items():
        if ideal:
            ax.plot(workers, workers, color="k", linestyle=":", linewidth=1)
        pts = [p for p in points if p["model"] == m and p["batch"] == b]
        plot_lines(ax, pts, variants, lambda p: p["workers"], lambda p, e: val(p, e + field))
        ax.set_xticks(workers)
    refs = [Line2D([], [], color="k", linestyle=":", label="ideal: N x 1 worker")] if ideal else []
    finish(fig, axes, d, name, "workers (ranks)", ylabel,
           [("engine", engine_handles(points)), (variants.title(), variants.handles()),
            ("", refs)])


def last_epoch_seconds(p, e):
    s = p.get(e + "_epoch_seconds")
    return s[-1] if s else None  # the last epoch: warm caches, no first-touch costs


def plot_epoch_time_vs_size(points, d):
    variants = Variants(points, ("workers", "threads"))
    fig, axes, cells = panels(points, sharey="row")
    for (m, b), ax in cells.items():
        pts = [p for p in points if p["model"] == m and p["batch"] == b]
        plot_lines(ax, pts, variants, lambda p: p["train_images"], last_epoch_seconds)
        ax.set_xticks(uniq(points, "train_images"))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:,.0f}".format(v)))
    finish(fig, axes, d, "epoch_time_vs_size.png", "training images per epoch (limit x repeat)",
           "last epoch seconds",
           [("engine", engine_handles(points)), (variants.title(), variants.handles())])


def plot_first_vs_second(points, d):
    """Grouped bars per panel: for each setting, each engine's epoch 1 (filled)
    and epoch 2 (hatched) side by side."""
    variants = Variants(points, ("size", "workers", "threads"))
    engs = engines(points)
    width = 0.8 / (2 * len(engs))
    fig, axes, cells = panels(points, sharey="row")
    for (m, b), ax in cells.items():
        pts = {variants.key(p): p for p in points if p["model"] == m and p["batch"] == b}
        for gi, key in enumerate(variants.keys):
            p = pts.get(key)
            for ei, (e, _, colour) in enumerate(engs):
                for k in (1, 2):
                    y = val(p, "%s_epoch%d_seconds" % (e, k)) if p else None
                    if y is not None:
                        x = gi - 0.4 + width * (2 * ei + k - 0.5)
                        ax.bar(x, y, width, color=colour if k == 1 else "white",
                               edgecolor=colour, hatch=None if k == 1 else "////", linewidth=0.8)
        ax.set_xticks(range(len(variants.keys)))
        ax.set_xticklabels([variants.label(k, short=True) for k in variants.keys], fontsize=7)
        ax.grid(axis="x", visible=False)
    epochs = [Patch(facecolor="0.45", edgecolor="0.45", label="epoch 1"),
              Patch(facecolor="white", edgecolor="0.45", hatch="////", label="epoch 2")]
    finish(fig, axes, d, "first_vs_second_epoch.png", variants.title(), "epoch seconds",
           [("engine", engine_handles(points)), ("bars", epochs)])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_report.py RESULTS_DIR")
    d = sys.argv[1]
    points = [p for p in load(d) if "model" in p]
    if not points:
        sys.exit("plot_report.py: %s/results.jsonl holds no points" % d)
    plot_over_workers(points, d, "ips_vs_workers.png", "_images_per_second",
                      "images/s (mean over epochs)", ideal=False)
    plot_over_workers(points, d, "scaling.png", "_speedup", "speed-up over 1 worker", ideal=True)
    plot_epoch_time_vs_size(points, d)
    if engines(points):
        plot_first_vs_second(points, d)


if __name__ == "__main__":
    main()
