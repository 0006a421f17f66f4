"""The jit benchmark's re-measure reads the decorator's kept decisions back and compiles
them as the decorator does (private names of ``hlo_go.api.jit`` it must keep up with)."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import hlo_go
from benchmarks.bench_jit import kept_executable


def _step(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.sum(jnp.tanh(x @ w) * 2.0 + 1.0, axis=0)


def test_kept_decisions_compile_again_and_match_jax_jit(tmp_path: Path) -> None:
    x = jnp.linspace(-1.0, 1.0, 64, dtype=jnp.float32).reshape(8, 8)
    w = jnp.eye(8, dtype=jnp.float32) * 0.5
    options = hlo_go.Options(cache_dir=tmp_path, measure=False, candidates=("fuse-all-legal",))
    decorated = hlo_go.jit(_step, options=options)
    decorated(x, w)
    lowered = decorated.jitted.lower(x, w)
    executable = kept_executable(decorated, lowered, (x, w), options)
    assert executable is not None
    np.testing.assert_allclose(
        np.asarray(executable.compiled(x, w)), np.asarray(jax.jit(_step)(x, w)), rtol=1e-6
    )
    elsewhere = hlo_go.Options(cache_dir=tmp_path / "empty")
    assert kept_executable(decorated, lowered, (x, w), elsewhere) is None
