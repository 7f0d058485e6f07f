"""Summarizes results/bench_precision.jsonl (scripts/bench_precision.sh): each
side's best over the rounds, the ratios, and accuracy medians over seeds."""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = defaultdict(dict)  # (model, batch, threads) -> side -> best record figure
for r in rows:
    if r.get("event") != "bench":
        continue
    key = (r["model"], r["batch"], r["threads"])
    side = "cohort " + r["precision"]
    b = best[key]
    if r["images_per_second"] > b.get(side, {}).get("images_per_second", 0):
        b[side] = r
    if "peer_images_per_second" in r:
        peer = "pytorch " + r["peer_precision"]
        b[peer] = {"images_per_second": max(r["peer_images_per_second"],
                                            b.get(peer, {}).get("images_per_second", 0))}

print("| model | batch | threads | side | best img/s | share of its peak | KiB activations/image |")
print("|---|---|---|---|---|---|---|")
for key in sorted(best):
    for side, r in sorted(best[key].items()):
        share = "%.0f%% of %s %.0f GFLOP/s" % (100 * r["peak_share"], r["matmul_peak_dtype"],
                                                r["matmul_peak_gflops"]) if "peak_share" in r else ""
        act = "%.0f" % (r["activation_bytes_per_image"] / 1024) if "activation_bytes_per_image" in r else ""
        print("| %s | %d | %d | %s | %.0f | %s | %s |" % (key + (side, r["images_per_second"], share, act)))

print()
print("| model | threads | bf16 / PyTorch bf16 | bf16 / cohort fp32 | fp32 / PyTorch fp32 |")
print("|---|---|---|---|---|")
for key in sorted(best):
    b = best[key]
    ips = lambda s: b[s]["images_per_second"] if s in b else float("nan")
    print("| %s | %d | %.2fx | %.2fx | %.2fx |" % (key[0], key[2], ips("cohort bf16") / ips("pytorch bf16"),
          ips("cohort bf16") / ips("cohort fp32"), ips("cohort fp32") / ips("pytorch fp32")))

acc = defaultdict(list)
for r in rows:
    if r.get("event") == "summary":
        acc[r["precision"]].append(r["test_accuracy"])
if acc:
    print()
    print("| precision | test accuracy per seed | median | minus fp32's median |")
    print("|---|---|---|---|")
    ref = statistics.median(acc["fp32"]) if acc.get("fp32") else float("nan")
    for p, v in acc.items():
        m = statistics.median(v)
        print("| %s | %s | %.4f | %+.4f |" % (p, ", ".join("%.4f" % a for a in v), m, m - ref))
