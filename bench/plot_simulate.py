#!/usr/bin/python3
"""Draws a `cohort simulate --sweep ... --out DIR` efficiency plot.

    /usr/bin/python3 bench/plot_simulate.py DIR

Reads DIR/sweep.json and writes DIR/efficiency.png: scaling efficiency
against ranks (log2 axis), one line per all-reduce algorithm, beside the
ideal 1.0. Needs Debian's python3-matplotlib (Agg backend).
"""

import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = (("#1f5fa8", "o", "-"), ("#e07000", "s", "--"), ("#2a8a3a", "^", "-."),
          ("#8a2a7a", "D", ":"))


def main(folder):
    with open(os.path.join(folder, "sweep.json")) as f:
        sweep = json.load(f)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ranks = []
    for (name, rows), (colour, marker, line) in zip(sweep["curves"].items(), STYLES):
        ranks = [r["ranks"] for r in rows]
        ax.plot(ranks, [r["efficiency"] for r in rows], color=colour, marker=marker,
                linestyle=line, label=name)
    ax.axhline(1.0, color="#888888", linestyle=":", linewidth=1, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks)
    ax.set_xticklabels([str(r) for r in ranks])
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("ranks (%d per host)" % sweep["ranks_per_host"])
    ax.set_ylabel("scaling efficiency vs one rank")
    ax.set_title("%s --parallel %s, batch %d per rank\nbetween hosts %s; inside %s"
                 % (sweep["model"], sweep["parallel"], sweep["batch"], sweep["link"],
                    sweep["intra"]), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "efficiency.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
