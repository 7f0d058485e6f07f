#!/usr/bin/env python3
"""The Markdown table of scripts/bench_cluster.sh from its JSON lines.

Each (model, hosts, rate, engine) keeps its best round. Scaling efficiency is
images/s over (hosts x the same engine's single process at the same per-rank
batch). "ring at line rate" is what a ring all-reduce of the f32 gradients
needs on links of that rate alone: 2 (H-1)/H x 4 x parameters bytes per host
link, each way.
"""

import json
import sys

PARAMETERS = {"mnist-large": 2007050, "resnet50": 23520842}
RATE_BITS = {"1gbit": 1e9, "10gbit": 1e10}


def best_runs(path):
    """(model, hosts, rate, engine) -> its best run, and every round's images/s."""
    best, rounds = {}, {}
    for line in open(path):
        r = json.loads(line)
        key = (r["model"], r["hosts"], r["rate"], r["engine"])
        rounds.setdefault(key, []).append(r["images_per_second"])
        if key not in best or r["images_per_second"] > best[key]["images_per_second"]:
            best[key] = r
    return best, rounds


def line_rate_ms(model, hosts, rate):
    if model not in PARAMETERS or rate not in RATE_BITS:
        return None
    return 2 * (hosts - 1) / hosts * 4 * PARAMETERS[model] * 8 / RATE_BITS[rate] * 1e3


def main(path):
    best, rounds = best_runs(path)
    print("| model | hosts x ranks | link | cohort img/s | DDP img/s | cohort/DDP | "
          "cohort eff. | DDP eff. | cohort ms/step compute + comm wait | DDP ms/step | "
          "ring at line rate, ms | rounds, cohort / DDP img/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = sorted({k[:3] for k in best if k[1] > 1},
                  key=lambda k: (k[0], k[2] != "1gbit", k[1]))
    for model, hosts, rate in rows:
        c, d = best.get((model, hosts, rate, "cohort")), best.get((model, hosts, rate, "ddp"))
        c1, d1 = best.get((model, 1, "none", "cohort")), best.get((model, 1, "none", "ddp"))
        ips = lambda r: r["images_per_second"] if r else None  # noqa: E731
        fmt = lambda v, f="%.1f": (f % v) if v is not None else "-"  # noqa: E731
        ratio = ips(c) / ips(d) if c and d else None
        eff = lambda r, one: ips(r) / (hosts * ips(one)) if r and one else None  # noqa: E731
        cms = ("%.0f + %.0f" % (c["step_ms"]["compute"], c["step_ms"]["communication_wait"])
               if c and "step_ms" in c else "-")
        dms = fmt(d["seconds_per_step"] * 1e3, "%.0f") if d else "-"
        spread = " / ".join(", ".join("%.1f" % v for v in rounds.get((model, hosts, rate, e), []))
                            for e in ("cohort", "ddp"))
        print("| %s | %d x 1 | %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s |" % (
            model, hosts, rate.replace("gbit", " Gbit/s"), fmt(ips(c)), fmt(ips(d)),
            fmt(ratio, "%.2fx"), fmt(eff(c, c1), "%.2f"), fmt(eff(d, d1), "%.2f"), cms, dms,
            fmt(line_rate_ms(model, hosts, rate), "%.0f"), spread))
    for model in sorted({k[0] for k in best}):
        c1, d1 = best.get((model, 1, "none", "cohort")), best.get((model, 1, "none", "ddp"))
        if c1 and d1:
            print("\nOne process, %s: cohort %.1f img/s, PyTorch %.1f img/s (%.2fx; rounds %s / %s)."
                  % (model, c1["images_per_second"], d1["images_per_second"],
                     c1["images_per_second"] / d1["images_per_second"],
                     ", ".join("%.1f" % v for v in rounds[(model, 1, "none", "cohort")]),
                     ", ".join("%.1f" % v for v in rounds[(model, 1, "none", "ddp")])))


if __name__ == "__main__":
    main(sys.argv[1])
