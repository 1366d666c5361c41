"""Raw access to a rosbag2 recording, MCAP or sqlite3, that survives a cut-off file.

rosbags' Reader needs metadata.yaml and an intact summary section, which a recorder killed
mid-write (SIGKILL, power loss) never writes. This module reads the storage files
themselves, in file order, and stops at the first record it cannot read, saying where:

- MCAP: PyPI ``mcap``'s :class:`~mcap.stream_reader.StreamReader` walks the records
  sequentially (chunks are decompressed and CRC-checked), so everything before the cut is
  read; a truncated or corrupt record ends the scan with the byte offset of that record;
- sqlite3: the ``messages`` table is read in insertion order through the standard
  :mod:`sqlite3` module (read-only); a malformed page ends the scan at the last good row.

What a scan yields is raw CDR plus each topic's channel (type name and the message
definition embedded by the writer, the ``ros2msg`` text with its dependencies), so readers
can decode with the definitions the bag was recorded with, not today's (old bags stay
readable when the interfaces change; new fields just flow through).

No rclpy import: bags are read on machines without ROS.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import yaml
from mcap.exceptions import McapError
from mcap.records import Channel as McapChannel, Footer, Message, Schema
from mcap.stream_reader import StreamReader

STORAGE_MCAP = "mcap"
STORAGE_SQLITE3 = "sqlite3"
STORAGES = (STORAGE_MCAP, STORAGE_SQLITE3)
_SUFFIX = {".mcap": STORAGE_MCAP, ".db3": STORAGE_SQLITE3}


class BagError(Exception):
    """The path is not a readable bag at all (no storage file, not MCAP, not sqlite3)."""


@dataclass
class Channel:
    """One recorded topic: its type and the definition it was written with."""

    topic: str
    msgtype: str
    msgdef: str = ""              # ros2msg text with dependencies ("" when not embedded)
    encoding: str = "ros2msg"     # schema encoding (ros2msg, ros2idl)
    count: int = 0


@dataclass
class ScanState:
    """How far a scan got. ``stopped`` is "" when every file was read to its end."""

    messages: int = 0
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    stopped: str = ""
    notes: List[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.stopped


def _load_metadata(folder: Path) -> Optional[dict]:
    meta = folder / "metadata.yaml"
    if not meta.is_file():
        return None

    try:
        data = yaml.safe_load(meta.read_text())
        return dict(data["rosbag2_bagfile_information"])
    except Exception as exc:  # noqa: BLE001 - a broken metadata file is reported, not fatal
        raise BagError(f"{meta}: unreadable metadata.yaml ({exc})") from exc


class BagFile:
    """A bag folder (or one ``.mcap`` / ``.db3`` file) opened for sequential scans.

    ``storage`` is ``mcap`` or ``sqlite3``; ``files`` the storage files in recorded order;
    ``metadata`` the parsed metadata.yaml (None when the recorder did not close the bag).
    ``scan()`` yields ``(channel, log time ns, cdr bytes)`` and fills ``state``; it never
    raises for a damaged file once opened (``state.stopped`` says where it stopped).
    """

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.metadata: Optional[dict] = None
        self.state = ScanState()
        if self.path.is_file():
            storage = _SUFFIX.get(self.path.suffix)
            if storage is None:
                raise BagError(f"{self.path}: not a .mcap or .db3 file")
            self.storage, self.files = storage, [self.path]
            return
        if not self.path.is_dir():
            raise BagError(f"{self.path}: no such bag folder or file")
        self.metadata = _load_metadata(self.path)
        if self.metadata is not None:
            self.storage = str(self.metadata.get("storage_identifier", ""))
            names = self.metadata.get("relative_file_paths") or []
            self.files = [self.path / n for n in names]
            missing = [str(f.name) for f in self.files if not f.is_file()]
            if missing:
                raise BagError(f"{self.path}: metadata.yaml names missing files {missing}")
        else:
            self.files = sorted(p for p in self.path.iterdir() if p.suffix in _SUFFIX)
            if not self.files:
                raise BagError(f"{self.path}: no metadata.yaml and no .mcap/.db3 file")
            self.storage = _SUFFIX[self.files[0].suffix]
            self.files = [p for p in self.files if _SUFFIX[p.suffix] == self.storage]
            self.state.notes.append("no metadata.yaml: the recorder did not close the bag "
                                    "(killed?); reading the storage files directly")
        if self.storage not in STORAGES:
            raise BagError(f"{self.path}: storage {self.storage!r} is not mcap or sqlite3")
        self.channels: Dict[Tuple[str, int], Channel] = {}

    # ---- scanning -------------------------------------------------------------------------
    def scan(self, topics: Optional[Sequence[str]] = None
             ) -> Iterator[Tuple[Channel, int, bytes]]:
        """Every message (of ``topics``, all when None) in file order."""
        self.state = ScanState(notes=list(self.state.notes))
        self.channels = {}
        wanted = None if topics is None else set(topics)
        reader = self._scan_mcap if self.storage == STORAGE_MCAP else self._scan_sqlite
        for path in self.files:
            for channel, stamp, data in reader(path):
                channel.count += 1
                st = self.state
                st.messages += 1
                st.start_ns = stamp if st.start_ns is None else min(st.start_ns, stamp)
                st.end_ns = stamp if st.end_ns is None else max(st.end_ns, stamp)
                if wanted is None or channel.topic in wanted:
                    yield channel, stamp, data
            if self.state.stopped:
                break

    def count(self) -> ScanState:
        """Scan everything without keeping it (``channels`` then holds the counts)."""
        for _ in self.scan():
            pass
        return self.state

    def _where(self, path: Path, offset: int, reason: str) -> None:
        size = path.stat().st_size
        self.state.stopped = (f"{path.name}: unreadable from byte {offset} of {size} "
                              f"({reason}); {self.state.messages} messages read before it")

    def _scan_mcap(self, path: Path) -> Iterator[Tuple[Channel, int, bytes]]:
        schemas: Dict[int, Schema] = {}
        with path.open("rb") as stream:
            reader = StreamReader(stream, validate_crcs=True)
            records = reader.records
            footer = False
            while True:
                offset = reader._stream.count        # noqa: SLF001 - start of the next record
                try:
                    record = next(records)
                except StopIteration:
                    break
                except (McapError, ValueError, UnicodeDecodeError, OSError) as exc:
                    self._where(path, offset, _describe(exc))
                    return
                except Exception as exc:  # noqa: BLE001 - struct/zstd/lz4 errors of bad bytes
                    self._where(path, offset, _describe(exc))
                    return
                if isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, McapChannel):
                    schema = schemas.get(record.schema_id)
                    key = (str(path), record.id)
                    if key not in self.channels:
                        self.channels[key] = Channel(
                            record.topic, schema.name if schema else "",
                            schema.data.decode("utf-8", "replace") if schema else "",
                            schema.encoding if schema else "")
                elif isinstance(record, Message):
                    channel = self.channels.get((str(path), record.channel_id))
                    if channel is None:
                        self._where(path, offset, f"message on unknown channel "
                                                  f"{record.channel_id}")
                        return
                    yield channel, int(record.log_time), bytes(record.data)
                elif isinstance(record, Footer):
                    footer = True
            if not footer:
                self._where(path, reader._stream.count, "no footer")  # noqa: SLF001

    def _scan_sqlite(self, path: Path) -> Iterator[Tuple[Channel, int, bytes]]:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            self._where(path, 0, f"sqlite3: {exc}")
            return
        try:
            try:
                defs = {}
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
                if "message_definitions" in tables:
                    defs = {t: (e, d) for t, e, d in conn.execute(
                        "SELECT topic_type, encoding, encoded_message_definition "
                        "FROM message_definitions")}
                for tid, name, msgtype in conn.execute("SELECT id, name, type FROM topics"):
                    encoding, text = defs.get(msgtype, ("", ""))
                    self.channels[(str(path), tid)] = Channel(name, msgtype, text, encoding)
            except sqlite3.Error as exc:
                self._where(path, 0, f"sqlite3 tables: {exc}")
                return
            last = 0
            try:
                rows = conn.execute("SELECT id, topic_id, timestamp, data FROM messages "
                                    "ORDER BY id")
                for row_id, tid, stamp, data in rows:
                    channel = self.channels.get((str(path), tid))
                    if channel is None:
                        self.state.stopped = (f"{path.name}: message row {row_id} names "
                                              f"unknown topic id {tid}")
                        return
                    last = row_id
                    yield channel, int(stamp), bytes(data)
            except sqlite3.Error as exc:
                self.state.stopped = (f"{path.name}: unreadable after message row {last} "
                                      f"(sqlite3: {exc}); {self.state.messages} messages "
                                      "read before it")
        finally:
            conn.close()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    if name == "EndOfFile" or not text:
        return "file ends inside a record: truncated" if name == "EndOfFile" else name
    return f"{name}: {text}"
