"""Multi-device performance simulator: clusters, the cost model, the event-driven simulation.

Public names::

    simulate(graph, cluster, decisions) -> SimResult      simulate_batch(graph, cluster, [d, ...])
    SimResult, Timeline                                    plot_timeline(result, path)
    Cluster, Device, Link, OP_CLASSES                      get_cluster(name), names(), host_cpu(n)
    host_cpu_learned(n) (host_cpu(n) priced by the learned kernel cost model)
    load_cluster(path), ClusterFileError    MAX_DEVICES (the most devices a cluster may have)
    calibrate(profiles, base) -> Calibration              ProfiledGraph

The cost model's parts, batch preparation, cluster (de)serialization and the other
calibration fits stay importable from here and from their modules but are not advertised.

Module by concept: :mod:`~hlo_go.sim.cluster` (device and link types),
:mod:`~hlo_go.sim.presets` (named clusters and their sources),
:mod:`~hlo_go.sim.loading` (TOML/JSON cluster files), :mod:`~hlo_go.sim.cost_model`
(what a kernel costs: the roofline), :mod:`~hlo_go.sim.learned` (a learned kernel cost model,
which a device's ``kernel_model`` puts in the roofline's place; imported on demand), :mod:`~hlo_go.sim.simulate` (the semantics and the entry points),
:mod:`~hlo_go.sim.result` (what it reports), :mod:`~hlo_go.sim.plot` (Gantt charts),
:mod:`~hlo_go.cli.simulate` (the ``hlo-go simulate`` command), :mod:`~hlo_go.sim.calibrate`
(fitting a device to measured kernel times; measuring them is :mod:`hlo_go.calibration`'s).
"""

from hlo_go.decisions._jit import HAVE_NUMBA as HAVE_NUMBA
from hlo_go.sim.calibrate import Calibration, ProfiledGraph, calibrate
from hlo_go.sim.calibrate import FusedCase as FusedCase
from hlo_go.sim.calibrate import calibrate_fused_matrix as calibrate_fused_matrix
from hlo_go.sim.calibrate import calibrate_subsets as calibrate_subsets
from hlo_go.sim.cluster import MAX_DEVICES, OP_CLASSES, Cluster, Device, Link
from hlo_go.sim.cluster import LinkArrays as LinkArrays
from hlo_go.sim.cost_model import HOLDER as HOLDER
from hlo_go.sim.cost_model import HOLDER_OPCODES as HOLDER_OPCODES
from hlo_go.sim.cost_model import KERNEL as KERNEL
from hlo_go.sim.cost_model import VIEW as VIEW
from hlo_go.sim.cost_model import VIEW_OPCODES as VIEW_OPCODES
from hlo_go.sim.cost_model import NodeCosts as NodeCosts
from hlo_go.sim.cost_model import node_costs as node_costs
from hlo_go.sim.cost_model import node_kinds as node_kinds
from hlo_go.sim.cost_model import op_classes as op_classes
from hlo_go.sim.loading import ClusterFileError, load_cluster
from hlo_go.sim.loading import cluster_from_dict as cluster_from_dict
from hlo_go.sim.loading import cluster_to_dict as cluster_to_dict
from hlo_go.sim.plot import plot_timeline
from hlo_go.sim.presets import get_cluster, host_cpu, host_cpu_learned, names
from hlo_go.sim.result import SimResult, Timeline
from hlo_go.sim.simulate import Prepared as Prepared
from hlo_go.sim.simulate import prepare as prepare
from hlo_go.sim.simulate import simulate, simulate_batch

__all__ = [
    "MAX_DEVICES",
    "OP_CLASSES",
    "Calibration",
    "Cluster",
    "ClusterFileError",
    "Device",
    "Link",
    "ProfiledGraph",
    "SimResult",
    "Timeline",
    "calibrate",
    "get_cluster",
    "host_cpu",
    "host_cpu_learned",
    "load_cluster",
    "names",
    "plot_timeline",
    "simulate",
    "simulate_batch",
]
