"""Decisions lowered into XLA's compile: structure, outputs, order, errors, measure, CLI."""

from __future__ import annotations

import gc
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go import methods
from hlo_go.decisions import Decisions, fusion_group_names
from hlo_go.hlo import parse_hlo
from hlo_go.xla import (
    FusionError,
    LoweringError,
    ScheduleError,
    compile_hlo,
    lower,
    measure,
    program,
)
from hlo_go.xla.hooks import hlo_hook
from hlo_go.xla.schedule import list_schedule


def _f(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    h = jnp.tanh(x @ w) * 2.0 + 1.0
    return jnp.sum(h * h, axis=-1), jnp.exp(-h) - x


X = jnp.linspace(-1.0, 1.0, 16 * 8).reshape(16, 8)
W = jnp.linspace(-0.5, 0.5, 8 * 8).reshape(8, 8)


def _close(got: object, want: object) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def _elementwise_fusion(prog) -> Decisions:  # type: ignore[no-untyped-def]
    graph = prog.graph
    opcodes = [prog.prefusion.entry.instruction(n).opcode for n in graph.names]
    priority = np.array([0.0 if op in ("dot", "parameter") else 1.0 for op in opcodes], np.float32)
    return Decisions.default(graph)._replace(fusion_priority=priority)


def test_fusion_groups_become_fusions_with_identical_outputs() -> None:
    prog = program(_f, (X, W))
    decisions = _elementwise_fusion(prog)
    expected = fusion_group_names(
        prog.graph, decisions.fusion_groups(prog.graph, output_dims=prog.output_dims)
    )
    assert expected and max(len(g) for g in expected) > 2  # something real to fuse
    executable = prog.lower(fusion=decisions)
    assert executable.groups == expected
    compiled = executable.optimized
    fused_bodies = [
        {i.name for i in compiled.computations[f.attributes["calls"].lstrip("%")].instructions}
        for f in compiled.entry.instructions
        if f.opcode == "fusion"
    ]
    for group in expected:  # each group is exactly one kernel of the executable
        assert sum(set(group) <= body for body in fused_bodies) == 1, group
    assert executable.num_fusions < len(prog.prefusion.entry.instructions)
    _close(executable(*prog.args), jax.jit(_f)(X, W))


def _scan_step(w: jax.Array, xs: jax.Array) -> jax.Array:
    def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = jnp.tanh(h @ w + x) * jax.nn.sigmoid(x) + 0.1 * h
        return h, h.sum()

    h, ys = jax.lax.scan(cell, jnp.zeros((4, 8)), xs)
    return h.sum() + ys.sum()


def _multi_instruction_fusions(module, computation: str) -> int:  # type: ignore[no-untyped-def]
    """Fusions in ``computation`` whose fused computation has more than one instruction."""
    count = 0
    for instr in module.computations[computation].instructions:
        if instr.opcode == "fusion":
            called = module.computations[instr.attributes["calls"].lstrip("%")]
            count += sum(i.opcode != "parameter" for i in called.instructions) > 1
    return count


def test_loop_bodies_are_fused_by_xla() -> None:
    """The graph sees a ``while`` as one node; its body gets XLA's own fusion, except
    with ``fusion=None`` (nothing fused anywhere). Outputs match ``jax.jit`` both ways."""
    step = jax.grad(_scan_step)
    args = (W, jnp.linspace(-1.0, 1.0, 5 * 4 * 8).reshape(5, 4, 8))
    prog = program(step, args)
    bodies = [
        i.attributes["body"].lstrip("%")
        for i in prog.prefusion.entry.instructions
        if i.opcode == "while"
    ]
    assert bodies
    fused = prog.lower(fusion=methods.decide(prog.graph, "no-fusion"))
    unfused = prog.lower(fusion=None)
    assert sum(_multi_instruction_fusions(fused.optimized, b) for b in bodies) > 0
    assert sum(_multi_instruction_fusions(unfused.optimized, b) for b in bodies) == 0
    for executable in (fused, unfused):
        _close(executable(*args), jax.jit(step)(*args))


def _chain(x: jax.Array) -> jax.Array:
    for k in range(24):
        x = jnp.tanh(x * (1.0 + k) + 0.5)
    return x


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's /proc needed")
def test_lowered_executables_are_freed_when_dropped() -> None:
    # Each XLA:CPU executable maps memory for its kernels' code. A lowering dropped by its
    # caller must release them: a process that lowers hundreds of candidates (a measured
    # search) would otherwise reach vm.max_map_count, and XLA's JIT then crashes.
    def mappings() -> int:
        with open("/proc/self/maps") as maps:
            return sum(1 for _ in maps)

    prog = program(_chain, (X,))
    unfused = [[name] for name in prog.graph.names]  # one kernel per instruction
    executable = prog.lower(fusion=unfused)
    _close(executable(*prog.args), jax.jit(_chain)(X))
    del executable
    gc.collect()
    settled = mappings()
    for _ in range(3):
        executable = prog.lower(fusion=unfused)
        jax.block_until_ready(executable(*prog.args))
        del executable
        gc.collect()
    assert mappings() - settled < 8  # without freeing them: about 280 more per lowering


def test_schedule_is_the_executable_order() -> None:
    prog = program(_f, (X, W))
    names = list(prog.graph.names)
    late_first = Decisions.default(prog.graph)._replace(
        schedule_priority=np.arange(len(names), dtype=np.float32)
    )
    xla_like = methods.decide(prog.graph, "xla-cpu-like")
    executable = prog.lower(fusion=xla_like, schedule=late_first)
    assert executable.order is not None
    assert executable.entry_order == executable.order  # XLA runs the order we imposed
    fifo = prog.lower(fusion=xla_like, schedule=methods.decide(prog.graph, "fifo"))
    assert fifo.entry_order == fifo.order
    assert executable.order != fifo.order  # the priorities changed the order
    _close(executable(*prog.args), jax.jit(_f)(X, W))


def test_priorities_map_to_fused_kernels_and_list_schedule() -> None:
    prog = program(_f, (X, W))
    decisions = methods.decide(prog.graph, "critical-path+xla-cpu-like")
    module, _ = prog.fused_module(decisions)
    priority = prog.priorities(decisions, module)
    assert priority is not None
    node = dict(zip(prog.graph.names, decisions.schedule_priority.tolist(), strict=True))
    for instr in module.entry.instructions:
        if instr.opcode == "fusion" and instr.name not in node:  # one of our fusions
            members = module.computations[instr.attributes["calls"].lstrip("%")].instructions
            assert priority[instr.name] == max(node[i.name] for i in members if i.name in node)
    assert list_schedule(module.entry, priority)  # a valid order exists


def test_measure_with_method_names_and_with_decisions() -> None:
    prog = program(_f, (X, W))
    variant = methods.variants(prog.graph, {"v": ("xla-cpu-like", "critical-path")})["v"]
    named = measure(prog, fusion=variant.fusion, schedule=variant.schedule, label=variant.label,
                    repeats=2)  # fmt: skip
    assert named.correct, named.message
    assert named.time_s and named.baseline_time_s and named.spread and named.baseline_spread
    assert named.spread[0] <= named.time_s <= named.spread[1]
    assert named.label == "fusion=xla-cpu-like, schedule=critical-path"
    assert named.order is not None
    decisions = _elementwise_fusion(prog)
    by_decisions = measure(prog, fusion=decisions, schedule=decisions, repeats=2, clock="cpu")
    assert by_decisions.correct and by_decisions.clock == "cpu"
    assert by_decisions.relative == pytest.approx(
        by_decisions.time_s / by_decisions.baseline_time_s
    )


def _matmul_softmax(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.sum(jax.nn.softmax(x @ w, axis=-1) * x[:, :64], axis=-1)


def test_library_kernels_stay_as_xla_default_has_them() -> None:
    x = jnp.linspace(-1.0, 1.0, 64 * 256).reshape(64, 256)
    w = jnp.linspace(-0.5, 0.5, 256 * 64).reshape(256, 64)
    prog = program(_matmul_softmax, (x, w))

    def custom(module) -> list[object]:  # type: ignore[no-untyped-def]
        return [
            json.loads(i.backend_config or "{}")
            for i in module.entry.instructions
            if i.opcode == "fusion" and i.attributes.get("kind") == "kCustom"
        ]

    default = custom(parse_hlo(prog.default().as_text()))
    assert default, "XLA:CPU ran no library kernel: the premise of this test"
    assert custom(prog.prefusion) == default  # captured as XLA's default compile has them
    for fusion in ("xla-cpu-like", "fuse-all-legal"):
        executable = prog.lower(fusion=methods.decide(prog.graph, fusion))
        assert custom(executable.optimized) == default, fusion
        _close(executable(*prog.args), jax.jit(_matmul_softmax)(x, w))


def _cancelling(a: jax.Array, b: jax.Array, unused: jax.Array) -> jax.Array:
    return (a + b) - b  # float32 loses most of a's digits to b's rounding


def test_outputs_that_round_differently_are_judged_against_float64() -> None:
    from hlo_go.xla.measure import _as_accurate, outputs_match

    a = jnp.linspace(1e-3, 2e-3, 64, dtype=jnp.float32)
    b = jnp.full((64,), 1e4, jnp.float32)
    prog = program(_cancelling, (a, b, jnp.zeros(3)))  # jax.jit drops the unused argument
    exact = prog.float64_outputs()
    np.testing.assert_allclose(exact[0], np.asarray(a, np.float64), rtol=1e-12)
    want = prog.default()(*prog.args)
    accurate = a  # what an exact evaluation rounds to
    assert not outputs_match(accurate, want)[0]  # elementwise, it differs from XLA's
    ok, message = _as_accurate(prog, accurate, want, "elementwise")
    assert ok and "float64" in message
    wrong = want.at[5].add(0.5)
    assert not _as_accurate(prog, wrong, want, "elementwise")[0]
    hlo = program(prog.prefusion.to_text(), prog.args[:2])  # an HLO source: all parameters
    np.testing.assert_allclose(hlo.float64_outputs()[0], exact[0], rtol=1e-12)


def test_random_inputs_for_hlo_text_a_file_and_abstract_arguments(tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = jax.jit(_f).lower(X, W).as_text(dialect="hlo")
    graph = program(text).graph  # the graph to decide on: XLA's pre-fusion graph of the text
    fused, fifo = (methods.decide(graph, m) for m in ("fuse-all-legal", "fifo"))
    result = measure(text, fusion=fused, schedule=fifo, repeats=2)
    assert result.correct, result.message
    path = tmp_path / "f.hlo"
    path.write_text(text)
    prog = program(path)
    assert prog.source_kind == "hlo" and [a.shape for a in prog.args] == [(16, 8), (8, 8)]
    assert all(np.all(np.asarray(a) >= 0) for a in prog.args)  # |N(0, s)|: safe state
    abstract = (
        jax.ShapeDtypeStruct((16, 8), jnp.float32),
        jax.ShapeDtypeStruct((8, 8), jnp.float32),
    )
    drawn = program(_f, abstract)
    assert [a.shape for a in drawn.args] == [(16, 8), (8, 8)]
    executable = lower(_f, methods.decide(drawn.graph, "xla-cpu-like"), args=abstract)
    _close(executable(*drawn.args), jax.jit(_f)(*drawn.args))


def test_compile_hlo_runs_text() -> None:
    text = jax.jit(_f).lower(X, W).as_text(dialect="hlo")
    executable = compile_hlo(text, jax.devices("cpu")[:1])
    _close(executable(np.asarray(X), np.asarray(W)), jax.jit(_f)(X, W))
    with pytest.raises(ValueError, match="one device"):
        compile_hlo(text, [jax.devices("cpu")[0]] * 2)


def test_illegal_decisions_get_clear_errors() -> None:
    prog = program(_f, (X, W))
    parameter = prog.prefusion.entry.parameters[0].name
    tanh = next(i.name for i in prog.prefusion.entry.instructions if i.opcode == "tanh")
    with pytest.raises(FusionError, match="cannot be fused"):
        prog.lower(fusion=[[parameter, tanh]])
    with pytest.raises(methods.UnknownMethodError, match="unknown method 'no-such-method'"):
        methods.decide(prog.graph, "no-such-method")
    with pytest.raises(LoweringError, match="is a method name"):
        prog.lower(fusion="xla-cpu-like")  # names are hlo_go.methods' to resolve
    wrong = Decisions(np.zeros(3, np.int32), np.zeros(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(LoweringError, match="do not fit"):
        prog.lower(fusion=wrong)
    with pytest.raises(LoweringError, match="give its args"):
        program(_f)
    failed = measure(prog, fusion=[[parameter, tanh]], repeats=1)
    assert not failed.correct and "FusionError" in failed.message and failed.time_s is None


def test_hook_is_removed_also_on_error() -> None:
    def g(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        return _f(x, w)  # a function of its own: no other test compiled its lowering

    lowered = jax.jit(g).lower(X, W)
    name = lowered.compiler_ir("hlo").as_hlo_module().name
    calls: list[str] = []

    def fail(module: object) -> bytes:
        calls.append("called")
        raise ScheduleError("refused on purpose")

    with (
        pytest.raises(Exception, match=r"refused on purpose|callback"),
        hlo_hook(fail, module_name=name),
    ):
        lowered.compile()
    assert calls == ["called"]
    jax.clear_caches()
    lowered.compile()  # a real compile again: the hook must not fire
    assert calls == ["called"]


def _square_dots(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.tanh(a @ b) * 0.5 + (a.T @ b) * 0.25


def test_a_flop_heavy_dot_small_in_bytes_stays_out_of_fusions() -> None:
    """A 64x64 @ 64x64 dot writes only 16 KiB, but XLA's elemental emitter would compute
    it one element at a time inside a loop fusion: it stays a library kernel."""
    from hlo_go.decisions import SMALL_MATRIX_BYTES, SMALL_MATRIX_FLOPS, large_matrix_nodes

    a = jnp.linspace(-1.0, 1.0, 64 * 64).reshape(64, 64)
    b = jnp.linspace(-0.5, 0.5, 64 * 64).reshape(64, 64)
    prog = program(_square_dots, (a, b))
    graph = prog.graph
    opcode = {n: prog.prefusion.entry.instruction(n).opcode for n in graph.names}
    dots = [i for i, n in enumerate(graph.names) if opcode[n] == "dot"]
    assert dots and all(graph.bytes_out[i] <= SMALL_MATRIX_BYTES for i in dots)
    assert all(graph.flops[i] > SMALL_MATRIX_FLOPS for i in dots)
    assert all(large_matrix_nodes(graph)[i] for i in dots)
    executable = prog.lower(fusion=methods.decide(graph, "fuse-all-legal"))
    fused = {name for group in executable.groups for name in group}
    assert not fused & {graph.names[i] for i in dots}
    _close(executable(*prog.args), jax.jit(_square_dots)(a, b))


def test_cli_measure_smoke(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from hlo_go.cli import main

    path = tmp_path / "f.hlo"
    path.write_text(jax.jit(_f).lower(X, W).as_text(dialect="hlo"))
    code = main(
        ["measure", str(path), "--fusion", "xla-cpu-like", "--schedule", "critical-path",
         "--repeats", "2"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "XLA default" in out and "relative" in out and "temporaries MB" in out
    assert "CPU time of a process pinned to core" in out  # the default clock
    assert "outputs checked against XLA's default compile (jax.jit): match" in out
    assert main(["measure", str(tmp_path / "missing.hlo")]) == 1


def _conv(x: jax.Array, k: jax.Array) -> jax.Array:
    # A dilated 1-d convolution: XLA:CPU runs it bare, not as a library (kCustom) fusion.
    dims = ("NWC", "WIO", "NWC")
    return jax.lax.conv_general_dilated(
        x, k, (1,), "VALID", rhs_dilation=(2,), dimension_numbers=dims
    )


def _two_convs(x: jax.Array, k: jax.Array, s: jax.Array) -> tuple[jax.Array, jax.Array]:
    big = jnp.tanh(_conv(x, k)) + 1.0  # f32[8,60,32]: 60 KiB out, larger than XLA:CPU fuses
    small = jnp.tanh(_conv(s, k[:, :4, :4])) + 1.0  # f32[1,4,4]: 64 bytes
    return big, small


def test_large_convolutions_stay_out_of_fusions_small_ones_may_fuse() -> None:
    from hlo_go.decisions import SMALL_MATRIX_BYTES, large_matrix_nodes
    from hlo_go.xla.lowering import without_large_matrices

    x = jnp.linspace(-1.0, 1.0, 8 * 64 * 32).reshape(8, 64, 32)
    k = jnp.linspace(-0.1, 0.1, 3 * 32 * 32).reshape(3, 32, 32)
    s = jnp.linspace(-1.0, 1.0, 8 * 4).reshape(1, 8, 4)
    prog = program(_two_convs, (x, k, s))
    graph = prog.graph
    opcode = {n: prog.prefusion.entry.instruction(n).opcode for n in graph.names}
    convs = [i for i, n in enumerate(graph.names) if opcode[n] == "convolution"]
    assert len(convs) == 2  # both bare: what our fusions could take
    large = large_matrix_nodes(graph)
    big = max(convs, key=lambda i: graph.bytes_out[i])
    small = min(convs, key=lambda i: graph.bytes_out[i])
    assert graph.bytes_out[big] > SMALL_MATRIX_BYTES and large[big] and not large[small]
    assert large.sum() == 1

    every = Decisions.default(graph)._replace(fusion_priority=np.ones(graph.num_nodes, np.float32))
    kept = without_large_matrices(graph, every)
    assert kept.fusion_priority[big] == 0 and kept.fusion_priority[small] == 1
    assert without_large_matrices(graph, kept) is kept  # nothing left to change
    executable = prog.lower(fusion=methods.decide(graph, "fuse-all-legal"))
    fused = {name for group in executable.groups for name in group}
    assert graph.names[small] in fused and graph.names[big] not in fused
    _close(executable(*prog.args), jax.jit(_two_convs)(x, k, s))
