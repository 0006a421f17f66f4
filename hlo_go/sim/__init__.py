"""Multi-device performance simulator: clusters, the cost model, the event-driven simulation.

Public names::

    simulate(graph, cluster, decisions) -> SimResult      simulate_batch(graph, cluster, [d, ...])
    SimResult, Timeline                                    plot_timeline(result, path)
    Cluster, Device, Link, LinkArrays, OP_CLASSES          get_cluster(name), names(), host_cpu(n)
    load_cluster(path), cluster_from_dict, cluster_to_dict, ClusterFileError
    op_classes, node_kinds, node_costs, NodeCosts          prepare, Prepared
    KERNEL, VIEW, HOLDER, VIEW_OPCODES, HOLDER_OPCODES
    HAVE_NUMBA (True when the sequential kernels run compiled by numba)
    calibrate(profiles, base) -> Calibration   calibrate_subsets, calibrate_fused_matrix
    profiled_graph(profile) -> ProfiledGraph   FusedCase

Module by concept: :mod:`~hlo_go.sim.cluster` (device and link types),
:mod:`~hlo_go.sim.presets` (named clusters and their sources),
:mod:`~hlo_go.sim.loading` (TOML/JSON cluster files), :mod:`~hlo_go.sim.cost_model`
(what a kernel costs), :mod:`~hlo_go.sim.simulate` (the semantics and the entry points),
:mod:`~hlo_go.sim.result` (what it reports), :mod:`~hlo_go.sim.plot` (Gantt charts),
:mod:`~hlo_go.cli.simulate` (the ``hlo-go simulate`` command), :mod:`~hlo_go.sim.calibrate`
(fitting a device to measured kernel times), :mod:`~hlo_go.sim.validation` (measuring
this host and comparing: ``python -m hlo_go.sim.validation``).
"""

from hlo_go.decisions._jit import HAVE_NUMBA
from hlo_go.sim.calibrate import (
    Calibration,
    FusedCase,
    ProfiledGraph,
    calibrate,
    calibrate_fused_matrix,
    calibrate_subsets,
    profiled_graph,
)
from hlo_go.sim.cluster import OP_CLASSES, Cluster, Device, Link, LinkArrays
from hlo_go.sim.cost_model import (
    HOLDER,
    HOLDER_OPCODES,
    KERNEL,
    VIEW,
    VIEW_OPCODES,
    NodeCosts,
    node_costs,
    node_kinds,
    op_classes,
)
from hlo_go.sim.loading import ClusterFileError, cluster_from_dict, cluster_to_dict, load_cluster
from hlo_go.sim.plot import plot_timeline
from hlo_go.sim.presets import get_cluster, host_cpu, names
from hlo_go.sim.result import SimResult, Timeline
from hlo_go.sim.simulate import Prepared, prepare, simulate, simulate_batch

__all__ = [
    "HAVE_NUMBA",
    "HOLDER",
    "HOLDER_OPCODES",
    "KERNEL",
    "OP_CLASSES",
    "VIEW",
    "VIEW_OPCODES",
    "Calibration",
    "Cluster",
    "ClusterFileError",
    "Device",
    "FusedCase",
    "Link",
    "LinkArrays",
    "NodeCosts",
    "Prepared",
    "ProfiledGraph",
    "SimResult",
    "Timeline",
    "calibrate",
    "calibrate_fused_matrix",
    "calibrate_subsets",
    "cluster_from_dict",
    "cluster_to_dict",
    "get_cluster",
    "host_cpu",
    "load_cluster",
    "names",
    "node_costs",
    "node_kinds",
    "op_classes",
    "plot_timeline",
    "prepare",
    "profiled_graph",
    "simulate",
    "simulate_batch",
]
