"""Speed and quality benchmarks of hlo-go.

Each benchmark is a module ``benchmarks/bench_NAME.py`` exposing
``run(*, quick: bool = False) -> dict``. The dict is JSON-able; its ``"rows"``
entry (a list of dicts) is the benchmark's table, its other scalar entries are
headline numbers. ``python -m benchmarks [NAME ...] [--quick]`` runs them, prints
a table per benchmark and writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import hashlib
import math
import pkgutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BENCHMARKS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCHMARKS_DIR / "results"
CACHE_DIR = BENCHMARKS_DIR / ".cache"

_PREFIX = "bench_"

FUSING_HEURISTICS = ("xla-cpu-like", "fuse-all-legal", "priority-fusion")
"""The fusion heuristics the measuring benchmarks take the best of, per graph."""


def best_heuristic(
    rows: Sequence[Mapping[str, Any]], heuristics: Sequence[str] = FUSING_HEURISTICS
) -> str | None:
    """The fastest of ``heuristics`` among one graph's correct, timed ``rows`` (each with
    ``variant``, ``correct`` and ``relative``), or None where none of them is."""
    timed = {r["variant"]: r["relative"] for r in rows if r["correct"] and r["relative"]}
    present = [h for h in heuristics if h in timed]
    return min(present, key=timed.__getitem__) if present else None


def versus_best(
    per_graph: Mapping[str, Mapping[str, Any]],
    search: str,
    heuristics: Sequence[str] = FUSING_HEURISTICS,
) -> dict[str, float]:
    """Per graph, the best correct heuristic's relative time over ``search``'s (> 1: the
    search is faster); graphs where either is missing or wrong are left out.

    Args:
      per_graph: graph -> ``{"rows": [...]}``, rows with ``variant``, ``correct`` and
        ``relative`` (time over XLA's default compile's).
      search: the variant judged.
      heuristics: the variants whose fastest is the best heuristic.
    """
    out = {}
    for name, g in per_graph.items():
        by = {r["variant"]: r for r in g.get("rows", []) if r["correct"] and r["relative"]}
        best = best_heuristic(g.get("rows", []), heuristics)
        if best is not None and search in by:
            out[name] = by[best]["relative"] / by[search]["relative"]
    return out


def paired_log_wilcoxon(
    a_s: Sequence[float], b_s: Sequence[float], *, alternative: str = "two-sided"
) -> float | None:
    """The Wilcoxon signed-rank p-value of ``log(a / b)`` over paired rounds (``"greater"``:
    ``a`` slower than ``b``); None under 2 pairs or unpaired samples, 1.0 where every pair
    is equal."""
    from scipy import stats

    if len(a_s) != len(b_s) or len(a_s) < 2:
        return None
    logs = [math.log(a / b) for a, b in zip(a_s, b_s, strict=True)]
    if all(x == 0 for x in logs):
        return 1.0
    return float(stats.wilcoxon(logs, alternative=alternative).pvalue)


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


def one_device_peak_bytes(name: str) -> int:
    """The simulated peak memory of a corpus graph's step (pre-fusion stage) laid out on
    one device of this host."""
    import numpy as np

    from hlo_go import corpus
    from hlo_go.calibration.runtime import mpmd_host_cluster
    from hlo_go.decisions import Decisions
    from hlo_go.graph import build_graph
    from hlo_go.sim import simulate

    graph = build_graph(corpus.load(name, "prefusion"))
    zeros = np.zeros(graph.num_nodes, np.float32)
    single = Decisions(np.zeros(graph.num_nodes, np.int32), zeros, zeros)
    return int(simulate(graph, mpmd_host_cluster(1), single).peak_memory.sum())


def corpus_graphs_too_large(memory_fraction: float) -> dict[str, str]:
    """Corpus graphs whose simulated one-device peak memory is above ``memory_fraction``
    of this host's memory, each with the reason (empty where the memory is unknown)."""
    from benchmarks._report import memory_gib
    from hlo_go import corpus

    host_gib = memory_gib()
    if host_gib is None:
        return {}
    peaks = {n: one_device_peak_bytes(n) / 2**30 for n in corpus.names()}
    return {
        n: f"simulated one-device peak {peak:.1f} GiB > {memory_fraction:g} of {host_gib} GiB"
        for n, peak in peaks.items()
        if peak > memory_fraction * host_gib
    }


def corpus_graph_order(
    first: Sequence[str], excluded: Mapping[str, str], only: str, setting: str
) -> list[str]:
    """Corpus graphs in a benchmark's run order: ``first`` (those not ``excluded``), then
    the other graphs not ``excluded`` by pre-fusion node count.

    Args:
      first: graphs to run before the rest, in this order.
      excluded: graphs left out (name -> reason).
      only: comma-separated names (a benchmark's ``setting``): just those, in that order.
      setting: the environment variable ``only`` came from, for the error message.

    Raises:
      ValueError: a name in ``only`` that is not a corpus graph, or is excluded.
    """
    from hlo_go import corpus

    names = [n for n in corpus.names() if n not in excluded]
    if only:
        picked = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in picked if n not in names]
        if unknown:
            raise ValueError(f"{setting}: not corpus graphs that fit here: {unknown}")
        return picked
    rest = sorted(
        (n for n in names if n not in first),
        key=lambda n: corpus.info(n)["stages"]["prefusion"]["nodes"],
    )
    return [n for n in first if n in names] + rest


__all__ = [
    "BENCHMARKS_DIR",
    "CACHE_DIR",
    "RESULTS_DIR",
    "available",
    "corpus_graph_order",
    "corpus_graphs_too_large",
    "inputs_digest",
    "one_device_peak_bytes",
]
