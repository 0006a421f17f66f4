"""Simulator speed: ``hlo_go.sim.simulate`` and ``simulate_batch`` on the largest graphs.

Graphs: the largest corpus graph (pre-fusion stage) and a generated 80,000-node graph,
the pre-fusion HLO of a 2-layer LSTM language model training step unrolled over 560
time steps (cached under ``benchmarks/.cache/``; about 40 s to generate the first
time). Under ``--quick``: the smallest corpus graph only.

Decisions, on each graph:

* ``1 device``: :meth:`Decisions.default` (one device, FIFO, no fusion);
* ``1 device, fused``: every node asks for fusion (priority 1);
* ``8 devices``: the target configuration, with fusion, scheduling and placement: the
  topological order cut into 8 contiguous blocks with 10% of the nodes moved to random
  devices (colocation respected), random schedule priorities, and random fusion
  priorities on 70% of the nodes, on ``v100x8``.

Each is timed warm (the graph's adjacency and per-node costs cached, as when a search
or a policy scores many decisions on one graph) and, for ``8 devices``, cold (caches
cleared before every call). Targets: ≥ 1,000,000 simulated nodes per second
single-threaded (≤ 80 ms for 80,000 nodes with fusion, scheduling and placement on 8
devices), and ``simulate_batch`` of 32 candidates on the largest corpus graph ≤ 2 s.

Implementation choice: the same code runs compiled by numba or as plain Python
(``HLO_GO_NO_NUMBA=1``); the benchmark times the plain-Python path in a subprocess on
a mid-size corpus graph to report the speedup that justifies numba.
"""

from __future__ import annotations

import functools
import gzip
import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
from rich.console import Console

from benchmarks import CACHE_DIR
from benchmarks._timing import time_interleaved

TARGET_NODES_PER_S = 1_000_000
TARGET_80K_S = 0.080
TARGET_BATCH32_S = 2.0
LSTM_STEPS = 560
BATCH = 32
CLUSTER = "v100x8"

_console = Console(stderr=True)


def _log(message: str) -> None:
    _console.log(message)


