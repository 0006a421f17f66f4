"""Schedules imposed on XLA's compile: the executable runs the order we ask for."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import parse_hlo
from hlo_go.xla import (
    ScheduleError,
    apply_fusion,
    apply_schedule,
    capture_prefusion,
    compile_with,
    list_schedule,
)


def _f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.tanh(x) + jnp.exp(x), jnp.sin(x) * jnp.cos(x)


X = jnp.linspace(-1.0, 1.0, 16)


def _entry_order(compiled) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.name for i in parse_hlo(compiled.as_text()).entry.instructions]


def test_list_schedule_follows_priorities_and_dependencies() -> None:
    module = capture_prefusion(_f, X)
    entry = module.entry
    names = [i.name for i in entry.instructions]
    fifo = list_schedule(entry, {})
    assert fifo == names  # no priorities: text order
    cos = next(i.name for i in entry.instructions if i.opcode == "cosine")
    first = list_schedule(entry, {cos: 10.0, **{n: 0.0 for n in names if n != cos}})
    assert first.index(cos) == 1  # right after the parameter it needs
    apply_schedule(module, first)  # valid


def test_invalid_orders_are_rejected() -> None:
    module = capture_prefusion(_f, X)
    names = [i.name for i in module.entry.instructions]
    with pytest.raises(ScheduleError, match="before its dependency"):
        apply_schedule(module, list(reversed(names)))
    with pytest.raises(ScheduleError, match="each entry instruction once"):
        apply_schedule(module, names[:-1])


def test_compiled_executable_runs_the_requested_order() -> None:
    lowered = jax.jit(_f).lower(X)
    module = capture_prefusion(_f, X)
    names = [i.name for i in module.entry.instructions]
    reverse_priority = {n: float(k) for k, n in enumerate(names)}  # latest-defined first
    compiled, order = compile_with(lowered, priority=reverse_priority)
    assert order is not None
    assert _entry_order(compiled) == order
    assert order != names  # the reverse priorities really changed the order
    for got, want in zip(compiled(X), _f(X), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fusion_and_schedule_together() -> None:
    lowered = jax.jit(_f).lower(X)
    module = capture_prefusion(_f, X)
    by_op = {i.opcode: i.name for i in module.entry.instructions}
    fused = apply_fusion(module, [[by_op["sine"], by_op["cosine"], by_op["multiply"]]])
    fusion = next(i.name for i in fused.entry.instructions if i.opcode == "fusion")
    priority = {i.name: 0.0 for i in fused.entry.instructions} | {fusion: 100.0}
    compiled, order = compile_with(lowered, module=fused, priority=priority)
    assert order is not None and _entry_order(compiled) == order
    assert order.index(fusion) < order.index(by_op["tanh"])
    for got, want in zip(compiled(X), _f(X), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
