"""hlo_go.methods (names -> decisions), graph fingerprints on decisions, and what
hlo_go.xla accepts: decisions for its pre-fusion graph, never a name."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go import methods
from hlo_go.decisions import Decisions, GraphMismatchError
from hlo_go.graph import build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim import get_cluster
from hlo_go.xla import (
    MEMORY_ORDER,
    DecisionsMismatchError,
    LoweringError,
    measure,
    program,
)


def _f(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    h = jnp.tanh(x @ w)
    return jnp.sum(jax.nn.softmax(h) * 2.0 + 1.0), h.T @ h


X = jnp.linspace(-1.0, 1.0, 16 * 32).reshape(16, 32)
W = jnp.linspace(-0.5, 0.5, 32 * 32).reshape(32, 32)


def test_fingerprint_is_structure_not_names() -> None:
    text = jax.jit(_f).lower(X, W).as_text(dialect="hlo")
    graph = build_graph(parse_hlo(text))
    assert graph.fingerprint == build_graph(parse_hlo(text)).fingerprint  # parsed again
    renamed = parse_hlo(re.sub(r"%?\btanh\.(\d+)", r"renamed.\1", text))
    assert "renamed.1" in renamed.to_text()
    assert build_graph(renamed).fingerprint == graph.fingerprint
    other = jax.jit(lambda x, w: jnp.cos(x @ w)).lower(X, W).as_text(dialect="hlo")
    assert build_graph(parse_hlo(other)).fingerprint != graph.fingerprint


def test_decisions_carry_their_graph_and_refuse_another() -> None:
    graph = build_graph(parse_hlo(jax.jit(_f).lower(X, W).as_text(dialect="hlo")))
    cluster = get_cluster("host-cpu-1")
    decided = methods.decide(graph, "xla-cpu-like")
    assert decided.graph_fingerprint == graph.fingerprint
    assert Decisions.default(graph).graph_fingerprint == graph.fingerprint
    hand = Decisions(*(a.copy() for a in decided.arrays().values()))
    assert hand.graph_fingerprint is None
    assert hand.validate(graph, 1).graph_fingerprint == graph.fingerprint  # validate marks
    other = graph._replace(opcode=graph.opcode[::-1].copy())  # same size, other structure
    with pytest.raises(GraphMismatchError, match=graph.fingerprint) as caught:
        decided.validate(other, cluster.num_devices)
    assert caught.value.made_for == graph.fingerprint
    assert caught.value.given == other.fingerprint
    assert set(decided.arrays()) == {"placement", "schedule_priority", "fusion_priority"}


def test_names_per_task_and_check_name() -> None:
    assert {"xla-cpu-like", "no-fusion", "searched"} <= set(methods.names("fusion"))
    assert {"fifo", "critical-path", "memory", "xla"} <= set(methods.names("schedule"))
    assert "memory" not in methods.names("fusion")
    assert "metis" in methods.names("placement")
    assert methods.check_name("fusion", "critical-path+xla-cpu-like")
    with pytest.raises(methods.UnknownMethodError, match="unknown fusion method 'nope'"):
        methods.check_name("fusion", "nope")
    with pytest.raises(ValueError, match="unknown task"):
        methods.names("fuse")


def test_schedule_specs_of_names() -> None:
    graph = build_graph(parse_hlo(jax.jit(_f).lower(X, W).as_text(dialect="hlo")))
    assert methods.schedule_spec(graph, None) is None
    assert methods.schedule_spec(graph, "xla") is None
    assert methods.schedule_spec(graph, "memory") is MEMORY_ORDER
    assert methods.schedule_spec(graph, "searched") is MEMORY_ORDER  # one device: no order
    assert isinstance(methods.schedule_spec(graph, "fifo"), Decisions)
    variants = methods.variants(graph, {"a": ("xla-cpu-like", "fifo"), "b": (None, "memory")})
    assert variants["a"].label == "fusion=xla-cpu-like, schedule=fifo"
    assert variants["b"] == (None, MEMORY_ORDER, "fusion=none, schedule=memory")


def test_measure_text_from_lower_with_decisions_on_its_program_graph() -> None:
    text = jax.jit(_f).lower(X, W).as_text(dialect="hlo")
    graph = program(text).graph  # the documented graph to decide on
    decided = methods.decide(graph, "xla-cpu-like")
    result = measure(text, fusion=decided, schedule=decided, repeats=1, warmup=0)
    assert result.correct, result.message
    # Decisions made on the text's own (unoptimized) graph do not fit what XLA fuses.
    unoptimized = build_graph(parse_hlo(text))
    assert unoptimized.fingerprint != graph.fingerprint
    wrong = methods.decide(unoptimized, "xla-cpu-like")
    with pytest.raises(DecisionsMismatchError, match="made for the module as given"):
        measure(text, fusion=wrong, repeats=1)
    with pytest.raises(LoweringError, match="is a method name"):
        measure(text, fusion="xla-cpu-like", repeats=1)


def _elementwise(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum(jnp.tanh(x * y) * 2.0 + 1.0, axis=-1)


def test_measure_a_prefusion_module_with_decisions_on_its_parsed_graph() -> None:
    prefusion = program(_elementwise, (X, X)).prefusion.to_text()
    parsed = build_graph(parse_hlo(prefusion))
    decided = methods.decide(parsed, "fuse-all-legal")
    assert decided.graph_fingerprint == program(prefusion).graph.fingerprint
    result = measure(prefusion, fusion=decided, repeats=1, warmup=0)
    assert result.correct, result.message
    # A library (kCustom) fusion in it is inlined first (hlo_go.xla.optimized), then measured.
    with_library = program(_f, (X, W)).prefusion.to_text()
    assert "kind=kCustom" in with_library
    assert measure(with_library, repeats=1, warmup=0).correct


def test_a_compiled_module_is_measured_after_its_fusions_are_inlined() -> None:
    compiled = jax.jit(_f).lower(X, W).compile().as_text()
    result = measure(compiled, repeats=1, warmup=0)
    assert result.correct, result.message


def test_old_xla_names_warn_and_still_work() -> None:
    import hlo_go.xla as xla
    from hlo_go.xla.placed import compile_placed
    from hlo_go.xla.schedule import memory_schedule

    with pytest.warns(DeprecationWarning, match="hlo_go.xla.placed"):
        assert xla.compile_placed is compile_placed
    with pytest.warns(DeprecationWarning, match="hlo_go.xla.schedule"):
        assert xla.memory_schedule is memory_schedule
    with pytest.warns(DeprecationWarning, match="hlo_go.methods"):
        assert xla.SEARCHED == methods.SEARCHED
    with pytest.raises(AttributeError, match=r"hlo_go\.methods\.searched_tasks"):
        _ = xla.searched_tasks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(getattr(xla, name) is not None for name in xla.__all__)  # no warning
    assert len(xla.__all__) <= 30
    assert methods.searched_tasks(get_cluster("host-cpu-1")) == ("fusion",)
    assert np.all(np.isin(["run_placed", "measure_placed"], xla.__all__))
