#!/usr/bin/env python3
"""Compares two cohort binaries' `bench step` rates, run in turn (A B, then
B A, ...) so that a noisy machine's drifts hit both alike; prints each side's
median and best images/s per configuration and the after/before ratio of the
medians. Used for "speed unchanged" checks across a refactor:

    scripts/compare_builds.py BEFORE_BIN AFTER_BIN [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess

CONFIGS = [  # (label, bench step flags)
    ("mnist-small 1 thread", ["--model", "mnist-small", "--threads", "1", "--steps", "40"]),
    ("mnist-small 2 threads", ["--model", "mnist-small", "--threads", "2", "--steps", "40"]),
    ("mnist-large 1 thread", ["--model", "mnist-large", "--threads", "1", "--steps", "10"]),
    ("mnist-large 2 threads", ["--model", "mnist-large", "--threads", "2", "--steps", "10"]),
    ("mnist-small 2 ranks x 1", ["--model", "mnist-small", "--threads", "1", "--steps", "40",
                                 "--workers", "2"]),
    ("mnist-large 2 ranks x 1", ["--model", "mnist-large", "--threads", "1", "--steps", "10",
                                 "--workers", "2"]),
]


def rate(binary, flags):
    out = subprocess.run([binary, "bench", "step", "--batch", "128"] + flags,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_second"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print("| configuration | before median (best) | after median (best) | after / before |")
    print("|---|---|---|---|")
    for label, flags in CONFIGS:
        runs = {"before": [], "after": []}
        for r in range(a.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                runs[side].append(rate(getattr(a, side), flags))
        b, f = statistics.median(runs["before"]), statistics.median(runs["after"])
        print(f"| {label} | {b:,.0f} ({max(runs['before']):,.0f}) | "
              f"{f:,.0f} ({max(runs['after']):,.0f}) | {f / b:.3f} |", flush=True)


if __name__ == "__main__":
    main()
