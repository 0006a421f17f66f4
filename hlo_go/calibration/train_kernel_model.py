"""Training the learned kernel cost model on measured kernels, and judging it on held-out families.

``python -m hlo_go.calibration.train_kernel_model [--data DIR] [--out FILE]`` reads a
kernel dataset (:mod:`hlo_go.calibration.kernel_dataset`), keeps the graphs of the
training families (every family but :data:`HELDOUT_FAMILIES` by default:
those of :data:`hlo_go.calibration.kernel_dataset.HELDOUT_GRAPHS`), and fits
:class:`hlo_go.sim.learned.KernelNet` (Optax AdamW, cosine decay) to the log of each
kernel's measured time, as a correction of the roofline of :data:`ROOFLINE_CLUSTER`.
The runtime's time between kernels (``gap_s`` per launch) is then fitted to the
training variants' step times. The model file goes to the shipped model's place by
default (``hlo_go/sim/learned/host_cpu.msgpack``).

Examples (:func:`examples`): each variant of a graph is simulated on the analytic
``host-cpu-1`` with the measured grouping; its launched kernels are featurized and
paired with their measured seconds (the thunks charged to that group, less what other
processes took of the core: :func:`hlo_go.calibration.kernel_dataset.kernel_seconds`).
Times are scaled by the variant's contention factor
(:func:`hlo_go.calibration.kernel_dataset.contention_factors`) unless ``--raw``.

:func:`evaluate` is the held-out report (``python -m benchmarks cost_model`` writes it):
per-kernel and per-step errors and the Kendall τ of each graph's variants, for the
learned model and the roofline alike.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hlo_go import corpus
from hlo_go.calibration.kernel_dataset import (
    DEFAULT_ROOT,
    KernelSample,
    contention_factors,
    corrected_steps,
    kernel_seconds,
    load_dataset,
    split_half_tau,
)
from hlo_go.calibration.validation import rank_correlation
from hlo_go.decisions import Decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph
from hlo_go.graph.batching import Bucket
from hlo_go.sim import simulate
from hlo_go.sim.cluster import Cluster, Device
from hlo_go.sim.learned.features import KernelBatch, concat_batches, featurize, pad_batch, select
from hlo_go.sim.learned.model import ModelConfig, init_params
from hlo_go.sim.learned.predict import (
    SHIPPED,
    KernelModel,
    kernel_subset,
    save_kernel_model,
)
from hlo_go.sim.presets import A100_SXM4, H100_SXM5, HOST_CORE_CALIBRATED, V100_SXM2, host_cpu

logger = logging.getLogger(__name__)

HELDOUT_FAMILIES: tuple[str, ...] = ("gnmt", "bert")
"""Families the shipped model never sees in training: its accuracy is judged on them."""

DEFAULT_STEPS = 12000
"""Training steps of the shipped model (the in-sample error still fell from 8,000 to
12,000; ``docs/cost_model.md`` has the figures)."""

ROOFLINE_CLUSTER = host_cpu(1, kernel_model="")
"""The analytic cluster whose roofline times the model corrects (and the comparison)."""

# The roofline device's per-launch time outside a kernel (its launch overhead is the
# kernel's own share plus this gap, benchmarks/results/sim_calibration.json): subtracted
# from a roofline duration to compare it with a measured kernel (a thunk's event).
ROOFLINE_GAP_S = 1.85e-6

ROOFLINE_DEVICES: dict[str, Device] = {
    "host": HOST_CORE_CALIBRATED,
    "h100": H100_SXM5,
    "a100": A100_SXM4,
    "v100": V100_SXM2,
}
"""Devices a dataset's kernels can be priced against (``--device``): this host's core
(a CPU dataset), or a GPU's datasheet preset (a GPU dataset,
``kernel_dataset --platform gpu``)."""


def roofline_cluster(device: Device = HOST_CORE_CALIBRATED, kernel_model: str = "") -> Cluster:
    """One ``device`` as a cluster (``host-cpu-1`` for this host's core), its kernels priced
    by ``kernel_model`` (a model file) or, with ``""``, by the roofline alone."""
    if device.name == HOST_CORE_CALIBRATED.name:
        return host_cpu(1, kernel_model=kernel_model)
    return Cluster(
        f"{device.name} x1",
        (device.replace(kernel_model=kernel_model),),
        (),
        f"one {device.name}, for a kernel dataset measured on such a device",
    )


def roofline_gap_s(cluster: Cluster) -> float:
    """Seconds per launch of ``cluster``'s roofline spent outside the kernel: this host's
    fitted gap (:data:`ROOFLINE_GAP_S`), or a GPU's whole launch overhead (its kernel
    events, on the device's timeline, hold none of it)."""
    device = cluster.devices[0]
    if device.name == HOST_CORE_CALIBRATED.name:
        return ROOFLINE_GAP_S
    return float(device.launch_overhead)


class GraphExamples(NamedTuple):
    """The kernels of one graph's measured variants, featurized.

    Attributes:
      graph_name: the graph.
      graph: its pre-fusion graph.
      family: its corpus family.
      batch: every launched kernel of every variant (:class:`KernelBatch`).
      sample: ``int64[G]`` the variant (index into ``samples``) of each kernel.
      measured_s: ``float64[G]`` measured seconds (NaN: no thunk was charged to it).
      roofline_s: ``float64[G]`` the roofline duration (launch overhead included).
      launches: ``float64[G]`` launches of each kernel.
      fallback: ``bool[G]`` kernels too large to featurize (not in ``batch``'s model
        input; their roofline stands).
      samples: the variants.
      factors: ``float64[S]`` the contention factor applied to each variant's kernel times.
      step_s: ``float64[S]`` each variant's measured step (in the graph's quiet frame,
        :func:`~hlo_go.calibration.kernel_dataset.corrected_steps`, unless raw).
      cluster: the one-device cluster whose roofline gave ``roofline_s``.
    """

    graph_name: str
    graph: OpGraph
    family: str
    batch: KernelBatch
    sample: np.ndarray
    measured_s: np.ndarray
    roofline_s: np.ndarray
    launches: np.ndarray
    fallback: np.ndarray
    samples: list[KernelSample]
    factors: np.ndarray
    step_s: np.ndarray
    cluster: Cluster = ROOFLINE_CLUSTER


def family(graph_name: str) -> str:
    """The corpus family of a graph (its own name for a graph not in the corpus)."""
    try:
        return str(corpus.info(graph_name)["family"])
    except (KeyError, FileNotFoundError):
        return graph_name


def examples(
    graph_name: str,
    graph: OpGraph,
    samples: Sequence[KernelSample],
    *,
    cluster: Cluster = ROOFLINE_CLUSTER,
    correct_contention: bool = True,
) -> GraphExamples:
    """Featurizes the launched kernels of a graph's measured variants.

    Args:
      graph_name: the graph.
      graph: its pre-fusion graph.
      samples: its measured variants.
      cluster: the analytic cluster giving the roofline times.
      correct_contention: scale each variant's times by its contention factor.

    Returns:
      The :class:`GraphExamples`.
    """
    from hlo_go.sim.learned.features import featurizable

    factors = (
        contention_factors(samples) if correct_contention else np.ones(len(samples), np.float64)
    )
    batches, sample_ids, measured, roofline, launches, fallback = [], [], [], [], [], []
    node_launches = np.maximum(graph.kernel_launches, 1).astype(np.float64)
    for i, s in enumerate(samples):
        result = simulate(graph, cluster, Decisions.default(graph), group=s.group)
        t = result.timeline
        kernels = np.flatnonzero(~t.kernel_free)
        ptr, members = kernel_subset(t.kernel_ptr, t.kernel_nodes, kernels)
        dur = (t.kernel_end - t.kernel_start)[kernels]
        nl = np.maximum.reduceat(node_launches[members], ptr[:-1])
        labels = s.group[members[ptr[:-1]]]
        seconds = kernel_seconds(s)
        lookup = dict(zip(s.kernel_label.tolist(), seconds.tolist(), strict=True))
        meas = np.array([lookup.get(int(k), np.nan) for k in labels.tolist()]) * factors[i]
        ok = featurizable(ptr, dur)
        keep = np.flatnonzero(ok)
        sub_ptr, sub_members = kernel_subset(ptr, members, keep)
        batches.append(featurize(graph, sub_ptr, sub_members, dur[keep], nl[keep]))
        order = np.concatenate([keep, np.flatnonzero(~ok)])
        sample_ids.append(np.full(order.size, i))
        measured.append(meas[order])
        roofline.append(dur[order])
        launches.append(nl[order])
        fallback.append(~ok[order])
    return GraphExamples(
        graph_name,
        graph,
        family(graph_name),
        concat_batches(batches),
        np.concatenate(sample_ids),
        np.concatenate(measured),
        np.concatenate(roofline),
        np.concatenate(launches),
        np.concatenate(fallback),
        list(samples),
        factors,
        corrected_steps(samples) if correct_contention else np.array([s.step_s for s in samples]),
        cluster,
    )


def _rows(ex: GraphExamples) -> np.ndarray:
    """Example rows that are in the batch (non-fallback), in batch order."""
    return np.flatnonzero(~ex.fallback)


# ---------------------------------------------------------------------------------------------
# Training.


class TrainResult(NamedTuple):
    """A trained model and how the training went.

    Attributes:
      model: the model (``gap_s`` fitted).
      losses: mean training loss per logging interval.
      seconds: training wall time.
      kernels: training kernels (with a measured time).
    """

    model: KernelModel
    losses: list[float]
    seconds: float
    kernels: int


def train(
    train_examples: Sequence[GraphExamples],
    *,
    config: ModelConfig | None = None,
    steps: int = DEFAULT_STEPS,
    batch_size: int = 128,
    learning_rate: float = 2e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
    name: str = "host-cpu",
    log_every: int = 250,
    variant_weight: float = 1.0,
) -> TrainResult:
    """Fits a :class:`~hlo_go.sim.learned.KernelNet` to measured kernels.

    The loss is the Huber loss (δ = 1) of predicted against measured log seconds, every
    measured kernel weighted alike, plus ``variant_weight`` times the squared log error
    of one variant's summed kernel time (all its measured kernels, drawn at random each
    step): what a step time, and a ranking of variants, depends on. Kernel batches hold
    up to ``batch_size`` kernels and ``12 × batch_size`` member nodes, padded to one
    bucket; variant batches to another (two shapes, one compile).

    Args:
      train_examples: featurized graphs.
      config: the network's sizes (default :class:`ModelConfig`'s).
      steps: optimizer steps.
      batch_size: kernels per step.
      learning_rate: AdamW's peak rate (cosine decay to zero).
      weight_decay: AdamW's weight decay.
      seed: initialization and batch order.
      name: the model's name.
      log_every: steps per logged loss.
      variant_weight: weight of the per-variant sum term (0: kernels alone).

    Returns:
      The :class:`TrainResult`.
    """
    import jax
    import jax.numpy as jnp
    import optax

    from hlo_go.sim.learned.model import KernelNet

    config = config or ModelConfig()
    batches, targets, variant_of = [], [], []
    variants = 0
    for ex in train_examples:
        rows = _rows(ex)
        measured = ex.measured_s[rows]
        good = np.flatnonzero(np.isfinite(measured) & (measured > 0))
        batches.append(select(ex.batch, good))
        targets.append(np.log(measured[good]))
        variant_of.append(ex.sample[rows][good] + variants)
        variants += len(ex.samples)
    data = concat_batches(batches)
    y = np.concatenate(targets).astype(np.float32)
    variant = np.concatenate(variant_of)
    members = [np.flatnonzero(variant == v) for v in range(variants)]
    members = [m for m in members if m.size]
    count = y.size
    if count == 0:
        raise ValueError("no measured kernels to train on")
    rng = np.random.default_rng(seed)
    net = KernelNet(config)
    params = init_params(config, pad_batch(select(data, np.arange(min(count, 8)))), seed=seed)
    schedule = optax.cosine_decay_schedule(learning_rate, max(1, steps))
    optimizer = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=weight_decay)
    )
    state = optimizer.init(params)

    def loss_fn(p: Any, kernels: tuple, whole: tuple) -> jnp.ndarray:
        graphs, target, mask = kernels
        pred = net.apply({"params": p}, graphs)
        loss = jnp.sum(optax.huber_loss(pred, target, delta=1.0) * mask) / jnp.sum(mask)
        if variant_weight > 0:
            graphs, total, mask = whole
            pred = net.apply({"params": p}, graphs)
            summed = jax.nn.logsumexp(jnp.where(mask > 0, pred, -jnp.inf))
            loss = loss + variant_weight * (summed - total) ** 2
        return loss

    @jax.jit
    def step(p: Any, s: Any, kernels: tuple, whole: tuple) -> tuple:
        loss, grads = jax.value_and_grad(loss_fn)(p, kernels, whole)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    # Every step's batch is padded to one bucket, so the step compiles once: kernels are
    # drawn in a shuffled order until the next would overflow the node or edge budget.
    node_budget = max(int(data.n_node.max()), batch_size * 12)
    edge_budget = max(int(data.n_edge.max()), 3 * node_budget)
    bucket = Bucket(node_budget + 1, edge_budget, batch_size + 1)
    variant_bucket = Bucket(
        max(int(data.n_node[m].sum()) for m in members) + 1,
        max(1, max(int(data.n_edge[m].sum()) for m in members)),
        max(m.size for m in members) + 1,
    )
    start = time.perf_counter()
    losses, window = [], []
    order, cursor = rng.permutation(count), 0
    for k in range(steps):
        chosen, nodes, edges = [], 0, 0
        while len(chosen) < batch_size:
            if cursor == count:
                order, cursor = rng.permutation(count), 0
            i = int(order[cursor])
            if nodes + data.n_node[i] > node_budget or edges + data.n_edge[i] > edge_budget:
                break
            chosen.append(i)
            nodes, edges = nodes + int(data.n_node[i]), edges + int(data.n_edge[i])
            cursor += 1
        graphs = pad_batch(select(data, np.array(chosen)), bucket)
        target = np.zeros(bucket.n_graph, np.float32)
        target[: len(chosen)] = y[chosen]
        mask = np.zeros(bucket.n_graph, np.float32)
        mask[: len(chosen)] = 1.0
        whole: tuple = ()
        if variant_weight > 0:
            rows = members[int(rng.integers(len(members)))]
            vmask = np.zeros(variant_bucket.n_graph, np.float32)
            vmask[: rows.size] = 1.0
            total = np.float32(np.log(np.exp(y[rows].astype(np.float64)).sum()))
            whole = (pad_batch(select(data, rows), variant_bucket), total, vmask)
        params, state, loss = step(params, state, (graphs, target, mask), whole)
        window.append(float(loss))
        if (k + 1) % log_every == 0 or k + 1 == steps:
            losses.append(float(np.mean(window)))
            window = []
            logger.info("step %d/%d: loss %.4f", k + 1, steps, losses[-1])
    params = jax.tree.map(np.asarray, params)
    model = KernelModel(name, config, params, gap_s=0.0)
    model.gap_s = fit_gap(model, train_examples)
    return TrainResult(model, losses, time.perf_counter() - start, count)


