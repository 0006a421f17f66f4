"""Loading a learned kernel cost model and pricing a simulation's kernels with it.

A model file (:data:`MODEL_FORMAT`, msgpack via ``flax.serialization``) holds the
network's sizes and parameters, the features version it was trained on, the runtime's
time per kernel launch between kernels (``gap_s``, fitted to measured step times), and
a JSON ``meta`` (the data and the training run). Shipped models live beside this module
(:data:`SHIPPED`); a device names one in ``Device.kernel_model`` (or gives a path).

:func:`learned_durations` is what the simulator calls: a kernel's duration is the
model's seconds plus ``gap_s`` per launch. Predictions are cached per graph by a key of
the kernel's members and its roofline time (a kernel recurs across the thousands of
decisions a search scores), and the kernels not cached are featurized and run through
the network in batches. A kernel the model cannot featurize
(:func:`~hlo_go.sim.learned.features.featurizable`) keeps its roofline duration and is
counted.
"""

from __future__ import annotations

import functools
import json
import logging
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hlo_go.errors import HloGoError, HloGoWarning
from hlo_go.graph import OpGraph
from hlo_go.sim.learned.features import (
    FEATURES_VERSION,
    KernelBatch,
    featurizable,
    featurize,
    pad_batch,
    select,
)
from hlo_go.sim.learned.model import KernelNet, ModelConfig

logger = logging.getLogger(__name__)

MODEL_FORMAT = 1
"""Version of the model file's layout."""

SHIPPED: dict[str, str] = {"host-cpu": "host_cpu.msgpack"}
"""Shipped model name -> file beside this module."""

# Batches run through the network at most this large (graphs, nodes).
_CHUNK_GRAPHS = 1024
_CHUNK_NODES = 16384


class KernelModelError(ValueError, HloGoError):
    """A kernel model that cannot be loaded: unknown name, unreadable file, another format
    or features version. The message names the file."""


class MissingKernelModelWarning(HloGoWarning):
    """A device names a shipped kernel model whose file is not installed; its kernels are
    priced by the roofline."""


