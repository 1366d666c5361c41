# Source me: activates .venv and, unless --no-workspace is given, the colcon workspace.
# Keeps DDS discovery on this machine, so tests and demos never talk to other hosts.
_ag_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$_ag_root/.venv/bin/activate"
if [ -z "${ROS_DISTRO:-}" ] || [ "${ROS_DISTRO:-}" != "jazzy" ] || [ -z "${AMENT_PREFIX_PATH:-}" ]; then
  # PyPI wheels: the venv prefix is the ROS underlay.
  export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export AGENTIC_GRASP_DATA="${AGENTIC_GRASP_DATA:-$_ag_root}"
# A 16 MB shared-memory segment, so camera captures (2 MB) are not dropped and repaired seconds
# later (config/fastdds_localhost.xml says why). Set it empty to run Fast DDS's defaults.
export FASTRTPS_DEFAULT_PROFILES_FILE="${FASTRTPS_DEFAULT_PROFILES_FILE-$_ag_root/config/fastdds_localhost.xml}"
if [ "${1:-}" != "--no-workspace" ] && [ -f "$_ag_root/ros2_ws/install/setup.sh" ]; then
  # colcon's setup.sh reads COLCON_CURRENT_PREFIX; set -u safe.
  set +u
  # shellcheck disable=SC1091
  COLCON_CURRENT_PREFIX="$_ag_root/ros2_ws/install" source "$_ag_root/ros2_ws/install/setup.sh"
fi
unset _ag_root
