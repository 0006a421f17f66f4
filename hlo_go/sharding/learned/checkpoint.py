"""Saving and loading sharding policy parameters with their configuration (msgpack)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import serialization

from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig


def save_policy(
    path: str | Path, params: Params, config: ShardingPolicyConfig | None = None
) -> Path:
    """Writes parameters and their configuration as one msgpack file (atomically).

    Args:
      path: the file to write.
      params: the parameters.
      config: their configuration (default :class:`ShardingPolicyConfig`).

    Returns:
      The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "params": serialization.to_state_dict(jax.device_get(params)),
        "meta": json.dumps(
            {"kind": "sharding_policy", "config": (config or ShardingPolicyConfig()).to_dict()}
        ),
    }
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(serialization.msgpack_serialize(state))
    os.replace(tmp, target)
    return target


def load_policy(path: str | Path) -> tuple[Params, ShardingPolicyConfig]:
    """Reads a file written by :func:`save_policy`.

    Args:
      path: the file.

    Returns:
      ``(params, config)``.

    Raises:
      FileNotFoundError: no such file.
      ValueError: the file is not a saved sharding policy.
    """
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"no sharding policy at {target}")
    try:
        state = serialization.msgpack_restore(target.read_bytes())
        meta = json.loads(state["meta"])
        if meta.get("kind") != "sharding_policy":
            raise ValueError(f"kind is {meta.get('kind')!r}")
        config = ShardingPolicyConfig.from_dict(meta["config"])
    except (KeyError, ValueError, TypeError) as error:
        raise ValueError(f"{target} is not a saved sharding policy: {error}") from error
    params = jax.tree.map(jnp.asarray, state["params"])
    return params, config