def kernel_predictions(model: KernelModel, ex: GraphExamples) -> np.ndarray:
    """``float64[G]`` the model's seconds for every kernel of the examples (the roofline
    duration, less the roofline's gap, for kernels it cannot featurize)."""
    out = ex.roofline_s - roofline_gap_s(ex.cluster) * ex.launches
    rows = _rows(ex)
    if rows.size:
        out[rows] = np.exp(model.log_seconds(ex.batch))
    return out


def fit_gap(model: KernelModel, train_examples: Sequence[GraphExamples]) -> float:
    """Seconds per kernel launch between kernels: the median over training variants of
    (measured step - predicted kernel seconds) / launches, at least 0."""
    ratios = []
    for ex in train_examples:
        predicted = kernel_predictions(model, ex)
        for i in range(len(ex.samples)):
            mine = ex.sample == i
            ratios.append((ex.step_s[i] - predicted[mine].sum()) / ex.launches[mine].sum())
    return max(0.0, float(statistics.median(ratios))) if ratios else 0.0


# ---------------------------------------------------------------------------------------------
# Evaluation.


def _median_abs(errors: Sequence[float]) -> float | None:
    values = [abs(e) for e in errors if np.isfinite(e)]
    return float(statistics.median(values)) if values else None


def evaluate(
    examples_: Sequence[GraphExamples],
    model: KernelModel,
    *,
    min_variants: int = 10,
) -> dict[str, Any]:
    """Learned model and roofline against measurements, per kernel, per step, per ranking.

    A kernel's prediction is the model's seconds (the roofline's duration less its
    launch gap, :data:`ROOFLINE_GAP_S`), judged on the variants with per-run times where
    a graph has any; a step's is the simulated step on ``host-cpu-1`` with the model
    (without), from the measured grouping.

    Args:
      examples_: featurized graphs (held-out ones, for the headline).
      model: the learned model.
      min_variants: graphs with fewer measured variants get no Kendall τ.

    Returns:
      ``{"learned": {...}, "analytic": {...}, "measured": {...}, "graphs": {...}}``:
      per model ``kernel_median_abs_error``, ``step_median_abs_error``,
      ``variant_kendall_tau_median``; the measurement's own agreement
      (``split_half_tau_median`` over the graphs ranked,
      :func:`~hlo_go.calibration.kernel_dataset.split_half_tau`); per-graph figures.
    """
    out: dict[str, Any] = {"graphs": {}}
    learned: dict[str, Cluster] = {}
    totals: dict[str, dict[str, list[float]]] = {
        m: {"kernel": [], "step": [], "tau": []} for m in ("learned", "analytic")
    }
    self_taus: list[float] = []
    for ex in examples_:
        graph_rows: dict[str, Any] = {"family": ex.family, "variants": len(ex.samples)}
        measured = ex.measured_s
        timed = np.isfinite(measured) & (measured > 0)
        # Kernel labels are judged where runs were kept (format 2): older samples' labels
        # could not be corrected for preemption (kernel_seconds).
        with_runs = np.array([s.kernel_runs_s is not None for s in ex.samples])
        if with_runs.any():
            timed &= with_runs[ex.sample]
        graph_rows["kernel_variants"] = int(with_runs.sum()) if with_runs.any() else len(ex.samples)
        for method, predicted in (
            ("learned", kernel_predictions(model, ex)),
            ("analytic", ex.roofline_s - roofline_gap_s(ex.cluster) * ex.launches),
        ):
            errors = (predicted[timed] - measured[timed]) / measured[timed]
            totals[method]["kernel"].extend(errors.tolist())
            graph_rows[f"{method}_kernel_median_abs_error"] = _median_abs(errors.tolist())
        graph = ex.graph
        steps = {"learned": [], "analytic": []}
        if ex.cluster.name not in learned:
            learned[ex.cluster.name] = cluster_with(model, ex.cluster.devices[0])
        for s in ex.samples:
            for method, cluster in (
                ("learned", learned[ex.cluster.name]),
                ("analytic", ex.cluster),
            ):
                steps[method].append(
                    simulate(graph, cluster, Decisions.default(graph), group=s.group).step_time
                )
        rows = []
        for i, s in enumerate(ex.samples):
            rows.append(
                {
                    "variant": s.variant,
                    "kernels": int(np.count_nonzero(ex.sample == i)),
                    "measured_s": float(ex.step_s[i]),
                    "measured_raw_s": s.step_s,
                    "spread_s": list(s.step_spread_s),
                    "learned_s": steps["learned"][i],
                    "analytic_s": steps["analytic"][i],
                }
            )
        graph_rows["rows"] = rows
        for method in ("learned", "analytic"):
            errors = [(p - m) / m for p, m in zip(steps[method], ex.step_s, strict=True)]
            totals[method]["step"].extend(errors)
            graph_rows[f"{method}_step_median_abs_error"] = _median_abs(errors)
            tau = (
                rank_correlation(list(ex.step_s), steps[method])
                if len(ex.samples) >= min_variants
                else float("nan")
            )
            graph_rows[f"{method}_kendall_tau"] = tau if np.isfinite(tau) else None
            if np.isfinite(tau):
                totals[method]["tau"].append(tau)
        agreement = split_half_tau(ex.samples) if len(ex.samples) >= min_variants else None
        graph_rows["measured_split_half_tau"] = agreement
        if agreement is not None:
            self_taus.append(agreement)
        out["graphs"][ex.graph_name] = graph_rows
    out["measured"] = {
        "split_half_tau_median": float(statistics.median(self_taus)) if self_taus else None,
        "graphs": len(self_taus),
    }
    for method, t in totals.items():
        out[method] = {
            "kernel_median_abs_error": _median_abs(t["kernel"]),
            "step_median_abs_error": _median_abs(t["step"]),
            "variant_kendall_tau_median": (
                float(statistics.median(t["tau"])) if t["tau"] else None
            ),
            "kernels": len(t["kernel"]),
            "variants": len(t["step"]),
            "graphs_ranked": len(t["tau"]),
        }
    return out


