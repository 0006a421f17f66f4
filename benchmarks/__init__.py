"""Speed and quality benchmarks of hlo-go.

Each benchmark is a module ``benchmarks/bench_NAME.py`` exposing
``run(*, quick: bool = False) -> dict``. The dict is JSON-able; its ``"rows"``
entry (a list of dicts) is the benchmark's table, its other scalar entries are
headline numbers. ``python -m benchmarks [NAME ...] [--quick]`` runs them, prints
a table per benchmark and writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path

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


__all__ = ["BENCHMARKS_DIR", "CACHE_DIR", "RESULTS_DIR", "available"]
