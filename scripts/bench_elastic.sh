#!/bin/sh
# Elastic training's figures (docs/BENCHMARKS.md, "Elastic training (issue 18)").
#   overhead MODEL BATCH STEPS RUNS: the step time without commits and with
#     --commit-every auto (the default under --elastic), runs alternated
#     (B A B A ...), one process, synthetic data; prints each run's seconds a
#     step (commits included) and its commits (count, interval, seconds).
#   recovery KILLS: mnist-small on Fashion-MNIST, 4 ranks under --elastic, a
#     random rank SIGKILLed 3 s after each (re)start, KILLS times (at most 3:
#     4 -> 3 -> 2 -> 1 ranks); prints each restart's recovery seconds (the
#     death to the new job training on the survivors) and redone steps.
set -eu
BIN=${BIN:-build/cohort}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP" /dev/shm/cohort-bench-elastic-$$' EXIT

overhead() {
  model=$1 batch=$2 steps=$3 runs=$4
  for i in $(seq "$runs"); do
    for mode in off auto; do
      if [ $mode = off ]; then every=0; else every=auto; fi
      "$BIN" train --model "$model" --data synthetic --batch "$batch" --limit $((batch * steps)) \
        --epochs 1 --threads 2 --eval none --log jsonl --commit-every $every \
        --checkpoint-dir /dev/shm/cohort-bench-elastic-$$ > "$TMP/out" 2>&1
      python3 - "$model" "$mode" "$steps" "$TMP/out" <<'PY'
import json, sys
model, mode, steps, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = [json.loads(l) for l in open(path) if l.startswith('{"event":"summary"')][-1]
c = s.get("commits", {"count": 0, "every": 0, "seconds": 0.0, "mean_seconds": 0.0})
# The epoch's time holds the commits within it; the epoch-end commit follows it.
train = sum(s["epoch_seconds"]) + (c["mean_seconds"] if c["count"] else 0.0)
print(f"{model} {mode:4s} {train / steps:.4f} s/step  commits {c['count']} every {c['every']} "
      f"updates, {c['seconds']:.3f} s ({100 * c['seconds'] / train:.2f}% of training)")
PY
    done
  done
}

recovery() {
  kills=$1
  dir=$TMP/commits
  "$BIN" train --elastic --min-workers 1 --max-workers 4 --workers 4 --cooldown 600 \
    --max-restarts "$kills" --model mnist-small --data fashion-mnist --threads 1 --eval none \
    --log jsonl --global-batch 96 --limit 60000 --epochs 1 --commit-every 20 \
    --checkpoint-dir "$dir" --timeout 10 > "$TMP/elastic" 2>&1 &
  for k in $(seq "$kills"); do
    # Once the job (re)started trains, kill a random rank of it.
    until [ "$(grep -c '"event":"start"' "$TMP/elastic")" -ge "$k" ]; do sleep 0.2; done
    sleep 3
    rank=$(shuf -i 0-$((4 - k)) -n 1)
    pid=$(grep -l "OMPI_COMM_WORLD_RANK=$rank" /proc/[0-9]*/environ 2>/dev/null |
          while read -r f; do p=${f#/proc/}; p=${p%/environ}
            tr '\0' '\n' < "$f" 2>/dev/null | grep -q "COHORT_ELASTIC_PROGRESS=$dir.progress" && echo "$p"; done | head -1)
    [ -n "$pid" ] && kill -9 "$pid"
  done
  wait
  python3 - "$TMP/elastic" <<'PY'
import json, statistics, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"event":"summary"')][-1]
r = [x for x in s["elastic"]["restarts"] if "failed" in x]
rec = [x["recovery_seconds"] for x in r]
for x in r:
    print(f"restart {x['restart']}: rank {x['failed'][0]['rank']} {x['failed'][0]['how']}, "
          f"{x['world_before']} -> {x['world']} ranks, recovery {x['recovery_seconds']} s "
          f"(job ended after {x['ended_after_seconds']} s), {x['steps_redone']} steps redone")
print(f"recovery: median {statistics.median(rec):.2f} s, range {min(rec):.2f}-{max(rec):.2f} s "
      f"over {len(rec)} kills; time lost {s['elastic']['time_lost_seconds']} s; "
      f"test accuracy {s['test_accuracy']}")
PY
}

"$@"
