"""Compressed adjacency of an OpGraph, shared by fusion grouping and the simulator.

Both walk successors and predecessors node by node inside compiled loops, so the
edge lists are sorted once into CSR form (``ptr[i]:ptr[i+1]`` indexes node ``i``'s
neighbours) and cached per graph: a policy or a search scores thousands of decisions
on one graph, and the arrays depend on the graph only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from hlo_go.decisions._jit import jit
from hlo_go.graph import OpGraph


class Adjacency(NamedTuple):
    """CSR neighbour lists of an OpGraph with ``N`` nodes, ``E`` data and ``C`` control edges.

    Attributes:
      position: ``int64[N]`` each node's index in ``graph.topo_order``.
      succ_ptr: ``int64[N+1]`` offsets into ``succ`` (data and control successors).
      succ: ``int32[E+C]`` successor node ids, data and control edges together.
      pred_ptr: ``int64[N+1]`` offsets into ``pred``.
      pred: ``int32[E+C]`` predecessor node ids, data and control edges together.
      data_succ_ptr: ``int64[N+1]`` offsets into ``data_succ``.
      data_succ: ``int32[E]`` data successors.
      data_pred_ptr: ``int64[N+1]`` offsets into ``data_pred`` and ``data_pred_bytes``.
      data_pred: ``int32[E]`` data predecessors (operands, one per distinct producer).
      data_pred_bytes: ``int64[E]`` bytes of each of those edges.
      control_pred_ptr: ``int64[N+1]`` offsets into ``control_pred``.
      control_pred: ``int32[C]`` control predecessors.
    """

    position: np.ndarray
    succ_ptr: np.ndarray
    succ: np.ndarray
    pred_ptr: np.ndarray
    pred: np.ndarray
    data_succ_ptr: np.ndarray
    data_succ: np.ndarray
    data_pred_ptr: np.ndarray
    data_pred: np.ndarray
    data_pred_bytes: np.ndarray
    control_pred_ptr: np.ndarray
    control_pred: np.ndarray


@jit
def _counting_order(keys: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """The stable order that sorts ``keys``, given the CSR offsets of their counts."""
    fill = ptr[:-1].copy()
    order = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[fill[k]] = i
        fill[k] += 1
    return order


def _csr(n: int, keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """(ptr, values sorted by key ...): a stable counting sort of edges by ``keys``."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    order = _counting_order(np.ascontiguousarray(keys), ptr)
    return (ptr, *(v[order] for v in values))


def build_adjacency(graph: OpGraph) -> Adjacency:
    """The CSR adjacency of a graph (uncached; see :func:`adjacency`).

    Args:
      graph: an OpGraph.

    Returns:
      Its :class:`Adjacency`; neighbours of a node are listed in edge order.
    """
    n = graph.num_nodes
    position = np.empty(n, dtype=np.int64)
    position[graph.topo_order] = np.arange(n, dtype=np.int64)
    src = np.concatenate([graph.senders, graph.control_senders]).astype(np.int32)
    dst = np.concatenate([graph.receivers, graph.control_receivers]).astype(np.int32)
    succ_ptr, succ = _csr(n, src, dst)
    pred_ptr, pred = _csr(n, dst, src)
    data_succ_ptr, data_succ = _csr(n, graph.senders, graph.receivers.astype(np.int32))
    data_pred_ptr, data_pred, data_pred_bytes = _csr(
        n, graph.receivers, graph.senders.astype(np.int32), graph.edge_bytes.astype(np.int64)
    )
    control_pred_ptr, control_pred = _csr(
        n, graph.control_receivers, graph.control_senders.astype(np.int32)
    )
    return Adjacency(
        position,
        succ_ptr,
        succ,
        pred_ptr,
        pred,
        data_succ_ptr,
        data_succ,
        data_pred_ptr,
        data_pred,
        data_pred_bytes,
        control_pred_ptr,
        control_pred,
    )


# id(graph) -> (graph, {name: value}). The graph is held so that its id is not reused
# while the entry lives; OpGraphs are tuples and cannot be weakly referenced.
_CACHE: OrderedDict[int, tuple[OpGraph, dict[str, Any]]] = OrderedDict()
_CACHE_SIZE = 8


def graph_cached(graph: OpGraph, name: str, build: Callable[[OpGraph], Any]) -> Any:
    """A value derived from a graph alone, computed once per graph (for the last few graphs).

    OpGraph arrays are read-only, so derived values cannot go stale; returned arrays
    should be treated as read-only too.

    Args:
      graph: an OpGraph.
      name: what the value is (one name per ``build``).
      build: computes the value from the graph.

    Returns:
      ``build(graph)``, from the cache when it was computed before.
    """
    key = id(graph)
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not graph:
        hit = _CACHE[key] = (graph, {})
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    values = hit[1]
    if name not in values:
        values[name] = build(graph)
    return values[name]


def adjacency(graph: OpGraph) -> Adjacency:
    """The CSR adjacency of a graph, cached (:func:`graph_cached`).

    Args:
      graph: an OpGraph.

    Returns:
      Its :class:`Adjacency`.
    """
    return graph_cached(graph, "adjacency", build_adjacency)
