#!/bin/sh
# Validates `cohort simulate --grad-dtype bf16` on the namespace cluster (as
# root where `scripts/cluster.sh check` passes): dp ring, ZeRO-1 and ZeRO-3
# with f32 and bf16 gradients on HOSTS (2) hosts at RATE (1gbit), for
# MODELS (gpt2,cifar-resnet50), best of CLUSTER_REPS (2) rounds: predicted vs
# measured step time in docs/results/simulate/grad-dtype/. About 35 minutes
# on 2 vCPUs.
set -e
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/validate_grad_dtype.py "${1:-docs/results/simulate/grad-dtype}"
