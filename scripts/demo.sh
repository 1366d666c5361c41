#!/usr/bin/env bash
# Set up (idempotent), bring up the whole node graph on the embedded defaults (simulator arm,
# vlm_sim perception: the simulated VLM perceiving from the camera's pixels, as the benchmark
# does by default), ask the planner to pick up the ceramic cup through GraspObject while its
# feedback streams, print the result, shut everything down. The exit code is the grasp's
# (0 success, 1 failed, 2 error).
#
# Usage: scripts/demo.sh [--fresh]
#   --fresh  run against an empty learnt-experience folder (a temporary one, removed after),
#            so the result does not depend on what earlier runs on this machine learnt
#            (~/.local/share/agentic_grasp, or $AGENTIC_GRASP_DATA_HOME)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FRESH=0
for arg in "$@"; do
  case "$arg" in
    --fresh) FRESH=1 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/demo.sh [--fresh]" >&2; exit 2 ;;
  esac
done
# The first output comes at once: a first run installs for minutes before the graph starts.
if [ -f "$ROOT/.venv/.agentic_grasp/build" ]; then
  echo "[demo] checking the set-up (a few seconds)"
else
  echo "[demo] first run: setting up .venv/ (about 700 MB) and building ros2_ws/ first:" \
       "up to 25 min on 2 busy shared cores, most of it compiling the interfaces; later" \
       "runs check it in a few seconds"
fi
bash "$ROOT/scripts/setup.sh" --quiet
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 5 ))}"
if [ "$FRESH" = 1 ]; then
  AGENTIC_GRASP_DATA_HOME="$(mktemp -d -t agentic_grasp_fresh.XXXXXX)"
  export AGENTIC_GRASP_DATA_HOME
  echo "[demo] --fresh: learnt experience goes to $AGENTIC_GRASP_DATA_HOME (empty, removed after)"
else
  echo "[demo] learnt experience: $(python -c 'from agentic_grasp.core.paths import user_data_dir; print(user_data_dir())')" \
       "(scripts/demo.sh --fresh starts from none)"
fi
echo "[demo] bringing up the node graph (7 nodes, about 10 s) and sending 'pick up the ceramic cup'"

agentic-grasp bringup --arm sim &
bringup=$!
cleanup() {
  kill -INT "$bringup" 2>/dev/null || true; wait "$bringup" 2>/dev/null || true
  if [ "$FRESH" = 1 ]; then rm -rf "$AGENTIC_GRASP_DATA_HOME"; fi
}
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
