#!/usr/bin/env bash
# Reproduces issue 15's figures in docs/BENCHMARKS.md: cohort in bf16 against
# PyTorch 1.13's CPU autocast(bfloat16) and against cohort in fp32, the share
# of the bf16 matmul peak, activation bytes per image, mnist-small at 1 and 2
# threads against PyTorch fp32, and test accuracy over 3 seeds per precision.
# Every configuration runs ROUNDS times in turn (cohort, PyTorch, cohort, ...),
# and the summary takes each side's best. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
mkdir -p results
out=results/bench_precision.jsonl
: > "$out"
step() { build/cohort bench step "$@" 2>/dev/null | tail -1 >> "$out"; }
for r in $(seq "$rounds"); do
  for threads in 1 2; do
    step --model mnist-large --batch 128 --threads "$threads" --steps 10 --precision fp32 --peak
    step --model mnist-large --batch 128 --threads "$threads" --steps 10 --precision bf16 --peak \
      --peer pytorch
    step --model cifar-resnet50 --batch 32 --threads "$threads" --steps 4 --warmup 2 --precision fp32 --peak
    step --model cifar-resnet50 --batch 32 --threads "$threads" --steps 4 --warmup 2 --precision bf16 \
      --peak --peer pytorch
    step --model mnist-small --batch 128 --threads "$threads" --steps 40 --precision fp32 \
      --peer pytorch
  done
done
for precision in fp32 bf16 fp16; do
  for seed in 0 1 2; do
    build/cohort train --model mnist-small --epochs 2 --optimizer adam --lr 0.001 --batch 128 \
      --precision "$precision" --seed "$seed" --log jsonl 2>/dev/null | grep '"summary"' \
      | sed "s/^{/{\"seed\":$seed,/" >> "$out"
  done
done
python3 scripts/precision_table.py "$out"
