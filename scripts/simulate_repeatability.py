#!/usr/bin/python3
"""How far the validation's own measurements repeat (scripts/validate_simulate.py).

usage: simulate_repeatability.py RUN.json [RUN.json ...]   (validation.json files)

Two readings of the machine's repeatability, against the 15% that issue 20
asks of the predictions:
  within a run: rows (the single ones aside) run more than once whose
    fastest and slowest runs of the same command lie more than 15% apart
    (validate_simulate.repeated_rows, as validation.md's footer counts them);
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

from validate_simulate import TOLERANCE, repeated_rows


def load(path):
    """A validation.json's rows by (model, configuration); a one-line error
    naming the file, exit 2, where it is not one."""
    try:
        with open(path) as f:
            return {(r["model"], r["config"]): r for r in json.load(f)["rows"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("simulate_repeatability.py: %s: not a readable validation.json (%s)" % (path, e),
              file=sys.stderr)
        sys.exit(2)


def relative(rows, key):
    """A row's measured step over its model's single row's."""
    return rows[key]["measured_step_ms"] / rows[(key[0], "single")]["measured_step_ms"]


def across(a, b):
    """(rows in both runs, rows more than 15% off the carried-over step)."""
    keys = [k for k in a if k in b and k[1] != "single" and (k[0], "single") in a and (k[0], "single") in b]
    ratios = [relative(b, k) / relative(a, k) for k in keys]
    if not ratios:
        return 0, 0
    med = statistics.median(ratios)
    return len(ratios), sum(abs(r / med - 1) > TOLERANCE for r in ratios)


def label(path):
    """A run's name: the folder that holds its validation.json."""
    return os.path.basename(os.path.dirname(os.path.abspath(path)))


def main(paths):
    runs = [(label(p), load(p)) for p in paths]
    print("| run | rows run more than once | their runs more than 15% apart |")
    print("|---|---:|---:|")
    n_all = off_all = 0
    for name, rows in runs:
        repeated, _, moving = repeated_rows(list(rows.values()))
        n_all, off_all = n_all + len(repeated), off_all + len(moving)
        print("| %s | %d | %d (%.0f%%) |" % (name, len(repeated), len(moving),
                                            100.0 * len(moving) / max(1, len(repeated))))
    print("| all | %d | %d (%.0f%%) |" % (n_all, off_all, 100.0 * off_all / max(1, n_all)))
    if len(runs) > 1:
        pairs = list(itertools.combinations(runs, 2))
        rows = off = 0
        for (_, x), (_, y) in pairs:
            k, o = across(x, y)
            rows, off = rows + k, off + o
        print("\nacross %d pairs of runs: %d of %d rows (%.1f%%) more than 15%% off the other run's "
              "step carried over by the one-rank step" % (len(pairs), off, rows, 100.0 * off / max(1, rows)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: simulate_repeatability.py RUN.json [RUN.json ...]", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
