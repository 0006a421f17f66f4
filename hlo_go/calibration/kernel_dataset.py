"""Measured per-kernel times of fusion variants of corpus graphs: the learned cost model's data.

For each corpus graph, :func:`variant_groups` draws fusion groupings of its pre-fusion graph
(the graph :attr:`hlo_go.xla.Program.graph` every optimizer decides on): XLA:CPU-like
heuristics, the fusion baselines, size limits, random groupings. Each grouping is lowered
into XLA's compile as our lowering does it (:meth:`hlo_go.xla.Program.lower` with the
groups by name, XLA's order), compiled with per-thunk trace events
(:data:`hlo_go.xla.profile.TRACEME_OPTIONS`) and run on one pinned core; each thunk's time
(CPU clock, :func:`hlo_go.xla.profile.profile_compiled`) is charged to the kernel (group)
it belongs to (:func:`kernel_times`).

Storage (:data:`DATASET_FORMAT`), under one root directory:

* ``graphs/<graph>.hlo.gz``: the pre-fusion module's text, so that training rebuilds the
  exact graph without XLA (:func:`load_graph`; its fingerprint is checked);
* ``<graph>/<variant>.npz``: one file per (graph, variant), compressed:
  ``group`` (``int32[N]``, the grouping, labels the smallest member's id),
  ``kernel_label`` (``int32[K]``) and ``kernel_s`` (``float64[K]``, the measured seconds of
  each group that ran as a kernel), ``kernel_runs_s`` (``float64[K, R]``, each profiled
  run's seconds, R runs) and ``run_stretch`` (``float64[R]``, each run's wall / CPU time,
  which scaled its events), and ``meta`` (a JSON string: the step time and its
  spread, the time of thunks no group owns, clock, core, repeats, versions, the step
  time of XLA's default compile of the graph timed around the variant, and
  ``interleaved``: the variants' steps timed in rounds with that compile, each round's
  samples kept, renewed by :func:`retime_graph` (``--retime``)).

Measurements are CPU time of a process pinned to one core, and the thunk times are
scaled by each run's CPU / wall ratio (:mod:`hlo_go.xla.profile`). That removes the turns
other processes take on the core, not their contention for caches and memory: on a
shared host the same step can take twice the CPU time. The reference times let a reader
correct for that (:func:`contention_factors`, :func:`corrected_steps`).

On a GPU (``platform="gpu"``, ``--platform gpu``) the kernel times are the device's kernel
events of the trace (:mod:`hlo_go.xla.profile`), the steps are timed on the wall clock,
and the meta says ``"platform"`` and the ``"device_kind"``; the training reads a GPU's
dataset as it reads a CPU's (``python -m hlo_go.calibration.train_kernel_model --data
ROOT --device h100``).

Generation runs as independent jobs, one per graph, each in a fresh process pinned to one
core; a variant whose file exists is skipped, so an interrupted run resumes, and the same
jobs can run on several hosts (copy the files together). ``python -m
hlo_go.calibration.kernel_dataset --help`` runs it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import queue
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from hlo_go.decisions import FusionLimits, fusion_groups, large_matrix_nodes
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph, build_graph
from hlo_go.hlo import HloModule, parse_hlo
from hlo_go.sim.cluster import OP_CLASSES
from hlo_go.sim.cost_model import MATRIX_CLASSES, op_classes
from hlo_go.xla.segments import called_computations

if TYPE_CHECKING:
    from hlo_go.xla.timing import Clock

logger = logging.getLogger(__name__)

DATASET_FORMAT = 2
"""Version of the files' layout and meaning. 2 added each run's kernel times; a reader
accepts :data:`READABLE_FORMATS` and refuses others."""
READABLE_FORMATS = (1, 2)

DEFAULT_ROOT = Path("benchmarks") / "data" / "kernels"
"""Where the dataset lives by default (relative to the repository root)."""

# The graphs the model learns from and the families it is tested on (never seen in
# training), small enough to compile quickly on this host. Each held-out family has a kin
# in training (an LSTM: rnnlm for gnmt; a transformer: transformer_xl and gpt2 for bert).
TRAIN_GRAPHS: tuple[str, ...] = (
    "rnnlm_l2_scan",
    "transformer_xl_l2",
    "rnnlm_l4_scan",
    "gpt2_l2",
    "resnet_26",
    "transformer_xl_l4",
)
HELDOUT_GRAPHS: tuple[str, ...] = (
    "gnmt_l2_scan",
    "bert_l2",
    "gnmt_l4_scan",
    "bert_l4",
    "gnmt_l8_scan",
    "bert_l8",
)


class DatasetError(ValueError, HloGoError):
    """A dataset file that cannot be read: another format version, a graph that does not
    match its stored module, missing arrays. The message names the file."""


class KernelSample(NamedTuple):
    """One measured fusion variant of one graph.

    Attributes:
      graph_name: the corpus graph.
      variant: the variant's name (:func:`variant_groups`).
      group: ``int32[N]`` the grouping lowered (each node's group: its smallest member).
      kernel_label: ``int32[K]`` the groups that ran as kernels with a trace event.
      kernel_s: ``float64[K]`` their measured seconds in one step (median over runs;
        a ``while`` counts the thunks of its body).
      step_s: the median step time (CPU clock of the pinned process).
      step_spread_s: the least and most step time of the runs.
      unmapped_s: seconds of thunks no group owns (copies XLA added).
      meta: the rest: ``clock``, ``cpu`` (the core), ``repeats``, ``jax``,
        ``fingerprint``, ``reference_s`` (XLA's default compile of the graph, one step
        timed just before and just after this variant: how fast the core ran then).
      kernel_runs_s: ``float64[K, R]`` each profiled run's seconds per kernel (None in
        format 1 files).
      run_stretch: ``float64[R]`` each run's wall / CPU time (its events were divided
        by it); None in format 1 files.
    """

    graph_name: str
    variant: str
    group: np.ndarray
    kernel_label: np.ndarray
    kernel_s: np.ndarray
    step_s: float
    step_spread_s: tuple[float, float]
    unmapped_s: float
    meta: Mapping[str, Any]
    kernel_runs_s: np.ndarray | None = None
    run_stretch: np.ndarray | None = None


def variant_slug(variant: str) -> str:
    """A file name stem for a variant's name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", variant).strip("_")


