#!/usr/bin/env bash
# Run scripts/demo.sh N times in a row (default 10) and check that every run made the same
# attempt sequence ("repeatable"): the result line and each attempt line of the
# grasp report (target, attempt, retry level, grasp type, force, width, outcome, quality,
# failure type, correction) must match the first run's. Prints one line per run and a summary;
# exit 0 when all runs agree, 1 otherwise. Each run's full output is kept in OUT (default a
# temporary folder) as run-<i>.log, its attempt sequence as run-<i>.seq.
#   scripts/demo_repeat.sh [N] [OUT]
# The demo acquires every attempt into the user's knowledge base (bringup's default), so a
# later run may retrieve what an earlier one learned and grasp differently: that is learning,
# not noise. DEMO_FRESH_DATA=1 gives each run its own empty data folder
# (AGENTIC_GRASP_DATA_HOME under OUT, kept for a look) to check the runs themselves repeat.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-10}"
OUT="${2:-$(mktemp -d)}"
mkdir -p "$OUT"
same=0
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  if [ "${DEMO_FRESH_DATA:-0}" = 1 ]; then
    AGENTIC_GRASP_DATA_HOME="$OUT/data-$i" bash "$ROOT/scripts/demo.sh" > "$OUT/run-$i.log" 2>&1
  else
    bash "$ROOT/scripts/demo.sh" > "$OUT/run-$i.log" 2>&1
  fi
  rc=$?
  # the report's result and attempt lines; the total time is left out (wall time varies)
  grep -E '^(result: |  sub-goal )' "$OUT/run-$i.log" > "$OUT/run-$i.seq" || true
  if [ "$i" = 1 ]; then
    verdict="reference"
    same=1
  elif cmp -s "$OUT/run-1.seq" "$OUT/run-$i.seq"; then
    verdict="same as run 1"
    same=$((same + 1))
  else
    verdict="DIFFERENT from run 1"
  fi
  echo "run $i: exit $rc, $(grep -c '^  sub-goal ' "$OUT/run-$i.seq") attempt(s), $(( $(date +%s) - start )) s: $verdict"
done
echo "attempt sequence of run 1:"
sed 's/^/  /' "$OUT/run-1.seq"
echo "$same of $N runs made run 1's attempt sequence (logs in $OUT)"
[ "$same" = "$N" ]
