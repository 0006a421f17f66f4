"""Robustness and speed of ``hlo-go eval`` (:func:`hlo_go.evaluate.evaluate`) on a
mixed directory of 50 HLO files.

The files, written to a temporary directory:

* the corpus's modules (``hlo_go.corpus``): every graph's pre-fusion stage (30, from
  432 to 58k nodes; none dropped: the whole run takes about 20 s on this host) and one
  unoptimized-stage module per family (9), copied as ``.hlo.gz``;
* 5 modules made by JAX here: an MLP training step, a small convolution, a ``lax.scan``
  RNN (a ``while`` loop), a ``fori_loop`` with a layer norm (unoptimized, as ``.hlo``,
  ``.txt`` and ``.hlo.gz``), and an attention block's optimized module (fusions, a
  scheduled module);
* 6 broken on purpose: a real module with a syntax error, an empty file, binary
  garbage, a ``.hlo.gz`` that is not gzip, a module cut in half, and an unknown opcode.

:func:`~hlo_go.evaluate.evaluate` runs over the directory with the non-search
heuristics (:func:`hlo_go.rl.compare.heuristic_names`) and the shipped GO policy
(zero-shot; ``HLO_GO_EVAL_POLICY`` names another policy or checkpoint, ``none`` leaves it
out) on ``v100x4``. Reported: files,
ok rows, error rows with their reasons, crashes (inputs without a row, or an exception
out of ``evaluate``; must be 0), whether exactly the broken files failed, total and
per-file seconds, the geometric-mean speedup of each heuristic over one device, and the
GO column against each file's best baseline (geomean; faster, equal, slower).
``--quick``: 10 files (4 small corpus graphs, 1 unoptimized module, 2 JAX modules,
3 broken). Also writes ``results/eval.png`` (the bar chart of ``hlo-go eval --out``).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from benchmarks import BENCHMARKS_DIR, RESULTS_DIR

CLUSTER = "v100x4"
BROKEN = ("syntax", "empty", "binary", "not_gzip", "truncated", "unknown_opcode")

_console = Console(stderr=True)


def _jax_modules() -> dict[str, str]:
    """File name -> HLO text of the modules made with JAX."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)

    def f32(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def mlp_step(params, x, y):
        def loss(p):
            h = jnp.tanh(x @ p["w1"] + p["b1"])
            return jnp.mean((h @ p["w2"] - y) ** 2)

        grads = jax.grad(loss)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    def conv(x, k):
        out = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME")
        return jax.nn.relu(out).mean(axis=(2, 3))

    def rnn(w, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        return jax.lax.scan(cell, jnp.zeros(xs.shape[1:]), xs)

    def loop(x):
        def body(_, v):
            mean = v.mean(-1, keepdims=True)
            return (v - mean) / jnp.sqrt(v.var(-1, keepdims=True) + 1e-5) * 1.5

        return jax.lax.fori_loop(0, 6, body, x)

    def attention(q, k, v):
        weights = jax.nn.softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=-1)
        return weights @ v

    params = {"w1": f32(16, 32), "b1": f32(32), "w2": f32(32, 4)}

    def text(fn, *args: Any, optimized: bool = False) -> str:
        lowered = jax.jit(fn).lower(*args)
        return lowered.compile().as_text() if optimized else lowered.as_text(dialect="hlo")

    return {
        "jax_mlp_step.hlo": text(mlp_step, params, f32(8, 16), f32(8, 4)),
        "jax_conv.txt": text(conv, f32(2, 3, 16, 16), f32(8, 3, 3, 3)),
        "jax_scan_rnn.hlo.gz": text(rnn, f32(16, 16), f32(12, 4, 16)),
        "jax_fori_layernorm.hlo": text(loop, f32(8, 32)),
        "jax_attention_optimized.hlo": text(attention, f32(16, 32), f32(16, 32), f32(16, 32)),
    }


def _broken(sample: str) -> dict[str, bytes]:
    """File name -> bytes of the broken files; ``sample`` is a real module's text."""
    lines = sample.splitlines(keepends=True)
    middle = len(lines) // 2
    line = next(i for i in range(middle, len(lines)) if "(" in lines[i] and "=" in lines[i])
    syntax = [*lines]
    syntax[line] = syntax[line].replace("(", " (( ", 1)
    opcode = [*lines]
    opcode[line] = re.sub(r"\b[a-z][a-z0-9-]*\(", "frobnicate(", opcode[line], count=1)
    files = {
        "broken_syntax.hlo": "".join(syntax).encode(),
        "broken_empty.hlo": b"",
        "broken_binary.hlo": bytes((i * 37 + 11) % 256 for i in range(4096)),
        "broken_not_gzip.hlo.gz": b"this is not a gzip stream\n",
        "broken_truncated.hlo": "".join(lines[: middle + 1]).encode(),
        "broken_unknown_opcode.hlo": "".join(opcode).encode(),
    }
    assert len(files) == len(BROKEN)
    return files


def write_inputs(root: Path, *, quick: bool) -> dict[str, str]:
    """Writes the benchmark's files into ``root``.

    Returns:
      File name -> kind (``"corpus"``, ``"jax"`` or ``"broken"``).
    """
    from hlo_go import corpus

    infos = {name: corpus.info(name) for name in corpus.names()}
    by_size = sorted(infos, key=lambda n: infos[n]["stages"]["prefusion"]["nodes"] or 0)
    families: dict[str, str] = {}
    for name in by_size:
        families.setdefault(infos[name]["family"], name)  # the smallest of each family
    prefusion = by_size[:4] if quick else by_size
    unoptimized = list(families.values())[: 1 if quick else None]
    kinds: dict[str, str] = {}
    for stage, names in (("prefusion", prefusion), ("unoptimized", unoptimized)):
        for name in names:
            target = root / f"{name}.{stage}.hlo.gz"
            shutil.copyfile(corpus.path(name, stage), target)
            kinds[target.name] = "corpus"
    jax_files = _jax_modules()
    for file_name in list(jax_files)[: 2 if quick else None]:
        path = root / file_name
        data = jax_files[file_name].encode()
        path.write_bytes(gzip.compress(data) if file_name.endswith(".gz") else data)
        kinds[file_name] = "jax"
    sample = corpus.text(by_size[0], "prefusion")
    broken = _broken(sample)
    for file_name in list(broken)[: 3 if quick else None]:
        (root / file_name).write_bytes(broken[file_name])
        kinds[file_name] = "broken"
    return kinds


def _policy_summary(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The GO column against each file's best baseline: geomean, wins, ties, losses."""
    ratios = [r["policy_vs_best_baseline"] for r in table if r.get("policy_vs_best_baseline")]
    if not ratios:
        return {}
    return {
        "policy_vs_best_baseline_geomean": round(float(np.exp(np.mean(np.log(ratios)))), 4),
        "policy_faster_than_best_baseline": sum(r > 1 + 1e-9 for r in ratios),
        "policy_equal_to_best_baseline": sum(abs(r - 1) <= 1e-9 for r in ratios),
        "policy_slower_than_best_baseline": sum(r < 1 - 1e-9 for r in ratios),
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs :func:`hlo_go.evaluate.evaluate` over the files; see the module docstring.

    Args:
      quick: 10 files instead of 50.

    Returns:
      Rows (one per file: kind, status, nodes, best heuristic, its speedup, seconds)
      and headline numbers (``error_reasons``: file -> reason).
    """
    from hlo_go.baselines.report import speedups
    from hlo_go.evaluate import as_baseline_rows, evaluate, plot_speedups

    policy = os.environ.get("HLO_GO_EVAL_POLICY", "default")
    policy = None if policy == "none" else policy
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        root = Path(tmp)
        kinds = write_inputs(root, quick=quick)
        _console.log(f"{len(kinds)} files in {root}; evaluating on {CLUSTER}")
        crashes = 0
        started = time.perf_counter()
        try:
            rows = evaluate([root], cluster=CLUSTER, policy=policy, progress=True)
        except Exception as error:  # what must never happen: the run itself fails
            _console.log(f"evaluate raised {type(error).__name__}: {error}")
            rows, crashes = [], 1
        total_s = time.perf_counter() - started
    by_name = {row.name: row for row in rows}
    crashes += sum(name not in by_name for name in kinds)
    table = []
    for name, kind in kinds.items():
        row = by_name.get(name)
        if row is None:
            table.append({"file": name, "kind": kind, "status": "missing"})
            continue
        best = row.method(row.best) if row.best else None
        go = next((m for m in row.methods if m.kind == "policy"), None)
        table.append(
            {
                "file": name,
                "kind": kind,
                "status": row.status,
                "nodes": row.nodes,
                "best": row.best,
                "best_speedup": None if best is None else best.speedup,
                "policy_vs_best_baseline": None if go is None else go.vs_best_baseline,
                "seconds": round(row.seconds, 3),
            }
        )
    ok = [r for r in rows if r.status == "ok"]
    # Reasons name the file by its temporary path: keep the file name.
    errors = {r.name: r.reason.replace(f"{root}{os.sep}", "") for r in rows if r.status != "ok"}
    broken = {name for name, kind in kinds.items() if kind == "broken"}
    gains = speedups(as_baseline_rows(ok))
    chart = plot_speedups(
        ok, RESULTS_DIR / f"eval{'.quick' if quick else ''}.png", title=f"hlo-go eval, {CLUSTER}"
    )
    return {
        "title": f"hlo-go eval over {len(kinds)} files on {CLUSTER} (heuristics, no search)",
        "rows": table,
        "files": len(kinds),
        "ok_rows": len(ok),
        "error_rows": len(errors),
        "crashes": crashes,
        "errors_are_exactly_the_broken_files": set(errors) == broken,
        "error_reasons": errors,
        "total_s": round(total_s, 2),
        "seconds_per_file": round(total_s / max(1, len(kinds)), 3),
        "largest_nodes": max((r.nodes or 0 for r in ok), default=0),
        "policy": policy,
        "geomean_speedup_vs_single_device": {m: round(v, 4) for m, v in gains.items()},
        **_policy_summary(table),
        "chart": str(chart.relative_to(BENCHMARKS_DIR)) if chart else None,
    }
