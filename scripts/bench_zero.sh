#!/usr/bin/env bash
# Reproduces issue 17's figures in docs/BENCHMARKS.md ("ZeRO memory and
# speed"). Two tables:
#  memory: MODEL (gpt2, 124M) with Adam on --data text, a few steps at each
#    of RANKS (1 2 4) and STAGES (0 1 2 3): every rank's peak RSS, the ZeRO
#    summary's held bytes, DeepSpeed's model for Adam and cohort's own
#    estimate (where the summary has one). Stage 0 is data parallelism (at
#    one rank, --parallel none); stages 1-3 are --parallel zero. PRECISION
#    (fp32) is their --precision, and the speed runs' (bf16: DeepSpeed's
#    model assumes mixed precision, and stages 1 and 2 hold its layout).
#    GRAD_DTYPE (fp32) is --grad-dtype of every run on more than one rank
#    (bf16: DeepSpeed's communication_data_type, gradients at 2 bytes).
#  speed: SPEED_MODEL (gpt2-tiny) on 2 ranks, dp, zero1, zero2, zero3 in
#    turn (A B C D A B C D ...) for ROUNDS rounds; each side's best.
# Prints the Markdown tables; JSON_OUT has them as JSON, RAW every run's
# summary. Run on a quiet machine. RANKS=" " (a space) skips the memory table.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${MODEL:-gpt2} seq=${SEQ:-64} batch=${BATCH:-1} steps=${STEPS:-4}
ranks=${RANKS:-1 2 4} stages=${STAGES:-0 1 2 3} precision=${PRECISION:-fp32}
grad_dtype=${GRAD_DTYPE:-fp32}
speed_model=${SPEED_MODEL:-gpt2-tiny} speed_seq=${SPEED_SEQ:-64} speed_batch=${SPEED_BATCH:-8}
speed_limit=${SPEED_LIMIT:-512} speed_epochs=${SPEED_EPOCHS:-2} rounds=${ROUNDS:-3}
bin=${COHORT:-build/cohort}
mkdir -p results
raw=${RAW:-results/bench_zero.jsonl}
json_out=${JSON_OUT:-results/bench_zero.json}
: > "$raw"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0

# run TABLE RANKS STAGE ROUND SEQ FLAGS...: one `cohort train --seq SEQ`; its
# summary line, tagged, goes to $raw.
run() {
  local table=$1 n=$2 stage=$3 round=$4 len=$5
  shift 5
  local tag="\"table\":\"$table\",\"ranks\":$n,\"stage\":$stage,\"round\":$round,\"seq\":$len"
  local rc=0
  "$bin" train --log jsonl --seq "$len" "$@" > "$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    grep '"event":"summary"' "$log" | tail -1 | sed "s/^{/{$tag,/" >> "$raw"
  else
    echo "failed ($rc): $table, $n rank(s), stage $stage: $bin train $*" >&2
    tail -5 "$log" >&2
    failed=1
  fi
}

# The strategy flags of stage S on N ranks.
strategy() {
  local n=$1 s=$2
  if [ "$s" = 0 ] && [ "$n" = 1 ]; then
    echo "--parallel none"  # no gradients summed: --grad-dtype does not apply
  elif [ "$s" = 0 ]; then
    echo "--workers $n --parallel dp --grad-dtype $grad_dtype"
  else
    echo "--workers $n --parallel zero --zero-stage $s --grad-dtype $grad_dtype"
  fi
}

for n in $ranks; do
  for s in $stages; do
    # shellcheck disable=SC2046  # strategy's words are separate flags
    run memory "$n" "$s" 1 "$seq" --model "$model" --batch "$batch" --data text \
      --optimizer adam --epochs 1 --eval none --limit $((steps * batch * n)) --precision "$precision" \
      $(strategy "$n" "$s")
  done
done
for r in $(seq "$rounds"); do
  for s in 0 1 2 3; do
    # shellcheck disable=SC2046
    run speed 2 "$s" "$r" "$speed_seq" --model "$speed_model" --batch "$speed_batch" \
      --data text --optimizer adam --epochs "$speed_epochs" --eval none --limit "$speed_limit" \
      --precision "$precision" $(strategy 2 "$s")
  done
done
python3 scripts/zero_table.py "$raw" "$json_out"
exit "$failed"
