#!/bin/sh
# Validates `cohort simulate` on every configuration this machine can run
# (1-4 ranks on one host: dp, ps, pp, hybrid, ZeRO for mnist-large, cifar-resnet50
# and gpt2 at --seq 64): predicted vs measured step time, a table and a plot
# in docs/results/simulate/. REPS=N runs each configuration N times (best
# kept), MODELS=a,b limits the models. Takes 15-40 minutes on 2 vCPUs.
set -e
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/validate_simulate.py "${1:-docs/results/simulate}"
