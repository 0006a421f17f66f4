"""The pre-trained sharding policy shipped in the package
(``hlo_go/pretrained/sharding.msgpack``)."""

from __future__ import annotations

from hlo_go.pretrained import sharding_policy_path
from hlo_go.sharding.learned.checkpoint import load_policy
from hlo_go.sharding.learned.config import Params, ShardingPolicyConfig


def shipped_policy() -> tuple[Params, ShardingPolicyConfig]:
    """The pre-trained sharding policy shipped in the package (loaded once per process).

    It was trained by :mod:`hlo_go.sharding.pretrain` (imitation of the ILP on corpus
    training steps, then PPO); its docstring has the command.

    Returns:
      ``(params, config)``.

    Raises:
      FileNotFoundError: the package was installed without it.
    """
    if _SHIPPED_CACHE:
        return _SHIPPED_CACHE[0]
    loaded = load_policy(sharding_policy_path())
    _SHIPPED_CACHE.append(loaded)
    return loaded


_SHIPPED_CACHE: list[tuple[Params, ShardingPolicyConfig]] = []
