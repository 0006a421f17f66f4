"""Index bounds of integer parameters, and random inputs that stay inside them."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import parse_hlo
from hlo_go.xla import program
from hlo_go.xla.bridge import compile_hlo_text, run_executable
from hlo_go.xla.index_bounds import index_bounds
from hlo_go.xla.inputs import random_arguments, random_inputs


def _take(rows: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    table = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)

    def f(w: jax.Array, ids: jax.Array) -> jax.Array:
        return w * jnp.take(jnp.asarray(table), ids, axis=0)

    return f


_ARGS = (jax.ShapeDtypeStruct((16, 4), jnp.float32), jax.ShapeDtypeStruct((16,), jnp.int32))


def _texts(fn: Callable[..., jax.Array], *args: jax.ShapeDtypeStruct) -> dict[str, str]:
    lowered = jax.jit(fn).lower(*args)
    return {"unoptimized": lowered.as_text(dialect="hlo"), "optimized": lowered.compile().as_text()}


@pytest.mark.parametrize("stage", ["unoptimized", "optimized"])
def test_take_bounds_its_indices_by_the_table_rows(stage: str) -> None:
    module = parse_hlo(_texts(_take(2), *_ARGS)[stage])
    assert index_bounds(module) == {1: 2}


def test_take_along_axis_and_dynamic_slice_bounds() -> None:
    def f(x: jax.Array, idx: jax.Array, start: jax.Array) -> jax.Array:
        picked = jnp.take_along_axis(x, idx, axis=1)
        return jax.lax.dynamic_slice(picked, (0, start), (8, 2))

    args = (
        jax.ShapeDtypeStruct((8, 3), jnp.float32),
        jax.ShapeDtypeStruct((8, 5), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.int32),
    )
    module = parse_hlo(_texts(f, *args)["unoptimized"])
    # idx picks one of x's 3 columns; start a 2-wide window of picked's 5 columns.
    assert index_bounds(module) == {1: 3, 2: 4}


def test_unbounded_integers_are_absent() -> None:
    def f(x: jax.Array, n: jax.Array) -> jax.Array:
        return x * n

    args = (jax.ShapeDtypeStruct((4,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))
    assert index_bounds(parse_hlo(_texts(f, *args)["unoptimized"])) == {}


_SHARED_CALLEE = """HloModule shared

wrap {
  c = pred[4]{0} parameter(0)
  a = s32[4]{0} parameter(1)
  b = s32[4]{0} parameter(2)
  ROOT s = s32[4]{0} select(c, a, b)
}

ENTRY main {
  small = s32[4]{0} parameter(0)
  large = s32[4]{0} parameter(1)
  zero = s32[] constant(0)
  zeros = s32[4]{0} broadcast(zero), dimensions={}
  neg_s = pred[4]{0} compare(small, zeros), direction=LT
  neg_l = pred[4]{0} compare(large, zeros), direction=LT
  ws = s32[4]{0} call(neg_s, small, small), to_apply=wrap
  wl = s32[4]{0} call(neg_l, large, large), to_apply=wrap
  one = s32[] constant(1)
  ones = s32[4]{0} broadcast(one), dimensions={}
  fits_s = pred[4]{0} compare(ws, ones), direction=LE
  hundred = s32[] constant(100)
  fits_l = pred[4]{0} compare(hundred, wl), direction=GT
  ROOT t = (pred[4]{0}, pred[4]{0}) tuple(fits_s, fits_l)
}
"""


def test_a_callee_shared_by_two_calls_keeps_their_values_apart() -> None:
    # Both indices pass through the same `wrap`; each keeps its own bound.
    assert index_bounds(parse_hlo(_SHARED_CALLEE)) == {0: 2, 1: 100}


@pytest.mark.parametrize("jit", [False, True])
def test_random_inputs_stay_inside_small_tables(jit: bool) -> None:
    fn = _take(2)
    text = _texts(fn, *_ARGS)["unoptimized"]
    module = parse_hlo(text)
    w, ids = random_inputs(module, seed=5, positive=True)
    assert set(np.unique(ids)) <= {0, 1}
    expected = np.asarray(jax.jit(fn)(w, ids) if jit else fn(w, ids))
    assert not np.isnan(expected).any()
    (out,) = run_executable(compile_hlo_text(text), [w, ids])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    # Drawn as before, [1, 4) would put indices outside the table: JAX fills NaN there.
    assert np.isnan(np.asarray(fn(w, np.full(16, 3, np.int32)))).all(axis=1).all()


def test_bounding_an_index_leaves_the_other_draws_unchanged() -> None:
    small = parse_hlo(_texts(_take(2), *_ARGS)["unoptimized"])  # ids drawn in [0, 2)
    large = parse_hlo(_texts(_take(50), *_ARGS)["unoptimized"])  # ids drawn as before
    w_small, ids_small = random_inputs(small, seed=1)
    w_large, ids_large = random_inputs(large, seed=1)
    np.testing.assert_array_equal(w_small, w_large)
    assert ids_small.max() < 2 and ids_large.max() == 3


@pytest.mark.parametrize("source", ["function", "lowered"])
def test_program_draws_abstract_indices_inside_their_tables(source: str) -> None:
    fn = _take(2)
    program_source = fn if source == "function" else jax.jit(fn).lower(*_ARGS)
    prog = program(program_source, _ARGS if source == "function" else None, seed=2)
    w, ids = (np.asarray(a) for a in prog.args)
    assert set(np.unique(ids)) <= {0, 1}
    assert not np.isnan(np.asarray(jax.jit(fn)(w, ids))).any()


def test_random_arguments_leaf_bounds_redraw_only_the_bounded_leaf() -> None:
    abstract = {"w": _ARGS[0], "ids": _ARGS[1], "n": jax.ShapeDtypeStruct((3,), jnp.int32)}
    plain = random_arguments(abstract, seed=4, positive=True)
    bounded = random_arguments(abstract, seed=4, positive=True, leaf_bounds={0: 2})
    # Leaves flatten in key order: ids (0), n (1), w (2).
    assert set(np.unique(bounded["ids"])) <= {0, 1}
    np.testing.assert_array_equal(bounded["n"], plain["n"])
    np.testing.assert_array_equal(bounded["w"], plain["w"])
