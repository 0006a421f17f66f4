"""Schedules imposed on XLA's compile: the executable runs the order we ask for."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import HloComputation, parse_hlo
from hlo_go.xla import ScheduleError, apply_fusion, apply_schedule, capture_prefusion, compile_with
from hlo_go.xla._jaxlib import compiled_temp_bytes
from hlo_go.xla.schedule import list_schedule, memory_schedule, names_by_structure, peak_bytes


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
    # and it is the order they give, in the captured module's names
    back = names_by_structure(parse_hlo(compiled.as_text()), module)
    assert len(back) == len(names)
    assert [back[n] for n in order if n in back] == list_schedule(module.entry, reverse_priority)
    for got, want in zip(compiled(X), _f(X), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# jaxlib 0.12's XLA:CPU wraps each op left unfused in a fusion of its own (``wrapped_tanh``,
# ...) between the pre- and post-scheduler hooks: priorities given by the handed module's
# names reach those ops through ``names_by_structure``; the order returned, and what a
# ``reorder`` callback sees, are the scheduled module's names.
def _named(name: str, prefix: str, op: str) -> bool:
    return name.startswith((prefix, f"wrapped_{op}"))


def test_fusion_and_schedule_together() -> None:
    lowered = jax.jit(_f).lower(X)
    module = capture_prefusion(_f, X)
    by_op = {i.opcode: i.name for i in module.entry.instructions}
    fused = apply_fusion(module, [[by_op["sine"], by_op["cosine"], by_op["multiply"]]])
    fusion = next(i.name for i in fused.entry.instructions if i.opcode == "fusion")
    priority = {i.name: 0.0 for i in fused.entry.instructions} | {fusion: 100.0}
    compiled, order = compile_with(lowered, module=fused, priority=priority)
    assert order is not None and _entry_order(compiled) == order
    # the order in the fused module's names (XLA may rename between the hooks)
    back = names_by_structure(parse_hlo(compiled.as_text()), fused)
    assert set(back.values()) >= {fusion, by_op["tanh"]}
    ours = [back.get(n, n) for n in order]
    assert ours.index(fusion) < ours.index(by_op["tanh"])
    for got, want in zip(compiled(X), _f(X), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# A softmax-loss shape: the logits ``l`` are read by ``e`` and by the loss ``s``; ``p``
# writes a tensor the size of the logits. Run in text order, three 1 KiB buffers are live
# at ``p``; with the loss first, the logits die before ``p`` runs.
SOFTMAX_LIKE = """
HloModule softmax_like, entry_computation_layout={(f32[256]{0})->(f32[256]{0}, f32[1]{0})}

ENTRY main {
  x = f32[256]{0} parameter(0)
  l = f32[256]{0} exponential(x)
  e = f32[256]{0} negate(l)
  p = f32[256]{0} sine(e)
  s = f32[1]{0} slice(l), slice={[0:1]}
  ROOT t = (f32[256]{0}, f32[1]{0}) tuple(p, s)
}
"""


def test_peak_bytes_and_memory_schedule_by_hand() -> None:
    entry = parse_hlo(SOFTMAX_LIKE).entry
    text_order = [i.name for i in entry.instructions]
    # l, e and p live together at p (e dies after it); outputs p and s never die.
    assert peak_bytes(entry, text_order) == 3 * 1024
    new = memory_schedule(entry, text_order)
    assert new == ["x", "l", "e", "s", "p", "t"]
    # At s: l, e and s (l dies after it); at p: e, s and p.
    assert peak_bytes(entry, new) == 2 * 1024 + 4
    # Already the order of least memory: returned unchanged.
    assert memory_schedule(entry, new) == new
    with pytest.raises(ScheduleError, match=r"missing \['p'\], unknown \['q'\]"):
        peak_bytes(entry, ["x", "l", "e", "s", "q", "t"])
    with pytest.raises(ScheduleError, match="each instruction once"):
        memory_schedule(entry, text_order[:-1])


def test_memory_schedule_keeps_an_order_it_cannot_improve() -> None:
    module = capture_prefusion(_f, X)
    names = [i.name for i in module.entry.instructions]
    order = memory_schedule(module.entry, names)
    assert peak_bytes(module.entry, order) <= peak_bytes(module.entry, names)
    apply_schedule(module, order)  # valid


def _softmax_loss(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    logits = jnp.exp(x)
    flipped = jnp.flip(jnp.sin(logits))  # a full-size temporary written beside the logits
    return jnp.sum(flipped * flipped), jnp.sum(logits)


def test_compiled_memory_schedule_lowers_xlas_temporaries() -> None:
    x = jnp.linspace(-1.0, 1.0, 1 << 16)
    lowered = jax.jit(_softmax_loss).lower(x)

    def reverse_first(entry: HloComputation, order: list[str]) -> list[str]:
        # The reverse runs as soon as it is ready, before the sum (which XLA splits into
        # reduce-windows) frees the logits.
        first = {n: 10.0 if _named(n, "rev", "reverse") else 0.0 for n in order}
        return list_schedule(entry, first)

    def then_memory(entry: HloComputation, order: list[str]) -> list[str]:
        return memory_schedule(entry, reverse_first(entry, order))

    compiled_bad, order_bad = compile_with(lowered, reorder=reverse_first)
    compiled_mem, order_mem = compile_with(lowered, reorder=then_memory)
    assert order_bad is not None and order_mem is not None
    assert _entry_order(compiled_mem) == order_mem

    def first(order: list[str], prefix: str, op: str) -> int:
        return next(k for k, n in enumerate(order) if _named(n, prefix, op))

    assert first(order_bad, "rev", "reverse") < first(order_bad, "reduce", "reduce")
    assert first(order_mem, "reduce", "reduce") < first(order_mem, "rev", "reverse")
    # XLA's buffer assignment: logits, sine and reverse live together, or two of them
    # (plus the reduce-windows' small partial sums, placed differently).
    bad, mem = compiled_temp_bytes(compiled_bad), compiled_temp_bytes(compiled_mem)
    assert bad is not None and mem is not None and bad - mem >= 0.9 * x.nbytes
    for got, want in zip(compiled_mem(x), _softmax_loss(x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)
