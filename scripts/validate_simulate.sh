#!/bin/sh
# Validates `cohort simulate` on every configuration this machine can run:
# 1-4 ranks on one host (dp, ps, pp, hybrid, ZeRO) and, as root where
# `scripts/cluster.sh check` passes, 2 and 4 namespace hosts at 1 and 10
# Gbit/s (dp, ZeRO, pp, hybrid), for mnist-large, cifar-resnet50 and gpt2 at
# --seq 64: predicted vs measured step time, a table and a plot in
# docs/results/simulate/. REPS=N runs each host configuration N times and
# CLUSTER_REPS=N (or RATE:N,...; 1gbit:1,10gbit:2) each cluster one, in
# rounds (best kept), COMM_REPS=N the `bench comm`
# runs per cluster (3; the fit takes their median), MODELS=a,b limits the models,
# CLUSTER=0 skips the cluster. Takes 75-105 minutes on 2 vCPUs (runs 21-25;
# about 40 for the host rows alone since run 24's drift readings).
set -e
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/validate_simulate.py "${1:-docs/results/simulate}"
