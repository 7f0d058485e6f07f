#!/usr/bin/env bash
# Issue 17's speed where the gradients' bytes matter: MODEL (gpt2, --seq 64)
# at bf16 on HOSTS (2) namespace hosts of this machine (scripts/cluster.sh),
# one rank each, their links shaped to RATE (1gbit). dp and ZeRO-1/-2 with
# f32 and with bf16 gradients on the wire (--grad-dtype, DeepSpeed's
# communication_data_type), `cohort bench step` in turn (A B C ... A B C)
# for ROUNDS rounds; each configuration's best and median step, and its
# rate against dp's with f32 gradients. Needs root (namespaces, tc).
# Markdown on stdout; RAW has every run's JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
# One timed step a run (after one warm-up): `bench step` checks that the
# loss fell, and gpt2 at bf16 with its fixed learning rate climbs after 3.
model=${MODEL:-gpt2} hosts=${HOSTS:-2} rate=${RATE:-1gbit} rounds=${ROUNDS:-3}
batch=${BATCH:-2} steps=${STEPS:-1} bin=${COHORT:-build/cohort}
raw=${RAW:-results/bench_zero_hosts.jsonl}
mkdir -p "$(dirname "$raw")"
: > "$raw"
: > "$raw.err"
configs=("dp --grad-dtype fp32" "dp --grad-dtype bf16"
         "zero --zero-stage 1 --grad-dtype bf16" "zero --zero-stage 2 --grad-dtype bf16"
         "zero --zero-stage 1 --grad-dtype fp32" "zero --zero-stage 2 --grad-dtype fp32")
name=$(scripts/cluster.sh up "$hosts" --slots 1 --rate "$rate")
trap 'scripts/cluster.sh down --name "$name" >/dev/null 2>&1 || true' EXIT
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    # shellcheck disable=SC2086  # the configuration's words are separate flags
    line=$(scripts/cluster.sh run --name "$name" -- -np "$hosts" "$bin" bench step --model "$model" \
      --seq 64 --batch "$batch" --precision bf16 --threads 1 --steps "$steps" --warmup 1 \
      --parallel $c 2>>"$raw.err" | grep '^{' | tail -1) || line=""
    if [ -z "$line" ]; then
      echo "failed: --parallel $c ($raw.err)" >&2
      continue
    fi
    echo "{\"config\":\"$c\",\"round\":$r,\"hosts\":$hosts,\"rate\":\"$rate\",\"run\":$line}" >> "$raw"
  done
done
python3 - "$raw" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    runs.setdefault(j["config"], []).append(j["run"]["images_per_second"] * 64)
base = runs.get("dp --grad-dtype fp32")
print("| --parallel | best tokens/s | median tokens/s | tokens/s per run | vs dp f32, best | vs dp f32, median |")
print("|---|---|---|---|---|---|")
for c, v in runs.items():
    best, med = max(v), statistics.median(v)
    print("| %s | %.1f | %.1f | %s | %s | %s |" % (
        c, best, med, ", ".join("%.1f" % x for x in v),
        "%.2fx" % (best / max(base)) if base else "", "%.2fx" % (med / statistics.median(base)) if base else ""))
EOF
