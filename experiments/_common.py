"""What every experiment script shares: arguments, graphs, training settings and outputs.

Each script (``placement``, ``generalization``, ``multitask``, ``convergence``,
``measured``) runs as ``python experiments/NAME.py [--quick] [--out DIR]`` or
``python -m experiments.NAME``; it writes ``DIR/NAME.json`` (``NAME.quick.json`` with
``--quick``), a markdown table ``NAME.md`` and its plots, and prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"

PRIOR_BIAS = 3.0
"""Fresh GO-one parameters lean toward one device / fuse everything legal (as in
``benchmarks/bench_rl.py``; see :class:`hlo_go.rl.TrainConfig`)."""


def parser(description: str) -> argparse.ArgumentParser:
    """The arguments every experiment takes: ``--quick``, ``--out``, ``--seed``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a CI-sized run (minutes)")
    p.add_argument(
        "--out", type=Path, default=RESULTS_DIR, help="results folder (default experiments/results)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    return p


def add_teacher_store(p: argparse.ArgumentParser) -> None:
    """``--store``: the resumable teacher store (default ``~/.cache/hlo-go/teachers``)."""
    p.add_argument(
        "--store",
        type=Path,
        default=Path.home() / ".cache" / "hlo-go" / "teachers",
        help="teacher store (resumable)",
    )


def apply_quick(
    p: argparse.ArgumentParser, args: argparse.Namespace, quick: dict[str, Any]
) -> None:
    """With ``--quick``, each setting of ``quick`` left at its default takes its quick value."""
    if args.quick:
        for name, value in quick.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)


def log(name: str, message: str) -> None:
    """A timestamped progress line."""
    print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", flush=True)


def load_graphs(names: Sequence[str]) -> dict[str, Any]:
    """Corpus graphs by name (an HLO file path works too): name -> OpGraph."""
    from hlo_go.hlo.parser import HloParseError
    from hlo_go.sources import load_graph

    try:
        return {name: load_graph(name)[1] for name in dict.fromkeys(names)}
    except (FileNotFoundError, HloParseError) as error:  # a clear message, not a traceback
        raise SystemExit(f"error: {error}") from None


def select_graphs(
    names: Sequence[str] | None, *, quick: bool, full: Sequence[str], quick_names: Sequence[str]
) -> dict[str, Any]:
    """The graphs an experiment runs on: ``names`` given on the command line, else the
    CI-sized :func:`quick_graphs` named ``quick_names`` with ``--quick``, else the corpus
    graphs ``full``."""
    if names:
        return load_graphs(names)
    if quick:
        return {k: v for k, v in quick_graphs().items() if k in quick_names}
    return load_graphs(full)


def family(name: str) -> str:
    """A corpus graph's model family (the file stem for other inputs)."""
    from hlo_go import corpus

    try:
        return str(corpus.info(name)["family"])
    except (KeyError, ValueError, FileNotFoundError):
        return Path(name).stem


def train_config(*, quick: bool, seed: int, **changes: Any) -> Any:
    """The GO training settings of the experiments (``TrainConfig`` with the prior of
    :data:`PRIOR_BIAS`, no progress bar, no periodic checkpoints)."""
    from hlo_go.gonet import PolicyConfig
    from hlo_go.rl import TrainConfig

    config = TrainConfig(
        progress=False, eval_every=5, checkpoint_every=0, prior_bias=PRIOR_BIAS, seed=seed
    )
    if quick:  # a small policy compiles in seconds rather than a minute
        config = config.replace(
            samples=4,
            ppo=dataclasses.replace(config.ppo, epochs=1),
            policy=PolicyConfig(hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2),
        )
    return config.replace(**changes) if changes else config


