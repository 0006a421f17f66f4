"""Training metrics: a CSV file and TensorBoard event files, written side by side.

Event files are written by ``tensorboardX``'s :class:`~tensorboardX.SummaryWriter`;
:func:`read_events` reads them back (TFRecord framing with its CRCs checked, each record
an ``Event`` protocol buffer parsed by ``tensorboardX.proto``).
"""

from __future__ import annotations

import csv
import math
import struct
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import tensorboardX.record_writer as _record_writer
from tensorboardX import SummaryWriter
from tensorboardX.proto.event_pb2 import Event

# Seconds between the writer thread's flushes of queued events to disk (and on close).
FLUSH_SECS = 10


class EventFileWriter:
    """Writes scalar summaries to a TensorBoard event file in ``log_dir``.

    Events reach the file from ``tensorboardX``'s writer thread, at most
    :data:`FLUSH_SECS` after they are written, and all of them on :meth:`close`.

    Args:
      log_dir: the directory (created); the file is
        ``events.out.tfevents.<unix time>.<host>.<unique suffix>``.
      purge_step: when resuming a run at this step, events of earlier files in
        ``log_dir`` with ``step >= purge_step`` are hidden from TensorBoard.

    Attributes:
      path: the event file.
    """

    def __init__(self, log_dir: str | Path, *, purge_step: int | None = None) -> None:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        # A unique suffix: tensorboardX names files by the second and truncates a file of
        # the same name (a run resumed within the second it started).
        suffix = f".{uuid.uuid4().hex[:12]}"
        self._writer = SummaryWriter(
            str(log_dir), purge_step=purge_step, flush_secs=FLUSH_SECS, filename_suffix=suffix
        )
        (self.path,) = log_dir.glob(f"events.out.tfevents.*{suffix}")

    def scalars(
        self, step: int, values: Mapping[str, float], wall_time: float | None = None
    ) -> None:
        """Writes ``tag -> value`` scalars at ``step`` (non-finite values skipped)."""
        for tag, value in values.items():
            if math.isfinite(float(value)):
                self._writer.add_scalar(tag, float(value), global_step=step, walltime=wall_time)

    def flush(self) -> None:
        """Flushes the events the writer thread has written to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Writes every queued event, flushes and closes the file."""
        self._writer.close()


def _records(data: bytes, path: str | Path) -> Iterator[bytes]:
    """The payloads of a TFRecord file's records, checking both CRCs of each."""
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"{path}: truncated record header at byte {pos}")
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack_from("<I", data, pos + 8)
        if crc != _record_writer.masked_crc32c(header):
            raise ValueError(f"{path}: bad length CRC at byte {pos}")
        if pos + 16 + length > len(data):
            raise ValueError(f"{path}: truncated record at byte {pos}")
        payload = data[pos + 12 : pos + 12 + length]
        (crc,) = struct.unpack_from("<I", data, pos + 12 + length)
        if crc != _record_writer.masked_crc32c(payload):
            raise ValueError(f"{path}: bad payload CRC at byte {pos}")
        pos += 16 + length
        yield payload


def read_events(path: str | Path) -> list[tuple[int, dict[str, float]]]:
    """``(step, {tag: value})`` of the scalars in an event file, in file order.

    Consecutive scalar events of one step are merged into one entry.

    Raises:
      ValueError: a corrupt or truncated record.
    """
    out: list[tuple[int, dict[str, float]]] = []
    for payload in _records(Path(path).read_bytes(), path):
        event = Event.FromString(payload)
        scalars = {
            v.tag: float(v.simple_value)
            for v in event.summary.value
            if v.WhichOneof("value") == "simple_value"
        }
        if not scalars:
            continue
        if out and out[-1][0] == event.step:
            out[-1][1].update(scalars)
        else:
            out.append((int(event.step), scalars))
    return out


def __getattr__(name: str) -> Any:
    # Deprecated aliases (one release): the CRCs are tensorboardX's.
    if name in ("crc32c", "masked_crc32c"):
        warnings.warn(
            f"hlo_go.rl.metrics.{name} is deprecated: use tensorboardX.record_writer.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_record_writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        self.tensorboard = EventFileWriter(self.out_dir / "tb", purge_step=resume_step)

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
