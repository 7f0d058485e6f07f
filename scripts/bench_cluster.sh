#!/usr/bin/env bash
# Reproduces issue 19's figures in docs/BENCHMARKS.md ("Many hosts on one
# machine"): data parallelism across namespace hosts (scripts/cluster.sh),
# cohort beside PyTorch DDP over gloo on the same links, in the same run.
#
# For each RATE (1gbit 10gbit) and HOSTS (2 4): a cluster of HOSTS hosts x 1
# slot with its links shaped to RATE; for each MODEL (mnist-large cifar-resnet50),
# ROUNDS rounds of cohort then DDP (A B A B ...), one rank per host at batch
# BATCH_<model> per rank, 1 thread each:
#   cohort: scripts/cluster.sh run -- -np HOSTS cohort bench step --parallel dp
#   DDP:    scripts/cluster.sh each -- python3 bench/peers/pytorch_peer step
#           (one process per namespace, gloo rendezvous at host 0)
# and, outside any cluster, each engine's single process at the same batch
# (the base of the scaling efficiency: images/s / (hosts x one process's)).
# Each side's best round is reported. Prints the Markdown table; RAW has every
# run's JSON line. Needs root (ip netns); run it on a quiet machine if you can.
set -euo pipefail
cd "$(dirname "$0")/.."
rates=${RATES:-1gbit 10gbit} hosts_list=${HOSTS:-2 4} models=${MODELS:-mnist-large cifar-resnet50}
rounds=${ROUNDS:-2} steps=${STEPS:-4} warmup=${WARMUP:-2}
bin=${COHORT:-build/cohort} python=${COHORT_PEER_PYTHON:-/usr/bin/python3}
peer=bench/peers/pytorch_peer
mkdir -p results
raw=${RAW:-results/bench_cluster.jsonl}
: >"$raw"
log=$(mktemp)
cluster=""
trap 'rm -f "$log"; [ -z "$cluster" ] || scripts/cluster.sh down --name "$cluster"' EXIT
failed=0

batch_of() {
  case "$1" in
    cifar-resnet50) echo "${BATCH_resnet50:-8}" ;;
    *) echo "${BATCH_mnist_large:-32}" ;;
  esac
}

# record TAG CMD...: runs CMD; its last JSON line, tagged, goes to $raw.
record() {
  local tag=$1 rc=0
  shift
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ] && grep -q '^{' "$log"; then
    grep '^{' "$log" | tail -1 | sed "s/^{/{$tag,/" >>"$raw"
  else
    echo "failed ($rc): $*" >&2
    tail -5 "$log" >&2
    failed=1
  fi
}

step_flags() {  # MODEL: the flags both engines' step benchmarks share
  echo "--model $1 --batch $(batch_of "$1") --threads 1 --steps $steps --warmup $warmup"
}

# One process each, no network: the scaling base.
for model in $models; do
  for r in $(seq "$rounds"); do
    tag="\"engine\":\"cohort\",\"hosts\":1,\"rate\":\"none\",\"round\":$r"
    # shellcheck disable=SC2046  # step_flags' words are separate flags
    record "$tag" "$bin" bench step $(step_flags "$model")
    tag="\"engine\":\"ddp\",\"hosts\":1,\"rate\":\"none\",\"round\":$r"
    # shellcheck disable=SC2046
    record "$tag" "$python" "$peer" step $(step_flags "$model") --world 1
  done
done

for rate in $rates; do
  for hosts in $hosts_list; do
    cluster=$(scripts/cluster.sh up "$hosts" --slots 1 --rate "$rate" 2>/dev/null)
    echo "cluster $cluster: $hosts hosts at $rate" >&2
    for model in $models; do
      for r in $(seq "$rounds"); do
        tag="\"engine\":\"cohort\",\"hosts\":$hosts,\"rate\":\"$rate\",\"round\":$r"
        # shellcheck disable=SC2046
        record "$tag" scripts/cluster.sh run --name "$cluster" -- -np "$hosts" \
          "$bin" bench step $(step_flags "$model") --parallel dp
        tag="\"engine\":\"ddp\",\"hosts\":$hosts,\"rate\":\"$rate\",\"round\":$r"
        # shellcheck disable=SC2046
        record "$tag" scripts/cluster.sh each --name "$cluster" -- \
          "$python" "$peer" step $(step_flags "$model") --world "$hosts"
      done
    done
    scripts/cluster.sh down --name "$cluster"
    cluster=""
  done
done
python3 scripts/cluster_table.py "$raw"
exit "$failed"
