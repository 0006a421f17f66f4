"""The kernel cost model: what one node costs on one device.

A kernel (a fused group, or a node on its own) runs for::

    launch_overhead × launches + max(compute, memory)         (a roofline)
    compute = Σ over members of  (flops / rate + transcendentals / trate) / ce
    memory  = bytes / (memory_bandwidth · min over members of me)

where ``rate`` is the device's FLOP/s for the member's output element type (its matrix
units for ``dot``/``convolution``), ``trate`` its transcendental rate, and ``ce`` /
``me`` its compute / memory efficiency for the member's op class (:func:`op_classes`;
a matrix op in a group of two or more nodes uses the ``fused_matrix`` class); a
``reduce-window`` on a device with ``window_reads_per_s`` computes for flops / that rate
(a reducer call per window read).
A member of a fused kernel counts once per time the kernel computes it: a value a fused
``reduce-window`` reads is computed at every read (``OpGraph.operand_reads`` per element,
:mod:`hlo_go.sim.simulate`).
``launches`` is 1, except for a ``while`` or ``conditional``, which runs every kernel of
its body on every trip (``OpGraph.kernel_launches``).
``bytes`` is what the kernel moves to and from memory: the members' bytes read and
written (XLA's HloCostAnalysis counts) minus the traffic between members, which a
fused kernel keeps in registers: a member's read of another member's output is not
counted, nor is the write of a member whose users are all in the group.

Some nodes are not kernels (:func:`node_kinds`): *views* name existing buffers
(``tuple``, ``get-tuple-element``, ``bitcast``, ``after-all``, ``add-dependency``,
``domain``, ``opt-barrier``) and *holders* are buffers that exist before the step
(``parameter``, ``constant``). Unfused, they take no time and no device slot.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo_go.graph import (
    DATA_MOVEMENT_OPCODES,
    DTYPE_CLASSES,
    FEATURE_NAMES,
    OPCODE_VOCAB,
    OpGraph,
)
from hlo_go.hlo import ELEMENTWISE_OPCODES, HOLDER_OPCODES, VIEW_OPCODES
from hlo_go.sim.cluster import OP_CLASSES, Cluster

# Node kinds (:func:`node_kinds`).
KERNEL, VIEW, HOLDER = 0, 1, 2

MATRIX_OPCODES: frozenset[str] = frozenset({"dot", "convolution", "ragged-dot"})
# Op classes that run on matrix units (``Device.matrix_flops``) and become ``fused_matrix``
# inside a fused group.
MATRIX_CLASSES: tuple[int, ...] = tuple(
    OP_CLASSES.index(c) for c in ("matrix", "convolution", "grouped_convolution")
)
# op class by ``OpGraph.matrix_kind`` (none, dot, convolution, grouped convolution).
_MATRIX_KIND_CLASS = np.array([-1, *MATRIX_CLASSES], dtype=np.int8)
REDUCTION_OPCODES: frozenset[str] = frozenset({
    "reduce", "reduce-window", "select-and-scatter", "reduce-precision",
})  # fmt: skip
_DATA_MOVEMENT = DATA_MOVEMENT_OPCODES | {"scatter", "iota"}


def _class_of(name: str) -> int:
    if name == "convolution":
        return OP_CLASSES.index("convolution")
    if name in MATRIX_OPCODES:
        return OP_CLASSES.index("matrix")
    if name in REDUCTION_OPCODES:
        return OP_CLASSES.index("reduction")
    if name in _DATA_MOVEMENT:
        return OP_CLASSES.index("data_movement")
    if name in ELEMENTWISE_OPCODES or name in ("constant", "fusion"):
        return OP_CLASSES.index("elementwise")
    return OP_CLASSES.index("other")


_OP_CLASS = np.array([_class_of(name) for name in OPCODE_VOCAB], dtype=np.int8)
_KIND = np.array(
    [
        VIEW if n in VIEW_OPCODES else HOLDER if n in HOLDER_OPCODES else KERNEL
        for n in OPCODE_VOCAB
    ],
    dtype=np.int8,
)
_DTYPE_COLUMNS = [FEATURE_NAMES.index(f"dtype_{c}") for c in DTYPE_CLASSES]
_FUSION_MATRIX = [FEATURE_NAMES.index("fusion_koutput"), FEATURE_NAMES.index("fusion_kcustom")]
_FUSION_INPUT = FEATURE_NAMES.index("fusion_kinput")


def op_classes(graph: OpGraph) -> np.ndarray:
    """The op class of every node, an index into :data:`hlo_go.sim.OP_CLASSES`.

    ``matrix``: dot, ``convolution``, ``grouped_convolution`` (feature or batch group
    count above 1), nodes and fusions alike by the matrix op they hold
    (``OpGraph.matrix_kind``; output and custom fusions count as dots for a graph
    without it);
    ``reduction``: reduce, reduce-window, select-and-scatter (and kInput fusions);
    ``data_movement``: copies, transposes, slices, broadcasts, gathers, scatters, iota;
    ``elementwise``: elementwise ops, constants, kLoop fusions; ``other``: the rest
    (control flow, custom calls, collectives, sort, rng, ...).

    Args:
      graph: an OpGraph.

    Returns:
      ``int8[N]``.
    """
    classes = _OP_CLASS[graph.opcode].copy()
    features = graph.features
    classes[features[:, _FUSION_INPUT] > 0] = OP_CLASSES.index("reduction")
    if graph.matrix_kind is None:  # a graph built without it: output/custom fusions are dots
        classes[(features[:, _FUSION_MATRIX] > 0).any(axis=1)] = OP_CLASSES.index("matrix")
    else:
        kind = graph.matrix_kind
        classes[kind > 0] = _MATRIX_KIND_CLASS[kind[kind > 0]]
    return classes


def node_kinds(graph: OpGraph) -> np.ndarray:
    """``int8[N]``: :data:`KERNEL`, :data:`VIEW` or :data:`HOLDER` per node."""
    return _KIND[graph.opcode]


def dtype_classes(graph: OpGraph) -> np.ndarray:
    """``int8[N]``: each node's output element type class, an index into ``DTYPE_CLASSES``."""
    return np.argmax(graph.features[:, _DTYPE_COLUMNS], axis=1).astype(np.int8)


