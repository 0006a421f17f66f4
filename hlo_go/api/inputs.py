"""The inputs of a call to :func:`hlo_go.jit`: the platform they run on, and the finite
inputs its outputs are checked on.

NaN compares equal to NaN in the output check (:func:`hlo_go.xla.outputs_match`), so a
first call whose inputs hold NaN or infinity would let any executable through: a wrong
one gives NaN outputs just as the right one does. Such inputs are replaced, for the check
and the timing only, by fresh finite arrays of the same shapes and dtypes.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

# Scale of redrawn floats: |N(0, SCALE^2)|, as the corpus' random inputs.
SCALE = 0.1


def _is_float(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return isinstance(x, float)
    return np.issubdtype(np.dtype(dtype), np.inexact) or np.dtype(dtype).name == "bfloat16"


def call_platform(tree: Any) -> str:
    """The XLA platform a call on ``tree`` runs on: that of the first JAX array's device
    (``"cpu"``, ``"cuda"``, ...), else JAX's default backend (where ``jax.jit`` puts
    NumPy and Python inputs)."""
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array):
            return next(iter(leaf.devices())).platform
    return jax.default_backend()


def has_nonfinite(tree: Any) -> bool:
    """Whether any float leaf of ``tree`` holds NaN or infinity."""
    for leaf in jax.tree.leaves(tree):
        if not _is_float(leaf):
            continue
        values = np.asarray(leaf)
        if values.dtype.name == "bfloat16":
            values = values.astype(np.float32)
        if not np.all(np.isfinite(values)):
            return True
    return False


def finite_like(tree: Any, *, seed: int = 0) -> Any:
    """``tree`` with every float leaf replaced by a finite random one of its shape, dtype
    and device (|N(0, 0.1²)|); other leaves kept.

    Args:
      tree: the call's arguments.
      seed: the random seed.
    """
    rng = np.random.default_rng(seed)

    def redraw(leaf: Any) -> Any:
        if not _is_float(leaf):
            return leaf
        if isinstance(leaf, float):
            return float(abs(rng.normal(0.0, SCALE)))
        shape, dtype = tuple(np.shape(leaf)), np.dtype(leaf.dtype)
        if np.issubdtype(dtype, np.complexfloating):
            values = rng.normal(0, SCALE, shape) + 1j * rng.normal(0, SCALE, shape)
        else:
            values = np.abs(rng.normal(0.0, SCALE, shape))
        values = np.asarray(values).astype(dtype)
        if isinstance(leaf, jax.Array):
            return jax.device_put(values, leaf.sharding)
        return values

    return jax.tree.map(redraw, tree)
