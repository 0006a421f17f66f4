"""Checkpoints: parameters, optimizer state, step and best decisions, with Flax msgpack.

A checkpoint is one file (``checkpoint.msgpack`` in a run's directory) written
atomically (temporary file, then rename) by :func:`save_checkpoint`. It holds::

    params      the policy's variables
    opt_state   the Optax state (restored into the structure of optimizer.init(params))
    step        training steps done
    elapsed     training wall-clock seconds so far (for metrics)
    best        graph name -> best decisions seen and their step time
    meta        JSON: the TrainConfig, the run's kind, cluster and graph names, and
                fingerprints of the cluster and of each graph (what a resume must match),
                the file's ``format`` (:data:`CHECKPOINT_FORMAT`) and the ``vocabulary``
                its network reads (:func:`hlo_go.graph.vocabulary_signature`)

A checkpoint of a newer format, or one whose network reads another opcode vocabulary or
other node features, is refused when loaded; parameters whose structure or shapes differ
from the network's are refused when restored (:class:`CheckpointMismatchError`).

Since every random draw of step ``s`` comes from ``fold_in(key(seed), s)``, a run
resumed from a checkpoint continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import serialization

from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph, vocabulary_signature
from hlo_go.rl.config import TrainConfig
from hlo_go.sim import Cluster, cluster_to_dict

CHECKPOINT_NAME = "checkpoint.msgpack"
CHECKPOINT_FORMAT = 2
"""Version of a checkpoint's contents. 2 records ``format`` and ``vocabulary`` in ``meta``;
files without them are format 1 and still read (their parameters' shapes are checked)."""


class CheckpointMismatchError(ValueError, HloGoError):
    """A checkpoint this hlo-go cannot use as it is: a newer file format, another opcode
    vocabulary or feature set, parameters of other shapes, or a cluster with more devices
    than its network was built for. The message says which."""


class Checkpoint(NamedTuple):
    """A loaded checkpoint.

    Attributes:
      params: the policy's variables.
      opt_state: the raw optimizer state (a state dict; see :func:`restore_opt_state`).
      step: steps done.
      elapsed: training seconds so far.
      best: graph name -> arrays of :meth:`hlo_go.rl.GraphEnv.best_state`.
      config: the run's TrainConfig.
      meta: the rest of the metadata (``kind``, ``cluster``, ``graphs``).
    """

    params: Any
    opt_state: Any
    step: int
    elapsed: float
    best: dict[str, dict[str, np.ndarray]]
    config: TrainConfig
    meta: dict[str, Any]


def checkpoint_path(path: str | Path) -> Path:
    """``path`` itself if it is a file, else ``path / checkpoint.msgpack``."""
    path = Path(path)
    return path if path.suffix == ".msgpack" else path / CHECKPOINT_NAME


def save_checkpoint(
    path: str | Path,
    *,
    params: Any,
    opt_state: Any,
    step: int,
    elapsed: float,
    best: dict[str, dict[str, np.ndarray]],
    config: TrainConfig,
    meta: dict[str, Any],
) -> Path:
    """Writes a checkpoint atomically; returns its path."""
    target = checkpoint_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "params": serialization.to_state_dict(jax.device_get(params)),
        "opt_state": serialization.to_state_dict(jax.device_get(opt_state)),
        "step": int(step),
        "elapsed": float(elapsed),
        "best": {name: dict(b) for name, b in best.items()},
        "meta": json.dumps(
            {
                **meta,
                "format": CHECKPOINT_FORMAT,
                "vocabulary": vocabulary_signature(),
                "config": config.to_dict(),
            }
        ),
    }
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(serialization.msgpack_serialize(state))
    os.replace(tmp, target)
    return target


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Reads a checkpoint written by :func:`save_checkpoint`.

    Args:
      path: the file, or the run directory holding ``checkpoint.msgpack``.

    Raises:
      FileNotFoundError: no checkpoint there.
      ValueError: the file is not a checkpoint.
      CheckpointMismatchError: a newer format, or another vocabulary
        (:func:`check_vocabulary`).
    """
    target = checkpoint_path(path)
    if not target.is_file():
        raise FileNotFoundError(f"no checkpoint at {target}")
    try:
        state = serialization.msgpack_restore(target.read_bytes())
        meta = json.loads(state["meta"])
        config = TrainConfig.from_dict(meta.pop("config"))
    except (KeyError, ValueError, TypeError) as error:
        raise ValueError(f"{target} is not an hlo-go checkpoint: {error}") from error
    version = meta.get("format", 1)
    if not isinstance(version, int) or version > CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(
            f"{target}: checkpoint format {version!r} was written by a newer hlo-go; this "
            f"one reads formats 1 to {CHECKPOINT_FORMAT}"
        )
    check_vocabulary(meta, where=target)
    return Checkpoint(
        state["params"],
        state["opt_state"],
        int(state["step"]),
        float(state["elapsed"]),
        {name: dict(b) for name, b in state["best"].items()},
        config,
        meta,
    )


def check_vocabulary(meta: Mapping[str, Any], *, where: str | Path = "") -> None:
    """Refuses a checkpoint whose network reads another opcode vocabulary or feature set.

    Args:
      meta: the checkpoint's metadata (no ``vocabulary``, as in format 1: not checked
        here; :func:`restore_params` still checks the parameters' shapes).
      where: the checkpoint's path, for the message.

    Raises:
      CheckpointMismatchError: naming the opcode vocabulary or the features, or both.
    """
    saved = meta.get("vocabulary")
    if saved is None:
        return
    current = vocabulary_signature()
    differ = [
        f"{what} ({saved.get(f'num_{what}')} {what}, signature {saved.get(what)}; this "
        f"hlo-go has {current[f'num_{what}']}, signature {current[what]})"
        for what in ("opcodes", "features")
        if saved.get(what) != current[what]
    ]
    if differ:
        prefix = f"{where}: " if where else ""
        raise CheckpointMismatchError(
            f"{prefix}the checkpoint's network reads another vocabulary: "
            + "; ".join(differ)
            + ". Retrain it with this version"
        )


def restore_params(template: Any, raw: Any) -> Any:
    """Checkpointed parameters in the structure of ``template``.

    Args:
      template: the network's parameters, or only their shapes (``policy.init`` or
        :meth:`hlo_go.gonet.GOPolicy.param_shapes`).
      raw: the checkpoint's parameters (a state dict).

    Raises:
      CheckpointMismatchError: a parameter missing, extra, or of another shape (the
        first few named with both shapes).
    """
    expected = _shapes_by_path(serialization.to_state_dict(template))
    found = _shapes_by_path(raw)
    problems = [f"{p}: missing" for p in expected if p not in found]
    problems += [f"{p}: not in this network" for p in found if p not in expected]
    problems += [
        f"{p}: shape {found[p]}, the network's {shape}"
        for p, shape in expected.items()
        if p in found and found[p] != shape
    ]
    if problems:
        more = f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""
        raise CheckpointMismatchError(
            "the checkpoint's parameters do not fit this network (another vocabulary, "
            f"policy config or device count?): {'; '.join(problems[:4])}{more}"
        )
    return serialization.from_state_dict(template, raw)


def _shapes_by_path(tree: Any) -> dict[str, tuple[int, ...]]:
    """``"a/b/c"`` -> shape of every leaf of a nested state dict."""
    return {
        "/".join(str(getattr(k, "key", k)) for k in path): tuple(np.shape(leaf))
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


def check_devices(checkpoint: Checkpoint, cluster: Cluster) -> None:
    """Refuses a cluster with more devices than ``checkpoint``'s network places on.

    Raises:
      CheckpointMismatchError: naming the cluster, its devices and the checkpoint's.
    """
    limit = checkpoint.config.max_devices
    if cluster.num_devices > limit:
        trained = checkpoint.meta.get("cluster")
        raise CheckpointMismatchError(
            f"the checkpoint (trained for cluster {trained!r}) places on at most {limit} "
            f"devices; cluster {cluster.name!r} has {cluster.num_devices}. Use a policy "
            f"trained with max_devices >= {cluster.num_devices}"
        )


def restore_opt_state(template: Any, raw: Any) -> Any:
    """A checkpointed optimizer state in the structure of ``template`` (``optimizer.init``)."""
    return serialization.from_state_dict(template, raw)


class ResumeMismatchError(ValueError, HloGoError):
    """A run directory's checkpoint was made for another cluster, graph, task set or config."""


