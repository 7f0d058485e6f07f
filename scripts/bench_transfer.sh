#!/usr/bin/env bash
# Reproduces issue 21's speed table in docs/BENCHMARKS.md ("Transfer
# learning"): one fine-tuning step of torchvision's ResNet-50 (its 1000-class
# head, batch 32, 2 threads, fp32, Adam) at 32x32 and 224x224 input, backbone frozen
# and full, cohort beside the PyTorch peer in the same `bench step` run. The
# four configurations take turns ROUNDS times (default 4); the table keeps
# each side's best and the median of the runs' ratios. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-4}
mkdir -p results
out=results/bench_transfer.jsonl
: > "$out"
for r in $(seq "$rounds"); do
  for size in 32 224; do
    if [ "$size" = 32 ]; then steps="--steps 10 --warmup 3"; else steps="--steps 2 --warmup 1"; fi
    for freeze in backbone none; do
      # shellcheck disable=SC2086
      build/cohort bench step --model resnet50 --batch 32 --threads 2 --resize "$size" --freeze "$freeze" --peer pytorch $steps 2>/dev/null \
        | tail -1 | sed "s/^{/{\"resize\":$size,/" >> "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    rows.setdefault((j["resize"], j["freeze"]), []).append(j)
print("| input | freeze | runs | cohort images/s (each run) | PyTorch images/s (each run) "
      "| best / best (goal >= 1.3x) | median of the runs' ratios |")
print("|---|---|---|---|---|---|---|")
for (size, freeze), rs in sorted(rows.items()):
    c = [r["images_per_second"] for r in rs]
    p = [r["peer_images_per_second"] for r in rs]
    ratio = max(c) / max(p)
    print("| %dx%d | %s | %d | %s | %s | %.2fx | %.2fx |" % (
        size, size, freeze, len(rs), ", ".join("%.1f" % x for x in c),
        ", ".join("%.1f" % x for x in p), ratio,
        statistics.median(r["ratio"] for r in rs)))
PY
