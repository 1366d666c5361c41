#!/usr/bin/env bash
# Entrypoint of the agentic_grasp ROS image: source ROS, franka_ros2 and the workspace, then
#   bringup        ros2 launch agentic_grasp bringup.launch.py with ARM, PERCEPTION, VLM_URL,
#                  PARAMS_FILE and RECORD from the environment (defaults: sim, oracle)
#   colcon-test    the package's tests (core, graph over DDS, launch_testing bringup tests)
#   anything else  run as a command (ros2 ..., bash)
set -eo pipefail
# shellcheck disable=SC1091
source "/opt/ros/${ROS_DISTRO:-jazzy}/setup.bash"
# shellcheck disable=SC1091
source /opt/franka_ws/install/setup.bash
# shellcheck disable=SC1091
source /opt/agentic_grasp/ros2_ws/install/setup.bash

case "${1:-bringup}" in
  bringup)
    shift || true
    args=("arm:=${ARM:-sim}" "perception:=${PERCEPTION:-oracle}")
    [[ -n "${VLM_URL:-}" ]] && args+=("vlm_url:=${VLM_URL}")
    [[ -n "${PARAMS_FILE:-}" ]] && args+=("params_file:=${PARAMS_FILE}")
    [[ -n "${RECORD:-}" ]] && args+=("record:=${RECORD}")
    exec ros2 launch agentic_grasp bringup.launch.py "${args[@]}" "$@"
    ;;
  colcon-test)
    shift
    cd /opt/agentic_grasp/ros2_ws
    colcon test --packages-select agentic_grasp --event-handlers console_direct+ "$@"
    exec colcon test-result --verbose
    ;;
  *)
    exec "$@"
    ;;
esac