class NodeCosts(NamedTuple):
    """Per-node costs of a graph on a cluster's devices.

    Devices with equal specifications share one row (``U`` distinct specifications).

    Attributes:
      compute_s: ``float64[U, N]`` seconds of compute of each node on each specification.
      memory_efficiency: ``float64[U, N]`` the memory efficiency of each node's op class.
      fused_compute_s: ``float64[U, N]`` as ``compute_s`` for a node inside a fused group
        (differs for matrix ops: the ``fused_matrix`` efficiency).
      fused_memory_efficiency: ``float64[U, N]`` likewise.
      spec: ``int64[D]`` the row of each device.
      launch_s: ``float64[D]`` launch overhead per device.
      bandwidth: ``float64[D]`` memory bandwidth per device (bytes/s).
      capacity: ``float64[D]`` memory capacity per device (bytes).
    """

    compute_s: np.ndarray
    memory_efficiency: np.ndarray
    fused_compute_s: np.ndarray
    fused_memory_efficiency: np.ndarray
    spec: np.ndarray
    launch_s: np.ndarray
    bandwidth: np.ndarray
    capacity: np.ndarray


def node_costs(graph: OpGraph, cluster: Cluster) -> NodeCosts:
    """Per-node compute times and memory efficiencies of a graph on a cluster.

    Args:
      graph: an OpGraph.
      cluster: the cluster.

    Returns:
      The :class:`NodeCosts`.
    """
    classes = op_classes(graph)
    dtypes = dtype_classes(graph)
    matrix = np.isin(classes, MATRIX_CLASSES)
    windowed = graph.opcode == OPCODE_VOCAB.index("reduce-window")
    specs: dict[object, int] = {}
    spec = np.array([specs.setdefault(d, len(specs)) for d in cluster.devices], dtype=np.int64)
    n = graph.num_nodes
    fused_classes = np.where(matrix, OP_CLASSES.index("fused_matrix"), classes)
    shape = (len(specs), n)
    compute, memory_eff = np.empty(shape), np.empty(shape)
    fused_compute, fused_memory_eff = np.empty(shape), np.empty(shape)
    for device, row in specs.items():
        rates = np.array(
            [[device.flops_rate(c, m) for c in DTYPE_CLASSES] for m in (False, True)],
            dtype=np.float64,
        )
        ce, me = device.efficiencies()
        peak_s = graph.flops / rates[matrix.astype(np.int64), dtypes]
        transcendental_s = graph.transcendentals / device.transcendental_rate
        compute[row] = (peak_s + transcendental_s) / ce[classes]
        fused_compute[row] = (peak_s + transcendental_s) / ce[fused_classes]
        if device.window_reads_per_s:  # reads of the window loop, one flop of adds each
            reads_s = graph.flops[windowed] / device.window_reads_per_s
            compute[row, windowed] = fused_compute[row, windowed] = reads_s
        memory_eff[row] = me[classes]
        fused_memory_eff[row] = me[fused_classes]
    devices = cluster.devices
    return NodeCosts(
        compute,
        memory_eff,
        fused_compute,
        fused_memory_eff,
        spec,
        np.array([d.launch_overhead for d in devices], dtype=np.float64),
        np.array([d.memory_bandwidth for d in devices], dtype=np.float64),
        np.array([d.memory_capacity for d in devices], dtype=np.float64),
    )
