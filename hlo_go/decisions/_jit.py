"""Optional numba compilation for the sequential kernels of fusion grouping and simulation.

Fusion grouping and the simulator's event loop are sequential graph walks that vectorized
numpy cannot express; compiled with numba (``nopython``, cached on disk next to the
source) they run far faster than the same code as plain Python
(``benchmarks/bench_sim.py`` measures it). Without numba installed, or with ``HLO_GO_NO_NUMBA=1``
in the environment, :func:`jit` returns the function unchanged: results are identical,
only slower.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

try:  # numba is optional: the pure-Python path computes the same results
    import numba as _numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _numba = None

# True when the kernels run compiled.
HAVE_NUMBA: bool = _numba is not None and os.environ.get("HLO_GO_NO_NUMBA", "") in ("", "0")


def jit(fn: F) -> F:
    """Compiles ``fn`` with ``numba.njit(cache=True, nogil=True)`` when numba is usable.

    Args:
      fn: a function written in the numba-compatible subset of Python (scalars,
        numpy arrays, loops).

    Returns:
      The compiled dispatcher (its ``py_func`` is the plain function), or ``fn``
      itself without numba.
    """
    if not HAVE_NUMBA:
        return fn
    return _numba.njit(cache=True, nogil=True)(fn)  # type: ignore[return-value]


def python_version(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The plain-Python function behind a :func:`jit` result (itself without numba)."""
    return getattr(fn, "py_func", fn)
