#!/usr/bin/env python3
"""Markdown table of scripts/bench_comm_cluster.sh's JSON lines: per link
rate, hosts x ranks per host and message size, each algorithm's bus bandwidth
(GB/s, its best run) and the hierarchical all-reduce's ratio to the flat ring,
to MPI_Allreduce and to gloo."""

import json
import sys


def main(path):
    best = {}  # (rate, hosts, slots, bytes) -> {column: best GB/s}
    for line in open(path):
        run = json.loads(line)
        key0 = (run["rate"], run["hosts"], run["slots"])
        for row in run["sizes"]:
            cell = best.setdefault(key0 + (row["bytes"],), {})
            for col in ("ring", "tree", "hierarchical", "mpi", "gloo"):
                v = row.get(col + "_gbps")
                if v is not None:
                    cell[col] = max(cell.get(col, 0.0), v)
    print("| link | hosts x ranks | bytes | ring | tree | hierarchical | MPI_Allreduce "
          "| gloo | hier / ring | hier / MPI | hier / gloo |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def fmt(v):
        return "%.3f" % v if v else "-"

    def ratio(a, b):
        return "%.2fx" % (a / b) if a and b else "-"

    for key in sorted(best, key=lambda k: (k[0], k[1], k[2], k[3])):
        rate, hosts, slots, nbytes = key
        c = best[key]
        h = c.get("hierarchical")
        print("| %s | %d x %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            rate, hosts, slots, nbytes, fmt(c.get("ring")), fmt(c.get("tree")), fmt(h),
            fmt(c.get("mpi")), fmt(c.get("gloo")), ratio(h, c.get("ring")),
            ratio(h, c.get("mpi")), ratio(h, c.get("gloo"))))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/bench_comm_cluster.jsonl")
