"""The disk cache of :func:`hlo_go.jit`: decisions and verdicts by HLO fingerprint.

A fingerprint is the sha256 of the lowered module's HLO text (without source
locations, so editing comments or moving the function keeps it), the jax version, the
platform and the decision-relevant :class:`~hlo_go.api.Options`. Each entry is two
files in the cache directory: ``<fingerprint>.json`` (the :class:`Record`) and, when
ours was kept, ``<fingerprint>.npz`` (the decisions). Writes are atomic (a temporary
file, then a rename), so processes sharing the directory never read half an entry.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from hlo_go.api.record import Record
from hlo_go.decisions import ARRAY_FIELDS, Decisions


def fingerprint(lowered: Any, options_key: str, *, platform: str = "cpu") -> str:
    """The cache key of a ``jax.stages.Lowered`` under some options."""
    text = lowered.as_text(dialect="hlo", debug_info=False)
    digest = hashlib.sha256()
    for part in (jax.__version__, platform, options_key, text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class DecisionCache:
    """Decisions and verdicts on disk, keyed by :func:`fingerprint`.

    Args:
      root: the cache directory (created on first write).
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def load(self, key: str) -> tuple[Record, Decisions | None] | None:
        """The cached record and decisions of ``key``, or None (absent or unreadable)."""
        record_path = self.root / f"{key}.json"
        if not record_path.is_file():
            return None
        try:
            record = Record(**json.loads(record_path.read_text()))
            decisions = None
            arrays_path = self.root / f"{key}.npz"
            if arrays_path.is_file():
                with np.load(arrays_path) as arrays:
                    decisions = Decisions(**{f: arrays[f] for f in ARRAY_FIELDS})
        except (OSError, ValueError, TypeError, KeyError):
            return None  # a corrupt entry is a miss, decided again and overwritten
        return record, decisions

    def store(self, key: str, record: Record, decisions: Decisions | None) -> None:
        """Writes ``key``'s record (and decisions) atomically."""
        self.root.mkdir(parents=True, exist_ok=True)
        if decisions is not None:
            buffer = io.BytesIO()
            np.savez(buffer, **decisions.arrays())
            _write(self.root / f"{key}.npz", buffer.getvalue())
        _write(self.root / f"{key}.json", json.dumps(record.to_json()).encode())
