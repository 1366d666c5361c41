#!/usr/bin/env bash
# Set up (idempotent), bring up the whole node graph on the embedded defaults (simulator arm,
# vlm_sim perception: the simulated VLM perceiving from the camera's pixels, as the benchmark
# does by default), ask the planner to pick up the ceramic cup through GraspObject while its
# feedback streams, print the result, shut everything down. The exit code is the grasp's
# (0 success, 1 failed, 2 error).
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
agentic-grasp grasp "pick up the ceramic cup" --task sg_cup --seed 0 --timeout 120 \
  --server-timeout 60
rc=$?
set -e
cleanup
trap - EXIT
echo "demo finished (exit $rc)"
exit "$rc"
