"""A registry of small real JAX programs whose HLO text the parser tests use.

Each entry of :data:`SAMPLES` builds ``(fn, example_args)``; :func:`hlo_text`
lowers ``jax.jit(fn)`` on those arguments and returns XLA's HLO text, either as
lowered (``"unoptimized"``) or after XLA's CPU compiler (``"optimized"``).

The programs are chosen to cover the HLO opcodes and attribute syntaxes that JAX
emits on CPU: training steps of Flax models (convolutions, batch norm, attention,
Adam), loops (``while`` from ``scan``/``fori_loop``), conditionals, random number
generation, sorting, scatter/gather, LAPACK custom calls, collectives over 8 CPU
devices, many dtypes and a grab bag of less common ops. Sizes are tiny so that
generating every text of every sample takes well under a minute.

The samples in :data:`MULTI_DEVICE` need 8 CPU devices. ``tests/conftest.py``
asks for them before JAX is used; importing this module first does the same.

What JAX 0.10.2 does not emit on CPU, and so only the hand-written modules in
``tests/data/xla_style`` cover: async collectives (``*-start``/``*-done``; the
CPU compiler keeps collectives synchronous), generic ``async-*``, ``send``/``recv``,
``infeed``/``outfeed``, ``copy-start``/``copy-done``, dynamic shapes
(``get-dimension-size``/``set-dimension-size``), ``stochastic-convert``,
``collective-broadcast``, ``replica-id``, and the ``cholesky``/``triangular-solve``
ops (LAPACK custom calls instead). ``logistic``, ``asin``/``acos``/``atan``/``sinh``/
``cosh`` and friends are expanded into other ops before they reach HLO.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.experimental import io_callback
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

# Must happen before JAX initializes its backends; a no-op error if it already did.
with contextlib.suppress(RuntimeError):
    jax.config.update("jax_num_cpu_devices", 8)

Sample = tuple[Callable[..., Any], tuple[Any, ...]]

STAGES: tuple[str, ...] = ("unoptimized", "optimized")

NUM_DEVICES = 8


# Example arguments are made with NumPy: every eager JAX op would cost a compile,
# and building the samples should cost only the compiles of the samples themselves.


def _key(seed: int = 0) -> np.ndarray:
    """A raw threefry key, as ``jax.random.PRNGKey(seed)`` makes it."""
    return np.array([0, seed], dtype=np.uint32)


def _normal(seed: int, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ints(seed: int, shape: tuple[int, ...], high: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int32)


def _materialize(shapes: Any, seed: int = 0) -> Any:
    """Concrete values for a pytree of ``ShapeDtypeStruct`` (from ``jax.eval_shape``).

    Flax leaves get their usual initial values by name: variances and scales are
    ones, biases and means are zeros, and other weights are small normals.
    """
    rng = np.random.default_rng(seed)

    def leaf(path: tuple[Any, ...], s: jax.ShapeDtypeStruct) -> np.ndarray:
        names = "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
        last = names.rsplit("/", 1)[-1]
        if last in ("var", "scale"):
            return np.ones(s.shape, s.dtype)
        if last in ("bias", "mean"):
            return np.zeros(s.shape, s.dtype)
        return (0.1 * rng.standard_normal(s.shape)).astype(s.dtype)

    return jax.tree_util.tree_map_with_path(leaf, shapes)


def _init_opt_state(tx: optax.GradientTransformation, params: Any) -> Any:
    """``tx.init(params)`` without running JAX ops eagerly (Adam and SGD start at zero)."""
    shapes = jax.eval_shape(tx.init, params)
    return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)


def _softmax_xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


# --------------------------------------------------------------------------- models


class _ConvNet(nn.Module):
    """Conv → BatchNorm → max-pool → conv → LayerNorm → avg-pool → dense."""

    num_classes: int = 4

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        x = nn.Conv(8, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.Conv(8, (3, 3), strides=(1, 1))(x)
        x = nn.LayerNorm()(x)
        x = nn.gelu(x)
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(self.num_classes)(x)


class _TransformerLM(nn.Module):
    """One pre-LayerNorm decoder block with causal self-attention."""

    vocab: int = 32
    dim: int = 16
    heads: int = 2

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.dim)(tokens)
        x = x + self.param("pos", nn.initializers.normal(0.02), (tokens.shape[-1], self.dim))
        mask = nn.make_causal_mask(tokens)
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h, mask=mask)
        h = nn.LayerNorm()(x)
        h = nn.Dense(4 * self.dim)(h)
        x = x + nn.Dense(self.dim)(nn.gelu(h))
        x = nn.LayerNorm()(x)
        return nn.Dense(self.vocab)(x)


def _lstm_params(inp: int, hidden: int, out: int) -> dict[str, np.ndarray]:
    return {
        "wx": _normal(1, (inp, 4 * hidden)) * 0.1,
        "wh": _normal(2, (hidden, 4 * hidden)) * 0.1,
        "b": np.zeros((4 * hidden,), np.float32),
        "wo": _normal(3, (hidden, out)) * 0.1,
    }


def _lstm_cell(
    p: dict[str, jax.Array], carry: tuple[jax.Array, jax.Array], x: jax.Array
) -> tuple[jax.Array, jax.Array]:
    h, c = carry
    z = x @ p["wx"] + h @ p["wh"] + p["b"]
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return h, c


# --------------------------------------------------------------------------- samples


def _cnn_train_step() -> Sample:
    model = _ConvNet()
    x = _normal(0, (4, 8, 8, 3))
    y = np.arange(4, dtype=np.int32) % 4
    variables = _materialize(jax.eval_shape(functools.partial(model.init, train=True), _key(1), x))
    tx = optax.adam(1e-3)
    opt_state = _init_opt_state(tx, variables["params"])

    def step(params, batch_stats, opt_state, x, y):
        def loss_fn(params):
            logits, updates = model.apply(
                {"params": params, "batch_stats": batch_stats},
                x,
                train=True,
                mutable=["batch_stats"],
            )
            return _softmax_xent(logits, y), updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    return step, (variables["params"], variables["batch_stats"], opt_state, x, y)


def _transformer_train_step() -> Sample:
    model = _TransformerLM()
    tokens = _ints(0, (2, 8), 32)
    params = _materialize(jax.eval_shape(model.init, _key(1), tokens[:, :-1])["params"])
    tx = optax.adam(1e-3)
    opt_state = _init_opt_state(tx, params)

    def step(params, opt_state, tokens):
        def loss_fn(params):
            logits = model.apply({"params": params}, tokens[:, :-1])
            return _softmax_xent(logits, tokens[:, 1:])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, (params, opt_state, tokens)


def _lstm_batch() -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    params = _lstm_params(inp=4, hidden=8, out=3)
    xs = _normal(4, (5, 2, 4))  # [time, batch, features]
    ys = np.array([0, 2], dtype=np.int32)
    return params, xs, ys


def _lstm_scan_train_step() -> Sample:
    params, xs, ys = _lstm_batch()
    tx = optax.sgd(0.1)
    opt_state = tx.init(params)

    def step(params, opt_state, xs, ys):
        def loss_fn(p):
            zeros = jnp.zeros((xs.shape[1], p["wh"].shape[0]))

            def body(carry, x):
                h, c = _lstm_cell(p, carry, x)
                return (h, c), h

            (h, _), _ = lax.scan(body, (zeros, zeros), xs)
            return _softmax_xent(h @ p["wo"], ys)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, (params, opt_state, xs, ys)


def _lstm_unrolled_train_step() -> Sample:
    params, xs, ys = _lstm_batch()
    tx = optax.sgd(0.1)
    opt_state = tx.init(params)

    def step(params, opt_state, xs, ys):
        def loss_fn(p):
            h = c = jnp.zeros((xs.shape[1], p["wh"].shape[0]))
            for t in range(xs.shape[0]):
                h, c = _lstm_cell(p, (h, c), xs[t])
            return _softmax_xent(h @ p["wo"], ys)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, (params, opt_state, xs, ys)


def _cond_switch() -> Sample:
    def fn(x, pred, index):
        a = lax.cond(pred, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) - 1.0, x)
        branches = [
            lambda v: v + 1.0,
            lambda v: jnp.exp(v).sum(keepdims=True) * v,
            lambda v: lax.cond(v.sum() > 0, jnp.tanh, jnp.negative, v),
        ]
        b = lax.switch(index, branches, a)
        # A cond whose branches take different operands and return tuples.
        c, d = lax.cond(
            pred,
            lambda u, w: (u * w, w.astype(jnp.int32)),
            lambda u, w: (u, -w.astype(jnp.int32)),
            b,
            x,
        )
        return c, d

    return fn, (_normal(0, (8,)), np.bool_(True), np.int32(1))


def _rng() -> Sample:
    def fn(key, raw_key):
        k1, k2, k3 = jax.random.split(key, 3)
        normal = jax.random.normal(k1, (4, 4))
        mask = jax.random.bernoulli(k2, 0.3, (4, 4))
        uniform = jax.random.uniform(k3, (4,), minval=-1.0, maxval=1.0)
        new_key, bits = lax.rng_bit_generator(raw_key, (4, 4), dtype=jnp.uint32)
        _, bits64 = lax.rng_bit_generator(
            new_key,
            (3,),
            dtype=jnp.uint64 if jax.config.x64_enabled else jnp.uint32,
            algorithm=lax.RandomAlgorithm.RNG_PHILOX,
        )
        legacy = lax.rng_uniform(jnp.float32(0.0), jnp.float32(1.0), (2, 2))
        return jnp.where(mask, normal, 0.0), uniform, bits, bits64, new_key, legacy

    return fn, (_key(0), np.array([1, 2, 3, 4], dtype=np.uint32))


def _sort_topk() -> Sample:
    def fn(x, y, keys):
        s = jnp.sort(x, axis=-1)
        order = jnp.argsort(y, descending=True, stable=True)
        vals, idx = lax.top_k(x, 3)
        k_sorted, a_sorted, b_sorted = lax.sort((keys, x[0], y), num_keys=1, is_stable=True)
        lex = lax.sort((keys, y, x[1]), num_keys=2)
        return s, order, vals, idx, k_sorted, a_sorted, b_sorted, lex

    x = _normal(0, (3, 10))
    y = _normal(1, (10,))
    keys = _ints(2, (10,), 4)
    return fn, (x, y, keys)


def _scatter_gather() -> Sample:
    def fn(x, idx, cube, seg, data):
        added = x.at[idx].add(1.0)
        maxed = x.at[idx, 1].max(data[:3])
        setted = cube.at[:, idx[:2], 0].set(-1.0)
        taken = jnp.take(x, idx, axis=0)
        fancy = cube[idx[:2], :, idx[1:3]]  # gather with batch-like and offset dims
        clipped = jnp.take(cube, idx, axis=1, mode="clip")
        filled = jnp.take(data, idx + 7, mode="fill", fill_value=-2.0)
        segs = jax.ops.segment_sum(data, seg, num_segments=4)
        segmax = jax.ops.segment_max(data, seg, num_segments=4)
        return added, maxed, setted, taken, fancy, clipped, filled, segs, segmax

    x = _normal(0, (6, 4))
    idx = np.array([0, 2, 5], dtype=np.int32)
    cube = _normal(1, (3, 5, 4))
    seg = np.array([0, 0, 1, 3, 3, 2], dtype=np.int32)
    data = _normal(2, (6,))
    return fn, (x, idx, cube, seg, data)


def _custom_calls() -> Sample:
    def host_fn(v: np.ndarray) -> np.ndarray:
        return np.asarray(np.tanh(v), dtype=np.float32)

    def fn(a, b):
        spd = a @ a.T + 4.0 * jnp.eye(a.shape[0])
        chol = jnp.linalg.cholesky(spd)
        w, v = jnp.linalg.eigh(spd)
        q, r = jnp.linalg.qr(a)
        sol = jax.scipy.linalg.solve_triangular(chol, b, lower=True)
        lu = jax.scipy.linalg.lu_factor(a)
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        cb = jax.pure_callback(host_fn, jax.ShapeDtypeStruct(b.shape, b.dtype), b)
        # An ordered effect threads a token[] through the entry computation.
        io_callback(lambda v: None, None, cb, ordered=True)
        token = lax.create_token(cb)  # after-all
        return chol, w, v, q, r, sol, lu, u, s, vt, cb, token

    return fn, (_normal(0, (4, 4)), _normal(1, (4, 2)))


def _mesh() -> Mesh:
    devices = jax.devices()
    if len(devices) < NUM_DEVICES:
        raise RuntimeError(
            f"the collective samples need {NUM_DEVICES} CPU devices, JAX has {len(devices)}: "
            "call jax.config.update('jax_num_cpu_devices', 8) before using JAX"
        )
    return Mesh(np.array(devices[:NUM_DEVICES]).reshape(2, 4), ("x", "y"))


def _collectives() -> Sample:
    mesh = _mesh()

    def per_device(a, b):
        total = lax.psum(a, "y")  # all-reduce over subgroups
        gathered = lax.all_gather(a, "x", tiled=True)  # all-gather
        scattered = lax.psum_scatter(b, "y", scatter_dimension=0, tiled=True)  # reduce-scatter
        swapped = lax.all_to_all(b, "y", split_axis=0, concat_axis=1, tiled=True)  # all-to-all
        shifted = lax.ppermute(a, "y", perm=[(i, (i + 1) % 4) for i in range(4)])
        biggest = lax.pmax(a, ("x", "y"))
        index = lax.axis_index(("x", "y")).reshape(1)
        return total, gathered, scattered, swapped, shifted, biggest, index

    smap = jax.shard_map(
        per_device,
        mesh=mesh,
        in_specs=(P("x", "y"), P("x")),
        out_specs=(
            P("x", "y"),
            P(None, "y"),
            P("x", "y"),
            P("x", "y"),
            P("x", "y"),
            P("x", "y"),
            P(("x", "y")),
        ),
        check_vma=False,
    )

    row = NamedSharding(mesh, P("x", "y"))
    rep = NamedSharding(mesh, P())

    def fn(a, b, w):
        outs = smap(a, b)
        # GSPMD-partitioned matmul and reduction between sharded arrays.
        h = jax.lax.with_sharding_constraint(jnp.tanh(a @ w), row)
        return (*outs, jax.lax.with_sharding_constraint(h.sum(axis=0), rep))

    a = jax.device_put(_normal(0, (8, 8)), row)
    b = jax.device_put(_normal(1, (8, 16)), NamedSharding(mesh, P("x")))
    w = jax.device_put(_normal(2, (8, 8)), NamedSharding(mesh, P(None, "y")))
    return fn, (a, b, w)


def _dtypes() -> Sample:
    def fn(xb, xh, i8, u32, z):
        bf = (xb * xb + jnp.bfloat16(1)).astype(jnp.float32)
        hf = jnp.sqrt(jnp.abs(xh)) * jnp.float16(0.5)
        acc = jnp.sum(i8.astype(jnp.int32)) + jnp.max(i8)
        wide = lax.mul(i8, i8) // jnp.int8(3)
        bits = lax.bitcast_convert_type(bf, jnp.uint32)
        back = lax.bitcast_convert_type(u32, jnp.float32)
        halves = lax.bitcast_convert_type(hf, jnp.int16)
        narrow = lax.reduce_precision(bf, exponent_bits=5, mantissa_bits=10)
        pop = lax.population_count(u32)
        clz = lax.clz(u32)
        shl = lax.shift_left(u32, jnp.uint32(3))
        shr = lax.shift_right_logical(u32, jnp.uint32(5))
        sar = lax.shift_right_arithmetic(i8, jnp.int8(2))
        logic = (u32 & ~bits) ^ (u32 | jnp.uint32(7))
        zz = z * jnp.conj(z) + jnp.exp(z)
        mag = jnp.abs(z) + jnp.angle(z) + jnp.real(z) * jnp.imag(z)
        mixed = lax.complex(bf, hf[:4].astype(jnp.float32))
        rounded = jnp.round(bf) + jnp.floor(bf) + jnp.ceil(bf) + jnp.sign(bf)
        rounded = rounded + lax.round(bf, lax.RoundingMethod.AWAY_FROM_ZERO)
        finite = jnp.isfinite(hf)
        return (
            acc,
            wide,
            back,
            halves,
            narrow,
            pop,
            clz,
            shl,
            shr,
            sar,
            logic,
            zz,
            mag,
            mixed,
            rounded,
            finite,
        )

    xb = _normal(0, (4,), jnp.bfloat16)
    xh = _normal(1, (8,), np.float16)
    i8 = np.array([-3, 5, 7, -128], dtype=np.int8)
    u32 = np.array([1, 2, 0xFFFF, 0x80000000], dtype=np.uint32)
    z = (_normal(2, (4,)) + 1j * _normal(3, (4,))).astype(np.complex64)
    return fn, (xb, xh, i8, u32, z)


def _misc() -> Sample:
    def fn(x, img, n, i, signal):
        # while with a data-dependent trip count, fori_loop with a known one.
        def cond(c):
            return c[0] < n

        def body(c):
            return c[0] + 1, c[1] * 1.5

        _, grown = lax.while_loop(cond, body, (jnp.int32(0), x))
        looped = lax.fori_loop(0, 4, lambda k, v: v + jnp.float32(k) * v, x)
        cs = jnp.cumsum(x, axis=1) + jnp.cumprod(x, axis=0)
        am = jnp.argmax(x, axis=1) + jnp.argmin(x, axis=0)[:1]
        padded = lax.pad(x, jnp.float32(0.0), [(-1, 2, 1), (1, -1, 0)])
        ds = lax.dynamic_slice(x, (i, 1), (2, 2))
        dus = lax.dynamic_update_slice(x, ds * 2.0, (1, i))
        io = lax.broadcasted_iota(jnp.int32, (3, 4), 1) + jnp.arange(3)[:, None]
        cat = jnp.concatenate([x, x[::-1, ::-1]], axis=0)

        def pool_loss(v):
            return nn.max_pool(v, (2, 2), strides=(2, 2), padding="SAME").sum()

        maxpool_grad = jax.grad(pool_loss)(img)  # select-and-scatter
        depthwise = lax.conv_general_dilated(
            img,
            jnp.ones((3, 3, 1, 4), img.dtype),
            window_strides=(1, 1),
            padding="SAME",
            rhs_dilation=(2, 2),
            lhs_dilation=(1, 1),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=4,
        )
        spectrum = jnp.fft.fft(signal.astype(jnp.complex64))
        inverse = (
            jnp.fft.irfft(jnp.fft.rfft(signal), n=signal.shape[0]) + jnp.fft.ifft(spectrum).real
        )

        @jax.checkpoint
        def heavy(v):
            return jnp.sin(jnp.sin(v) * 2.0)

        remat_grad = jax.grad(lambda v: heavy(v).sum())(x)
        barrier = lax.optimization_barrier((x, looped))
        clamped = jnp.clip(x, -0.5, 0.5)
        special = lax.erf(x) + jnp.expm1(x) + jnp.log1p(jnp.abs(x)) + jnp.arctan2(x, x + 1.0)
        special = special + jnp.tan(x) + jnp.cbrt(x) + lax.erf_inv(clamped) + lax.lgamma(x * x + 1)
        ints = jnp.arange(12, dtype=jnp.int32).reshape(3, 4) - 5
        divmod_ = ints // 3 + ints % 3 + lax.rem(ints, jnp.int32(4)) + lax.div(ints, jnp.int32(2))
        batch = _normal(5, (2, 3, 4))
        ein = jnp.einsum("bij,bjk->bik", batch, jnp.swapaxes(batch, 1, 2))
        return (
            grown,
            looped,
            cs,
            am,
            padded,
            dus,
            io,
            cat,
            maxpool_grad,
            depthwise,
            inverse,
            remat_grad,
            barrier,
            clamped,
            special,
            divmod_,
            ein,
        )

    x = _normal(0, (3, 4))
    img = _normal(1, (1, 6, 6, 4))
    signal = _normal(2, (8,))
    return fn, (x, img, np.int32(3), np.int32(1), signal)


SAMPLES: dict[str, Callable[[], Sample]] = {
    "cnn_train_step": _cnn_train_step,
    "transformer_train_step": _transformer_train_step,
    "lstm_scan_train_step": _lstm_scan_train_step,
    "lstm_unrolled_train_step": _lstm_unrolled_train_step,
    "cond_switch": _cond_switch,
    "rng": _rng,
    "sort_topk": _sort_topk,
    "scatter_gather": _scatter_gather,
    "custom_calls": _custom_calls,
    "collectives": _collectives,
    "dtypes": _dtypes,
    "misc": _misc,
}

MULTI_DEVICE: frozenset[str] = frozenset({"collectives"})


# ``tests/conftest.py`` may turn XLA:CPU's fusion emitters off to compile faster; that also
# changes XLA's own pipeline (scatters become while loops, lone ops stay unwrapped), so the
# "optimized" stage is compiled with XLA's default emitters, as users' modules are.
EMITTERS_OFF_FLAG = "--xla_cpu_use_fusion_emitters=false"
XLA_DEFAULT_EMITTERS: dict[str, Any] = (
    {"xla_cpu_use_fusion_emitters": True}
    if EMITTERS_OFF_FLAG in os.environ.get("XLA_FLAGS", "")
    else {}
)


@functools.cache
def _lowered(name: str) -> Any:
    fn, args = SAMPLES[name]()
    return jax.jit(fn).lower(*args)


@functools.cache
def hlo_text(name: str, stage: str) -> str:
    """HLO text of one sample.

    Args:
      name: a key of :data:`SAMPLES`.
      stage: ``"unoptimized"`` (as lowered from JAX) or ``"optimized"`` (after
        XLA's CPU compiler; fused and scheduled).

    Returns:
      The module's HLO text as XLA prints it.

    Raises:
      KeyError: unknown sample name.
      ValueError: unknown stage.
    """
    if name not in SAMPLES:
        raise KeyError(f"unknown sample {name!r}; known: {sorted(SAMPLES)}")
    if stage == "unoptimized":
        return _lowered(name).as_text(dialect="hlo")
    if stage == "optimized":
        return _lowered(name).compile(compiler_options=XLA_DEFAULT_EMITTERS).as_text()
    raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