def sample_path(root: Path, graph_name: str, variant: str) -> Path:
    """The file of one (graph, variant)."""
    return Path(root) / graph_name / f"{variant_slug(variant)}.npz"


def save_sample(root: Path, sample: KernelSample) -> Path:
    """Writes one sample (compressed npz, :data:`DATASET_FORMAT`; a format 1 sample read
    back, without per-run times, keeps format 1); returns its path."""
    path = sample_path(root, sample.graph_name, sample.variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    has_runs = sample.kernel_runs_s is not None and sample.run_stretch is not None
    meta = {
        **dict(sample.meta),
        "format": DATASET_FORMAT if has_runs else sample.meta.get("format", DATASET_FORMAT),
        "graph": sample.graph_name,
        "variant": sample.variant,
        "step_s": sample.step_s,
        "step_spread_s": list(sample.step_spread_s),
        "unmapped_s": sample.unmapped_s,
    }
    tmp = path.with_suffix(".tmp.npz")
    runs = {}
    if has_runs:
        runs = {
            "kernel_runs_s": np.asarray(sample.kernel_runs_s, np.float64),
            "run_stretch": np.asarray(sample.run_stretch, np.float64),
        }
    np.savez_compressed(
        tmp,
        group=np.asarray(sample.group, np.int32),
        kernel_label=np.asarray(sample.kernel_label, np.int32),
        kernel_s=np.asarray(sample.kernel_s, np.float64),
        meta=np.array(json.dumps(meta, sort_keys=True)),
        **runs,
    )
    tmp.replace(path)  # a half-written file never looks measured
    return path


def load_sample(path: Path) -> KernelSample:
    """Reads a file written by :func:`save_sample`.

    Raises:
      DatasetError: another format version or a malformed file.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {k: data[k] for k in ("group", "kernel_label", "kernel_s")}
            runs = {k: data[k] for k in ("kernel_runs_s", "run_stretch") if k in data.files}
    except (OSError, KeyError, ValueError) as error:
        raise DatasetError(f"{path}: not a kernel dataset file ({error})") from None
    if meta.get("format") not in READABLE_FORMATS:
        raise DatasetError(
            f"{path}: dataset format {meta.get('format')!r}, this reader reads "
            f"{', '.join(map(str, READABLE_FORMATS))}"
        )
    return KernelSample(
        meta["graph"],
        meta["variant"],
        arrays["group"].astype(np.int32),
        arrays["kernel_label"].astype(np.int32),
        arrays["kernel_s"].astype(np.float64),
        float(meta["step_s"]),
        (float(meta["step_spread_s"][0]), float(meta["step_spread_s"][1])),
        float(meta["unmapped_s"]),
        {k: v for k, v in meta.items() if k not in _SAMPLE_META},
        runs.get("kernel_runs_s"),
        runs.get("run_stretch"),
    )


_SAMPLE_META = frozenset({"graph", "variant", "step_s", "step_spread_s", "unmapped_s"})


def graph_path(root: Path, graph_name: str) -> Path:
    """The stored pre-fusion module of a graph."""
    return Path(root) / "graphs" / f"{graph_name}.hlo.gz"


def save_graph(root: Path, graph_name: str, module: HloModule, graph: OpGraph) -> Path:
    """Stores a graph's pre-fusion module (gzip text, its fingerprint in a header line)."""
    path = graph_path(root, graph_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"// hlo-go kernel dataset: fingerprint {graph.fingerprint}\n{module.to_text()}"
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", compresslevel=9) as out:
        out.write(text)
    tmp.replace(path)
    return path


def load_graph(root: Path, graph_name: str) -> OpGraph:
    """The pre-fusion graph of a stored module, built again.

    Raises:
      DatasetError: the file is missing, or the graph built has another fingerprint
        than the one it was measured on.
    """
    path = graph_path(root, graph_name)
    if not path.is_file():
        raise DatasetError(f"{path}: no stored module for graph {graph_name!r}")
    text = gzip.decompress(path.read_bytes()).decode()
    header, _, body = text.partition("\n")
    expected = header.rsplit(" ", 1)[-1]
    graph = build_graph(parse_hlo(body, filename=str(path)))
    if graph.fingerprint != expected:
        raise DatasetError(
            f"{path}: the graph built has fingerprint {graph.fingerprint}, measured on {expected}"
        )
    return graph


def sample_files(root: Path, graph_name: str) -> list[Path]:
    """A graph's stored variant files, by name (a half-written ``.tmp.npz`` left out)."""
    folder = Path(root) / graph_name
    return sorted(f for f in folder.glob("*.npz") if not f.name.endswith(".tmp.npz"))


def stored_graphs(root: Path) -> list[str]:
    """Graphs with a stored module and at least one measured variant, by name."""
    root = Path(root)
    return sorted(
        p.name.removesuffix(".hlo.gz")
        for p in (root / "graphs").glob("*.hlo.gz")
        if sample_files(root, p.name.removesuffix(".hlo.gz"))
    )


def load_dataset(
    root: Path, graphs: Iterable[str] | None = None
) -> dict[str, tuple[OpGraph, list[KernelSample]]]:
    """Every stored graph (or the named ones) with its samples, in variant-file order.

    Raises:
      DatasetError: a malformed or mismatched file, a sample whose grouping does not fit
        its graph.
    """
    root = Path(root)
    names = stored_graphs(root) if graphs is None else list(graphs)
    out: dict[str, tuple[OpGraph, list[KernelSample]]] = {}
    for name in names:
        files = sample_files(root, name)
        if not files:
            continue
        graph = load_graph(root, name)
        samples = [load_sample(f) for f in files]
        for s, f in zip(samples, files, strict=True):
            if s.group.shape != (graph.num_nodes,):
                raise DatasetError(
                    f"{f}: grouping of {s.group.shape} nodes, graph has {graph.num_nodes}"
                )
        out[name] = (graph, samples)
    return out


def contention_factors(samples: Sequence[KernelSample]) -> np.ndarray:
    """Per sample of one graph, the factor that scales its times to the graph's quiet
    frame: XLA's default compile's step time on a quiet host divided by the same step
    timed around the sample's profile (the geometric mean of its two timings). 1 for a
    sample without reference times.

    The quiet frame is the median reference of the graph's interleaved re-timings
    (``meta["interleaved"]["reference_s"]``, :func:`retime_graph`), where the samples have
    them; else the median of the profiled references (the graph's typical load). The
    kernels were profiled on a host under load: the default compile ran 1.4x to 2.6x
    slower then (per graph) than in the quiet rounds, so kernel times scaled to the
    typical load describe a loaded host, and step times (:func:`corrected_steps`) are in
    the quiet frame.

    Args:
      samples: samples of one graph.

    Returns:
      ``float64[len(samples)]``.
    """
    refs = profiled_references(samples)
    if not np.isfinite(refs).any():
        return np.ones(len(samples))
    return np.where(np.isfinite(refs), frame_reference(samples, refs) / refs, 1.0)


def profiled_references(samples: Sequence[KernelSample]) -> np.ndarray:
    """Per sample, XLA's default compile's step timed around its profile (the geometric
    mean of the two timings; NaN where the sample has none)."""
    return np.array(
        [
            float(np.sqrt(np.prod(s.meta["reference_s"]))) if s.meta.get("reference_s") else np.nan
            for s in samples
        ]
    )


def frame_reference(samples: Sequence[KernelSample], profiled: np.ndarray) -> float:
    """The reference step time of a graph's frame (:func:`contention_factors`): the median
    of its interleaved (quiet) references where any sample has one, else the median of
    ``profiled`` (per sample, NaN where it has none)."""
    quiet = [
        float(s.meta["interleaved"]["reference_s"])
        for s in samples
        if (s.meta.get("interleaved") or {}).get("reference_s")
    ]
    return float(np.median(quiet)) if quiet else float(np.nanmedian(profiled))


PREEMPT_INTERVAL_S = 3e-3
"""Assumed on-CPU time between two preemptions of a measuring process on a loaded host
(about the Linux scheduler's minimum granularity): :func:`kernel_seconds`."""


def kernel_seconds(
    sample: KernelSample, *, preempt_interval_s: float = PREEMPT_INTERVAL_S
) -> np.ndarray:
    """Each kernel's seconds, less what other processes took of the core while it ran.

    A run's events are wall-clock durations; the profile divides all of a run's events by
    the run's wall / CPU ratio ``s`` (its stretch). That is right on average, not per
    event: a short event is rarely preempted (its wall time is its time), a long one
    loses about ``1 - 1/s`` of its wall time to other processes. Here an event of wall
    time ``w`` is charged ``w / (1 + (s - 1) p)``, with ``p = 1 - exp(-w / (s τ))`` the
    chance it was preempted (``τ`` = ``preempt_interval_s`` on-CPU seconds between
    preemptions), and the median over runs is kept. On a quiet host (``s`` = 1) this is
    the measured time. Format 1 samples (no per-run times) give their stored medians.

    Args:
      sample: a measured variant.
      preempt_interval_s: ``τ``.

    Returns:
      ``float64[K]`` aligned with ``sample.kernel_label``.
    """
    if sample.kernel_runs_s is None or sample.run_stretch is None or not sample.kernel_runs_s.size:
        return np.asarray(sample.kernel_s, np.float64)
    stretch = np.asarray(sample.run_stretch, np.float64)[None, :]
    wall = np.asarray(sample.kernel_runs_s, np.float64) * stretch
    preempted = 1.0 - np.exp(-wall / (stretch * preempt_interval_s))
    return np.median(wall / (1.0 + (stretch - 1.0) * preempted), axis=1)


def corrected_steps(samples: Sequence[KernelSample]) -> np.ndarray:
    """Each sample's step time in the graph's frame (:func:`frame_reference`).

    A sample timed interleaved with XLA's default compile (``meta["interleaved"]``)
    gives its step relative to the reference in the same rounds (the median of the
    per-round ratios where the rounds are stored, so that each round's load cancels); one
    without, its profiled step relative to the reference timed around it. Either ratio is
    scaled by the frame's reference.

    Args:
      samples: samples of one graph.

    Returns:
      ``float64[len(samples)]`` seconds (the profiled steps where no sample has
      reference times).
    """
    profiled = profiled_references(samples)
    steps, refs = [], []
    for s, around in zip(samples, profiled, strict=True):
        inter = s.meta.get("interleaved")
        if inter:
            reference = float(inter["reference_s"])
            rounds = round_ratios([s])
            ratio = (
                float(np.median(rounds[0]))
                if rounds is not None
                else float(inter["step_s"]) / reference
            )
            steps.append(ratio * reference)
            refs.append(reference)
        else:  # the profiled step against the reference timed around it (NaN: none)
            steps.append(s.step_s)
            refs.append(float(around))
    ref = np.array(refs)
    if not np.isfinite(ref).any():
        return np.array(steps)
    typical = frame_reference(samples, profiled)
    return np.array(steps) * np.where(np.isfinite(ref), typical / ref, 1.0)


def round_ratios(samples: Sequence[KernelSample]) -> np.ndarray | None:
    """Each sample's step over XLA's default compile's in each interleaved round.

    Args:
      samples: samples of one graph.

    Returns:
      ``float64[S, R]``; None unless every sample has per-round interleaved timings of
      the same number of rounds, at least 2 (one interleaving of them all).
    """
    rows = []
    for s in samples:
        inter = s.meta.get("interleaved") or {}
        steps, refs = inter.get("step_samples_s"), inter.get("reference_samples_s")
        if not steps or not refs or len(steps) != len(refs):
            return None
        rows.append(np.asarray(steps, np.float64) / np.asarray(refs, np.float64))
    if not rows or len({r.size for r in rows}) != 1 or rows[0].size < 2:
        return None
    return np.stack(rows)


def split_half_tau(samples: Sequence[KernelSample]) -> float | None:
    """How far a graph's measured ranking of its variants agrees with itself: Kendall's τ
    between the variants ranked by their even rounds and by their odd rounds (each the
    median of the per-round ratios of :func:`round_ratios`).

    A model's τ against the measured ranking is bounded by the measurement's own
    agreement; this is the figure to read it against.

    Args:
      samples: samples of one graph.

    Returns:
      τ, or None with fewer than 3 samples or without per-round timings.
    """
    from scipy import stats

    ratios = round_ratios(samples)
    if ratios is None or ratios.shape[0] < 3:
        return None
    even = np.median(ratios[:, 0::2], axis=1)
    odd = np.median(ratios[:, 1::2], axis=1)
    tau = float(stats.kendalltau(even, odd).statistic)
    return tau if np.isfinite(tau) else None


REPEAT_MIN = 3
"""Variants a kernel must have run in for :func:`repeated_kernel_errors` to count it."""


def repeated_kernel_errors(
    samples: Sequence[KernelSample], *, min_repeats: int = REPEAT_MIN
) -> np.ndarray:
    """How far the measurements of one kernel agree with each other across variants: the
    error floor of any per-kernel price.

    A kernel here is a set of member nodes; the same set often runs in several variants
    of a graph (each measured in its own process, at its own time). For each kernel that
    ran in at least ``min_repeats`` variants, each of its measured times ``t`` (as the
    model is judged against: :func:`kernel_seconds` scaled by
    :func:`contention_factors`) is compared with the median ``m`` of its other
    measurements: ``|m / t - 1|``. A model that gave every such kernel the best price its
    data allow would still be off by about these errors' median: it is the figure to read
    a model's kernel error against, as :func:`split_half_tau` is for its ranking.

    Args:
      samples: samples of one graph.
      min_repeats: variants a kernel must have run in (at least 2).

    Returns:
      ``float64[M]``, one error per measurement of a repeated kernel.

    Raises:
      ValueError: ``min_repeats < 2``.
    """
    if min_repeats < 2:
        raise ValueError(f"min_repeats must be at least 2, got {min_repeats}")
    factors = contention_factors(samples)
    times: dict[tuple[int, ...], list[float]] = {}
    for factor, sample in zip(factors, samples, strict=True):
        seconds = kernel_seconds(sample) * factor
        order = np.argsort(sample.group, kind="stable")
        sorted_groups = sample.group[order]
        starts = np.searchsorted(sorted_groups, sample.kernel_label)
        ends = np.searchsorted(sorted_groups, sample.kernel_label, side="right")
        for start, end, t in zip(starts.tolist(), ends.tolist(), seconds.tolist(), strict=True):
            if end > start and t > 0:
                times.setdefault(tuple(order[start:end].tolist()), []).append(t)
    errors = []
    for measured in times.values():
        if len(measured) >= min_repeats:
            t = np.asarray(measured)
            others = [np.median(np.delete(t, i)) for i in range(t.size)]
            errors.extend(np.abs(np.asarray(others) / t - 1.0).tolist())
    return np.asarray(errors, np.float64)


# ---------------------------------------------------------------------------------------------
# Variants.


def variant_priorities(
    graph: OpGraph, *, seed: int = 0, baselines: bool = True
) -> dict[str, tuple[np.ndarray, FusionLimits]]:
    """Fusion priorities and limits of a graph's variants, in a fixed order.

    Large dots and convolutions never fuse (:func:`hlo_go.decisions.large_matrix_nodes`,
    as the lowering keeps them out); small ones fuse only in the ``small matrix`` variant.

    Args:
      graph: the pre-fusion graph.
      seed: the random variants' seed.
      baselines: include the fusion baselines (``xla-cpu-like``, ``fuse-all-legal``,
        ``priority-fusion``) decided on the analytic ``host-cpu-1``.

    Returns:
      Variant name -> (``float32[N]`` fusion priority, limits).
    """
    n = graph.num_nodes
    rng = np.random.default_rng(seed)
    classes = op_classes(graph)
    matrix = np.isin(classes, MATRIX_CLASSES)
    large = large_matrix_nodes(graph)
    not_matrix = (~matrix).astype(np.float32)
    cheap = np.isin(
        classes, [OP_CLASSES.index("elementwise"), OP_CLASSES.index("data_movement")]
    ).astype(np.float32)
    out: dict[str, tuple[np.ndarray, FusionLimits]] = {}
    if baselines:
        from hlo_go import baselines as methods
        from hlo_go.sim.presets import host_cpu

        cluster = host_cpu(1, kernel_model="")
        for name in ("xla-cpu-like", "fuse-all-legal", "priority-fusion"):
            decided = methods.get(name)(graph, cluster, seed=seed)
            out[name] = (np.asarray(decided.fusion_priority, np.float32), FusionLimits())
    out["no fusion"] = (np.zeros(n, np.float32), FusionLimits())
    out["all, max 64"] = (not_matrix, FusionLimits(max_nodes=64))
    out["all, max 8"] = (not_matrix, FusionLimits(max_nodes=8))
    out["elementwise only"] = (cheap, FusionLimits(max_nodes=64))
    out["all, max 2"] = (not_matrix, FusionLimits(max_nodes=2))
    out["random half"] = (not_matrix * (rng.random(n) < 0.5), FusionLimits(max_nodes=64))
    out["small matrix, max 8"] = (np.ones(n, np.float32), FusionLimits(max_nodes=8))
    for k, (keep, size) in enumerate(((0.8, 16), (0.3, 64), (0.6, 4), (0.9, 32))):
        priority = not_matrix * (rng.random(n) < keep) * rng.random(n).astype(np.float32)
        out[f"random {k}: {keep:g} of nodes, max {size}"] = (
            priority.astype(np.float32),
            FusionLimits(max_nodes=size),
        )
    return {
        name: (np.where(large, 0.0, p).astype(np.float32), limits)
        for name, (p, limits) in out.items()
    }


def variant_groups(
    graph: OpGraph,
    output_dims: np.ndarray | None,
    *,
    count: int,
    seed: int = 0,
    baselines: bool = True,
) -> dict[str, np.ndarray]:
    """The first ``count`` variants' groupings (distinct groupings only).

    Args:
      graph: the pre-fusion graph.
      output_dims: exact output-dimension keys (:attr:`hlo_go.xla.Program.output_dims`).
      count: how many variants at most.
      seed: the random variants' seed.
      baselines: include the fusion baselines.

    Returns:
      Variant name -> ``int32[N]`` grouping, in :func:`variant_priorities` order.
    """
    placement = np.zeros(graph.num_nodes, np.int32)
    out: dict[str, np.ndarray] = {}
    seen: set[bytes] = set()
    for name, (priority, limits) in variant_priorities(
        graph, seed=seed, baselines=baselines
    ).items():
        group = fusion_groups(graph, placement, priority, output_dims=output_dims, limits=limits)
        key = group.tobytes()
        if key in seen:
            continue
        seen.add(key)
        out[name] = group.astype(np.int32)
        if len(out) == count:
            break
    return out


# ---------------------------------------------------------------------------------------------
# Thunks to kernels.


def thunk_owners(graph: OpGraph, group: np.ndarray, hlo_text: str) -> dict[str, int]:
    """The kernel (group) each instruction of a compiled module is charged to.

    An entry instruction of the compiled module belongs to a group by its name (a node of
    the graph) or, for a fusion, by the names of its fused computation's instructions
    (our fusions keep their members' names; regenerated clones are new names). The
    instructions of the computations it calls (a ``while``'s body, fused by XLA) are
    charged to the same group.

    Args:
      graph: the pre-fusion graph the grouping is for.
      group: ``int[N]`` the grouping lowered.
      hlo_text: the compiled module's text.

    Returns:
      Instruction name -> group label, or -1 for an instruction of no group (copies XLA
      added).
    """
    module = parse_hlo(hlo_text, filename="<compiled module>")
    index = graph.node_index
    group = np.asarray(group)
    owners: dict[str, int] = {}
    for instr in module.entry.instructions:
        inside = [
            inner.name
            for name in called_computations(module, [instr])
            for inner in module.computations[name].instructions
        ]
        members = [index[n] for n in inside if n in index] if instr.opcode == "fusion" else []
        if instr.name in index:
            label = int(group[index[instr.name]])
        elif members:
            labels, counts = np.unique(group[members], return_counts=True)
            label = int(labels[np.argmax(counts)])
        else:
            label = -1
        for name in (instr.name, *inside):
            owners.setdefault(name, label)
    return owners


def charge(
    owners: Mapping[str, int], instruction_s: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Sums traced times by kernel (:func:`thunk_owners`).

    Returns:
      ``(labels int32[K], seconds float64[K], unmapped seconds)``: the groups with a
      traced thunk and their time, and the time of thunks of no group.
    """
    per_group: dict[int, float] = {}
    unmapped = 0.0
    for name, seconds in instruction_s.items():
        label = owners.get(name, -1)
        if label < 0:
            unmapped += seconds
        else:
            per_group[label] = per_group.get(label, 0.0) + seconds
    labels = np.array(sorted(per_group), dtype=np.int32)
    return labels, np.array([per_group[k] for k in labels.tolist()], np.float64), unmapped


def kernel_times(
    graph: OpGraph, group: np.ndarray, hlo_text: str, instruction_s: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Charges each traced thunk of a compiled module to the kernel (group) it ran
    (:func:`thunk_owners`, :func:`charge`).

    Args:
      graph: the pre-fusion graph the grouping is for.
      group: ``int[N]`` the grouping lowered.
      hlo_text: the compiled module's text.
      instruction_s: seconds per traced instruction name (``InstructionProfile``).

    Returns:
      ``(labels int32[K], seconds float64[K], unmapped seconds)``.
    """
    return charge(thunk_owners(graph, group, hlo_text), instruction_s)


# ---------------------------------------------------------------------------------------------
# Measuring.


def measure_graph(
    name: str,
    root: str,
    *,
    variants: int,
    repeats: int = 3,
    seed: int = 0,
    core: int | None = None,
    deadline_s: float | None = None,
    interleaved_rounds: int = 3,
    platform: str = "cpu",
) -> dict[str, Any]:
    """Measures the variants of one corpus graph not yet stored (run it pinned).

    Each variant is profiled on its own; then the variants measured here and XLA's
    default compile are timed again, interleaved in rotating rounds, so that a change of
    load hits them alike: each sample's ``meta["interleaved"]`` holds its median step
    and the reference's in those rounds (what ranking variants should use).

    Args:
      name: a corpus graph.
      root: the dataset root.
      variants: how many variants (:func:`variant_groups`).
      repeats: profiled runs per variant (after one warm-up run).
      seed: the random variants' seed.
      core: the core this process is pinned to (recorded).
      deadline_s: a ``time.time()`` after which no new variant is started.
      interleaved_rounds: rounds of the interleaved step timing (0: none).
      platform: where to measure: ``"cpu"`` (this process's CPU time) or ``"gpu"``
        (kernel times from the device's trace, steps on the wall clock).

    Returns:
      A summary: variants measured, skipped (already stored) and failed (with why).
    """
    import jax

    from hlo_corpus import get_workload
    from hlo_go.decisions import fusion_group_names
    from hlo_go.xla import program
    from hlo_go.xla.profile import profile_compiled, profile_options
    from hlo_go.xla.timing import CLOCKS

    start = time.perf_counter()
    root_path = Path(root)
    clock: Clock = "cpu" if platform == "cpu" else "wall"
    now = CLOCKS[clock]
    step, abstract = get_workload(name).make()
    prog = program(step, abstract, compiler_options=profile_options(platform), platform=platform)
    graph = prog.graph
    if not graph_path(root_path, name).is_file():
        save_graph(root_path, name, prog.prefusion, graph)
    chosen = variant_groups(graph, prog.output_dims, count=variants, seed=seed)
    todo = {k: g for k, g in chosen.items() if not sample_path(root_path, name, k).is_file()}
    skipped = [k for k in chosen if k not in todo]
    done: list[str] = []
    failed: dict[str, str] = {}
    if not todo:
        return {"graph": name, "measured": done, "skipped": skipped, "failed": failed}
    # XLA's default compile, run once between variants: how fast this core runs now
    # (other processes sharing the host slow even a pinned process's CPU time).
    reference = prog.default()
    jax.block_until_ready(reference(*prog.args))

    def reference_s() -> float:
        begin = now()
        jax.block_until_ready(reference(*prog.args))
        return now() - begin

    before = reference_s()
    executables: dict[str, Any] = {}
    for label, group in todo.items():
        if deadline_s is not None and time.time() > deadline_s:
            failed[label] = "not started: past the deadline"
            continue
        begin = time.perf_counter()
        try:
            executable = prog.lower(fusion=fusion_group_names(graph, group))
            profile = profile_compiled(
                executable,
                prog.args,
                prog.name,
                repeats=repeats,
                clock=clock,
                warmup=True,
                separate_steps=False,
            )
        except Exception as error:  # a lowering XLA refuses: recorded, not fatal
            failed[label] = f"{type(error).__name__}: {str(error)[:200]}"
            logger.warning("%s / %s: %s", name, label, failed[label])
            continue
        owners = thunk_owners(graph, group, profile.hlo_text)
        labels, seconds, unmapped = charge(owners, profile.instruction_s)
        per_run = np.zeros((labels.size, len(profile.run_instruction_s)))
        position = {int(k): i for i, k in enumerate(labels.tolist())}
        for r, times in enumerate(profile.run_instruction_s):
            run_labels, run_seconds, _ = charge(owners, times)
            for k, t in zip(run_labels.tolist(), run_seconds.tolist(), strict=True):
                if k in position:
                    per_run[position[k], r] = t
        spread = profile.step_spread_s or (profile.step_s, profile.step_s)
        after = reference_s()
        save_sample(
            root_path,
            KernelSample(
                name,
                label,
                group,
                labels,
                seconds,
                float(profile.step_s),
                (float(spread[0]), float(spread[1])),
                float(unmapped),
                {
                    "clock": clock,
                    "platform": platform,
                    "device_kind": jax.devices(platform)[0].device_kind,
                    "cpu": core,
                    "repeats": repeats,
                    "runs": profile.runs,
                    "seed": seed,
                    "jax": jax.__version__,
                    "fingerprint": graph.fingerprint,
                    "kernels": int(np.unique(group).size),
                    "reference_s": [before, after],
                    "measure_s": round(time.perf_counter() - begin, 2),
                    "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
                },
                per_run,
                np.asarray(profile.run_stretch, np.float64),
            ),
        )
        before = after
        executables[label] = executable
        done.append(
            f"{label}: step {profile.step_s:.4f} s (reference {after:.4f} s), "
            f"{labels.size} kernels timed, unmapped {unmapped:.4f} s, "
            f"{time.perf_counter() - begin:.0f} s"
        )
    if executables and interleaved_rounds > 0:
        _time_steps_interleaved(
            root_path, name, executables, reference, prog.args, rounds=interleaved_rounds,
            clock=clock,
        )  # fmt: skip
    return {
        "graph": name,
        "measured": done,
        "skipped": skipped,
        "failed": failed,
        "seconds": round(time.perf_counter() - start, 1),
    }


_REFERENCE = "\0XLA default"


def _time_steps_interleaved(
    root: Path,
    name: str,
    executables: Mapping[str, Any],
    reference: Any,
    args: Sequence[Any],
    *,
    rounds: int,
    clock: Clock = "cpu",
) -> None:
    """Times stored variants' executables and XLA's default compile interleaved in
    rotating rounds (on ``clock``: CPU time on this process's core, or the wall clock for
    a GPU) and records each sample's
    ``meta["interleaved"]``: medians, the per-round samples, when, and the host's load
    average before and after (what the figures were measured under)."""
    import os

    import jax

    from hlo_go.xla.timing import time_interleaved

    calls = {
        label: (lambda f=f: jax.block_until_ready(f(*args)))
        for label, f in {**executables, _REFERENCE: reference}.items()
    }
    load_before = os.getloadavg()[0]
    timings = time_interleaved(calls, repeats=rounds, warmup=0, clock=clock)
    load_after = os.getloadavg()[0]
    ref = timings[_REFERENCE]
    for label in executables:
        path = sample_path(root, name, label)
        sample = load_sample(path)
        t = timings[label]
        interleaved = {
            "rounds": rounds,
            "clock": clock,
            "step_s": t.median,
            "step_samples_s": list(t.samples),
            "reference_s": ref.median,
            "reference_samples_s": list(ref.samples),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load_avg": [round(load_before, 2), round(load_after, 2)],
        }
        save_sample(root, sample._replace(meta={**sample.meta, "interleaved": interleaved}))


def retime_graph(name: str, root: str, *, rounds: int, core: int | None = None) -> dict[str, Any]:
    """Times a graph's stored variants again, interleaved with XLA's default compile for
    ``rounds`` rounds, and replaces each sample's ``meta["interleaved"]`` (run it pinned).

    The per-kernel times are kept; only the step timings that rank the variants are
    renewed: more rounds, on a quieter host, give a ranking that agrees with itself
    (:func:`split_half_tau`). Each variant is lowered again from its stored grouping.

    Args:
      name: a corpus graph with stored variants.
      root: the dataset root.
      rounds: interleaved rounds (at least 2).
      core: the core this process is pinned to (recorded).

    Returns:
      A summary: variants re-timed, failed (with why), seconds.

    Raises:
      DatasetError: no stored variants, or they were measured on another graph than the
        corpus builds today.
    """
    import jax

    from hlo_corpus import get_workload
    from hlo_go.decisions import fusion_group_names
    from hlo_go.xla import program
    from hlo_go.xla.profile import TRACEME_OPTIONS

    if rounds < 2:
        raise ValueError(f"rounds must be at least 2, not {rounds}")
    start = time.perf_counter()
    root_path = Path(root)
    samples = [load_sample(f) for f in sample_files(root_path, name)]
    if not samples:
        raise DatasetError(f"{root_path / name}: no measured variants of {name!r} to re-time")
    step, abstract = get_workload(name).make()
    prog = program(step, abstract, compiler_options=TRACEME_OPTIONS)
    graph = prog.graph
    measured_on = {str(s.meta["fingerprint"]) for s in samples if s.meta.get("fingerprint")}
    others = sorted(measured_on - {graph.fingerprint})
    if others:
        raise DatasetError(
            f"{root_path / name}: variants measured on graph {', '.join(others)}; the corpus "
            f"builds {graph.fingerprint} today (measure them again)"
        )
    reference = prog.default()
    executables: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for s in samples:
        try:
            executables[s.variant] = prog.lower(fusion=fusion_group_names(graph, s.group))
            jax.block_until_ready(executables[s.variant](*prog.args))
        except Exception as error:  # a lowering XLA refuses now: recorded, not fatal
            failed[s.variant] = f"{type(error).__name__}: {str(error)[:200]}"
            executables.pop(s.variant, None)
    jax.block_until_ready(reference(*prog.args))
    if executables:
        _time_steps_interleaved(root_path, name, executables, reference, prog.args, rounds=rounds)
    return {
        "graph": name,
        "retimed": sorted(executables),
        "failed": failed,
        "rounds": rounds,
        "core": core,
        "seconds": round(time.perf_counter() - start, 1),
    }


def generate(
    names: Sequence[str],
    root: Path,
    *,
    variants: int | Mapping[str, int],
    jobs: int = 1,
    repeats: int = 3,
    seed: int = 0,
    cpus: Sequence[int] | None = None,
    budget_s: float | None = None,
    retime_rounds: int = 0,
    platform: str = "cpu",
) -> list[dict[str, Any]]:
    """Measures the graphs' variants, one pinned process per graph, ``jobs`` at a time.

    Args:
      names: corpus graphs.
      root: the dataset root.
      variants: variants per graph (or per graph name; missing names get 10).
      jobs: graphs measured at once (each pinned to its own core of ``cpus``).
      repeats: profiled runs per variant.
      seed: the random variants' seed.
      cpus: the cores to pin to (default: the highest-numbered ``jobs`` usable ones).
      budget_s: no variant starts after this many seconds.
      retime_rounds: measure nothing new; time each graph's stored variants' steps again
        for this many interleaved rounds (:func:`retime_graph`).
      platform: where to measure (:func:`measure_graph`).

    Returns:
      One summary per graph (:func:`measure_graph` or :func:`retime_graph`).
    """
    import os

    from hlo_go.xla.timing import in_pinned_process

    usable = sorted(os.sched_getaffinity(0))
    cores = list(cpus) if cpus else usable[-jobs:]
    deadline = None if budget_s is None else time.time() + budget_s
    root.mkdir(parents=True, exist_ok=True)

    # A graph takes a core that no other graph holds, and gives it back when done.
    free_cores: queue.SimpleQueue[int] = queue.SimpleQueue()
    for cpu in cores:
        free_cores.put(cpu)

    def run(name: str) -> dict[str, Any]:
        cpu = free_cores.get()
        logger.info("%s: measuring on core %d", name, cpu)
        try:
            if retime_rounds:
                return in_pinned_process(
                    retime_graph, name, str(root), rounds=retime_rounds, core=cpu, cpu=cpu
                )
            return in_pinned_process(
                measure_graph,
                name,
                str(root),
                cpu=cpu,
                variants=variants if isinstance(variants, int) else variants.get(name, 10),
                repeats=repeats,
                seed=seed,
                core=cpu,
                deadline_s=deadline,
                platform=platform,
            )
        except Exception as error:  # one graph's failure does not stop the others
            return {"graph": name, "error": f"{type(error).__name__}: {str(error)[:300]}"}
        finally:
            free_cores.put(cpu)

    def logged(name: str) -> dict[str, Any]:
        result = run(name)
        for line in result.get("measured", []):
            logger.info("%s / %s", name, line)
        if "retimed" in result:
            logger.info(
                "%s: %d variants re-timed over %d rounds in %.0f s, failed: %s",
                name,
                len(result["retimed"]),
                result["rounds"],
                result["seconds"],
                result["failed"] or "none",
            )
            return result
        logger.info(
            "%s: %d measured, %d already stored, failed: %s",
            name,
            len(result.get("measured", [])),
            len(result.get("skipped", [])),
            result.get("error") or result.get("failed") or "none",
        )
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(cores)))) as pool:
        return list(pool.map(logged, names))


