#!/usr/bin/env bash
# Reproduces issue 19's all-reduce figures in docs/BENCHMARKS.md
# ("Hierarchical all-reduce across hosts"): `cohort bench comm` across
# namespace hosts (scripts/cluster.sh), cohort's ring, tree and hierarchical
# all-reduce beside MPI_Allreduce and gloo (one gloo rank per host, the same
# links), in the same run.
#
# For each RATE in $RATES, HOSTS in $HOSTS and SLOTS in $SLOTS (ranks per
# host): a cluster of HOSTS hosts x SLOTS slots with its links shaped to RATE,
# then ROUNDS runs of
#   scripts/cluster.sh run -- -np HOSTS*SLOTS cohort bench comm \
#       --min-bytes MIN --max-bytes MAX --peer pytorch
# (ranks fill a host's slots first: ranks 0,1 on host 0 at 2 slots). Within a
# run the algorithms take turns, batch by batch, and the fastest batch counts;
# the table keeps each algorithm's best run. Prints the Markdown table
# (scripts/comm_cluster_table.py); RAW has every run's JSON line.
#
#   RATES="1gbit" HOSTS=2 SLOTS=2 MAX=268435456 scripts/bench_comm_cluster.sh
#
# Needs root (ip netns). The hosts share this machine's CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
rates=${RATES:-1gbit 10gbit} hosts_list=${HOSTS:-2 4} slots_list=${SLOTS:-1 2}
rounds=${ROUNDS:-1} min=${MIN:-65536} max=${MAX:-16777216} peer=${PEER:-pytorch}
seconds=${SECONDS_PER_SIZE:-0.3} bin=${COHORT:-build/cohort}
mkdir -p results
raw=${RAW:-results/bench_comm_cluster.jsonl}
: >"$raw"
log=$(mktemp)
cluster=""
trap 'rm -f "$log"; [ -z "$cluster" ] || scripts/cluster.sh down --name "$cluster"' EXIT
failed=0

for rate in $rates; do
  for hosts in $hosts_list; do
    for slots in $slots_list; do
      cluster=$(scripts/cluster.sh up "$hosts" --rate "$rate" --slots "$slots")
      for r in $(seq "$rounds"); do
        tag="\"rate\":\"$rate\",\"slots\":$slots,\"round\":$r"
        echo "bench comm: $hosts hosts x $slots ranks at $rate, round $r" >&2
        rc=0
        scripts/cluster.sh run --name "$cluster" -- -np $((hosts * slots)) "$bin" bench comm \
          --min-bytes "$min" --max-bytes "$max" --peer "$peer" --seconds "$seconds" \
          >"$log" 2>&1 || rc=$?
        if [ "$rc" = 0 ] && grep -q '^{' "$log"; then
          grep '^{' "$log" | tail -1 | sed "s/^{/{$tag,/" >>"$raw"
        else
          echo "failed ($rc)" >&2
          tail -5 "$log" >&2
          failed=1
        fi
      done
      scripts/cluster.sh down --name "$cluster"
      cluster=""
    done
  done
done
python3 scripts/comm_cluster_table.py "$raw"
exit "$failed"
