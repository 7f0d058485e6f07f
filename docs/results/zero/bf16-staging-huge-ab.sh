#!/bin/sh
# A/B: the engine before (old, eeac04e) and after (new) bf16 gradient buckets staged
# on huge pages (whole ones), alternating, ZeRO x2 rows with --grad-dtype bf16 as the
# harness runs them, and one f32 row as a control. perf stat counts each run's page faults.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rep in 1 2 3; do
  for cfg in "cifar-resnet50 --batch 8 --steps 4 --zero-stage 1 --grad-dtype bf16" "gpt2 --seq 64 --batch 2 --steps 3 --zero-stage 1 --grad-dtype bf16" "cifar-resnet50 --batch 8 --steps 4 --zero-stage 3 --grad-dtype bf16" "cifar-resnet50 --batch 8 --steps 4 --zero-stage 1 --grad-dtype fp32"; do
    for v in old new; do
      set -- $cfg
      m=$1; shift
      out=$(perf stat -x, -e page-faults /tmp/cohort.$v bench step --model $m "$@" --threads 1 --warmup 2 --workers 2 --parallel zero 2>&1 | grep '"event":"bench"\|page-faults')
      echo "$rep $v $m $* :: $(echo "$out" | grep -o '"images_per_second":[0-9.]*\|"step_ms":{[^}]*}\|"peak_memory_mb":[0-9.]*\|^[0-9]*,,page-faults' | tr '\n' ' ')"
    done
  done
done
