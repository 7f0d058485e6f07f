#!/usr/bin/env bash
# Reproduces the figures in docs/BENCHMARKS.md: single-process steps against
# PyTorch (1 and 2 threads), the matmul peak share, data-parallel steps on 2
# ranks against PyTorch DDP, overlap on and off. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p results
out=results/bench_engine.jsonl
: > "$out"
for model in mnist-small mnist-large; do
  steps=40; [ "$model" = mnist-large ] && steps=10
  for threads in 1 2; do
    build/cohort bench step --model "$model" --batch 128 --threads "$threads" --steps "$steps" \
      --peer pytorch $([ "$model" = mnist-large ] && echo --peak) | tail -1 >> "$out"
  done
  for batch in 64 128; do
    build/cohort bench step --model "$model" --batch "$batch" --threads 1 --workers 2 \
      --steps "$steps" --peer pytorch | tail -1 >> "$out"
    build/cohort bench step --model "$model" --batch "$batch" --threads 1 --workers 2 \
      --steps "$steps" --no-overlap | tail -1 >> "$out"
  done
done
cat "$out"