class KernelModel:
    """A trained kernel cost model.

    Attributes:
      name: the shipped name or the file's path.
      config: the network's sizes.
      params: its parameters.
      gap_s: seconds the runtime spends per kernel launch outside the kernels.
      meta: what it was trained on and how (JSON-able).
    """

    def __init__(
        self,
        name: str,
        config: ModelConfig,
        params: Any,
        *,
        gap_s: float,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.params = params
        self.gap_s = float(gap_s)
        self.meta = dict(meta or {})
        self._net = KernelNet(config)
        self._apply: Any = None

    def __repr__(self) -> str:
        return f"KernelModel({self.name!r}, gap_s={self.gap_s:.3g})"

    def apply(self, graphs: Any) -> Any:
        """The network on a padded batch (un-jitted): log seconds per graph."""
        return self._net.apply({"params": self.params}, graphs)

    def log_seconds(self, batch: KernelBatch) -> np.ndarray:
        """Predicted log seconds of every kernel of a batch (jitted, in padded chunks).

        Returns:
          ``float64[G]``.
        """
        if self._apply is None:
            import jax

            self._apply = jax.jit(self.apply)
        out = np.empty(batch.num_graphs, np.float64)
        ranges = _chunks(batch.n_node)
        for start, stop in ranges:
            part = batch if len(ranges) == 1 else select(batch, np.arange(start, stop))
            out[start:stop] = np.asarray(self._apply(pad_batch(part)))[: stop - start]
        return out


def _chunks(n_node: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive ranges of graphs within the chunk limits."""
    out, start, nodes = [], 0, 0
    for i, count in enumerate(n_node.tolist()):
        if i > start and (i - start >= _CHUNK_GRAPHS or nodes + count > _CHUNK_NODES):
            out.append((start, i))
            start, nodes = i, 0
        nodes += count
    if start < n_node.size:
        out.append((start, int(n_node.size)))
    return out


def shipped_models() -> list[str]:
    """Names of the shipped models whose files are installed."""
    here = Path(__file__).parent
    return [name for name, file in SHIPPED.items() if (here / file).is_file()]


def model_path(name: str) -> Path:
    """The file of a shipped model name or a path.

    Raises:
      KernelModelError: neither a shipped name nor an existing file.
    """
    if name in SHIPPED:
        return Path(__file__).with_name(SHIPPED[name])
    path = Path(name)
    if path.is_file():
        return path
    raise KernelModelError(
        f"kernel model {name!r} is neither a shipped model ({', '.join(SHIPPED)}) nor a file"
    )


def save_kernel_model(path: str | Path, model: KernelModel) -> Path:
    """Writes a model file (:data:`MODEL_FORMAT`); returns its path."""
    from flax import serialization

    payload = {
        "format": MODEL_FORMAT,
        "features_version": FEATURES_VERSION,
        "config": model.config.as_dict(),
        "gap_s": model.gap_s,
        "meta": json.dumps(model.meta, sort_keys=True),
        "params": model.params,
    }
    path = Path(path)
    path.write_bytes(serialization.msgpack_serialize(_to_numpy(payload)))
    return path


def _to_numpy(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _to_numpy(v) for k, v in tree.items()}
    if hasattr(tree, "shape") and hasattr(tree, "dtype"):
        return np.asarray(tree)
    return tree


def read_kernel_model(path: str | Path, *, name: str | None = None) -> KernelModel:
    """Reads a model file.

    Raises:
      KernelModelError: unreadable, another format, or features of another version.
    """
    from flax import serialization

    path = Path(path)
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
        fmt = payload.get("format")
    except Exception as error:  # msgpack raises several types for a corrupt file
        raise KernelModelError(f"{path}: not a kernel model file ({error})") from None
    if fmt != MODEL_FORMAT:
        raise KernelModelError(f"{path}: model format {fmt!r}, this reader needs {MODEL_FORMAT}")
    if payload.get("features_version") != FEATURES_VERSION:
        raise KernelModelError(
            f"{path}: trained on features version {payload.get('features_version')!r}, "
            f"these features are version {FEATURES_VERSION}; train it again"
        )
    try:
        config = ModelConfig.from_dict(dict(payload["config"]))
        meta = json.loads(payload.get("meta", "{}"))
        return KernelModel(
            name or str(path), config, payload["params"], gap_s=float(payload["gap_s"]), meta=meta
        )
    except (KeyError, TypeError, ValueError) as error:
        raise KernelModelError(f"{path}: malformed kernel model ({error})") from None


@functools.cache
def load_kernel_model(name: str) -> KernelModel | None:
    """A shipped model by name, or a model file by path (each loaded once).

    Returns:
      The model, or None for a shipped name whose file is not installed (warned once
      with :class:`MissingKernelModelWarning`).

    Raises:
      KernelModelError: an unknown name, or a file that cannot be read.
    """
    if name in SHIPPED and not model_path(name).is_file():
        warnings.warn(
            f"the shipped kernel model {name!r} ({model_path(name)}) is not installed; "
            "its devices' kernels are priced by the roofline "
            "(train one: python -m hlo_go.calibration.train_kernel_model)",
            MissingKernelModelWarning,
            stacklevel=2,
        )
        return None
    return read_kernel_model(model_path(name), name=name)


# ---------------------------------------------------------------------------------------------
# Pricing a simulation's kernels.


class _Cache(NamedTuple):
    graph: OpGraph
    model: KernelModel
    zobrist: np.ndarray  # uint64[N]: a random key per node
    keys: list[np.ndarray]  # [sorted uint64 keys]
    values: list[np.ndarray]  # [seconds, aligned with keys]


_CACHES: OrderedDict[tuple[int, int], _Cache] = OrderedDict()
_CACHES_SIZE = 8
_CACHE_LIMIT = 1 << 20  # entries per graph before the cache starts afresh
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _cache(graph: OpGraph, model: KernelModel) -> _Cache:
    key = (id(graph), id(model))
    hit = _CACHES.get(key)
    if hit is not None and hit.graph is graph and hit.model is model:
        _CACHES.move_to_end(key)
        return hit
    rng = np.random.default_rng(0x5EED)
    zobrist = rng.integers(0, np.iinfo(np.uint64).max, graph.num_nodes, dtype=np.uint64)
    value = _Cache(graph, model, zobrist, [np.zeros(0, np.uint64)], [np.zeros(0)])
    _CACHES[key] = value
    while len(_CACHES) > _CACHES_SIZE:
        _CACHES.popitem(last=False)
    return value


def kernel_keys(
    zobrist: np.ndarray, mptr: np.ndarray, members: np.ndarray, roofline_s: np.ndarray
) -> np.ndarray:
    """``uint64[K]`` a key per kernel: its members' random keys summed, mixed with the
    bits of its roofline time (which also reflects what it recomputes or reads)."""
    with np.errstate(over="ignore"):
        summed = np.add.reduceat(zobrist[members], mptr[:-1]) if members.size else zobrist[:0]
        bits = np.ascontiguousarray(roofline_s, np.float64).view(np.uint64)
        return summed ^ (bits * _MIX)


def learned_durations(
    graph: OpGraph,
    model: KernelModel,
    mptr: np.ndarray,
    members: np.ndarray,
    roofline_s: np.ndarray,
    launches: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Durations of kernels of one graph by a learned model.

    Args:
      graph: the graph.
      model: the model.
      mptr: ``int[K+1]`` offsets into ``members``.
      members: member node ids of each kernel (disjoint kernels).
      roofline_s: ``float64[K]`` the roofline durations (launch overhead included).
      launches: ``float64[K]`` kernel launches of each.

    Returns:
      ``(float64[K] durations, kernels left at their roofline duration)``: the model's
      seconds plus ``gap_s`` per launch where it could price the kernel.
    """
    mptr = np.asarray(mptr, np.int64)
    members = np.asarray(members, np.int64)
    roofline_s = np.asarray(roofline_s, np.float64)
    k = mptr.size - 1
    out = roofline_s.copy()
    ok = featurizable(mptr, roofline_s)
    if not ok.any():
        return out, int(k)
    cache = _cache(graph, model)
    keys = kernel_keys(cache.zobrist, mptr, members, roofline_s)
    known_keys, known_values = cache.keys[0], cache.values[0]
    seconds = np.full(k, np.nan)
    if known_keys.size:
        at = np.minimum(np.searchsorted(known_keys, keys), known_keys.size - 1)
        hit = ok & (known_keys[at] == keys)
        seconds[hit] = known_values[at[hit]]
    missing = np.flatnonzero(ok & np.isnan(seconds))
    if missing.size:
        # Kernels of one call are disjoint, and equal keys are equal kernels.
        new_keys, first = np.unique(keys[missing], return_index=True)
        todo = missing[first]
        sub_ptr, sub_members = kernel_subset(mptr, members, todo)
        batch = featurize(graph, sub_ptr, sub_members, roofline_s[todo], launches[todo])
        predicted = np.exp(model.log_seconds(batch))
        lookup = dict(zip(new_keys.tolist(), predicted.tolist(), strict=True))
        seconds[missing] = [lookup[key] for key in keys[missing].tolist()]
        merged_keys = np.concatenate([known_keys, new_keys])
        merged_values = np.concatenate([known_values, predicted])
        order = np.argsort(merged_keys, kind="stable")
        if merged_keys.size > _CACHE_LIMIT:
            order = order[:0]
        cache.keys[0], cache.values[0] = merged_keys[order], merged_values[order]
    out[ok] = seconds[ok] + model.gap_s * np.asarray(launches, np.float64)[ok]
    return out, int(k - np.count_nonzero(ok))


def kernel_subset(mptr: np.ndarray, members: np.ndarray, kernels: np.ndarray) -> tuple:
    """The CSR ``(ptr, members)`` of some kernels (indices into ``mptr``) of a CSR."""
    sizes = mptr[kernels + 1] - mptr[kernels]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    owner = np.repeat(np.arange(kernels.size), sizes)
    offsets = np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], sizes)
    return ptr, members[mptr[kernels][owner] + offsets]