def curve_of(history: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """GO training's best-so-far curve from its metric rows."""
    return {
        "step": [int(r["step"]) for r in history],
        "wall_s": [float(r["wall_s"]) for r in history],
        "best_step_time": [float(r["best_step_time"]) for r in history],
    }


def time_to_reach(seconds: Sequence[float], values: Sequence[float], target: float) -> float | None:
    """The first time a best-so-far curve is at or below ``target`` (None if never)."""
    for t, v in zip(seconds, values, strict=True):
        if v <= target * (1 + 1e-9):
            return float(t)
    return None


def thin(curve: dict[str, Sequence[float]], points: int = 400) -> dict[str, list[float]]:
    """A long curve (name -> equally long columns) cut to about ``points`` evenly spaced
    entries, the last one kept."""
    length = len(next(iter(curve.values()), []))
    keep = list(range(0, length, max(1, length // points)))
    if length and keep[-1] != length - 1:
        keep.append(length - 1)
    return {name: [column[i] for i in keep] for name, column in curve.items()}


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean (None when empty)."""
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean (None when empty)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(values)) if values else None


def median(values: Sequence[float]) -> float | None:
    """Median (None when empty)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(values)) if values else None


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """Rows (dicts with the same keys) as a GitHub markdown table."""
    if not rows:
        return "_no rows_\n"
    columns = [k for k in rows[0] if not isinstance(rows[0][k], list | dict)]

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_outputs(
    name: str,
    result: dict[str, Any],
    *,
    out: Path,
    quick: bool,
    argv: Sequence[str] | None,
    began: float,
) -> Path:
    """Writes ``out/NAME[.quick].json`` (result + run metadata + the command) and
    ``out/NAME[.quick].md`` (title, headline numbers, table), prints the table, and returns
    the JSON's path."""
    from rich.console import Console

    from benchmarks._report import print_result, write_result

    suffix = ".quick" if quick else ""
    args = list(sys.argv[1:] if argv is None else argv)
    result = {
        **result,
        "plots": [Path(p).name for p in result.get("plots", [])],  # beside the JSON
        "command": " ".join(["python", f"experiments/{name}.py", *args]),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    path = out / f"{name}{suffix}.json"
    write_result(path, name, result, quick=quick)
    headline = {
        k: v
        for k, v in result.items()
        if k not in ("rows", "title", "command") and isinstance(v, int | float | str | bool)
    }
    md = [f"# {result.get('title', name)}", "", f"`{result['command']}`", ""]
    md += [
        f"- **{k}**: {v:.4g}" if isinstance(v, float) else f"- **{k}**: {v}"
        for k, v in headline.items()
    ]
    md += ["", markdown_table(result.get("rows", []))]
    for plot in result.get("plots", []):
        md.append(f"![{Path(plot).stem}]({plot})")
    (out / f"{name}{suffix}.md").write_text("\n".join(md) + "\n")
    print_result(Console(), name, result)
    return path


def save_figure(fig: Any, path: Path) -> str:
    """Lays out, writes (110 dpi) and closes a matplotlib figure; returns its path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_path(out: Path, name: str, quick: bool) -> Path:
    """Where a plot of an experiment goes (``.quick`` before the extension in quick mode)."""
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{name}{'.quick' if quick else ''}.png"


# -- CI-sized graphs: three tiny training steps of different "families" -------------------


def _mlp_step(params: dict[str, Any], x: Any, y: Any) -> Any:
    import jax
    import jax.numpy as jnp

    def loss(p: dict[str, Any]) -> Any:
        h = jnp.tanh(x @ p["w0"])
        h = jnp.tanh(h @ p["w1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def _attention_step(params: dict[str, Any], x: Any) -> Any:
    import jax
    import jax.numpy as jnp

    def loss(p: dict[str, Any]) -> Any:
        q, k, v = x @ p["q"], x @ p["k"], x @ p["v"]
        att = jax.nn.softmax(q @ k.swapaxes(-1, -2) / 8.0, axis=-1)
        out = (att @ v) @ p["o"] + x
        return jnp.mean(jax.nn.gelu(out @ p["f"]) ** 2)

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def quick_programs() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """CI-sized training steps: name -> ``(function, example arguments)``."""
    import jax.numpy as jnp

    f32 = jnp.float32
    mlp = (
        {"w0": jnp.ones((64, 128), f32) / 8, "w1": jnp.ones((128, 128), f32) / 11,
         "w2": jnp.ones((128, 16), f32) / 11},
        jnp.ones((32, 64), f32),
        jnp.zeros((32, 16), f32),
    )  # fmt: skip
    attention = (
        {name: jnp.ones((64, 64), f32) / 8 for name in ("q", "k", "v", "o", "f")},
        jnp.ones((4, 32, 64), f32),
    )
    return {"mlp": (_mlp_step, mlp), "attention": (_attention_step, attention)}


def quick_graphs() -> dict[str, Any]:
    """CI-sized graphs (name -> OpGraph): the bundled CNN training step and the pre-fusion
    modules of :func:`quick_programs` (an MLP and an attention layer)."""
    import jax

    from hlo_go.examples import example_path
    from hlo_go.graph import build_graph
    from hlo_go.hlo import load_hlo
    from hlo_go.xla.hooks import capture_prefusion_lowered

    graphs = {"cnn": build_graph(load_hlo(example_path("cnn_train_step")))}
    for name, (fn, args) in quick_programs().items():
        graphs[name] = build_graph(capture_prefusion_lowered(jax.jit(fn).lower(*args)))
    return graphs
