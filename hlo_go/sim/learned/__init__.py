"""A learned per-kernel cost model: a GNN over a kernel's instructions, on top of the roofline.

After "A Learned Performance Model for Tensor Processing Units" (Kaufman et al., MLSys
2021): each kernel the simulator launches (a fused group, or a node alone) is a small
graph of its member instructions (:mod:`~hlo_go.sim.learned.features`); a GraphSAGE-style
network (:mod:`~hlo_go.sim.learned.model`, Flax + jraph) predicts its log time as a
correction of the analytic roofline's (:mod:`hlo_go.sim.cost_model`). A device whose
``kernel_model`` names one (``host-cpu-N`` does) has its kernels priced by it
(:mod:`~hlo_go.sim.learned.predict`); the event-driven engine still handles order,
overlap, transfers and memory.

Public names::

    load_kernel_model(name) -> KernelModel | None     shipped_models()
    KernelModel, KernelModelError, MissingKernelModelWarning
    save_kernel_model(path, model), read_kernel_model(path)
    featurize(graph, mptr, members, roofline_s, launches) -> KernelBatch, pad_batch(batch)
    KernelNet, ModelConfig, learned_durations(...)

The data (measured per-thunk times of fusion variants) and the training are
:mod:`hlo_go.calibration.kernel_dataset` and :mod:`hlo_go.calibration.train_kernel_model`,
a layer above (they need XLA). Importing this package imports Flax; the simulator
imports it only for a device with a kernel model.
"""

from hlo_go.sim.learned.features import (
    EDGE_FEATURES,
    FEATURES_VERSION,
    GLOBAL_FEATURES,
    MAX_KERNEL_NODES,
    NODE_FEATURES,
    KernelBatch,
    featurize,
    pad_batch,
)
from hlo_go.sim.learned.model import KernelNet, ModelConfig
from hlo_go.sim.learned.predict import (
    KernelModel,
    KernelModelError,
    MissingKernelModelWarning,
    learned_durations,
    load_kernel_model,
    read_kernel_model,
    save_kernel_model,
    shipped_models,
)

__all__ = [
    "EDGE_FEATURES",
    "FEATURES_VERSION",
    "GLOBAL_FEATURES",
    "MAX_KERNEL_NODES",
    "NODE_FEATURES",
    "KernelBatch",
    "KernelModel",
    "KernelModelError",
    "KernelNet",
    "MissingKernelModelWarning",
    "ModelConfig",
    "featurize",
    "learned_durations",
    "load_kernel_model",
    "pad_batch",
    "read_kernel_model",
    "save_kernel_model",
    "shipped_models",
]