def cluster_with(model: KernelModel, device: Device = HOST_CORE_CALIBRATED) -> Cluster:
    """One ``device`` (``host-cpu-1`` by default) priced by ``model`` (written to a
    temporary file the device names)."""
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="hlo_go_kernel_model_"))
    path = save_kernel_model(directory / "model.msgpack", model)
    return roofline_cluster(device, kernel_model=str(path))


def load_examples(
    root: Path,
    *,
    graphs: Sequence[str] | None = None,
    correct_contention: bool = True,
    device: Device = HOST_CORE_CALIBRATED,
) -> dict[str, GraphExamples]:
    """Featurized examples of every stored graph (or the named ones), priced against
    ``device``'s roofline (:func:`roofline_cluster`)."""
    out = {}
    cluster = roofline_cluster(device)
    for name, (graph, samples) in load_dataset(root, graphs).items():
        start = time.perf_counter()
        ex = examples(name, graph, samples, cluster=cluster, correct_contention=correct_contention)
        out[name] = ex
        logger.info(
            "%s: %d variants, %d kernels (%.0f s)",
            name,
            len(samples),
            ex.measured_s.size,
            time.perf_counter() - start,
        )
    return out


def split(
    examples_: Mapping[str, GraphExamples], heldout_families: Sequence[str]
) -> tuple[list[GraphExamples], list[GraphExamples]]:
    """``(training, held-out)`` graphs by family."""
    train_ = [ex for ex in examples_.values() if ex.family not in heldout_families]
    held = [ex for ex in examples_.values() if ex.family in heldout_families]
    return train_, held


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hlo_go.calibration.train_kernel_model",
        description="Train the learned kernel cost model on a kernel dataset.",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_ROOT, help="dataset root")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "sim" / "learned" / SHIPPED["host-cpu"],
        help="model file to write (default: the shipped host-cpu model)",
    )
    parser.add_argument(
        "--heldout",
        nargs="*",
        default=list(HELDOUT_FAMILIES),
        help="families left out of training",
    )
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--variant-weight", type=float, default=1.0, help="weight of the variant-sum loss"
    )
    parser.add_argument("--raw", action="store_true", help="no contention correction")
    parser.add_argument(
        "--device",
        choices=sorted(ROOFLINE_DEVICES),
        default="host",
        help="the roofline the model corrects: this host's core (a CPU dataset, the "
        "default) or a GPU preset (a GPU dataset; implies --raw)",
    )
    return parser


