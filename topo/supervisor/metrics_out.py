"""Metric rows written also where users look, beside the JSON lines the launcher always
keeps (``topo run --metrics-to csv,tensorboard``):

- ``csv``: ``<run_dir>/metrics/csv/<node>.<label>.csv``, one file per node and logger
  label (an actor's and a learner's rows have different columns), a header line of the
  columns; a row that brings a new column rewrites its file with it (rare: a logger
  writes the same keys every time).
- ``tensorboard``: ``<run_dir>/metrics/tensorboard/<node>/events.out.tfevents.*``, one
  event file per node, so ``tensorboard --logdir <run_dir>/metrics/tensorboard`` shows
  each node as a run and each figure as ``<label>/<key>``. The file is written here
  (TFRecord framing, the Event and Summary messages encoded by hand): no TensorFlow in
  the launcher.

The x axis of a TensorBoard curve is the row's own step when it has one (``STEP_KEYS``,
the first present), else the count of rows its node wrote with that label.
"""

from __future__ import annotations

import csv
import socket
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from topo.rundir.layout import METRICS_CSV_DIR, METRICS_DIR, METRICS_TENSORBOARD_DIR, safe_name
from topo.runs.figures import STAMPS

FORMATS = ("csv", "tensorboard")
STEP_KEYS = ("step", "steps", "actor_steps", "learner_steps", "trainer_steps", "episodes")


class CsvOut:
    """One CSV file per (node, label) under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._files: dict[tuple[str, str], tuple[IO[str], list[str]]] = {}

    def write(self, row: dict[str, Any]) -> None:
        node, label = str(row["node"]), str(row.get("label") or "metrics")
        values = {k: v for k, v in row.items() if k not in ("node", "label")}
        opened = self._files.get((node, label))
        if opened is None:
            opened = self._open(node, label, list(values))
        f, columns = opened
        if any(k not in columns for k in values):
            f, columns = self._widen(node, label, columns + [k for k in values if k not in columns])
        csv.writer(f).writerow(["" if values.get(c) is None else values.get(c) for c in columns])

    def _path(self, node: str, label: str) -> Path:
        return self.dir / f"{safe_name(node)}.{safe_name(label)}.csv"

    def _open(self, node: str, label: str, columns: list[str]) -> tuple[IO[str], list[str]]:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(node, label)
        f = open(path, "a", encoding="utf-8", newline="")
        if f.tell() == 0:
            csv.writer(f).writerow(columns)
        self._files[(node, label)] = (f, columns)
        return f, columns

    def _widen(self, node: str, label: str, columns: list[str]) -> tuple[IO[str], list[str]]:
        """Rewrite the file of (node, label) with ``columns`` (the old ones first)."""
        old, _ = self._files.pop((node, label))
        old.close()
        path = self._path(node, label)
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, columns, restval="")
            writer.writeheader()
            writer.writerows(rows)
        return self._open(node, label, columns)

    def flush(self) -> None:
        for f, _ in self._files.values():
            f.flush()

    def close(self) -> None:
        for f, _ in self._files.values():
            f.close()
        self._files.clear()


class TensorBoardOut:
    """One TensorBoard event file per node under ``directory``/<node>/."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._files: dict[str, IO[bytes]] = {}
        self._rows: dict[tuple[str, str], int] = {}

    def write(self, row: dict[str, Any]) -> None:
        node, label = str(row["node"]), str(row.get("label") or "metrics")
        count = self._rows.get((node, label), 0)
        self._rows[(node, label)] = count + 1
        steps = (row[k] for k in STEP_KEYS if k in row)
        step = next((int(s) for s in steps if _whole(s)), count)
        figures = [
            (f"{label}/{k}", float(v)) for k, v in row.items() if k not in STAMPS and _number(v)
        ]
        if figures:
            self._file(node).write(record(event(float(row["time"]), step, summary(figures))))

    def _file(self, node: str) -> IO[bytes]:
        f = self._files.get(node)
        if f is None:
            where = self.dir / safe_name(node)
            where.mkdir(parents=True, exist_ok=True, mode=0o700)
            name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.topo"
            f = self._files[node] = open(where / name, "ab")
            f.write(record(event(time.time(), 0, version=b"brain.Event:2")))
        return f

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def checked_formats(asked: Sequence[str] | str) -> tuple[str, ...]:
    """``asked`` as ``FORMATS`` orders them; ValueError naming one topo does not write."""
    asked = [asked] if isinstance(asked, str) else list(asked)
    unknown = [f for f in asked if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown format {unknown[0]!r} (choose from {', '.join(FORMATS)})")
    return tuple(f for f in FORMATS if f in asked)


def outputs(run_dir: Path, formats: tuple[str, ...]) -> list[CsvOut | TensorBoardOut]:
    """The writers ``formats`` ask for, each under ``<run_dir>/metrics``."""
    base = run_dir / METRICS_DIR
    made: list[CsvOut | TensorBoardOut] = []
    if "csv" in formats:
        made.append(CsvOut(base / METRICS_CSV_DIR))
    if "tensorboard" in formats:
        made.append(TensorBoardOut(base / METRICS_TENSORBOARD_DIR))
    return made


def _whole(value: Any) -> bool:
    """A count: an int, or a float that is one (counters may sum as floats)."""
    return _number(value) and not isinstance(value, bool) and float(value).is_integer()


def _number(value: Any) -> bool:
    return isinstance(value, int | float)  # bools too: a flag charts as 0/1


# -- the event file format: TFRecord frames of tensorflow.Event protocol buffers -------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 as protobuf encodes it (two's complement)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def summary(values: list[tuple[str, float]]) -> bytes:
    """A ``Summary`` of simple values (``Summary.Value``: tag 1, simple_value 2)."""
    return b"".join(
        _field(1, _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value))
        for tag, value in values
    )


def event(wall_time: float, step: int, summary: bytes = b"", version: bytes = b"") -> bytes:
    """An ``Event``: wall_time 1 (double), step 2, file_version 3 or summary 5."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)
    if version:
        out += _field(3, version)
    if summary:
        out += _field(5, summary)
    return out


def record(data: bytes) -> bytes:
    """``data`` as one TFRecord: length, its masked CRC-32C, data, the data's."""
    length = struct.pack("<Q", len(data))
    return (
        length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))
    )


def _table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as TFRecord frames use."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