# TrainConfig fields that may change between a run and its resumption: they do not change
# what is trained (only how often it is shown, evaluated and saved).
RESUMABLE_CHANGES = frozenset({"progress", "eval_every", "checkpoint_every"})


def graph_fingerprint(graph: OpGraph) -> str:
    """A hash of a graph's structure and costs (not its name or file name).

    Two graphs with the same fingerprint have the same nodes (opcodes, costs, output
    bytes, trip counts) and the same data and control edges, so decisions for one are
    decisions for the other.
    """
    digest = hashlib.sha256()
    for array in (
        graph.opcode, graph.flops, graph.transcendentals, graph.bytes_read,
        graph.bytes_written, graph.bytes_out, graph.trip_count, graph.senders,
        graph.receivers, graph.control_senders, graph.control_receivers,
        graph.colocation_group,
    ):  # fmt: skip
        value = np.ascontiguousarray(array)
        digest.update(f"{value.dtype.str}{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def cluster_fingerprint(cluster: Cluster) -> str:
    """A hash of a cluster's devices and links (its name and description excluded)."""
    data = cluster_to_dict(cluster)
    data.pop("name", None)
    data.pop("description", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def clusters_identity(clusters: Cluster | Sequence[Cluster]) -> tuple[str, str]:
    """``(name, fingerprint)`` a run saves for the clusters it trains on: one cluster's own
    name and :func:`cluster_fingerprint`; several clusters' names joined by ``","`` and a
    hash of their fingerprints, in order."""
    if isinstance(clusters, Cluster):
        return clusters.name, cluster_fingerprint(clusters)
    clusters = list(clusters)
    if len(clusters) == 1:
        return clusters_identity(clusters[0])
    joined = ",".join(cluster_fingerprint(c) for c in clusters)
    name = ",".join(c.name for c in clusters)
    return name, hashlib.sha256(joined.encode()).hexdigest()


def run_meta(
    kind: str, cluster: Cluster | Sequence[Cluster], graphs: Mapping[str, OpGraph]
) -> dict[str, Any]:
    """The ``meta`` a run saves: kind, cluster (or clusters), graph names and their
    fingerprints."""
    name, fingerprint = clusters_identity(cluster)
    meta = {
        "kind": kind,
        "cluster": name,
        "graphs": list(graphs),
        "cluster_fingerprint": fingerprint,
        "graph_fingerprints": {n: graph_fingerprint(g) for n, g in graphs.items()},
    }
    if not isinstance(cluster, Cluster) and len(cluster) > 1:
        meta["clusters"] = [c.name for c in cluster]
    return meta


def check_resume(
    checkpoint: Checkpoint,
    *,
    kind: str,
    cluster: Cluster | Sequence[Cluster],
    graphs: Mapping[str, OpGraph],
    config: TrainConfig,
    where: str | Path = "",
) -> None:
    """Refuses to resume ``checkpoint`` as a run that differs from the one that saved it.

    Args:
      checkpoint: the run directory's checkpoint.
      kind: the run's kind (``train_one``, ``pretrain``).
      cluster: the cluster the resumed run is for (or its clusters, in order).
      graphs: graph name -> graph of the resumed run.
      config: the resumed run's settings (fields in :data:`RESUMABLE_CHANGES` may differ).
      where: the run directory, for messages.

    Raises:
      ResumeMismatchError: naming what differs (kind, cluster, graph set, a graph's
        fingerprint, tasks or another setting).
    """
    meta = checkpoint.meta
    prefix = f"{where}: " if where else ""
    hint = "; use another --out directory (or --no-resume to start over)"

    def refuse(what: str) -> ResumeMismatchError:
        return ResumeMismatchError(f"{prefix}cannot resume: {what}{hint}")

    if meta.get("kind") != kind:
        raise refuse(f"it holds a {meta.get('kind')!r} run, not {kind!r}")
    saved_fp = meta.get("cluster_fingerprint")
    name, fingerprint = clusters_identity(cluster)
    if meta.get("cluster") != name or (saved_fp is not None and saved_fp != fingerprint):
        same_name = meta.get("cluster") == name
        raise refuse(
            f"the checkpoint was trained for cluster {meta.get('cluster')!r}, not "
            f"{name!r}" + (" (same name, other devices or links)" if same_name else "")
        )
    if list(meta.get("graphs", [])) != list(graphs):
        raise refuse(f"the checkpoint's graphs are {meta.get('graphs')}, not {list(graphs)}")
    saved = meta.get("graph_fingerprints", {})
    for name, graph in graphs.items():
        if name in saved and saved[name] != graph_fingerprint(graph):
            raise refuse(
                f"graph {name!r} ({graph.num_nodes} nodes) is not the graph the checkpoint "
                "was trained on (its structure or costs differ)"
            )
    if tuple(checkpoint.config.tasks) != tuple(config.tasks):
        raise refuse(
            f"the checkpoint learned tasks {list(checkpoint.config.tasks)}, not {list(config.tasks)}"
        )
    old, new = checkpoint.config.to_dict(), config.to_dict()
    changed = sorted(k for k in old.keys() | new.keys() if k not in RESUMABLE_CHANGES
                     and old.get(k) != new.get(k))  # fmt: skip
    if changed:
        shown = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed)
        raise refuse(f"settings differ from the checkpoint's ({shown})")
