"""Graph speed: ``hlo_go.graph.build_graph`` and ``to_graphs_tuple`` on one large module.

The module is the largest graph of the workload corpus (``hlo_go.corpus``, its
pre-fusion stage) when the corpus is importable and holds data; otherwise a
generated stand-in of the same kind: the pre-fusion HLO (XLA's optimizations
with fusion disabled, captured before scheduling) of one training step of a
2-layer LSTM language model unrolled over 384 time steps with Adam, about 56,000
nodes and 100,000 edges (32 steps, about 5,000 nodes, under ``--quick``). The
capture aborts XLA's compile right after the pre-fusion hook, so generating it
costs the lowering and XLA's optimization passes only (about 20 s); the text is
cached, gzipped, under ``benchmarks/.cache/``.

Timed interleaved (median of 5 rounds, 3 under ``--quick``): ``build_graph`` (flatten,
cost, edges, topological order, colocation, features), ``to_graphs_tuple`` (batch
and pad to the power-of-two bucket) and ``OpGraph.validate``. Targets: build ≤ 2 s,
featurize/pad ≤ 1 s on the largest graph.
"""

from __future__ import annotations

import functools
import gzip
import time
from typing import Any

from rich.console import Console

from benchmarks import CACHE_DIR
from benchmarks._timing import time_interleaved

TARGET_BUILD_S = 2.0
TARGET_PAD_S = 1.0
FULL_STEPS = 384
QUICK_STEPS = 32

_console = Console(stderr=True)


def _log(message: str) -> None:
    _console.log(message)


def build_lstm_prefusion_text(steps: int, *, layers: int = 2, hidden: int = 32) -> str:
    """Pre-fusion HLO text of a training step of an unrolled LSTM language model.

    Args:
      steps: time steps the Python loop unrolls.
      layers: stacked LSTM layers.
      hidden: hidden size (the vocabulary is 16, the batch 4).

    Returns:
      The module XLA would fuse (``hlo_go.xla.PREFUSION_COMPILER_OPTIONS``), as text.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from hlo_go.xla.hooks import capture_prefusion_lowered

    vocab, batch = 16, 4
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)

    params = {
        "layers": [
            {
                "w": normal(vocab if layer == 0 else hidden, 4 * hidden),
                "u": normal(hidden, 4 * hidden),
                "b": np.zeros(4 * hidden, np.float32),
            }
            for layer in range(layers)
        ],
        "out": normal(hidden, vocab),
    }
    tx = optax.adam(1e-3)
    opt_state = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(tx.init, params))
    xs = rng.standard_normal((steps, batch, vocab)).astype(np.float32)
    # One-hot targets: integer labels would bring gather/scatter the unfused CPU backend lacks.
    ys = np.eye(vocab, dtype=np.float32)[rng.integers(0, vocab, (steps, batch))]

    def train_step(params, opt_state, xs, ys):
        def loss_fn(p):
            h = [jnp.zeros((batch, hidden))] * layers
            c = [jnp.zeros((batch, hidden))] * layers
            loss = 0.0
            for t in range(steps):
                x = xs[t]
                for layer, lp in enumerate(p["layers"]):
                    z = x @ lp["w"] + h[layer] @ lp["u"] + lp["b"]
                    i, f, g, o = jnp.split(z, 4, axis=-1)
                    c[layer] = jax.nn.sigmoid(f) * c[layer] + jax.nn.sigmoid(i) * jnp.tanh(g)
                    h[layer] = jax.nn.sigmoid(o) * jnp.tanh(c[layer])
                    x = h[layer]
                loss = loss + optax.softmax_cross_entropy(x @ p["out"], ys[t]).mean()
            return loss / steps

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    start = time.perf_counter()
    lowered = jax.jit(train_step).lower(params, opt_state, xs, ys)
    _log(f"lowered {steps} steps in {time.perf_counter() - start:.1f}s; running XLA's passes ...")
    start = time.perf_counter()
    text = capture_prefusion_lowered(lowered).to_text()
    _log(f"captured the pre-fusion module in {time.perf_counter() - start:.1f}s")
    return text


def _generated_module(steps: int) -> tuple[Any, dict[str, Any]]:
    """The generated stand-in, from the cache or freshly built (and then cached)."""
    import jax

    from hlo_go.hlo import parse_hlo

    path = CACHE_DIR / f"graph_lstm{steps}_prefusion_jax{jax.__version__}.hlo.gz"
    info: dict[str, Any] = {
        "module": f"lstm2x{steps} unrolled train step, pre-fusion (generated)",
        "cache": str(path),
    }
    if path.exists():
        _log(f"using cached module {path}")
        text = gzip.decompress(path.read_bytes()).decode()
        info["cached"] = True
    else:
        start = time.perf_counter()
        text = build_lstm_prefusion_text(steps)
        info.update(cached=False, generate_s=round(time.perf_counter() - start, 2))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(gzip.compress(text.encode(), compresslevel=6))
        tmp.replace(path)
        _log(f"cached at {path}")
    return parse_hlo(text), info


def _info_size(info: Any) -> int | None:
    """The pre-fusion graph's node count from a corpus index entry (instructions as a proxy)."""
    if not isinstance(info, dict):
        return None
    stage = info.get("stages", {}).get("prefusion", {})
    for source in (stage, info):
        for key in ("nodes", "entry_instructions", "instructions"):
            value = source.get(key) if isinstance(source, dict) else None
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _corpus_module(quick: bool) -> tuple[Any, dict[str, Any]] | None:
    """The corpus's largest graph (smallest under ``quick``), or None without a corpus."""
    try:
        from hlo_go import corpus  # type: ignore[attr-defined]

        names = list(corpus.names())
        sizes = {name: _info_size(corpus.info(name)) for name in names}
    except Exception as error:  # no corpus yet, or a different API
        _log(f"no usable hlo_go.corpus ({type(error).__name__}: {error}); generating a module")
        return None
    known = {name: size for name, size in sizes.items() if size is not None}
    if not known:
        _log("hlo_go.corpus gives no graph sizes; generating a module")
        return None
    pick = min if quick else max
    name = pick(known, key=known.__getitem__)
    _log(f"corpus graph {name!r} ({known[name]:,} nodes per its index)")
    return corpus.load(name, "prefusion"), {"module": f"corpus {name}, pre-fusion"}


