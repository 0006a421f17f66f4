"""Optional numba compilation for the sequential kernels of fusion grouping and simulation.

Fusion grouping and the simulator's event loop are sequential graph walks that vectorized
numpy cannot express; compiled with numba (``nopython``, cached on disk next to the
source, or not cached where no location is writable) they run far faster than the same code as
plain Python (``benchmarks/bench_sim.py`` measures it). Without numba installed, or with ``HLO_GO_NO_NUMBA=1``
in the environment, :func:`jit` returns the function unchanged: results are identical,
only slower.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
_log = logging.getLogger(__name__)

try:  # numba is optional: the pure-Python path computes the same results
    import numba as _numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _numba = None

# True when the kernels run compiled.
HAVE_NUMBA: bool = _numba is not None and os.environ.get("HLO_GO_NO_NUMBA", "") in ("", "0")


def jit(fn: F) -> F:
    """Compiles ``fn`` with ``numba.njit(cache=True, nogil=True)`` when numba is usable.

    Where numba finds no writable cache location (neither next to the source, nor under
    HOME, nor NUMBA_CACHE_DIR), it compiles without the disk cache (logged once).

    Args:
      fn: a function written in the numba-compatible subset of Python (scalars,
        numpy arrays, loops).

    Returns:
      The compiled dispatcher (its ``py_func`` is the plain function), or ``fn``
      itself without numba.
    """
    if not HAVE_NUMBA:
        return fn
    try:
        return _numba.njit(cache=True, nogil=True)(fn)  # type: ignore[return-value]
    except RuntimeError as error:  # "cannot cache function ...: no locator available"
        _note_uncached(fn, error)
        return _numba.njit(nogil=True)(fn)  # type: ignore[return-value]


_uncached_noted = False


def _note_uncached(fn: Callable[..., Any], error: RuntimeError) -> None:
    """Logs once that numba compiles without its disk cache (no writable location)."""
    global _uncached_noted
    if not _uncached_noted:
        _uncached_noted = True
        _log.info(
            "numba cannot cache compiled kernels (%s); compiling them in every process "
            "instead. Set NUMBA_CACHE_DIR to a writable directory to cache them.",
            error,
        )


def python_version(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The plain-Python function behind a :func:`jit` result (itself without numba)."""
    return getattr(fn, "py_func", fn)
