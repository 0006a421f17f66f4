"""Speed and quality benchmarks of hlo-go.

Each benchmark is a module ``benchmarks/bench_NAME.py`` exposing
``run(*, quick: bool = False) -> dict``. The dict is JSON-able; its ``"rows"``
entry (a list of dicts) is the benchmark's table, its other scalar entries are
headline numbers. ``python -m benchmarks [NAME ...] [--quick]`` runs them, prints
a table per benchmark and writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import hashlib
import pkgutil
from pathlib import Path
from typing import Any

BENCHMARKS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCHMARKS_DIR / "results"
CACHE_DIR = BENCHMARKS_DIR / ".cache"

_PREFIX = "bench_"


def available() -> list[str]:
    """Names of the benchmarks in this package (``bench_NAME.py`` -> ``NAME``), sorted."""
    return sorted(
        info.name[len(_PREFIX) :]
        for info in pkgutil.iter_modules([str(BENCHMARKS_DIR)])
        if info.name.startswith(_PREFIX)
    )


def inputs_digest(args: Any) -> str:
    """A short digest of the arrays a graph is run on (dtype, shape and bytes of each
    leaf), so that a resumed benchmark reruns results computed on other inputs."""
    import jax
    import numpy as np

    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(args):
        array = np.asarray(leaf)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


__all__ = ["BENCHMARKS_DIR", "CACHE_DIR", "RESULTS_DIR", "available", "inputs_digest"]
