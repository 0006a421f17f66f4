"""Measured step time of a function compiled with our fusion and schedule, against
XLA's default compile, after checking that both compute the same outputs.

``measure`` ALWAYS checks outputs first (tolerance by dtype) and only then times
the two executables interleaved in one process (A B A B ...), reporting medians
and their ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.hlo import HloModule
from hlo_go.xla.fusion import apply_fusion
from hlo_go.xla.hooks import capture_prefusion_lowered
from hlo_go.xla.schedule import compile_with
from hlo_go.xla.timing import time_interleaved

# Relative and absolute tolerances by element type of the output.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "complex64": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}


class Measurement(NamedTuple):
    """A measured variant against XLA's default compile of the same function.

    Attributes:
      correct: outputs matched XLA's default within tolerance (time is None otherwise).
      time_s: median wall time of one call of the variant.
      baseline_time_s: median wall time of XLA's default compile, timed interleaved.
      spread: (min, max) of the variant's samples, seconds.
      speedup: baseline_time_s / time_s (> 1: the variant is faster).
      repeats: timed calls per configuration.
      message: why ``correct`` is False, or notes.
      order: the entry instruction order imposed, if a schedule was given.
    """

    correct: bool
    time_s: float | None
    baseline_time_s: float | None
    spread: tuple[float, float] | None
    speedup: float | None
    repeats: int
    message: str = ""
    order: list[str] | None = None


def outputs_match(got: Any, want: Any) -> tuple[bool, str]:
    """Compares two pytrees of arrays with dtype-dependent tolerances."""
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    if len(got_leaves) != len(want_leaves):
        return False, f"{len(got_leaves)} outputs, expected {len(want_leaves)}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return (
                False,
                f"output {k}: {g.dtype}{list(g.shape)} vs expected {w.dtype}{list(w.shape)}",
            )
        if np.issubdtype(w.dtype, np.inexact) or w.dtype.name == "bfloat16":
            rtol, atol = TOLERANCES.get(w.dtype.name, (1e-4, 1e-5))
            g64, w64 = (
                g.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
                w.astype(np.complex128 if np.iscomplexobj(w) else np.float64),
            )
            if not np.allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True):
                error = float(np.nanmax(np.abs(g64 - w64)))
                return (
                    False,
                    f"output {k}: max abs error {error:.3g} above rtol={rtol}, atol={atol}",
                )
        elif not np.array_equal(g, w):
            return False, f"output {k}: integer/boolean values differ"
    return True, ""


def measure(
    fn: Callable[..., Any],
    args: Sequence[Any],
    *,
    fusion: Sequence[Sequence[str]] | HloModule | None = None,
    schedule: Mapping[str, float] | None = None,
    repeats: int = 20,
    warmup: int = 2,
) -> Measurement:
    """Compiles ``fn`` with our fusion groups and schedule priorities, checks its
    outputs against ``jax.jit(fn)``, then times both interleaved.

    Args:
      fn: the function (as given to ``jax.jit``).
      args: its arguments.
      fusion: groups of pre-fusion entry instruction names (see
        :func:`hlo_go.xla.capture_prefusion`), or an already fused module; None
        leaves every instruction unfused.
      schedule: priority per entry instruction name of the fused module (higher
        runs first among ready ones); None keeps XLA's order.
      repeats: timed calls per configuration.
      warmup: untimed rounds first.

    Returns:
      A :class:`Measurement`; ``correct`` False (and no times) when outputs differ.
    """
    lowered = jax.jit(fn).lower(*args)
    baseline = lowered.compile()
    if isinstance(fusion, HloModule):
        module = fusion
    else:
        module = apply_fusion(capture_prefusion_lowered(lowered), fusion or [])
    variant, order = compile_with(lowered, module=module, priority=schedule)
    want = jax.block_until_ready(baseline(*args))
    got = jax.block_until_ready(variant(*args))
    ok, message = outputs_match(got, want)
    if not ok:
        return Measurement(False, None, None, None, None, 0, message, order)
    timings = time_interleaved(
        {
            "variant": lambda: jax.block_until_ready(variant(*args)),
            "baseline": lambda: jax.block_until_ready(baseline(*args)),
        },
        repeats=repeats,
        warmup=warmup,
    )
    v, b = timings["variant"], timings["baseline"]
    return Measurement(
        True, v.median, b.median, (v.min, v.max), b.median / v.median, repeats, "", order
    )
