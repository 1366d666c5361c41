#!/usr/bin/env bash
# Set up (idempotent), bring up the node graph on the embedded defaults (simulator arm),
# grasp the banana through ExecuteGrasp, print the outcome, shut everything down.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --quiet
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 5 ))}"

agentic-grasp bringup --arm sim &
bringup=$!
cleanup() { kill -INT "$bringup" 2>/dev/null || true; wait "$bringup" 2>/dev/null || true; }
trap cleanup EXIT

set +e
agentic-grasp execute --task sg_banana --seed 0 --timeout 60
rc=$?
set -e
cleanup
trap - EXIT
echo "demo finished (exit $rc)"
exit "$rc"
