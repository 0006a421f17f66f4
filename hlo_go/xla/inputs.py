"""Random inputs for a module's entry parameters."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_go.hlo import HloModule, Shape

# HLO element type -> numpy dtype.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(bool), "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64), "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
}  # fmt: skip


def random_array(shape: Shape, rng: np.random.Generator, *, int_high: int = 4) -> np.ndarray:
    """A random array of an HLO array shape. Integers are drawn from [0, int_high) so
    that they are safe as indices, shift amounts and loop bounds; floats from N(0, 1).

    Raises:
      ValueError: for tuple, token or unsupported element types.
    """
    if shape.dtype not in NUMPY_DTYPES:
        raise ValueError(f"cannot draw random inputs of element type {shape.dtype!r} ({shape})")
    dtype = NUMPY_DTYPES[shape.dtype]
    dims = tuple(max(d, 0) for d in shape.dims)
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, int_high, size=dims).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    return rng.standard_normal(dims).astype(dtype)


def random_inputs(module: HloModule, *, seed: int = 0) -> list[np.ndarray]:
    """One random array per entry parameter, in parameter order."""
    rng = np.random.default_rng(seed)
    return [random_array(p.shape, rng) for p in module.entry.parameters]
