"""The disk cache of :func:`hlo_go.jit`: decisions and verdicts by fingerprint.

A fingerprint is the sha256 of the lowered module's HLO text (without source locations,
so editing comments or moving the function keeps it), the decision-relevant
:class:`~hlo_go.api.Options`, and everything a verdict depends on besides the program
(:func:`environment`): the hlo-go, jax and jaxlib versions, the backend and its device
kind, and the CPU model. A verdict made under another version or on another machine is
therefore never found.

Each entry is two files in the cache directory: ``<fingerprint>.json`` (the
:class:`Record`) and, when ours was kept, ``<fingerprint>.npz`` (the decisions). Writes
are atomic (a temporary file, then a rename), so processes sharing the directory never
read half an entry. An entry that cannot be read (truncated, not a zip, wrong fields) is
a miss: it is decided again and overwritten. When the directory cannot be written the
entry is kept in this process's memory, and :class:`CacheWriteWarning` is issued once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import platform
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from hlo_go.api.record import Record
from hlo_go.decisions import ARRAY_FIELDS, Decisions
from hlo_go.errors import HloGoWarning

logger = logging.getLogger(__name__)


class CacheWriteWarning(HloGoWarning):
    """The decorator's cache directory cannot be written: verdicts stay in memory."""


def cpu_model() -> str:
    """This host's CPU model (``/proc/cpuinfo``'s ``model name``, else :mod:`platform`)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def environment(platform_name: str = "cpu") -> str:
    """What a verdict depends on besides the program: versions, backend, device, CPU."""
    import jax
    import jaxlib

    from hlo_go import __version__

    device = jax.devices(platform_name)[0]
    parts = {
        "hlo_go": __version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "backend": device.platform,
        "device_kind": device.device_kind,
        "cpu": cpu_model(),
    }
    return ";".join(f"{k}={v}" for k, v in parts.items())


def fingerprint(
    lowered: Any, options_key: str, *, platform: str = "cpu", environment_key: str | None = None
) -> str:
    """The cache key of a ``jax.stages.Lowered`` under some options.

    Args:
      lowered: the lowered function.
      options_key: :meth:`Options.key`.
      platform: the backend (its device kind is part of the key).
      environment_key: what else the key holds (default :func:`environment`).
    """
    text = lowered.as_text(dialect="hlo", debug_info=False)
    env = environment(platform) if environment_key is None else environment_key
    digest = hashlib.sha256()
    for part in (env, options_key, text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


_SHARED: dict[str | None, DecisionCache] = {}


def shared_cache(root: str | os.PathLike | None) -> DecisionCache:
    """The process-wide :class:`DecisionCache` of a directory (one per root, so every
    decorated function of the process sees the verdicts the others made)."""
    key = None if root is None else str(Path(root).expanduser().resolve())
    if key not in _SHARED:
        _SHARED[key] = DecisionCache(key)
    return _SHARED[key]


class DecisionCache:
    """Decisions and verdicts on disk, keyed by :func:`fingerprint`.

    Args:
      root: the cache directory (created on first write); None: memory only.
    """

    def __init__(self, root: str | os.PathLike | None) -> None:
        self.root = Path(root) if root is not None else None
        self._memory: dict[str, tuple[Record, Decisions | None]] = {}
        self._warned = False

    def load(self, key: str) -> tuple[Record, Decisions | None] | None:
        """The cached record and decisions of ``key``, or None (absent or unreadable)."""
        if key in self._memory:
            return self._memory[key]
        if self.root is None:
            return None
        record_path = self.root / f"{key}.json"
        if not record_path.is_file():
            return None
        try:
            record = Record(**json.loads(record_path.read_text()))
            decisions = None
            arrays_path = self.root / f"{key}.npz"
            if record.kept_decisions:
                with np.load(arrays_path) as arrays:
                    decisions = Decisions(**{f: arrays[f] for f in ARRAY_FIELDS})
        except Exception as error:  # any unreadable entry is a miss
            logger.info("cache entry %s unreadable (%s): deciding again", key[:12], error)
            return None
        return record, decisions

    def store(self, key: str, record: Record, decisions: Decisions | None) -> None:
        """Writes ``key``'s record (and decisions) atomically; in memory when the
        directory cannot be written (warning once)."""
        record = record._replace(kept_decisions=decisions is not None)
        self._memory[key] = (record, decisions)
        if self.root is None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if decisions is not None:
                buffer = io.BytesIO()
                np.savez(buffer, **decisions.arrays())
                _write(self.root / f"{key}.npz", buffer.getvalue())
            _write(self.root / f"{key}.json", json.dumps(record.to_json()).encode())
        except OSError as error:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"hlo_go.jit cannot write its cache in {str(self.root)!r} ({error}); "
                    "verdicts are kept in this process's memory only",
                    CacheWriteWarning,
                    stacklevel=4,
                )

    def remembered(self, key: str) -> bool:
        """Whether ``key``'s entry was decided or checked in this process."""
        return key in self._memory

    def drop(self, key: str) -> None:
        """Forgets ``key`` (a verdict that failed its re-check)."""
        self._memory.pop(key, None)
        if self.root is None:
            return
        for suffix in (".json", ".npz"):
            with contextlib.suppress(OSError):
                (self.root / f"{key}{suffix}").unlink(missing_ok=True)
