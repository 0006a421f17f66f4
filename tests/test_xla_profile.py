"""Per-instruction times read back from XLA's trace events."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from hlo_go.hlo import parse_hlo
from hlo_go.xla import profile_lowered


def test_profile_names_entry_instructions_and_times_are_plausible() -> None:
    def f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.tanh(x @ x) + jnp.exp(x).sum(), jnp.sin(x)

    x = jnp.ones((128, 128))
    profile = profile_lowered(jax.jit(f).lower(x), [x], repeats=3)
    assert profile.module_name == "jit_f" and profile.runs == 3
    entry = {i.name for i in parse_hlo(profile.hlo_text).entry.instructions}
    assert profile.instruction_s and set(profile.instruction_s) <= entry
    assert all(t > 0 for t in profile.instruction_s.values()) and profile.step_s > 0


def test_shared_durations_split_overlaps_by_processor_share() -> None:
    from hlo_go.xla.profile import shared_durations

    # A [0,4), B [1,3), C [2,6): [0,1) A alone; [1,2) A,B; [2,3) A,B,C; [3,4) A,C; [4,6) C.
    a, b, c = shared_durations([(0.0, 4.0), (1.0, 3.0), (2.0, 6.0)])
    assert a == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 2)
    assert b == pytest.approx(1 / 2 + 1 / 3)
    assert c == pytest.approx(1 / 3 + 1 / 2 + 2)
    assert a + b + c == pytest.approx(6.0)  # the union's length
    assert shared_durations([(0.0, 1.0), (2.0, 3.0)]) == [1.0, 1.0]  # disjoint: unchanged
    assert shared_durations([]) == []


def test_cpu_clock_profile_of_a_pinned_process() -> None:
    """Pinned to one core and timed by CPU time, a step's kernels add up to no more than
    the step (overlapping thunks are charged by share)."""
    from hlo_go.xla.timing import default_cpu, in_pinned_process

    profile = in_pinned_process(_profile_small, cpu=default_cpu())
    assert profile.runs == 3
    total = sum(profile.instruction_s.values())
    # Kernels and step are different runs, and a run's events are scaled by its own CPU /
    # wall ratio: with other processes on the core (CI's two workers and this child on two
    # cores) the kernels came to 1.25x the step once; overlapping thunks charged in full
    # would count several times over.
    assert 0 < total <= 1.5 * profile.step_s


def _profile_small() -> object:
    import os

    assert len(os.sched_getaffinity(0)) == 1

    def f(x: jax.Array) -> jax.Array:
        y = jnp.tanh(x @ x)
        return (y @ x + jnp.exp(x) @ x).sum()

    x = jnp.ones((256, 256))
    return profile_lowered(jax.jit(f).lower(x), [x], repeats=3, clock="cpu")


def _malloc_settings() -> dict[str, str | None]:
    import os

    from hlo_go.xla.timing import RETAIN_MALLOC_ENV

    return {name: os.environ.get(name) for name in RETAIN_MALLOC_ENV}


def test_pinned_process_allocator_settings_reach_the_child_only() -> None:
    from hlo_go.xla.timing import RETAIN_MALLOC_ENV, default_cpu, in_pinned_process

    before = _malloc_settings()
    assert in_pinned_process(_malloc_settings, cpu=default_cpu(), allocator="retain") == (
        RETAIN_MALLOC_ENV
    )
    assert _malloc_settings() == before  # restored
    assert in_pinned_process(_malloc_settings, cpu=default_cpu()) == before
    with pytest.raises(ValueError, match="allocator must be one of"):
        in_pinned_process(_malloc_settings, cpu=default_cpu(), allocator="tcmalloc")  # type: ignore[arg-type]
