"""Sharded HLO through XLA's SPMD partitioner on the 8 virtual CPU devices of ``conftest.py``.

Modules come from ``jax.jit(...).lower(...)`` (unoptimized HLO) or are written by
hand; shardings are added by text and the partitioned runs are compared with numpy,
``jax.jit`` and the same module compiled unsharded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import FrozenDict, parse_hlo
from hlo_go.xla.arbiter import (
    INPUT_ROUNDING_REFERENCE,
    as_accurate_as_reference,
    input_rounding_runs,
    moved_by_one_ulp,
)
from hlo_go.xla.bridge import compile_hlo_text, run_executable
from hlo_go.xla.spmd import (
    COLLECTIVE_KINDS,
    check_spmd,
    collective_bytes,
    compile_spmd,
    count_collectives,
    run_spmd,
    strip_shardings,
    time_spmd,
)

ROW8 = "{devices=[8,1]<=[8]}"
REPLICATED = "{replicated}"


def annotate(
    text: str,
    parameters: Mapping[int, str] | None = None,
    root: str | None = None,
) -> str:
    """``text`` with ``sharding=`` set on entry parameters (by number) and the ROOT."""
    parameters = parameters or {}
    module = parse_hlo(text)
    entry = module.entry
    instructions = []
    for instr in entry.instructions:
        if instr.opcode == "parameter" and instr.parameter_number in parameters:
            instr = instr.replace(sharding=parameters[instr.parameter_number])
        if instr.name == entry.root_name and root is not None:
            instr = instr.replace(sharding=root)
        instructions.append(instr)
    computations = dict(module.computations)
    computations[entry.name] = dataclasses.replace(entry, instructions=tuple(instructions))
    return dataclasses.replace(module, computations=FrozenDict(computations)).to_text()


def lowered(f, *args) -> str:
    return jax.jit(f).lower(*args).as_text(dialect="hlo")


def only(**expected: int) -> dict[str, int]:
    """Every collective kind at 0 except those given."""
    return {kind: expected.get(kind.replace("-", "_"), 0) for kind in COLLECTIVE_KINDS}


RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 16)).astype(np.float32)
W = RNG.standard_normal((16, 32)).astype(np.float32)
MATMUL = lowered(lambda x, w: x @ w, X, W)


def test_batch_split_matmul_needs_no_all_reduce():
    text = annotate(MATMUL, {0: ROW8, 1: REPLICATED}, root=ROW8)
    exe = compile_spmd(text, 8)
    (out,) = run_spmd(exe, [X, W])
    np.testing.assert_allclose(out, X @ W, rtol=1e-5, atol=1e-5)
    assert count_collectives(exe.optimized_text)["all-reduce"] == 0
    # Partitioned: each device holds one row of x and computes one row of the product.
    assert "f32[1,16]" in exe.optimized_text and "num_partitions=8" in exe.optimized_text
    assert [s.hlo for s in exe.parameter_shardings] == [ROW8, REPLICATED]
    assert exe.parameter_shardings[0].shard_shape == (1, 16)
    assert exe.output_shardings[0].tiles == (8, 1)
    assert len(exe.devices) == 8


def test_contracting_split_all_reduces_once():
    lhs = "{devices=[1,2,4]<=[8] last_tile_dim_replicate}"
    rhs = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    check = check_spmd(annotate(MATMUL, {0: lhs, 1: rhs}, root=REPLICATED), 8, [X, W])
    assert check.correct, check.message
    np.testing.assert_allclose(check.outputs[0], X @ W, rtol=1e-5, atol=1e-5)
    # Each device multiplies half the contracting dimension: one all-reduce of the
    # f32[8,32] partial products over the 2 halves.
    assert check.collectives == only(all_reduce=1)
    assert check.collective_bytes["all-reduce"] == 8 * 32 * 4
    assert check.executable.parameter_shardings[0].shard_shape == (8, 8)
    assert check.max_abs_error[0] < 1e-4 and check.compile_s > 0


def test_transposed_iota_sharding():
    def f(x, y):
        return jnp.sum(jnp.tanh(x) * 2.0 + y, axis=1), x * y

    y = RNG.standard_normal((8, 16)).astype(np.float32)
    transposed = "{devices=[2,4]<=[2,4]T(1,0)}"
    text = annotate(
        lowered(f, X, y), {0: transposed, 1: "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}
    )
    exe = compile_spmd(text, 8)
    x_sharding = exe.parameter_shardings[0]
    assert x_sharding.hlo == transposed and x_sharding.tiles == (2, 4)
    # <=[2,4]T(1,0) assigns tiles (0,0), (0,1), ..., (1,3) to devices 0,4,1,5,2,6,3,7.
    shards = x_sharding.split(X)
    np.testing.assert_array_equal(shards[1], X[0:4, 8:12])
    np.testing.assert_array_equal(shards[2], X[4:8, 0:4])
    np.testing.assert_array_equal(shards[4], X[0:4, 4:8])
    np.testing.assert_array_equal(shards[7], X[4:8, 12:16])
    total, product = run_spmd(exe, [X, y])
    np.testing.assert_allclose(total, np.sum(np.tanh(X) * 2.0 + y, axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(product, X * y, rtol=1e-6)


def test_tuple_root_with_different_output_shardings():
    def f(x, w):
        d = x @ w
        return d, jnp.sum(d, axis=0), jnp.max(x)

    outputs = "{{devices=[4,2]<=[8]}, {devices=[2,4]<=[8] last_tile_dim_replicate}, {replicated}}"
    text = annotate(lowered(f, X, W), {0: "{devices=[2,4]<=[2,4]T(1,0)}"}, root=outputs)
    check = check_spmd(text, 8, [X, W])
    assert check.correct, check.message
    exe = check.executable
    assert [s.hlo for s in exe.output_shardings] == [
        "{devices=[4,2]<=[8]}",
        "{devices=[2,4]<=[8] last_tile_dim_replicate}",
        "{replicated}",
    ]
    assert [s.shard_shape for s in exe.output_shardings] == [(2, 16), (16,), ()]
    d, s, m = check.outputs
    np.testing.assert_allclose(d, X @ W, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, (X @ W).sum(axis=0), rtol=1e-4, atol=1e-4)
    assert m == X.max()


def test_uneven_shards_are_padded_and_trimmed():
    x = X[:6]
    text = annotate(lowered(lambda x, w: x @ w, x, W), {0: "{devices=[4,2]<=[8]}"})
    text = annotate(text, root="{devices=[4,2]<=[8]}")
    exe = compile_spmd(text, 8)
    assert exe.parameter_shardings[0].padded and exe.parameter_shardings[0].shard_shape == (2, 8)
    (out,) = run_spmd(exe, [x, W])
    np.testing.assert_allclose(out, x @ W, rtol=1e-5, atol=1e-5)


def test_too_few_devices_says_how_to_get_more():
    with pytest.raises(
        ValueError, match=r"jax_num_cpu_devices.*xla_force_host_platform_device_count"
    ):
        compile_spmd(MATMUL, len(jax.devices("cpu")) + 1)
    with pytest.raises(ValueError, match="num_devices"):
        compile_spmd(MATMUL, 0)


def test_wrong_argument_shape_is_rejected():
    exe = compile_spmd(annotate(MATMUL, {0: ROW8}), 8)
    with pytest.raises(ValueError, match="shape"):
        run_spmd(exe, [X[:4], W])
    with pytest.raises(ValueError, match="2 parameters"):
        run_spmd(exe, [X])


def _mlp_step(params, x, y):
    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value


def test_mlp_training_step_batch_split():
    params = {
        "b1": RNG.standard_normal(32).astype(np.float32),
        "b2": RNG.standard_normal(4).astype(np.float32),
        "w1": RNG.standard_normal((16, 32)).astype(np.float32) * 0.3,
        "w2": RNG.standard_normal((32, 4)).astype(np.float32) * 0.3,
    }
    x = RNG.standard_normal((32, 16)).astype(np.float32)
    y = RNG.standard_normal((32, 4)).astype(np.float32)
    flat = [*jax.tree.leaves(params), x, y]
    text = lowered(_mlp_step, params, x, y)
    n = len(parse_hlo(text).entry.parameters)
    assert n == 6
    # Batch split over the 8 devices, weights replicated (outputs replicated by default).
    sharded = annotate(
        text, {0: REPLICATED, 1: REPLICATED, 2: REPLICATED, 3: REPLICATED, 4: ROW8, 5: ROW8}
    )
    check = check_spmd(sharded, 8, flat)
    assert check.correct, check.message
    want = jax.tree.leaves(jax.jit(_mlp_step)(params, x, y))
    for got, expected in zip(check.outputs, want, strict=True):
        np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-4, atol=1e-5)
    # Per-device partial weight gradients are summed across the batch shards.
    assert check.collectives["all-reduce"] >= 1
    gradient_bytes = 4 * sum(np.size(p) for p in params.values())
    assert check.collective_bytes["all-reduce"] >= gradient_bytes
    assert "f32[4,16]" in check.executable.optimized_text  # the per-device batch of x
    assert time_spmd(check.executable, flat, repeats=2, warmup=1).median > 0


def test_strip_shardings():
    text = annotate(MATMUL, {0: ROW8}, root=ROW8)
    stripped = strip_shardings(text)
    assert "sharding=" in text and "sharding=" not in stripped
    assert all(i.sharding is None for _, i in parse_hlo(stripped).instructions())


ASYNC = """HloModule m, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%inner (p: f32[16]) -> f32[4] {
  %p = f32[16]{0} parameter(0)
  ROOT %rs = f32[4]{0} reduce-scatter(%p), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%add
}

