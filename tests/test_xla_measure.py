"""measure(): outputs checked against jax.jit before any time is reported."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go import methods
from hlo_go.hlo import FrozenDict, HloComputation, HloModule, parse_hlo
from hlo_go.methods import searched_tasks
from hlo_go.xla import (
    MEMORY_ORDER,
    Variant,
    capture_prefusion,
    measure,
    measure_many,
    outputs_match,
    program,
)
from hlo_go.xla.measure import _looks_slow


def _f(x: jax.Array, w: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ w) * 2.0 + 1.0
    return jnp.sum(h * h, axis=-1)


X = jnp.linspace(-1.0, 1.0, 64 * 32).reshape(64, 32)
W = jnp.linspace(-0.5, 0.5, 32 * 32).reshape(32, 32)


def test_fused_and_scheduled_variant_is_correct_and_timed() -> None:
    module = program(_f, (X, W)).prefusion  # the module measure() fuses
    group = [
        i.name
        for i in module.entry.instructions
        if i.opcode not in ("parameter", "constant", "dot", "fusion")  # fusion: XLA's library
    ]
    result = measure(_f, (X, W), fusion=[group], schedule={}, repeats=3, warmup=1)
    assert result.correct, result.message
    assert result.time_s is not None and result.time_s > 0
    assert result.baseline_time_s is not None and result.speedup is not None
    assert result.spread is not None and result.spread[0] <= result.time_s <= result.spread[1]
    assert result.order is not None  # a schedule was imposed
    # both compiles' temporaries are reported (XLA's buffer assignment)
    assert result.temp_bytes is not None and result.baseline_temp_bytes is not None
    assert result.temp_bytes >= 0 and result.baseline_temp_bytes >= 0


def test_slowness_is_judged_past_either_factor() -> None:
    assert not _looks_slow(5.0, 1.0, None, None)
    assert _looks_slow(5.0, 1.0, 3.0, None) and not _looks_slow(2.0, 1.0, 3.0, None)
    assert _looks_slow(9.0, 1.0, None, 8.0) and not _looks_slow(5.0, 1.0, None, 8.0)
    assert _looks_slow(4.0, 1.0, 3.0, 8.0)  # the lower factor decides


def test_a_variant_skipped_as_slow_is_judged_on_its_second_run() -> None:
    # skip_factor 0: every variant crosses it, so its one sample is the run after its
    # checking run, reported as such, and its outputs were still checked.
    out = measure_many(
        _f, {"plain": Variant(None, None)}, args=(X, W), repeats=3, warmup=1,
        skip_factor=0.0,
    )  # fmt: skip
    result = out["plain"]
    assert result.correct and result.repeats == 1
    assert "one (second) run" in result.message
    assert result.time_s is not None and result.time_s > 0


def test_temp_bytes_are_those_of_xla_buffer_assignment() -> None:
    prog = program(_f, (X, W))
    default = prog.default()
    assert default.temp_bytes == default.compiled.memory_analysis().temp_size_in_bytes
    unfused = prog.lower(fusion=None)
    # Nothing fused: tanh, the scale, the shift and the square each get a f32[64,32]
    # buffer; XLA's default keeps them in one fusion (its temporaries: far less).
    assert unfused.temp_bytes is not None and unfused.temp_bytes > default.temp_bytes
    from hlo_go.xla import compile_hlo

    loaded = compile_hlo(jax.jit(_f).lower(X, W).as_text(dialect="hlo"))
    assert loaded.temp_bytes == default.temp_bytes  # same module, same buffer assignment


def test_searched_orders_the_entry_only_where_the_order_changes_simulated_time() -> None:
    from hlo_go.sim import get_cluster
    from hlo_go.xla.schedule import peak_bytes

    # One device: one kernel at a time, nothing moved, so the search decides no
    # priorities; the entry keeps XLA's order, memory-freeing instructions first.
    assert searched_tasks(get_cluster("host-cpu-1")) == ("fusion",)
    assert "scheduling" in searched_tasks(get_cluster("v100x4"))
    prog = program(_f, (X, W))
    searched = methods.variants(prog.graph, {"s": ("searched", "searched")}, budget=20)["s"]
    assert searched.schedule is MEMORY_ORDER  # the search decided no order on one device
    executable = prog.lower(fusion=searched.fusion, schedule=searched.schedule)
    assert prog.priorities(searched.schedule, executable.module) is None
    assert executable.order is not None and "schedule=memory" in executable.label
    assert executable.entry_order == executable.order
    xla_order = prog.lower(fusion=searched.fusion)
    assert xla_order.order is None and "schedule=xla" in xla_order.label
    entry = executable.optimized.entry
    assert peak_bytes(entry, executable.order) <= peak_bytes(entry, xla_order.entry_order)
    no_fusion = methods.variants(prog.graph, {"n": ("no-fusion", None)})["n"]
    assert prog.lower(fusion=no_fusion.fusion, label=no_fusion.label).label == (
        "fusion=no-fusion, schedule=xla"
    )
    assert not np.any(searched.fusion.placement)
    four = methods.schedule_spec(prog.graph, "searched", cluster="v100x4", budget=20)
    ordered = prog.priorities(four, executable.module)
    assert ordered is not None and len(ordered) > 0
    result = measure(prog, fusion=searched.fusion, schedule=searched.schedule, repeats=2)
    assert result.correct, result.message


def test_wrong_outputs_are_caught_and_not_timed() -> None:
    module = capture_prefusion(_f, X, W)
    entry = module.entry
    broken = tuple(
        i.replace(opcode="exponential") if i.opcode == "tanh" else i for i in entry.instructions
    )
    computations = dict(module.computations)
    computations[entry.name] = HloComputation(entry.name, broken, entry.root_name)
    wrong = HloModule(
        module.name, FrozenDict(computations), entry.name, module.attributes, module.stack_frames
    )
    result = measure(_f, (X, W), fusion=wrong, repeats=3)
    assert not result.correct
    assert result.time_s is None and "error" in result.message


@pytest.mark.parametrize(
    ("got", "want", "ok"),
    [
        (np.float32([1.0, 2.0]), np.float32([1.0, 2.00001]), True),
        (np.float32([1.0, 2.0]), np.float32([1.0, 2.1]), False),
        (np.int32([1, 2]), np.int32([1, 3]), False),
        (np.float32([np.nan]), np.float32([np.nan]), True),
        (np.float32([1.0]), np.float64([1.0]), False),
    ],
)
def test_outputs_match_tolerances(got: np.ndarray, want: np.ndarray, ok: bool) -> None:
    assert outputs_match([got], [want])[0] is ok


_TPU_KERNEL = """HloModule pallas_step

