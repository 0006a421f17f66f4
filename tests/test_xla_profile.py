"""Per-instruction times read back from XLA's trace events."""

from __future__ import annotations

import jax
import jax.numpy as jnp

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
    assert all(t > 0 for t in profile.instruction_s.values())
    # Instructions run inside one call: their sum cannot exceed the calls' wall time by much.
    assert sum(profile.instruction_s.values()) < 20 * profile.step_s