class FitError(ValueError, HloGoError):
    """A kernel dataset with no graph of the training families."""


def fit(
    data: Path,
    heldout: Sequence[str] = HELDOUT_FAMILIES,
    *,
    steps: int = DEFAULT_STEPS,
    batch_size: int = 128,
    learning_rate: float = 2e-3,
    hidden: int = 64,
    layers: int = 3,
    seed: int = 0,
    variant_weight: float = 1.0,
    raw: bool = False,
    device: str = "host",
) -> KernelModel:
    """Trains a model on a kernel dataset's training families and reports on the others.

    Args:
      data: the dataset root (:mod:`hlo_go.calibration.kernel_dataset`).
      heldout: families left out of training and reported on (none: in-sample only).
      steps, batch_size, learning_rate, seed, variant_weight: of :func:`train`.
      hidden, layers: the network's :class:`~hlo_go.sim.learned.ModelConfig`.
      raw: no contention correction of the measured times.
      device: a key of :data:`ROOFLINE_DEVICES`: the roofline the model corrects. A GPU
        dataset has no contention to correct (its times are the device's), so any device
        but ``"host"`` implies ``raw``.

    Returns:
      The model; its ``meta`` holds the data, the settings, the losses, and the
      in-sample and held-out reports (:func:`evaluate`: ``"learned"`` and ``"analytic"``).

    Raises:
      FitError: no graph of the training families in ``data``.
    """
    import jax

    start = time.perf_counter()
    if device not in ROOFLINE_DEVICES:
        raise FitError(f"device must be one of {sorted(ROOFLINE_DEVICES)}, got {device!r}")
    raw = raw or device != "host"
    roofline = ROOFLINE_DEVICES[device]
    loaded = load_examples(data, correct_contention=not raw, device=roofline)
    train_set, held = split(loaded, heldout)
    if not train_set:
        raise FitError(f"no training graphs in {data} (held out: {', '.join(heldout) or 'none'})")
    config = ModelConfig(hidden=hidden, layers=layers)
    result = train(
        train_set,
        config=config,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        variant_weight=variant_weight,
    )
    in_sample = evaluate(train_set, result.model, min_variants=2)
    report = evaluate(held, result.model) if held else {}
    model = result.model
    model.meta = {
        "dataset": str(data),
        "train_graphs": {ex.graph_name: len(ex.samples) for ex in train_set},
        "heldout_graphs": {ex.graph_name: len(ex.samples) for ex in held},
        "heldout_families": sorted(heldout),
        "train_kernels": result.kernels,
        "contention_corrected": not raw,
        "roofline_device": roofline.name,
        "config": config.as_dict(),
        "steps": steps,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "seed": seed,
        "variant_weight": variant_weight,
        "losses": [round(x, 5) for x in result.losses],
        "train_s": round(result.seconds, 1),
        "total_s": round(time.perf_counter() - start, 1),
        "jax": jax.__version__,
        "in_sample": {k: in_sample[k] for k in ("learned", "analytic")},
        "heldout": {k: report[k] for k in ("learned", "analytic")} if report else None,
    }
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """Trains on the training families, reports the held-out ones, writes the model."""
    import json

    args = _parser().parse_args(argv)
    try:
        model = fit(
            args.data,
            args.heldout,
            steps=args.steps,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            hidden=args.hidden,
            layers=args.layers,
            seed=args.seed,
            variant_weight=args.variant_weight,
            raw=args.raw,
            device=args.device,
        )
    except FitError as error:
        logger.error("%s", error)
        return 1
    save_kernel_model(args.out, model)
    logger.info("gap %.3g s per launch; wrote %s", model.gap_s, args.out)
    logger.info("in sample: %s", json.dumps(model.meta["in_sample"]))
    if model.meta["heldout"]:
        logger.info("held out: %s", json.dumps(model.meta["heldout"]))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
    sys.exit(main())