def run(*, quick: bool = False) -> dict[str, Any]:
    """Times ``build_graph``, ``to_graphs_tuple`` and ``validate`` on one large module.

    Args:
      quick: a small module (the corpus's smallest graph, or 32 unrolled steps) and
        3 rounds.

    Returns:
      Rows (one per timed step: median/min/max seconds) and headline numbers: node,
      edge and feature counts, the padded bucket, both medians, and whether they
      meet the targets (build ≤ 2 s, pad ≤ 1 s).
    """
    from hlo_go.graph import build_graph, to_graphs_tuple

    found = _corpus_module(quick)
    module, source = (
        found if found is not None else _generated_module(QUICK_STEPS if quick else FULL_STEPS)
    )
    graph = build_graph(module, validate=True)
    padded = to_graphs_tuple(graph)
    _log(f"graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges; timing")

    timings = time_interleaved(
        {
            "build_graph": functools.partial(build_graph, module),
            "to_graphs_tuple": functools.partial(to_graphs_tuple, graph),
            "validate": graph.validate,
        },
        repeats=3 if quick else 5,
        warmup=1,
        progress=_log,
    )
    rows = [
        {
            "step": name,
            "median_s": t.median,
            "min_s": t.min,
            "max_s": t.max,
            "nodes/s": graph.num_nodes / t.median,
            "repeats": len(t.samples),
            "samples_s": list(t.samples),
        }
        for name, t in timings.items()
    ]
    build_s = timings["build_graph"].median
    pad_s = timings["to_graphs_tuple"].median
    return {
        "title": f"build + pad one OpGraph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges",
        "rows": rows,
        **source,
        "instructions": module.instruction_count,
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "control_edges": int(graph.control_senders.shape[0]),
        "features": graph.num_features,
        "bucket_nodes": int(padded.nodes["features"].shape[0]),
        "bucket_edges": int(padded.senders.shape[0]),
        "build_median_s": build_s,
        "pad_median_s": pad_s,
        "target_build_s": TARGET_BUILD_S,
        "target_pad_s": TARGET_PAD_S,
        "meets_target": build_s <= TARGET_BUILD_S and pad_s <= TARGET_PAD_S,
    }