ENTRY main {
  x = f32[8,128]{1,0} parameter(0)
  ROOT k = f32[8,128]{1,0} custom-call(x), custom_call_target="tpu_custom_call", backend_config={"custom_call_config": {"body": "..."}}
}
"""


def test_a_module_that_cannot_run_here_is_refused_with_the_instruction_named() -> None:
    from hlo_go.decisions import Decisions
    from hlo_go.xla import LoweringError, run_placed, unsupported_reasons
    from hlo_go.xla.placed import PlacementError

    module = parse_hlo(_TPU_KERNEL)
    assert unsupported_reasons(module, "tpu") == []
    assert unsupported_reasons(module, "cpu") == [
        "%k in main calls 'tpu_custom_call', a tpu kernel"
    ]
    with pytest.raises(LoweringError, match=r"cannot compile pallas_step for cpu: %k in main"):
        program(_TPU_KERNEL)
    one = Decisions(np.zeros(2, np.int32), np.zeros(2, np.float32), np.zeros(2, np.float32))
    with pytest.raises(PlacementError, match=r"cannot run pallas_step on cpu: %k in main"):
        run_placed(module, one, jax.devices()[:1])
    shard_map = (Path(__file__).parent / "data" / "xla_style" / "shardings.hlo").read_text()
    [reason] = unsupported_reasons(parse_hlo(shard_map), "cpu")
    assert "manually partitioned (shard_map)" in reason
