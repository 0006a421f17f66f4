"""Per-graph measurements on a pool of pinned cores, resumable through a partial file.

The measuring benchmarks (lowering, headroom, search_learned) time each corpus graph in a
process of its own pinned to one core (:func:`hlo_go.xla.timing.in_pinned_process`), as
many graphs at a time as they have cores, and keep every finished graph in a partial
results file so that a cut run resumes. A graph whose process died (a signal, such as a
crash inside XLA's compile) is measured once more at the end, alone.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

DIED = (
    "the measuring process died (a signal: see dmesg; XLA's compile overflowing its "
    "stack, or out of memory)"
)


def reusable(
    per_graph: dict[str, dict[str, Any]], *, version: int, **identity: object
) -> dict[str, dict[str, Any]]:
    """The cached graphs a resumed run keeps: measured at results ``version`` and with the
    same ``identity`` fields (e.g. ``policy_sha256``, the digest of the file they were
    measured with)."""
    return {
        g: v
        for g, v in per_graph.items()
        if v.get("version") == version and all(v.get(k) == x for k, x in identity.items())
    }


def measure_pinned(
    names: Sequence[str],
    measure: Callable[..., dict[str, Any]],
    *,
    per_graph: dict[str, dict[str, Any]],
    cache: Path,
    version: int,
    log: Callable[[str], None],
    workers: int = 2,
    deadline_s: float | None = None,
    retry_died: bool = True,
    **kwargs: Any,
) -> None:
    """``measure(name, **kwargs)`` for each graph, each in a process pinned to a core.

    Args:
      names: the graphs to measure.
      measure: a picklable function returning the graph's result (a dict).
      per_graph: graph -> result; each result (or its failure) goes in as it comes.
      cache: the partial results file, rewritten with ``per_graph`` after each graph.
      version: the benchmark's results version, put in a failed graph's row.
      log: the benchmark's progress log.
      workers: graphs at a time, each on one of the last ``workers`` cores.
      deadline_s: start no graph after this many seconds (None: no limit).
      retry_died: measure a graph whose process died once more, after the others, with
        nothing else of this call running.
      **kwargs: passed to ``measure``.

    A graph that cannot be measured becomes ``{"graph", "error", "rows": [], "version"}``.
    """
    from hlo_go.xla.timing import in_pinned_process

    cores = sorted(os.sched_getaffinity(0))[-max(1, workers) :]
    free: queue.SimpleQueue[int] = queue.SimpleQueue()
    for cpu in cores:  # each running graph holds a core of its own until it is done
        free.put(cpu)
    lock = threading.Lock()
    started = time.perf_counter()
    died: list[str] = []

    def one(name: str) -> None:
        if deadline_s is not None and time.perf_counter() - started > deadline_s:
            log(f"{name}: skipped (time budget of {deadline_s / 60:.0f} min spent)")
            return
        cpu = free.get()
        log(f"{name}: start on core {cpu}")
        try:
            measured = in_pinned_process(measure, name, cpu=cpu, **kwargs)
        except Exception as error:  # a graph that cannot be measured is reported, not fatal
            message = f"{type(error).__name__}: {error}"
            if isinstance(error, BrokenProcessPool):
                message = DIED
                with lock:
                    died.append(name)
            log(f"{name}: failed: {message}")
            measured = {"graph": name, "error": message, "rows": [], "version": version}
        finally:
            free.put(cpu)
        with lock:
            per_graph[name] = measured
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(per_graph, indent=1))
        log(f"{name}: done in {measured.get('seconds', 0):.0f} s")

    with ThreadPoolExecutor(max_workers=len(cores)) as pool:
        list(pool.map(one, names))
    if retry_died and died:
        again, died[:] = list(died), []
        log(f"measuring again, one at a time, the graphs whose process died: {', '.join(again)}")
        for name in again:
            one(name)
