"""Run one long set-up step so that it talks: its own output passes through, and while it is
silent a line says what is still running, for how long, and what to expect.

scripts/setup.sh runs pip, colcon and apt-get through this. A first run takes minutes, and a
command that prints nothing for minutes looks hung; these steps can each be silent for over
a minute (pip installing 200 wheels, colcon compiling the interfaces' type support).

Usage: python3 setup_step.py [--log FILE] [--every S] [--estimate TEXT] [--drop TEXT]
                             LABEL -- COMMAND...
  --log FILE     the command's output goes to FILE instead of the terminal (colcon: its
                 log is kept for a failure); the heartbeat still shows
  --every S      a heartbeat after S seconds without output (default 15)
  --estimate T   how long the step takes the first time, as the heartbeat shows it
  --drop TEXT    leave out output lines that contain TEXT (repeatable)

When standard output is a terminal, the command runs on a pseudo-terminal, so pip draws its
own progress bars. Runs on the system Python (standard library only): the venv may not exist
yet. Exit status: the command's.
"""
from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import time
from typing import List, Optional, Sequence


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="setup_step.py")
    parser.add_argument("--log", default=None)
    parser.add_argument("--every", type=float, default=15.0)
    parser.add_argument("--estimate", default="")
    parser.add_argument("--drop", action="append", default=[])
    parser.add_argument("label")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command after --")
    return args


def heartbeat(label: str, elapsed_s: float, estimate: str) -> str:
    """The line printed while a step is silent."""
    text = f"[setup]   ... {label}: {elapsed_s:.0f} s so far"
    return text + (f" (the first time: {estimate})" if estimate else "")


class _Filter:
    """Writes the command's output on, leaving out lines that contain any of ``drop``."""

    def __init__(self, out, drop: List[str]) -> None:
        self._out, self._drop = out, [d.encode() for d in drop]
        self._partial = b""

    def write(self, data: bytes) -> None:
        if not self._drop:
            self._out.write(data)
            self._out.flush()
            return
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not any(d in line for d in self._drop):
                self._out.write(line + b"\n")
        # a progress bar redraws with \r and no \n: pass it on at once
        if b"\r" in self._partial:
            head, _, self._partial = self._partial.rpartition(b"\r")
            self._out.write(head + b"\r")
        self._out.flush()

    def close(self) -> None:
        if self._partial and not any(d in self._partial for d in self._drop):
            self._out.write(self._partial)
        self._out.flush()


def run(args: argparse.Namespace) -> int:
    log = open(args.log, "wb") if args.log else None
    tty = log is None and sys.stdout.isatty()
    master: Optional[int] = None
    if tty:
        master, slave = os.openpty()
        proc = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=slave, close_fds=True)
        os.close(slave)
        source = master
    else:
        proc = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        source = proc.stdout.fileno()
    sink = _Filter(log if log is not None else sys.stdout.buffer, args.drop)
    start = last = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([source], [], [], 1.0)
            now = time.monotonic()
            if ready:
                try:
                    data = os.read(source, 65536)
                except OSError:         # the pseudo-terminal closes with EIO at the end
                    data = b""
                if not data:
                    break
                sink.write(data)
                if log is None:
                    last = now
            if now - last >= args.every:
                print(heartbeat(args.label, now - start, args.estimate), flush=True)
                last = now
    finally:
        sink.close()
        if master is not None:
            os.close(master)
        if log is not None:
            log.close()
    return proc.wait()


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(_parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
