"""Calibrating the simulator against runs on this host: a layer above ``sim`` and ``xla``.

Public names::

    profiled_graph(profile) -> ProfiledGraph    measure_workload(name) -> InstructionProfile
    step_table(profiles, base) -> (rows, Calibration)   StepRow
    fusion_variants(graph), measure_variants(name) -> (graph, [Variant])   Variant
    variant_table(graph, variants, device) -> (rows, Kendall tau)
    RuntimeCalibration, HOST_MPMD, calibrate_runtime(devices)
    mpmd_host_cluster(n) -> Cluster             predict_placed(graph, decisions, segments)
    KernelSample, load_dataset(root), variant_groups(graph, dims, count=)   (kernel dataset)

Module by concept: :mod:`~hlo_go.calibration.profiles` (measured kernel times aligned with
their graph), :mod:`~hlo_go.calibration.variants` (fusion variants compiled and timed),
:mod:`~hlo_go.calibration.validation` (predictions against measurements),
:mod:`~hlo_go.calibration.__main__` (the report: ``python -m hlo_go.calibration``),
:mod:`~hlo_go.calibration.plot` (its figure), :mod:`~hlo_go.calibration.runtime` (the MPMD
runtime's dispatch and transfer overheads), :mod:`~hlo_go.calibration.kernel_dataset` (measured
per-kernel times of fusion variants, ``python -m hlo_go.calibration.kernel_dataset``),
:mod:`~hlo_go.calibration.train_kernel_model` (the learned kernel cost model trained on them,
``python -m hlo_go.calibration.train_kernel_model``; it imports Flax, so it is not imported
here). The fit itself is :func:`hlo_go.sim.calibrate`.
"""

from typing import TYPE_CHECKING, Any

from hlo_go.calibration.profiles import measure_workload, profiled_graph
from hlo_go.calibration.runtime import (
    HOST_MPMD,
    RuntimeCalibration,
    calibrate_runtime,
    mpmd_host_cluster,
    predict_placed,
)
from hlo_go.calibration.validation import (
    StepRow,
    step_table,
    variant_table,
)
from hlo_go.calibration.variants import Variant, fusion_variants, measure_variants

if TYPE_CHECKING:
    from hlo_go.calibration.kernel_dataset import KernelSample, load_dataset, variant_groups

# The kernel dataset's names load on first use, so that ``python -m
# hlo_go.calibration.kernel_dataset`` runs the module fresh (runpy warns when the package
# has imported it already).
_KERNEL_DATASET_NAMES = frozenset({"KernelSample", "load_dataset", "variant_groups"})


def __getattr__(name: str) -> Any:
    if name in _KERNEL_DATASET_NAMES:
        from hlo_go.calibration import kernel_dataset

        return getattr(kernel_dataset, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HOST_MPMD",
    "KernelSample",
    "RuntimeCalibration",
    "StepRow",
    "Variant",
    "calibrate_runtime",
    "fusion_variants",
    "load_dataset",
    "measure_variants",
    "measure_workload",
    "mpmd_host_cluster",
    "predict_placed",
    "profiled_graph",
    "step_table",
    "variant_groups",
    "variant_table",
]