def eight_device_decisions(graph: Any, seed: int, devices: int = 8) -> Any:
    """The ``8 devices`` configuration of the module docstring."""
    from hlo_go.decisions import Decisions

    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    position = np.empty(n, np.int64)
    position[graph.topo_order] = np.arange(n)
    placement = (position * devices // max(n, 1)).astype(np.int32)
    moved = rng.random(n) < 0.1
    placement[moved] = rng.integers(0, devices, int(moved.sum()))
    placement = placement[graph.colocation_group]
    fusion = np.where(rng.random(n) < 0.7, rng.random(n), 0.0).astype(np.float32)
    return Decisions(placement, rng.random(n).astype(np.float32), fusion)


def _corpus_graphs() -> dict[str, int]:
    try:
        from hlo_go import corpus

        return {
            name: int(corpus.info(name)["stages"]["prefusion"]["nodes"]) for name in corpus.names()
        }
    except Exception as error:  # no corpus
        _log(f"no usable corpus ({type(error).__name__}: {error})")
        return {}


def _lstm_graph(steps: int) -> tuple[Any, str]:
    import jax

    from benchmarks.bench_graph import build_lstm_prefusion_text
    from hlo_go.graph import build_graph
    from hlo_go.hlo import parse_hlo

    path = CACHE_DIR / f"sim_lstm{steps}_prefusion_jax{jax.__version__}.hlo.gz"
    if path.exists():
        text = gzip.decompress(path.read_bytes()).decode()
    else:
        _log(f"generating the {steps}-step LSTM (cached afterwards at {path}) ...")
        text = build_lstm_prefusion_text(steps)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(gzip.compress(text.encode(), compresslevel=6))
        tmp.replace(path)
    return build_graph(parse_hlo(text)), f"lstm2x{steps} unrolled train step (generated)"


def _clear_caches() -> None:
    # The modules, not the functions of the same names the packages re-export.
    for module in ("hlo_go.decisions.adjacency", "hlo_go.sim.simulate"):
        importlib.import_module(module)._CACHE.clear()


_PYTHON_TIMER = """
import json, sys, time
import numpy as np
from hlo_go import corpus
from hlo_go.graph import build_graph
from hlo_go.sim import get_cluster, simulate
from benchmarks.bench_sim import eight_device_decisions
graph = build_graph(corpus.load(sys.argv[1], "prefusion"))
decisions = eight_device_decisions(graph, 0)
cluster = get_cluster(sys.argv[2])
start = time.perf_counter()
result = simulate(graph, cluster, decisions)
print(json.dumps({"seconds": time.perf_counter() - start, "step_time": result.step_time}))
"""


def _time_plain_python(name: str) -> dict[str, Any] | None:
    """Times one ``8 devices`` simulate of a corpus graph without numba, in a subprocess."""
    env = {**os.environ, "HLO_GO_NO_NUMBA": "1"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PYTHON_TIMER, name, CLUSTER],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as error:
        _log(f"plain-Python timing failed: {error}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(*, quick: bool = False) -> dict[str, Any]:
    """Times the simulator on the largest graphs.

    Args:
      quick: the smallest corpus graph only, fewer repeats, no 80k graph, batch of 4.

    Returns:
      Rows (graph × configuration: median/min/max seconds, nodes/s) and headline numbers:
      nodes/s of the target configuration, its time on the 80k graph, the batch time, the
      plain-Python comparison, and whether the targets are met.
    """
    from hlo_go import corpus
    from hlo_go.decisions import Decisions, fusion_groups
    from hlo_go.graph import build_graph
    from hlo_go.sim import HAVE_NUMBA, get_cluster, simulate, simulate_batch

    cluster = get_cluster(CLUSTER)
    sizes = _corpus_graphs()
    graphs: dict[str, tuple[Any, str]] = {}
    if sizes:
        pick = min(sizes, key=sizes.__getitem__) if quick else max(sizes, key=sizes.__getitem__)
        graphs["largest corpus" if not quick else "smallest corpus"] = (
            build_graph(corpus.load(pick, "prefusion")),
            f"corpus {pick}, pre-fusion",
        )
    if not quick:
        graphs["80k"] = _lstm_graph(LSTM_STEPS)
    repeats = 3 if quick else 7
    rows: list[dict[str, Any]] = []
    headline: dict[str, Any] = {}
    for label, (graph, source) in graphs.items():
        n = graph.num_nodes
        _log(f"{label}: {source}, {n:,} nodes, {graph.num_edges:,} edges")
        eight = eight_device_decisions(graph, 0)
        one = Decisions.default(graph)
        fused = one._replace(fusion_priority=np.ones(n, np.float32))
        for d in (one, fused, eight):
            simulate(graph, cluster, d)  # compile / warm the caches

        def cold(d: Any = eight, g: Any = graph) -> Any:
            _clear_caches()
            return simulate(g, cluster, d)

        configs = {
            "1 device": functools.partial(simulate, graph, cluster, one),
            "1 device, fused": functools.partial(simulate, graph, cluster, fused),
            "8 devices": functools.partial(simulate, graph, cluster, eight),
            "8 devices, cold": cold,
            "8 devices: fusion grouping only": functools.partial(
                fusion_groups, graph, eight.placement, eight.fusion_priority
            ),
        }
        timings = time_interleaved(configs, repeats=repeats, warmup=1, progress=_log)
        result = simulate(graph, cluster, eight)
        for name, t in timings.items():
            rows.append(
                {
                    "graph": label,
                    "nodes": n,
                    "config": name,
                    "median_s": t.median,
                    "min_s": t.min,
                    "max_s": t.max,
                    "nodes/s": n / t.median,
                    "repeats": len(t.samples),
                    "samples_s": list(t.samples),
                }
            )
        key = "80k" if label == "80k" else "corpus"
        headline[f"{key}_graph"] = source
        headline[f"{key}_nodes"] = n
        headline[f"{key}_8dev_s"] = timings["8 devices"].median
        headline[f"{key}_8dev_cold_s"] = timings["8 devices, cold"].median
        headline[f"{key}_8dev_nodes_per_s"] = n / timings["8 devices"].median
        headline[f"{key}_8dev_kernels"] = result.num_kernels
        headline[f"{key}_8dev_transfers"] = result.timeline.num_transfers

    if sizes:
        graph, source = next(iter(graphs.values()))
        count = 4 if quick else BATCH
        candidates = [eight_device_decisions(graph, seed) for seed in range(count)]
        simulate_batch(graph, cluster, candidates[:2])
        samples = []
        for _ in range(2 if quick else 3):
            start = time.perf_counter()
            simulate_batch(graph, cluster, candidates)
            samples.append(time.perf_counter() - start)
        batch_s = float(np.median(samples))
        rows.append(
            {
                "graph": next(iter(graphs)),
                "nodes": graph.num_nodes,
                "config": f"simulate_batch x{count}",
                "median_s": batch_s,
                "min_s": min(samples),
                "max_s": max(samples),
                "nodes/s": count * graph.num_nodes / batch_s,
                "repeats": len(samples),
                "samples_s": samples,
            }
        )
        headline["batch_candidates"] = count
        headline["batch_s"] = batch_s

        # Plain Python (no numba) on a mid-size graph, for the implementation choice.
        mid = min(
            (name for name, size in sizes.items() if size >= (1000 if quick else 4000)),
            key=sizes.__getitem__,
            default=None,
        )
        if mid is not None and HAVE_NUMBA:
            mid_graph = build_graph(corpus.load(mid, "prefusion"))
            decisions = eight_device_decisions(mid_graph, 0)
            simulate(mid_graph, cluster, decisions)
            compiled = time_interleaved(
                {"numba": functools.partial(simulate, mid_graph, cluster, decisions)},
                repeats=repeats,
                warmup=1,
            )["numba"].median
            _log(f"timing plain Python on {mid} ({mid_graph.num_nodes:,} nodes) ...")
            plain = _time_plain_python(mid)
            if plain is not None:
                headline["python_graph"] = mid
                headline["python_nodes"] = mid_graph.num_nodes
                headline["python_8dev_s"] = plain["seconds"]
                headline["numba_8dev_s"] = compiled
                headline["numba_speedup"] = plain["seconds"] / compiled
    nodes_per_s = headline.get("80k_8dev_nodes_per_s", headline.get("corpus_8dev_nodes_per_s", 0))
    meets = nodes_per_s >= TARGET_NODES_PER_S
    if "80k_8dev_s" in headline:
        meets &= headline["80k_8dev_s"] <= TARGET_80K_S
    if "batch_s" in headline and not quick:
        meets &= headline["batch_s"] <= TARGET_BATCH32_S
    return {
        "title": f"simulate on {CLUSTER}: nodes/s (warm caches unless 'cold')",
        "rows": rows,
        "numba": HAVE_NUMBA,
        **headline,
        "target_nodes_per_s": TARGET_NODES_PER_S,
        "target_80k_s": TARGET_80K_S,
        "target_batch32_s": TARGET_BATCH32_S,
        "meets_target": bool(meets),
    }
