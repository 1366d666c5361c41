"""JSON Lines files that survive a crash in the middle of a write.

The knowledge base grows while the robot works (paper Sec. VI, experience acquisition), so a
process may be killed while it appends. The rules that keep every file loadable:

- a record is one line, written with ONE ``os.write`` on an ``O_APPEND`` descriptor under an
  exclusive ``flock`` and then ``fsync``-ed, so a crash loses at most the record being written;
- such a crash can leave a final line without its newline. :func:`read_jsonl` reports that
  tail separately (the loader ignores it with a warning), and the next :func:`append_line`
  cuts it off before writing (or, when the tail is a complete JSON record that merely lacks
  its newline, e.g. after a hand edit, adds the newline instead of cutting).
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

_LOG = logging.getLogger(__name__)


@dataclass
class JsonlContent:
    """Parsed lines of a JSON Lines file.

    records: (line number, object) for every complete line that parsed.
    errors: (line number, message) for complete lines that did not parse (a real problem).
    partial_tail: text of a final line without newline that does not parse (an interrupted
    append; harmless, ignored by the loader), or None.
    """

    records: List[Tuple[int, Any]] = field(default_factory=list)
    errors: List[Tuple[int, str]] = field(default_factory=list)
    partial_tail: Optional[str] = None
    partial_line: int = 0


def read_jsonl(path: Union[str, Path]) -> JsonlContent:
    """Parse ``path`` line by line; blank lines and lines starting with '#' are skipped."""
    path = Path(path)
    data = path.read_bytes()
    out = JsonlContent()
    lines = data.split(b"\n")
    # split() leaves '' after a final newline; anything else there is an unterminated line.
    tail = lines.pop()
    for number, raw in enumerate(lines, start=1):
        _parse_line(raw, number, out)
    if tail.strip():
        number = len(lines) + 1
        try:
            out.records.append((number, json.loads(tail.decode("utf-8"))))
        except (UnicodeDecodeError, json.JSONDecodeError):
            out.partial_tail = tail.decode("utf-8", errors="replace")
            out.partial_line = number
    return out


def _parse_line(raw: bytes, number: int, out: JsonlContent) -> None:
    text = raw.strip()
    if not text or text.startswith(b"#"):
        return
    try:
        out.records.append((number, json.loads(text.decode("utf-8"))))
    except UnicodeDecodeError as exc:
        out.errors.append((number, f"not UTF-8: {exc}"))
    except json.JSONDecodeError as exc:
        out.errors.append((number, f"invalid JSON: {exc.msg} (column {exc.colno})"))


def append_line(path: Union[str, Path], obj: Any, fsync: bool = True) -> None:
    """Append ``obj`` as one JSON line, atomically with respect to crashes and other writers."""
    path = Path(path)
    payload = (json.dumps(obj, separators=(", ", ": "), ensure_ascii=False) + "\n")
    data = payload.encode("utf-8")
    if b"\n" in data[:-1]:
        raise ValueError("a JSON line must not contain a raw newline")
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = _open_locked(path)
    try:
        try:
            _repair_tail(fd, path)
            written = os.write(fd, data)
            if written != len(data):  # disk full or similar: do not leave half a record
                raise OSError(errno.EIO, f"{path}: short write ({written} of {len(data)} bytes)")
            if fsync:
                os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if created and fsync:
        _fsync_dir(path.parent)


def _open_locked(path: Path) -> int:
    """An O_APPEND descriptor of ``path`` under an exclusive flock, of the file that is at
    ``path`` once the lock is held (``kb prune`` replaces the file under the same lock; an
    append that waited for it must not land in the replaced, unlinked inode)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)               # closing releases the lock; open the new file


def _repair_tail(fd: int, path: Path) -> None:
    """Cut an unterminated, unparsable final line; terminate a parsable one."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    # Find the start of the last line (scan backwards in blocks).
    start, block = size, 65536
    while start > 0:
        lo = max(0, start - block)
        chunk = os.pread(fd, start - lo, lo)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            start = lo + cut + 1
            break
        start = lo
    tail = os.pread(fd, size - start, start)
    try:
        json.loads(tail.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        _LOG.warning("%s: dropping an incomplete last line of %d bytes (interrupted append)",
                     path, size - start)
        os.ftruncate(fd, start)
        return
    os.write(fd, b"\n")


def _fsync_dir(directory: Path) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
