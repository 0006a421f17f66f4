"""A Gym-style wrapper around the pure pass-ordering environment.

``PassOrderingEnv(module).reset() -> (obs, info)`` and ``.step(action) -> (obs,
reward, terminated, truncated, info)`` follow the Gymnasium API (without
depending on it); the state lives in the wrapper, the work in
:mod:`hlo_go.passes.env`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_go.hlo import HloModule
from hlo_go.passes.env import DEFAULT_CONFIG, PassEnvConfig, PassState, reset, step
from hlo_go.passes.episode import Episode, record
from hlo_go.passes.observe import observation_size, observe


class PassOrderingEnv:
    """Gym-style pass-ordering environment on one module.

    Args:
      module: the module (HloModule or HLO text) every episode starts from.
      config: environment options.
    """

    def __init__(self, module: HloModule | str, config: PassEnvConfig = DEFAULT_CONFIG) -> None:
        self.config = config
        self.start: PassState = reset(module)
        self.state: PassState = self.start
        self._states: list[PassState] = []

    @property
    def num_actions(self) -> int:
        """Size of the discrete action space."""
        return len(self.config.action_names)

    @property
    def observation_size(self) -> int:
        """Length of the observation vector."""
        return observation_size(self.num_actions)

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts a new episode from the prepared module (``seed`` is accepted for API
        compatibility; the environment is deterministic)."""
        del seed
        self.state, self._states = self.start, []
        return observe(self.state, self.config), {"op_count": self.state.op_count}

    def step(self, action: int | str) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Applies one action; returns ``(obs, reward, terminated, truncated, info)``.
        Episodes end by truncation after ``config.max_steps`` actions."""
        self.state, reward, done, info = step(self.state, action, self.config)
        self._states.append(self.state)
        return observe(self.state, self.config), reward, False, done, info

    def episode(self) -> Episode:
        """The current episode so far, as a record."""
        return record(self.start, self._states)
