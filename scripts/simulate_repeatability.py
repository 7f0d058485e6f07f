#!/usr/bin/python3
"""How far the validation's own measurements repeat (scripts/validate_simulate.py).

usage: simulate_repeatability.py RUN.json [RUN.json ...]   (validation.json files)

Two readings of the machine's repeatability, against the 15% that issue 20
asks of the predictions:
  within a run: rows (the single ones aside) run more than once whose fastest and slowest runs of
    the same command lie more than 15% apart;
  across runs: for each pair of runs, every row's step over its model's
    one-rank step in the one run against the other, over the pair's median
    such ratio (what a model exact on the one run, carried to the other by
    its one-rank step, would predict): the rows more than 15% off.
"""

import itertools
import json
import os
import statistics
import sys

TOLERANCE = 0.15


def load(path):
    with open(path) as f:
        return {(r["model"], r["config"]): r for r in json.load(f)["rows"]}


def relative(rows, key):
    """A row's measured step over its model's single row's."""
    return rows[key]["measured_step_ms"] / rows[(key[0], "single")]["measured_step_ms"]


def within(rows):
    """(rows run more than once, those whose runs lie more than 15% apart);
    the single rows, the anchor's many runs, left out as validation.md does."""
    many = [r for r in rows.values() if r["config"] != "single" and r["runs"] > 1 and r.get("spread")]
    return len(many), sum(r["spread"] > 1 + TOLERANCE for r in many)


def across(a, b):
    """(rows in both runs, rows more than 15% off the carried-over step)."""
    keys = [k for k in a if k in b and k[1] != "single" and (k[0], "single") in a and (k[0], "single") in b]
    ratios = [relative(b, k) / relative(a, k) for k in keys]
    if not ratios:
        return 0, 0
    med = statistics.median(ratios)
    return len(ratios), sum(abs(r / med - 1) > TOLERANCE for r in ratios)


def name(path):
    return os.path.basename(os.path.dirname(os.path.abspath(path)))


def main(paths):
    runs = {name(p) + ("" if i == 0 or name(p) != name(paths[i - 1]) else "#%d" % i): load(p)
            for i, p in enumerate(paths)}
    print("| run | rows run more than once | their runs more than 15% apart |")
    print("|---|---:|---:|")
    n_all = off_all = 0
    for n, rows in runs.items():
        m, off = within(rows)
        n_all, off_all = n_all + m, off_all + off
        print("| %s | %d | %d (%.0f%%) |" % (n, m, off, 100.0 * off / max(1, m)))
    print("| all | %d | %d (%.0f%%) |" % (n_all, off_all, 100.0 * off_all / max(1, n_all)))
    if len(runs) > 1:
        pairs = list(itertools.combinations(runs, 2))
        rows = off = 0
        for x, y in pairs:
            k, o = across(runs[x], runs[y])
            rows, off = rows + k, off + o
        print("\nacross %d pairs of runs: %d of %d rows (%.1f%%) more than 15%% off the other run's "
              "step carried over by the one-rank step" % (len(pairs), off, rows, 100.0 * off / max(1, rows)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: simulate_repeatability.py RUN.json [RUN.json ...]")
    main(sys.argv[1:])
