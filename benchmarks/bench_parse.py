"""Parse speed: ``hlo_go.hlo.parse_hlo`` against XLA's own C++ parser.

The input is the optimized HLO text of one training step of a deep ResNet-like
Flax CNN (a stack of small residual conv/BatchNorm blocks, Adam): 48 blocks give
about 100,000 instructions and 14 MB of text (8 blocks, about 9,000 instructions,
under ``--quick``). Compiling it takes about half a minute, so the text is cached,
gzipped, under ``benchmarks/.cache/`` keyed by the JAX version and block count.

Both parsers are timed interleaved on the same string (median of >= 5 calls
each). The target is ``parse_hlo`` at 12 MB/s or more.
"""

from __future__ import annotations

import functools
import gzip
import re
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from benchmarks import CACHE_DIR
from benchmarks._timing import ratio, time_interleaved

TARGET_MB_PER_S = 12.0
FULL_BLOCKS = 48
QUICK_BLOCKS = 8

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = ", re.M)

_console = Console(stderr=True)


def _log(message: str) -> None:
    _console.log(message)


def count_instructions(text: str) -> int:
    """Instructions in HLO text as XLA prints it (one per line, ``name = ...``)."""
    return len(_INSTRUCTION.findall(text))


def build_cnn_train_step_text(num_blocks: int) -> str:
    """Optimized HLO text of a training step of a ResNet-like CNN with ``num_blocks`` blocks.

    Each block is conv → BatchNorm → ReLU → conv → BatchNorm, plus a residual add
    and a ReLU, on a 2x8x8x8 activation; the step computes a softmax
    cross-entropy loss, its gradient, and an Adam update. Parameters are made
    with ``jax.eval_shape`` and NumPy, so building costs one compile.
    """
    import flax.linen as nn
    import jax
    import numpy as np
    import optax

    class Block(nn.Module):
        channels: int

        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            y = nn.Conv(self.channels, (3, 3), use_bias=False)(x)
            y = nn.relu(nn.BatchNorm(use_running_average=False, momentum=0.9)(y))
            y = nn.Conv(self.channels, (3, 3), use_bias=False)(y)
            y = nn.BatchNorm(use_running_average=False, momentum=0.9)(y)
            return nn.relu(x + y)

    class ResNet(nn.Module):
        blocks: int
        channels: int = 8
        classes: int = 10

        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = nn.Conv(self.channels, (3, 3))(x)
            for _ in range(self.blocks):
                x = Block(self.channels)(x)
            return nn.Dense(self.classes)(x.mean(axis=(1, 2)))

    model = ResNet(num_blocks)
    images = np.random.default_rng(0).standard_normal((2, 8, 8, 3)).astype(np.float32)
    labels = np.array([1, 7], dtype=np.int32)
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), images)
    rng = np.random.default_rng(1)
    variables = jax.tree.map(lambda s: (0.1 * rng.standard_normal(s.shape)).astype(s.dtype), shapes)
    tx = optax.adam(1e-3)
    opt_state = jax.tree.map(
        lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(tx.init, variables["params"])
    )

    def train_step(params, batch_stats, opt_state, images, labels):
        def loss_fn(params):
            logits, updates = model.apply(
                {"params": params, "batch_stats": batch_stats},
                images,
                mutable=["batch_stats"],
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
            return loss, updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    start = time.perf_counter()
    lowered = jax.jit(train_step).lower(
        variables["params"], variables["batch_stats"], opt_state, images, labels
    )
    _log(f"lowered in {time.perf_counter() - start:.1f}s; compiling {num_blocks} blocks ...")
    start = time.perf_counter()
    text = lowered.compile().as_text()
    _log(f"compiled in {time.perf_counter() - start:.1f}s")
    return text


def load_module_text(num_blocks: int) -> tuple[str, dict[str, Any]]:
    """The benchmark's HLO text, from the cache or freshly built (and then cached).

    Returns:
      ``(text, info)`` where ``info`` says whether the cache was used, the cache
      path, and the build time in seconds when the text was built.
    """
    import jax

    path = CACHE_DIR / f"parse_resnet{num_blocks}_jax{jax.__version__}.hlo.gz"
    if path.exists():
        _log(f"using cached module {path}")
        return gzip.decompress(path.read_bytes()).decode(), {"cached": True, "cache": str(path)}
    _log(f"building a {num_blocks}-block CNN training step (not cached yet) ...")
    start = time.perf_counter()
    text = build_cnn_train_step_text(num_blocks)
    build_s = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(text.encode(), compresslevel=6))
    tmp.replace(path)
    _log(f"built in {build_s:.1f}s, cached at {path}")
    return text, {"cached": False, "cache": str(path), "build_s": round(build_s, 2)}


def _roundtrip_check(parse: Callable[[str], Any], text: str, instructions: int) -> dict[str, Any]:
    """Prints our parse back and has XLA's parser read it; counts must agree."""
    from hlo_go.xla.bridge import xla_accepts

    module = parse(text)
    start = time.perf_counter()
    printed = module.to_text()
    to_text_s = time.perf_counter() - start
    accepted, message = xla_accepts(printed, timeout_s=600)
    return {
        "roundtrip_xla_accepts": accepted,
        "roundtrip_instructions_match": count_instructions(printed) == instructions,
        "to_text_s": round(to_text_s, 4),
        **({"roundtrip_error": message[:500]} if not accepted else {}),
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Times ``parse_hlo`` and XLA's parser on the same large module.

    Args:
      quick: use the small module (about 9,000 instructions) and 3 repeats.

    Returns:
      Rows (one per parser: median/min/max seconds, MB/s) and headline numbers:
      size, instruction count, both medians and speeds, the ratio ours / XLA,
      and whether ``parse_hlo`` meets the 12 MB/s target.
    """
    from hlo_go.hlo import parse_hlo
    from hlo_go.xla.bridge import xla_parse

    num_blocks = QUICK_BLOCKS if quick else FULL_BLOCKS
    repeats = 3 if quick else 5
    text, source = load_module_text(num_blocks)
    size_mb = len(text.encode()) / 1e6
    instructions = count_instructions(text)
    _log(f"module: {size_mb:.2f} MB, {instructions:,} instructions; timing {repeats} rounds")

    timings = time_interleaved(
        {"hlo_go": functools.partial(parse_hlo, text), "xla": functools.partial(xla_parse, text)},
        repeats=repeats,
        warmup=1,
        progress=_log,
    )
    ours, xla = timings["hlo_go"], timings["xla"]
    rows = [
        {
            "parser": name,
            "median_s": t.median,
            "min_s": t.min,
            "max_s": t.max,
            "MB/s": size_mb / t.median,
            "repeats": len(t.samples),
            "samples_s": list(t.samples),
        }
        for name, t in timings.items()
    ]
    ours_mb_s = size_mb / ours.median
    return {
        "title": f"parse {size_mb:.1f} MB / {instructions:,} instructions of optimized HLO",
        "rows": rows,
        "module": f"resnet{num_blocks} train step, optimized",
        "size_mb": round(size_mb, 3),
        "instructions": instructions,
        "ours_median_s": ours.median,
        "xla_median_s": xla.median,
        "ours_mb_per_s": ours_mb_s,
        "xla_mb_per_s": size_mb / xla.median,
        "ratio_ours_over_xla": ratio(ours, xla),
        "target_mb_per_s": TARGET_MB_PER_S,
        "meets_target": ours_mb_s >= TARGET_MB_PER_S,
        **source,
        **_roundtrip_check(parse_hlo, text, instructions),
    }
