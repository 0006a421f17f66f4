"""Checkpoints: parameters, optimizer state, step and best decisions, with Flax msgpack.

A checkpoint is one file (``checkpoint.msgpack`` in a run's directory) written
atomically (temporary file, then rename) by :func:`save_checkpoint`. It holds::

    params      the policy's variables
    opt_state   the Optax state (restored into the structure of optimizer.init(params))
    step        training steps done
    elapsed     training wall-clock seconds so far (for metrics)
    best        graph name -> best decisions seen and their step time
    meta        JSON: the TrainConfig, the run's kind, cluster and graph names

Since every random draw of step ``s`` comes from ``fold_in(key(seed), s)``, a run
resumed from a checkpoint continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import serialization

from hlo_go.rl.config import TrainConfig

CHECKPOINT_NAME = "checkpoint.msgpack"


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
        "meta": json.dumps({**meta, "config": config.to_dict()}),
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
    return Checkpoint(
        state["params"],
        state["opt_state"],
        int(state["step"]),
        float(state["elapsed"]),
        {name: dict(b) for name, b in state["best"].items()},
        config,
        meta,
    )


def restore_params(template: Any, raw: Any) -> Any:
    """Checkpointed parameters in the structure of ``template`` (from ``policy.init``)."""
    return serialization.from_state_dict(template, raw)


def restore_opt_state(template: Any, raw: Any) -> Any:
    """A checkpointed optimizer state in the structure of ``template`` (``optimizer.init``)."""
    return serialization.from_state_dict(template, raw)
