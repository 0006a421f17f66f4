"""``@hlo_go.jit``'s cache and checks (issues 40 and 41): the key holds the environment,
a stale "kept" verdict is re-checked and dropped, unreadable entries are misses and are
rewritten, an unwritable directory keeps verdicts in memory, NaN inputs do not let a
wrong executable through, ``jax.jit`` parity and ``explain()``."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlo_go
from hlo_go.api import HLO_GO, JAX_JIT, CacheWriteWarning, DecisionCache, Options, Record
from hlo_go.api import cache as cache_module
from hlo_go.api.cache import environment, fingerprint

# Cheap options: one heuristic candidate, outputs checked, nothing timed.
UNTIMED = dict(candidates=("xla-cpu-like",), measure=False)


@pytest.fixture(autouse=True)
def _new_process_cache():
    """Each test starts as a new process would: no verdict remembered in memory."""
    cache_module._SHARED.clear()
    yield
    cache_module._SHARED.clear()


def chain(x):
    """Many cheap elementwise ops on a large array: fused, one pass over memory; unfused,
    one pass per op (far slower)."""
    for k in range(16):
        x = x * (1.0 + 0.01 * k) + 0.5
    return x


def test_the_key_holds_versions_backend_device_and_cpu():
    env = environment()
    for part in ("hlo_go=", "jax=", "jaxlib=", "backend=cpu", "device_kind=", "cpu="):
        assert part in env
    lowered = jax.jit(chain).lower(jnp.ones(8))
    key = Options().key()
    assert fingerprint(lowered, key) == fingerprint(lowered, key)
    other_jaxlib = env.replace("jaxlib=", "jaxlib=0.0.0-")
    other_cpu = env + " (another host)"
    keys = {fingerprint(lowered, key, environment_key=e) for e in (env, other_jaxlib, other_cpu)}
    assert len(keys) == 3
    assert fingerprint(lowered, Options(min_gain=0.1).key()) != fingerprint(lowered, key)


def test_a_stale_kept_verdict_is_rechecked_and_dropped(tmp_path):
    from hlo_go import baselines
    from hlo_go.sim import get_cluster
    from hlo_go.xla import program

    x = jnp.linspace(-1.0, 1.0, 1 << 22)
    options = Options(cache_dir=tmp_path, candidates=("xla-cpu-like",), measure_budget_s=2.0)
    lowered = jax.jit(chain).lower(x)
    key = fingerprint(lowered, options.key())
    # A verdict another process would have written, for decisions genuinely slower than
    # jax.jit here: no fusion at all on a long elementwise chain.
    graph = program(lowered).graph
    slower = baselines.get("no-fusion")(graph, get_cluster("host-cpu-1"))
    stale = Record("(float32[4194304])", HLO_GO, "kept (stale)", candidate="no-fusion")
    DecisionCache(tmp_path).store(key, stale, slower)

    f = hlo_go.jit(chain, options=options)
    np.testing.assert_allclose(f(x), jax.jit(chain)(x), rtol=1e-5, atol=1e-6)
    (record,) = f.records
    assert record.source == "decided", record.reason
    assert "dropped" in record.reason and "no-fusion" in record.reason
    assert record.candidate != "no-fusion"
    # The entry on disk is the new verdict, not the stale one.
    entry = DecisionCache(tmp_path).load(key)
    assert entry is not None and entry[0].candidate != "no-fusion"


def test_a_truncated_entry_is_a_miss_and_is_rewritten(tmp_path):
    x = jnp.linspace(-1.0, 1.0, 4096)
    f = hlo_go.jit(chain, options=Options(cache_dir=tmp_path, **UNTIMED))
    f(x)
    assert f.records[0].kept == HLO_GO
    (npz,) = tmp_path.glob("*.npz")
    npz.write_bytes(npz.read_bytes()[:40])  # truncated: BadZipFile
    cache_module._SHARED.clear()  # a new process
    g = hlo_go.jit(chain, options=Options(cache_dir=tmp_path, **UNTIMED))
    np.testing.assert_allclose(g(x), jax.jit(chain)(x), rtol=1e-5, atol=1e-6)
    assert g.records[0].source == "decided" and g.records[0].kept == HLO_GO
    with np.load(npz) as arrays:  # rewritten, whole
        assert "fusion_priority" in arrays
    cache_module._SHARED.clear()
    h = hlo_go.jit(chain, options=Options(cache_dir=tmp_path, **UNTIMED))
    h(x)
    assert h.records[0].source == "cache" and h.records[0].kept == HLO_GO


def test_an_unwritable_cache_keeps_the_verdict_in_memory_and_warns_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    options = Options(cache_dir=blocker / "jit", **UNTIMED)
    x = jnp.linspace(-1.0, 1.0, 4096)
    with pytest.warns(CacheWriteWarning, match="memory"):
        f = hlo_go.jit(chain, options=options)
        f(x)
        f(jnp.ones((8, 8)))  # a second signature: no second warning
    assert f.records[0].kept == HLO_GO
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWriteWarning)
        g = hlo_go.jit(chain, options=options)
        g(x)
    assert g.records[0].source == "cache" and g.records[0].kept == HLO_GO


def test_nan_inputs_do_not_let_a_wrong_executable_through(tmp_path, monkeypatch):
    from hlo_go.xla import Executable, Program

    def add(x, y):
        return x * 2.0 + y

    x = jnp.full((64, 64), jnp.nan)
    y = jnp.full((64, 64), jnp.nan)
    wrong = jax.jit(lambda x, y: x * 3.0 + y).lower(x, y).compile()

    def lower_wrong(self, *args, **kwargs):  # a faulty lowering: another function's code
        return Executable(wrong, wrong, label="wrong")

    monkeypatch.setattr(Program, "lower", lower_wrong)
    f = hlo_go.jit(add, options=Options(cache_dir=tmp_path, **UNTIMED))
    out = f(x, y)
    assert np.all(np.isnan(np.asarray(out)))  # jax.jit's outputs, NaN as the inputs
    (record,) = f.records
    assert record.kept == JAX_JIT, record.reason
    assert "differ" in record.reason and "redrawn finite inputs" in record.checked_on
    assert not list(tmp_path.glob("*.npz"))


def test_jax_jit_parity_and_explain(tmp_path):
    def scaled(x, n, *, mode="sin"):
        act = jnp.sin if mode == "sin" else jnp.tanh
        for _ in range(n):
            x = act(x) * 1.5
        return x

    f = hlo_go.jit(
        scaled,
        static_argnums=1,
        static_argnames="mode",
        options=Options(cache_dir=tmp_path, **UNTIMED),
    )
    x = jnp.linspace(0.0, 1.0, 4096)
    assert f.eval_shape(x, 3).shape == (4096,)
    assert "sine" in f.lower(x, 3).as_text() or "sin" in f.lower(x, 3).as_text()
    assert f.trace(x, 3).jaxpr is not None
    f(x, 3)
    f(np.asarray(x), 3)  # numpy input: another key, the same text
    f(x, 2, mode="tanh")
    jax.grad(lambda v: f(v, 2).sum())(x)
    jax.vmap(lambda v: f(v, 2))(x.reshape(64, 64))
    text = f.explain()
    assert "static 3" in text and "mode=static 'tanh'" in text
    assert text.count("signature (float32[4096], static 3)") == 1
    assert text.count("another transformation") == 1
    assert "Options(" not in repr(f) and "Options(" not in text


def test_a_long_signature_is_elided_in_the_log_line_and_whole_in_explain():
    signature = "({" + ", ".join(f"p{i}: float32[8, 8]" for i in range(400)) + "},)"
    record = Record(signature, JAX_JIT, "fell back: lowering failed")
    logged = record.describe(signature_chars=100).splitlines()[0]
    assert logged.startswith("signature ({p0: float32[8, 8]")
    assert f"...({len(signature) - 100} characters)..." in logged and len(logged) < 200
    assert logged.endswith(f"{signature[-50:]}: kept {JAX_JIT} ({record.source})")
    assert (
        record.describe().splitlines()[0]
        == f"signature {signature}: kept {JAX_JIT} ({record.source})"
    )
    short = Record("(float32[3],)", JAX_JIT, "x")
    assert short.describe(signature_chars=100) == short.describe()
