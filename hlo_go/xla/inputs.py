"""Random inputs for a module's entry parameters, or for a function's abstract arguments."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np

from hlo_go.errors import HloGoWarning
from hlo_go.hlo import HloModule, Shape
from hlo_go.xla.index_bounds import index_bounds

# HLO element type -> numpy dtype.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "pred": np.dtype(bool), "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64), "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
}  # fmt: skip


class ElidedConstantsWarning(HloGoWarning):
    """HLO text whose large constants were printed as ``{...}``: XLA's parser fills them
    with placeholder values, so the module does not compute what the original model did."""


def elided_constants(module: HloModule) -> list[tuple[str, str]]:
    """``(computation, instruction)`` names of the constants printed as ``{...}``."""
    return [
        (comp.name, instr.name)
        for comp, instr in module.instructions()
        if instr.opcode == "constant" and instr.literal is not None and "..." in instr.literal
    ]


def warn_elided_constants(module: HloModule, *, stacklevel: int = 3) -> None:
    """Warns (:class:`ElidedConstantsWarning`) when ``module`` has elided constants.

    Its outputs are then those of placeholder constants: comparisons between compiles
    of the same text (and timings) still hold, but not against the original model.
    """
    elided = elided_constants(module)
    if not elided:
        return
    comp, name = elided[0]
    warnings.warn(
        f"{module.name}: {len(elided)} constant(s) printed as {{...}} (first: %{name} in "
        f"{comp}); XLA fills them with placeholder values, so outputs are not the original "
        "model's. Print the module with its large constants (XLA: "
        "--xla_dump_large_constants; jaxlib: HloPrintOptions.print_large_constants).",
        ElidedConstantsWarning,
        stacklevel=stacklevel,
    )


def _draw(
    dims: tuple[int, ...],
    dtype: np.dtype,
    rng: np.random.Generator,
    *,
    int_high: int,
    scale: float,
    positive: bool = False,
    fan_in: bool = False,
) -> np.ndarray:
    """Random values of one array: booleans fair, integers in [0, int_high) ([1, int_high)
    if ``positive``), complex and real floats N(0, scale²) (their absolute values if
    ``positive``; with ``fan_in``, see :func:`fan_in_scale`)."""
    if fan_in:
        scale = scale * fan_in_scale(dims)
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1 if positive else 0, int_high, size=dims).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (scale * (rng.standard_normal(dims) + 1j * rng.standard_normal(dims))).astype(dtype)
    values = scale * rng.standard_normal(dims)
    return (np.abs(values) if positive else values).astype(dtype)


def _inside(value: np.ndarray, bound: int, int_high: int, key: list[int]) -> np.ndarray:
    """``value`` redrawn from ``[0, bound)`` by a generator of its own (seeded by ``key``,
    so that no other draw changes) when it is an integer array and ``bound`` is below the
    ``int_high`` it was drawn under; else ``value``."""
    if bound >= int_high or not np.issubdtype(value.dtype, np.integer):
        return value
    return np.random.default_rng(key).integers(0, bound, size=value.shape).astype(value.dtype)


def fan_in_scale(dims: tuple[int, ...]) -> float:
    """``1 / sqrt(fan_in)`` for an array of rank >= 2, with ``fan_in`` the product of all
    dimensions but the last (a dense ``[in, out]`` or convolution ``HWIO`` kernel's
    inputs, as LeCun-normal initializers draw weights); 1 for scalars and vectors.

    Weights drawn at unit scale make a deep network's activations grow with depth:
    attention logits of 1e4 and more, softmaxes that saturate, float32 results that
    differ from float64 by their own size, so that no comparison of two float32
    compiles means anything. Fan-in scaled draws keep them O(1).
    """
    if len(dims) < 2:
        return 1.0
    return float(1.0 / np.sqrt(max(int(np.prod(dims[:-1])), 1)))


def random_array(
    shape: Shape, rng: np.random.Generator, *, int_high: int = 4, scale: float = 1.0
) -> np.ndarray:
    """A random array of an HLO array shape. Integers are drawn from [0, int_high) so
    that they are safe as indices, shift amounts and loop bounds; floats from
    N(0, scale²).

    Raises:
      ValueError: for tuple, token or unsupported element types.
    """
    if shape.dtype not in NUMPY_DTYPES:
        raise ValueError(f"cannot draw random inputs of element type {shape.dtype!r} ({shape})")
    dims = tuple(max(d, 0) for d in shape.dims)
    return _draw(dims, NUMPY_DTYPES[shape.dtype], rng, int_high=int_high, scale=scale)


def random_inputs(
    module: HloModule,
    *,
    seed: int = 0,
    scale: float = 1.0,
    positive: bool = False,
    fan_in: bool = False,
) -> list[np.ndarray]:
    """One random array per entry parameter, in parameter order (see :func:`random_array`).

    An integer parameter that the module uses as an index into a table of fewer than 4
    rows (:func:`~hlo_go.xla.index_bounds.index_bounds`) is drawn from ``[0, rows)``
    instead, by a generator of its own (seeded by ``seed`` and its parameter number), so
    that the other parameters' draws do not change: JAX's gathers fill NaN for an index
    out of range.

    ``positive`` draws integers from [1, 4) and floats as |N(0, scale²)|: safe for a
    training step's state (step counts divided by, variances under a square root).
    ``fan_in`` divides the scale of floats of rank >= 2 by the square root of their
    fan-in (:func:`fan_in_scale`), as initializers draw weights; with ``positive``, see
    :func:`training_inputs`.

    Raises:
      ValueError: a parameter of a tuple, token or unsupported element type (named).
    """
    rng = np.random.default_rng(seed)
    bounds = index_bounds(module)
    out = []
    for p in module.entry.parameters:
        try:
            if p.shape.dtype not in NUMPY_DTYPES:
                raise ValueError(f"unsupported element type {p.shape.dtype!r} ({p.shape})")
            dims = tuple(max(d, 0) for d in p.shape.dims)
            dtype = NUMPY_DTYPES[p.shape.dtype]
            value = _draw(
                dims, dtype, rng, int_high=4, scale=scale, positive=positive, fan_in=fan_in
            )
            if p.parameter_number in bounds:
                value = _inside(value, bounds[p.parameter_number], 4, [seed, p.parameter_number])
            out.append(value)
        except ValueError as e:
            raise ValueError(f"entry parameter {p.name!r} of {module.name!r}: {e}") from None
    return out


def training_inputs(module: HloModule, *, seed: int = 0) -> list[np.ndarray]:
    """Random inputs under which a training step computes well-conditioned values:
    :func:`random_inputs` with ``positive`` (no square root of a negative variance, no
    division by a zero step count) and ``fan_in`` (activations that stay O(1) with depth).

    The default wherever two float32 compiles of one module are compared (the MPMD
    runtime's and the SPMD partitioner's checks, pass-ordering output checks): under
    unit-scale draws the corpus' deep training steps give NaN in a third of their
    outputs and float32 errors as large as the outputs themselves, even from XLA's own
    compile (``benchmarks/README.md``, mpmd).
    """
    return random_inputs(module, seed=seed, positive=True, fan_in=True)


def random_arguments(
    abstract: Any,
    *,
    seed: int = 0,
    int_high: int = 4,
    scale: float = 1.0,
    positive: bool = False,
    leaf_bounds: Mapping[int, int] | None = None,
) -> Any:
    """Random arrays for every ``jax.ShapeDtypeStruct`` leaf of a pytree; other leaves
    (concrete arrays, Python scalars) are kept.

    Args:
      abstract: a pytree of ``jax.ShapeDtypeStruct`` and concrete values.
      seed: the random seed.
      int_high: integers are drawn from ``[0, int_high)``.
      scale: floats are drawn from N(0, scale²).
      positive: integers from [1, int_high), floats |N(0, scale²)| (see
        :func:`random_inputs`).
      leaf_bounds: exclusive upper bounds of integer leaves used as indices, by leaf
        position in ``jax.tree.leaves(abstract)`` (see :func:`leaf_index_bounds`); a
        leaf bounded below ``int_high`` is drawn from ``[0, bound)`` by a generator of
        its own, as :func:`random_inputs` draws such parameters.

    Returns:
      The pytree with random numpy arrays in place of the abstract leaves.
    """
    import jax

    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(abstract)
    bounds = leaf_bounds or {}
    drawn = []
    for position, leaf in enumerate(leaves):
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            drawn.append(leaf)
            continue
        dims, dtype = tuple(leaf.shape), np.dtype(leaf.dtype)
        value = _draw(dims, dtype, rng, int_high=int_high, scale=scale, positive=positive)
        if position in bounds:
            value = _inside(value, bounds[position], int_high, [seed, position])
        drawn.append(value)
    return jax.tree.unflatten(treedef, drawn)


def leaf_index_bounds(lowered: Any, abstract: Any) -> dict[int, int]:
    """:func:`~hlo_go.xla.index_bounds.index_bounds` of a ``jax.stages.Lowered``'s
    module, keyed by the position of each bounded argument among the leaves of
    ``abstract``, its flat arguments (JAX drops unused arguments from the module's
    parameters). The module is parsed only when ``abstract`` has an integer
    ``jax.ShapeDtypeStruct`` leaf to draw."""
    import jax

    from hlo_go.hlo import parse_hlo
    from hlo_go.xla._jaxlib import lowered_kept_arguments

    leaves = jax.tree.leaves(abstract)
    if not any(
        isinstance(leaf, jax.ShapeDtypeStruct) and np.issubdtype(np.dtype(leaf.dtype), np.integer)
        for leaf in leaves
    ):
        return {}
    module = parse_hlo(lowered.as_text(dialect="hlo"), filename="<lowered>")
    kept = lowered_kept_arguments(lowered, len(leaves))
    return {kept[k]: bound for k, bound in index_bounds(module).items() if k < len(kept)}


def has_abstract_leaves(tree: Any) -> bool:
    """Whether a pytree holds any ``jax.ShapeDtypeStruct`` leaf."""
    import jax

    return any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(tree))
