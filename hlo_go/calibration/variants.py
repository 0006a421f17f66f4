"""Fusion variants of a corpus graph, compiled and timed on this host.

The pre-fusion module of a corpus graph is fused by :func:`hlo_go.decisions.fusion_groups`
under several priorities and size limits (:func:`fusion_variants`), lowered through
:func:`hlo_go.xla.fusion.apply_fusion` and timed interleaved (:func:`measure_variants`):
what :func:`hlo_go.calibration.validation.variant_table` ranks the simulator's
predictions against.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_corpus import get_workload
from hlo_go import corpus
from hlo_go.calibration.profiles import concrete_arguments
from hlo_go.decisions import FusionLimits, fusion_group_names, fusion_groups, module_output_dims
from hlo_go.graph import OpGraph, build_graph
from hlo_go.sim.cluster import OP_CLASSES
from hlo_go.sim.cost_model import MATRIX_CLASSES, op_classes
from hlo_go.xla.fusion import apply_fusion, wrap_alone
from hlo_go.xla.hooks import compile_replacing
from hlo_go.xla.timing import Clock, time_interleaved

logger = logging.getLogger(__name__)


class Variant(NamedTuple):
    """One compiled and timed fusion variant of a corpus graph.

    Attributes:
      graph_name: the corpus graph.
      variant: the variant's name (:func:`fusion_variants`).
      group: ``int32[N]`` the grouping compiled (labels of the pre-fusion graph's nodes).
      measured_s: median step time over the interleaved rounds.
    """

    graph_name: str
    variant: str
    group: np.ndarray
    measured_s: float


def fusion_variants(
    graph: OpGraph, *, with_matrix: bool = False, seed: int = 0
) -> dict[str, tuple[np.ndarray, FusionLimits]]:
    """Fusion priorities and limits of the variants of one graph.

    Matrix ops (dot, convolution) keep priority 0 except in the ``with matrix`` variant:
    on XLA:CPU a dot fused into a loop fusion loses its library kernel and runs much
    slower, so those variants take long to time.

    Args:
      graph: the pre-fusion graph.
      with_matrix: add the ``with matrix, max 8`` variant (everything may fuse).
      seed: the random variant's seed.

    Returns:
      name -> (fusion priority ``float32[N]``, limits): all non-matrix nodes at sizes
      64, 8 and 2; elementwise and data-movement nodes only; a random half of the
      non-matrix nodes; no fusion; optionally everything at size 8.
    """
    n = graph.num_nodes
    rng = np.random.default_rng(seed)
    classes = op_classes(graph)
    not_matrix = (~np.isin(classes, MATRIX_CLASSES)).astype(np.float32)
    cheap = np.isin(
        classes, [OP_CLASSES.index("elementwise"), OP_CLASSES.index("data_movement")]
    ).astype(np.float32)
    variants = {
        "all, max 64": (not_matrix, FusionLimits(max_nodes=64)),
        "all, max 8": (not_matrix, FusionLimits(max_nodes=8)),
        "all, max 2": (not_matrix, FusionLimits(max_nodes=2)),
        "elementwise only": (cheap, FusionLimits(max_nodes=64)),
        "random half": (not_matrix * (rng.random(n) < 0.5), FusionLimits(max_nodes=64)),
        "none": (np.zeros(n, np.float32), FusionLimits()),
    }
    if with_matrix:
        variants["with matrix, max 8"] = (np.ones(n, np.float32), FusionLimits(max_nodes=8))
    return variants


def prefusion_graph(name: str) -> OpGraph:
    """The graph of a corpus workload's stored pre-fusion module."""
    return build_graph(corpus.load(name, "prefusion"))


def measure_variants(
    name: str, *, rounds: int = 3, with_matrix: bool = False, clock: Clock = "cpu"
) -> tuple[OpGraph, list[Variant]]:
    """Compiles the fusion variants of a corpus graph and times them interleaved.

    Run it through :func:`hlo_go.xla.timing.in_pinned_process` for a one-core measurement.
    A variant the CPU backend refuses to compile is skipped (logged as a warning).

    Args:
      name: a corpus graph.
      rounds: interleaved timing rounds (after one warm-up round).
      with_matrix: include the variant that fuses matrix ops (slow on CPU).
      clock: ``"cpu"`` (CPU time, for a pinned process) or ``"wall"``.

    Returns:
      ``(pre-fusion graph, one Variant per variant that compiled)``.
    """
    module = corpus.load(name, "prefusion")
    graph = build_graph(module)
    dims = module_output_dims(module)
    step, abstract = get_workload(name).make()
    lowered = jax.jit(step).lower(*abstract)
    args = concrete_arguments(abstract)
    compiled: dict[str, Any] = {}
    groups: dict[str, np.ndarray] = {}
    zeros = np.zeros(graph.num_nodes, np.int32)
    for label, (priority, limits) in fusion_variants(graph, with_matrix=with_matrix).items():
        group = fusion_groups(graph, zeros, priority, output_dims=dims, limits=limits)
        try:
            fused = wrap_alone(apply_fusion(module, fusion_group_names(graph, group)))
            executable = compile_replacing(lowered, fused)
            jax.block_until_ready(executable(*args))
        except Exception as error:  # a lowering the CPU backend refuses
            logger.warning(
                "%s / %s: skipped (%s: %s)", name, label, type(error).__name__, str(error)[:120]
            )
            continue
        compiled[label] = executable
        groups[label] = group
    timings = time_interleaved(
        {k: (lambda f=f: jax.block_until_ready(f(*args))) for k, f in compiled.items()},
        repeats=rounds,
        warmup=1,
        clock=clock,
    )
    return graph, [Variant(name, k, groups[k], timings[k].median) for k in compiled]


def save_variants(variants: dict[str, list[Variant]], path: str | Path) -> None:
    """Writes measured fusion variants (graph name -> variants) to a JSON file."""
    out = {
        name: [v._replace(group=v.group.tolist())._asdict() for v in measured]
        for name, measured in variants.items()
    }
    Path(path).write_text(json.dumps(out))


def load_variants(path: str | Path) -> dict[str, list[Variant]]:
    """Reads variants written by :func:`save_variants`."""
    return {
        name: [Variant(**{**v, "group": np.asarray(v["group"], np.int32)}) for v in measured]
        for name, measured in json.loads(Path(path).read_text()).items()
    }
