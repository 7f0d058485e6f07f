#!/usr/bin/env bash
# run_fuzzer.sh BUILD_DIR NAME SEED_CORPUS SECONDS
# Runs BUILD_DIR/NAME_fuzz for SECONDS from the seed corpus (read only; new
# inputs go to BUILD_DIR/corpus/NAME). Fails on any crash, leak, timeout or
# out-of-memory; the reproducer is left in BUILD_DIR/artifacts/NAME/ and the
# whole output in BUILD_DIR/NAME.log. Prints the final statistics.
set -uo pipefail
bin=$1/$2_fuzz work=$1/corpus/$2 artifacts=$1/artifacts/$2/ log=$1/$2.log
mkdir -p "$work" "$artifacts"
"$bin" -max_total_time="$4" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$work" "$3" >"$log" 2>&1
rc=$?
grep -E '#[0-9]+[[:space:]]+(INITED|DONE)|^Done |^stat::' "$log"
[ $rc -eq 0 ] || tail -n 60 "$log"
exit $rc