ENTRY %main (x: f32[16]) -> (f32[16], f32[64], f32[4], f32[16]) {
  %x = f32[16]{0} parameter(0)
  %ars = f32[16]{0} all-reduce-start(%x), replica_groups={{0,1,2,3}}, to_apply=%add
  %ard = f32[16]{0} all-reduce-done(%ars)
  %ags = (f32[16]{0}, f32[64]{0}) all-gather-start(%x), replica_groups={{0,1,2,3}}, dimensions={0}
  %agd = f32[64]{0} all-gather-done(%ags)
  %c = f32[4]{0} call(%x), to_apply=%inner
  %cp = f32[16]{0} collective-permute(%x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT %t = (f32[16]{0}, f32[64]{0}, f32[4]{0}, f32[16]{0}) tuple(%ard, %agd, %c, %cp)
}
"""


def test_count_collectives_async_and_called():
    assert count_collectives(ASYNC) == only(
        all_reduce=1, all_gather=1, reduce_scatter=1, collective_permute=1
    )
    assert collective_bytes(parse_hlo(ASYNC)) == only(
        all_reduce=64, all_gather=256, reduce_scatter=16, collective_permute=64
    )


def test_float64_arbiter_accepts_an_ill_conditioned_partitioned_sum():
    # Row sums of terms that nearly cancel: the exact sums are tiny against the terms,
    # so float32 in any order is off by far more than 1e-4 of the (tiny) output. Split
    # over the summed dim, the 8 partial sums are added in another order than one
    # device's loop: neither elementwise nor normwise agreement holds, but the
    # partitioned result is as accurate as one device's against float64.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4096)).astype(np.float32) * np.float32(1e4)
    x[:, -1] = -x[:, :-1].astype(np.float64).sum(axis=1)  # rows sum to ~0
    text = annotate(lowered(lambda a: jnp.sum(a, axis=1), x), {0: "{devices=[1,8]<=[8]}"})
    check = check_spmd(text, 8, [x])
    assert check.correct, check.message
    assert "float64" in check.message  # decided by the arbiter, not elementwise
    exact = x.astype(np.float64).sum(axis=1)
    single = jax.jit(lambda a: jnp.sum(a, axis=1))(x)
    error = np.max(np.abs(check.outputs[0] - exact))
    assert error <= 4 * max(np.max(np.abs(np.asarray(single, np.float64) - exact)), 1e-30)


def _near_tie_rows(seed: int) -> np.ndarray:
    """8 rows of 64 float32 terms; row 0 sums to within 1e-5 of 0 (a near tie for its
    sign), the others to +-0.01."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(8, 64)).astype(np.float32)
    offset = np.array([rng.uniform(-1e-5, 1e-5)] + [1e-2 * (-1) ** k for k in range(7)])
    x[:, -1] = (-x[:, :-1].astype(np.float64).sum(axis=1) + offset).astype(np.float32)
    return x


def _sign_of_row_sums(a):
    return (jnp.sum(a, axis=1) > 0).astype(jnp.float32)


def test_float64_arbiter_accepts_a_near_tie_that_input_rounding_flips_too():
    # The sign of a sum is discontinuous at 0: where the exact sum is within rounding
    # of 0, the partitioned sum can get the sign wrong where one device's happens to
    # get it right. The arbiter then runs one device's compile at inputs one ulp away,
    # which flips that sign as well: the partitioned result is as accurate as float32
    # allows there, and is accepted by that elementwise bar.
    text = lowered(_sign_of_row_sums, _near_tie_rows(0))
    single = compile_hlo_text(text)
    exe = compile_spmd(annotate(text, {0: "{devices=[1,8]<=[8]}"}), 8)
    for seed in range(300):  # a near tie that this host's rounding flips as described
        x = _near_tie_rows(seed)
        exact = (x.astype(np.float64).sum(axis=1) > 0).astype(np.float32)
        one_device = run_executable(single, [x])[0]
        partitioned = run_spmd(exe, [x])[0]
        if np.array_equal(one_device, exact) and partitioned[0] != exact[0]:
            moved = input_rounding_runs(lambda a: run_executable(single, a), [x])
            if any(run()[0][0] != exact[0] for run in moved):
                break
    else:
        pytest.skip("no near tie among 300 draws that this host's rounding flips")
    check = check_spmd(annotate(text, {0: "{devices=[1,8]<=[8]}"}), 8, [x])
    assert check.correct, check.message
    assert INPUT_ROUNDING_REFERENCE in check.message
    # Without that bar (one device's compile alone) it is rejected.
    ok, _ = as_accurate_as_reference([partitioned], [one_device], [exact])
    assert not ok
    # A sign flipped where the sum is far from 0 is rejected, even with the bar: it is
    # judged element by element, not by the tie's error.
    wrong = partitioned.copy()
    wrong[3] = 1.0 - wrong[3]
    ok, message = as_accurate_as_reference([wrong], [one_device], [exact], moved=moved)
    assert not ok, message
    assert INPUT_ROUNDING_REFERENCE in message


def test_moved_by_one_ulp_moves_float32_only_and_by_at_most_one_ulp():
    x = np.array([1.0, -3.5, 1e-30, 0.0], np.float32)
    labels = np.array([1, 2, 3], np.int32)
    moved, same = moved_by_one_ulp([x, labels], seed=0)
    assert moved.dtype == np.float32 and np.array_equal(same, labels)
    assert np.all(np.abs(moved - x) <= np.spacing(np.abs(x)))
    assert np.array_equal(moved, moved_by_one_ulp([x, labels], seed=0)[0])  # seeded
    assert not np.array_equal(moved, x) or not np.array_equal(moved_by_one_ulp([x], seed=1)[0], x)


def test_float64_arbiter_still_rejects_a_wrong_result():
    x = np.ones((8, 64), np.float32)
    text = annotate(lowered(lambda a: jnp.sum(a, axis=1), x), {0: "{devices=[1,8]<=[8]}"})
    wrong = [np.full((8,), 63.0, np.float32)]  # an explicit, wrong reference
    check = check_spmd(text, 8, [x], reference=wrong)
    assert not check.correct
