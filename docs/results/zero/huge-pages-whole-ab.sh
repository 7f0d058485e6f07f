#!/bin/sh
# A/B: the engine before (old) and after (new) fb2b0bd, alternating, ZeRO x2 rows as the harness runs them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rep in 1 2 3; do
  for cfg in "gpt2 --seq 64 --batch 2 --steps 3 --zero-stage 3" "cifar-resnet50 --batch 8 --steps 4 --zero-stage 3" "gpt2 --seq 64 --batch 2 --steps 3 --zero-stage 1" "cifar-resnet50 --batch 8 --steps 4 --zero-stage 1"; do
    for v in old new; do
      set -- $cfg
      m=$1; shift
      out=$(/tmp/cohort.$v bench step --model $m "$@" --threads 1 --warmup 2 --workers 2 --parallel zero 2>&1 | grep '"event":"bench"')
      echo "$rep $v $m $* :: $(echo "$out" | grep -o '"images_per_second":[0-9.]*\|"step_ms":{[^}]*}\|"peak_memory_mb":[0-9.]*' | tr '\n' ' ')"
    done
  done
done