def default_counts(variants: int, *, heldout_variants: int) -> dict[str, int]:
    """Graph -> variants to measure by default: :data:`TRAIN_GRAPHS` and
    :data:`HELDOUT_GRAPHS`, alternating, so that a cut run leaves some of both."""
    counts = {n: variants for n in TRAIN_GRAPHS} | dict.fromkeys(HELDOUT_GRAPHS, heldout_variants)
    names = [n for pair in zip(HELDOUT_GRAPHS, TRAIN_GRAPHS, strict=False) for n in pair]
    return {n: counts[n] for n in names} | counts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hlo_go.calibration.kernel_dataset",
        description="Measure per-kernel times of fusion variants of corpus graphs.",
    )
    parser.add_argument(
        "graphs",
        nargs="*",
        help="corpus graphs, NAME or NAME:VARIANTS (default: the training graphs with "
        "--variants each and the held-out graphs with 10)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT, help="dataset root")
    parser.add_argument("--variants", type=int, default=8, help="variants per graph")
    parser.add_argument("--jobs", type=int, default=1, help="graphs measured at once")
    parser.add_argument("--repeats", type=int, default=3, help="profiled runs per variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=None, help="start no variant after")
    parser.add_argument("--platform", default="cpu", help="where to measure: cpu (default) or gpu")
    parser.add_argument(
        "--retime",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="measure nothing new: time the stored variants' steps again, interleaved with "
        "XLA's default for ROUNDS rounds (the graphs named, or every stored graph)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 when a graph failed)."""
    args = _parser().parse_args(argv)
    if args.variants < 1 or args.jobs < 1 or args.repeats < 1:
        _parser().error("--variants, --jobs and --repeats must be positive")
    if args.retime:
        if args.retime < 2:
            _parser().error("--retime needs at least 2 rounds")
        names = [item.partition(":")[0] for item in args.graphs] or stored_graphs(args.out)
        if not names:
            _parser().error(f"{args.out}: no stored graphs to re-time")
        results = generate(names, args.out, variants=1, jobs=args.jobs, retime_rounds=args.retime)
        return 1 if any("error" in r or r.get("failed") for r in results) else 0
    counts: dict[str, int] = {}
    if args.graphs:
        for item in args.graphs:
            name, _, count = item.partition(":")
            if count and not count.isdigit():
                _parser().error(f"{item!r}: the count after ':' must be a number")
            counts[name] = int(count) if count else args.variants
    else:
        counts = default_counts(args.variants, heldout_variants=10)
    results = generate(
        list(counts),
        args.out,
        variants=counts,
        jobs=args.jobs,
        repeats=args.repeats,
        seed=args.seed,
        budget_s=args.budget_s,
        platform=args.platform,
    )
    return 1 if any("error" in r or r.get("failed") for r in results) else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
    sys.exit(main())
