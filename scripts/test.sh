#!/usr/bin/env bash
# Set up (idempotent), lint (ruff), then run every test: core unit tests, whole-graph tests
# over DDS and the real-vLLM tests (a tiny random Qwen3-VL served by vLLM on the CPU,
# .venv-vllm).
# Extra arguments go to pytest, e.g. scripts/test.sh -k banana
# AGENTIC_GRASP_SKIP_VLLM=1 skips the real-vLLM tests (no 3.5 GB for .venv-vllm): loudly,
# and the run then does not cover them.
# --ros2-tools DIR (first) installs the upstream ros2/launch tools from their sources in DIR
# (scripts/setup.sh --ros2-tools). With the tools there (that, an earlier install, or a ROS 2
# Jazzy install), test/ros2_tools runs: test/launch through launch_test, and the ros2 command
# lines of docs/ros2-tools.md against the real bringup. Without them those tests do not run,
# and a banner says so before and after the run: never counted as passed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROS2_TOOLS_ARGS=()
if [ "${1:-}" = "--ros2-tools" ]; then
  [ $# -ge 2 ] || { echo "usage: scripts/test.sh [--ros2-tools DIR] [pytest args]" >&2; exit 2; }
  ROS2_TOOLS_ARGS=(--ros2-tools "$2")
  shift 2
fi
tools_banner() {
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!!! The ROS 2 tools (ros2, ros2 launch, launch_test) are not installed: the tests !!!" >&2
  echo "!!! of test/ros2_tools (launch_test, the ros2 CLI tier) are NOT RUN, NOT PASSED.   !!!" >&2
  echo "!!! Install them: scripts/test.sh --ros2-tools DIR (docs/ros2-tools.md).           !!!" >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
}
skip_banner() {
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!!! AGENTIC_GRASP_SKIP_VLLM=1: the real-vLLM tests are SKIPPED, NOT PASSED.      !!!" >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
}
# The first line comes at once: a first run installs for many minutes before the tests.
if [ -f "$ROOT/.venv/.agentic_grasp/build" ] && { [ "${AGENTIC_GRASP_SKIP_VLLM:-}" = 1 ] \
    || [ -f "$ROOT/.venv-vllm/.agentic_grasp-vllm" ]; }; then
  echo "[test] checking the set-up (a few seconds)"
else
  echo "[test] first run: setting up .venv/ (with torch, open_clip, Ray), .venv-vllm/ (vLLM" \
       "for the CPU, about 3.5 GB) and ros2_ws/ first: the demo's set-up plus about 4 min" \
       "for vLLM; a full first run took 20.5 min with its tests"
fi
if [ "${AGENTIC_GRASP_SKIP_VLLM:-}" = 1 ]; then
  skip_banner
  bash "$ROOT/scripts/setup.sh" --quiet --with-clip --with-ray --with-postgres \
    ${ROS2_TOOLS_ARGS[@]+"${ROS2_TOOLS_ARGS[@]}"}
else
  bash "$ROOT/scripts/setup.sh" --quiet --with-clip --with-ray --with-vllm --with-postgres \
    ${ROS2_TOOLS_ARGS[@]+"${ROS2_TOOLS_ARGS[@]}"}
  # The real-vLLM tests must run here, not skip.
  export AGENTIC_GRASP_REQUIRE_VLLM=1
fi
# The fleet-store tests start their own PostgreSQL 15 (setup.sh --with-postgres made sure the
# binaries are there); a missing server fails them, never skips them.
# The open_clip test must run here, not skip.
export AGENTIC_GRASP_REQUIRE_OPEN_CLIP=1
# The Ray executor tests (a real two-node cluster) must run here, not skip.
export AGENTIC_GRASP_REQUIRE_RAY=1
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
# The ROS 2 tools tier runs where the tools are (and then must not skip); else a banner.
ROS2_TOOLS=0
if command -v ros2 >/dev/null 2>&1 && command -v launch_test >/dev/null 2>&1 \
    && python -c 'import ros2cli, ros2launch, launch_testing, launch_ros' >/dev/null 2>&1; then
  ROS2_TOOLS=1
  export AGENTIC_GRASP_REQUIRE_ROS2_TOOLS=1
else
  tools_banner
fi
# Our own DDS domain so parallel runs and other sessions on this host never see our nodes.
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 5 ))}"
# Lint first, each package with its own ruff.toml (the runtime and the lab): a finding fails
# the run before the long tests start.
for pkg in agentic_grasp agentic_grasp_lab; do
  if ! (cd "$ROOT/ros2_ws/src/$pkg" && ruff check .); then
    echo "error: ruff check failed (see above; config in ros2_ws/src/$pkg/ruff.toml)" >&2
    exit 1
  fi
done
# The tests of both packages live in the runtime's test/.
cd "$ROOT/ros2_ws/src/agentic_grasp"
set +e
# -rs: every skip is listed with its reason at the end (a skip is never a pass); -q keeps
# pytest's progress (a dot per test, the percentage done at each line's end).
echo "[test] running the tests (about 15 min on 2 cores; pytest's progress below)"
python -m pytest test -q -rs -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "error: pytest collected no tests" >&2
fi
if [ "${AGENTIC_GRASP_SKIP_VLLM:-}" = 1 ]; then
  skip_banner
fi
if [ "$ROS2_TOOLS" = 0 ]; then
  tools_banner
fi
exit "$rc"
