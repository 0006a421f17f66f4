"""Training metrics: a CSV file and TensorBoard event files, written side by side.

The TensorBoard writer is a small, dependency-free implementation of the event file
format TensorBoard reads: a sequence of TFRecords (``uint64`` length, masked CRC-32C
of the length, the payload, masked CRC-32C of the payload), each payload an ``Event``
protocol buffer (``wall_time`` = field 1, double; ``step`` = field 2, int64;
``file_version`` = field 3, string; ``summary`` = field 5, a ``Summary`` whose
repeated ``value`` = field 1 holds ``tag`` = field 1, string and ``simple_value`` =
field 2, float). :func:`read_events` parses such files back (used by the tests).
"""

from __future__ import annotations

import csv
import math
import socket
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# -- CRC-32C (Castagnoli), as TFRecord framing needs --------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: ``rotate_right(crc, 15) + 0xA282EAD8`` (mod 2^32)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- protocol buffer encoding of Event / Summary -----------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, *, version: str | None = None, scalars=None) -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3 | 0) + _varint(step)
    if version is not None:
        out += _field_bytes(3, version.encode())
    if scalars:
        summary = b"".join(
            _field_bytes(
                1,
                _field_bytes(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value),
            )
            for tag, value in scalars.items()
        )
        out += _field_bytes(5, summary)
    return out


def _record(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + payload
        + struct.pack("<I", masked_crc32c(payload))
    )


class EventFileWriter:
    """Writes scalar summaries to a TensorBoard event file in ``log_dir``.

    Args:
      log_dir: the directory (created); the file is
        ``events.out.tfevents.<unix time>.<host>``.
    """

    def __init__(self, log_dir: str | Path) -> None:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.path = log_dir / f"events.out.tfevents.{int(now)}.{socket.gethostname()}"
        suffix = 0
        while self.path.exists():
            suffix += 1
            self.path = log_dir / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{suffix}"
        self._file = self.path.open("ab")
        self._file.write(_record(_event(now, 0, version="brain.Event:2")))
        self._file.flush()

    def scalars(self, step: int, values: Mapping[str, float], wall_time: float | None = None):
        """Writes one event holding ``tag -> value`` scalars (non-finite values skipped)."""
        finite = {k: float(v) for k, v in values.items() if math.isfinite(float(v))}
        if finite:
            event = _event(time.time() if wall_time is None else wall_time, step, scalars=finite)
            self._file.write(_record(event))

    def flush(self) -> None:
        """Flushes buffered events to disk."""
        self._file.flush()

    def close(self) -> None:
        """Flushes and closes the file."""
        self._file.close()


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int | float]]:
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, struct.unpack_from("<d", data, pos)[0]
            pos += 8
        elif wire == 5:
            yield number, wire, struct.unpack_from("<f", data, pos)[0]
            pos += 4
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def read_events(path: str | Path) -> list[tuple[int, dict[str, float]]]:
    """``(step, {tag: value})`` of every scalar event in a file, checking every CRC.

    Raises:
      ValueError: a corrupt record.
    """
    data = Path(path).read_bytes()
    out = []
    pos = 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack_from("<I", data, pos + 8)
        if crc != masked_crc32c(header):
            raise ValueError(f"{path}: bad length CRC at byte {pos}")
        payload = data[pos + 12 : pos + 12 + length]
        (crc,) = struct.unpack_from("<I", data, pos + 12 + length)
        if crc != masked_crc32c(payload):
            raise ValueError(f"{path}: bad payload CRC at byte {pos}")
        pos += 16 + length
        step, scalars = 0, {}
        for number, _, value in _fields(payload):
            if number == 2:
                step = int(value)  # type: ignore[arg-type]
            elif number == 5:
                for _, _, item in _fields(value):  # type: ignore[arg-type]
                    parts = {n: v for n, _, v in _fields(item)}  # type: ignore[arg-type]
                    scalars[parts[1].decode()] = float(parts[2])  # type: ignore[union-attr,arg-type]
        if scalars:
            out.append((step, scalars))
    return out


# -- CSV + TensorBoard together -------------------------------------------------------------


class MetricsLogger:
    """Appends metric rows to ``out_dir/metrics.csv`` and ``out_dir/tb/`` event files.

    Args:
      out_dir: the run directory.
      columns: the CSV columns, in order (``step`` and ``graph`` first by convention).
      resume_step: when given, rows of an existing CSV with ``step >= resume_step`` are
        dropped (they came after the checkpoint being resumed) and new rows appended;
        otherwise an existing CSV is replaced.
    """

    def __init__(
        self, out_dir: str | Path, columns: Sequence[str], resume_step: int | None = None
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.columns = tuple(columns)
        self.csv_path = self.out_dir / "metrics.csv"
        kept: list[dict[str, str]] = []
        if resume_step is not None and self.csv_path.exists():
            with self.csv_path.open(newline="") as f:
                kept = [row for row in csv.DictReader(f) if int(row["step"]) < resume_step]
        self._file = self.csv_path.open("w", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=self.columns, extrasaction="ignore")
        self._csv.writeheader()
        for row in kept:
            self._csv.writerow(row)
        self._file.flush()
        self.tensorboard = EventFileWriter(self.out_dir / "tb")

    def log(self, step: int, row: Mapping[str, object]) -> None:
        """Writes one row (CSV) and its numeric entries (TensorBoard, tag ``graph/name``)."""
        self._csv.writerow({k: _fmt(row.get(k, "")) for k in self.columns})
        self._file.flush()
        graph = str(row.get("graph", ""))
        scalars = {
            (f"{graph}/{k}" if graph else k): float(v)  # type: ignore[arg-type]
            for k, v in row.items()
            if k not in ("step", "graph") and isinstance(v, int | float)
        }
        self.tensorboard.scalars(step, scalars)
        self.tensorboard.flush()

    def close(self) -> None:
        """Closes both files."""
        self._file.close()
        self.tensorboard.close()


def _fmt(value: object) -> object:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return value


def read_metrics(path: str | Path) -> list[dict[str, str]]:
    """The rows of a ``metrics.csv`` (a run directory or the file)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.csv"
    with path.open(newline="") as f:
        return list(csv.DictReader(f))
