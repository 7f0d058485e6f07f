"""Summarizes results/bench_zero.jsonl (scripts/bench_zero.sh): the memory
table (every rank's peak RSS against DeepSpeed's model for Adam and cohort's
own estimate) and the speed table (each configuration's best and median
over the rounds, each as a ratio to dp's). Markdown on stdout; the same rows as JSON in
the file named second."""
import json
import statistics
import sys

MB = 1 << 20
NAMES = {0: "dp", 1: "zero1", 2: "zero2", 3: "zero3"}


def deepspeed_model_bytes(stage, psi, n):
    """ZeRO paper, section 3: Adam in mixed precision holds 2 bytes of fp16
    weights, 2 of fp16 gradients and K = 12 of f32 state per parameter.
    cohort's f32 weights (4) + f32 gradients (4) + Adam (8) come to the same 16."""
    return {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n,
            3: 16 * psi / n}[stage]


def cohort_layout_bytes(stage, psi, n, precision="fp32", grad_dtype="fp32"):
    """What cohort's layout holds per rank for Adam (no working set).
    f32: f32 weights 4 Psi (the master copy), f32 gradients 4 Psi, Adam 8 Psi.
    Stage 1 shards Adam and keeps only its shard of each all-reduced
    gradient bucket (one micro-batch a step), stage 2 likewise, stage 3 the
    weights too. DeepSpeed keeps 2-byte copies of the weights replicated in
    stages 1 and 2 (and of the gradients in stage 1); cohort's f32 layout
    keeps f32 weights. bf16: dp adds the Linears' 2-byte copies (2 Psi);
    stages 1 and 2 on 3 ranks or more hold DeepSpeed's layout, a bf16 copy
    of the weights outside the shard (2 Psi - 2 Psi/N) and f32 masters of
    the shard. With --grad-dtype bf16 on N > 1 every stage keeps the shard's
    gradients at 2 bytes (G = 2, else 4)."""
    g = 2 if grad_dtype == "bf16" and n > 1 else 4
    if precision == "bf16" and stage == 0:
        return 18 * psi
    if precision == "bf16" and stage in (1, 2) and n > 2:
        return 2 * psi + (10 + g) * psi / n
    return {0: 16 * psi, 1: 4 * psi + (8 + g) * psi / n, 2: 4 * psi + (8 + g) * psi / n,
            3: (12 + g) * psi / n}[stage]


def estimate_mb(s):
    """cohort's own estimate, if the summary carries one ("memory_estimate"):
    a number of MB, or an object with total_mb / total_bytes (a list: per rank,
    rank 0's taken)."""
    e = s.get("memory_estimate")
    if e is None:
        return None
    if isinstance(e, dict):
        for key, scale in (("total_mb", 1), ("mb", 1), ("total_bytes", 1 / MB), ("bytes", 1 / MB)):
            if key in e:
                v = e[key]
                return (v[0] if isinstance(v, list) else v) * scale
        return None
    return float(e)


def held_mb(s):
    """Rank 0's parameters + gradients + optimizer state, as the ZeRO summary
    reports them (None for dp and the single process)."""
    z = s.get("zero")
    if not z:
        return None
    h = z["held_bytes_per_rank"]
    return sum(h[k][0] for k in ("parameters", "gradients", "optimizer_state")) / MB


def activations_mb(s):
    """Activations: measured by ZeRO's summary (peak bytes allocated in
    forward and backward), else cohort's estimate of them."""
    z = s.get("zero")
    if z:
        return max(z["held_bytes_per_rank"]["activations"]) / MB
    e = s.get("memory_estimate")
    return e.get("activations_mb") if isinstance(e, dict) else None


rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
skipped = list({(r["table"], r["ranks"], r["stage"]): r for r in rows if "skipped" in r}.values())
memory, speed = [], {}
for r in rows:
    if "skipped" in r:
        continue
    n, stage, psi = r["ranks"], r["stage"], r["parameters"]
    if r["table"] == "memory":
        peak = r.get("peak_memory_mb_per_rank", [r["peak_memory_mb"]])
        if r.get("zero"):  # the peak of training, after set-up (ZeRO resets it)
            peak = r["zero"]["held_bytes_per_rank"]["training_peak_rss_mb"]
        model = deepspeed_model_bytes(stage, psi, n) / MB
        name = "single" if n == 1 and stage == 0 else NAMES[stage]
        memory.append({"ranks": n, "stage": stage, "strategy": name, "parameters": psi,
                       "peak_rss_mb_per_rank": peak, "held_mb": held_mb(r),
                       "deepspeed_model_mb": model, "estimate_mb": estimate_mb(r),
                       "activations_mb": activations_mb(r),
                       "grad_dtype": r.get("grad_dtype", "fp32"),
                       "cohort_layout_mb": cohort_layout_bytes(
                           stage, psi, n, r.get("precision", "fp32"),
                           r.get("grad_dtype", "fp32")) / MB,
                       "peak_over_model": max(peak) / model})
    else:
        steady = r["epoch_images_per_second"][-1] if r.get("epoch_images_per_second") \
            else r["images_per_second"]
        b = speed.setdefault(stage, {"stage": stage, "strategy": NAMES[stage], "ranks": n,
                                     "model": r["model"], "seq": r["seq"], "runs": []})
        b["runs"].append(steady)

with_estimate = any(m["estimate_mb"] is not None for m in memory)
if memory:
    print("| ranks | strategy | peak RSS MB per rank | held MB (rank 0) | DeepSpeed model MB |"
          " activations MB | model + activations | peak / (model + activations) |"
          " cohort layout MB | peak / (layout + activations) |"
          + (" cohort estimate MB | peak / estimate |" if with_estimate else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if with_estimate else ""))
    for m in sorted(memory, key=lambda m: (m["ranks"], m["stage"])):
        held, act = m["held_mb"], m["activations_mb"]
        both = m["deepspeed_model_mb"] + (act or 0)
        cells = [str(m["ranks"]), m["strategy"],
                 " / ".join("%.0f" % v for v in m["peak_rss_mb_per_rank"]),
                 "%.0f" % held if held is not None else "",
                 "%.0f" % m["deepspeed_model_mb"],
                 "%.0f" % act if act is not None else "",
                 "%.0f" % both, "%.2f" % (max(m["peak_rss_mb_per_rank"]) / both),
                 "%.0f" % m["cohort_layout_mb"],
                 "%.2f" % (max(m["peak_rss_mb_per_rank"]) / (m["cohort_layout_mb"] + (act or 0)))]
        est = m["estimate_mb"]
        if with_estimate:
            cells += ["%.0f" % est if est is not None else "",
                      "%.2f" % (max(m["peak_rss_mb_per_rank"]) / est) if est else ""]
        print("| " + " | ".join(cells) + " |")
    psi = memory[0]["parameters"]
    print()
    print("%d parameters (Psi). DeepSpeed's model, Adam in mixed precision: dp 16 Psi, "
          "zero1 4 Psi + 12 Psi/N, zero2 2 Psi + 14 Psi/N, zero3 16 Psi/N per rank; "
          "peak RSS adds activations, workspaces and the process's runtime." % psi)

rows_speed = []
if speed:
    dp = max(speed[0]["runs"]) if 0 in speed else None
    dp_median = statistics.median(speed[0]["runs"]) if 0 in speed else None
    print()
    print("| strategy | ranks | model | best tokens/s | median tokens/s | sequences/s per run "
          "| vs dp, best | vs dp, median |")
    print("|---|---|---|---|---|---|---|---|")
    for stage in sorted(speed):
        b = speed[stage]
        best, median = max(b["runs"]), statistics.median(b["runs"])
        b["best_sequences_per_second"] = best
        b["best_tokens_per_second"] = best * b["seq"]
        b["median_tokens_per_second"] = median * b["seq"]
        b["vs_dp"] = best / dp if dp else None
        b["vs_dp_median"] = median / dp_median if dp_median else None
        rows_speed.append(b)
        print("| %s | %d | %s (seq %d) | %.0f | %.0f | %s | %s | %s |" % (
            b["strategy"], b["ranks"], b["model"], b["seq"], best * b["seq"], median * b["seq"],
            ", ".join("%.1f" % v for v in b["runs"]),
            "%.2fx" % b["vs_dp"] if b["vs_dp"] else "",
            "%.2fx" % b["vs_dp_median"] if b["vs_dp_median"] else ""))

for s in skipped:
    print("\nskipped: %s, %d rank(s), stage %d: %s" % (s["table"], s["ranks"], s["stage"],
                                                       s["skipped"]))
with open(sys.argv[2], "w") as f:
    json.dump({"memory": memory, "speed": rows_speed,
               "skipped": [{k: s[k] for k in ("table", "ranks", "stage", "skipped")}
                           for s in skipped]}, f, indent=1)
