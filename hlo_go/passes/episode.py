"""Recorded episodes: which module, which actions, what came out; and their replay."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hlo_go.errors import HloGoError
from hlo_go.hlo import HloModule
from hlo_go.passes.env import DEFAULT_CONFIG, PassEnvConfig, PassState, reset, step


class ReplayError(RuntimeError, HloGoError):
    """A replay started from a different module or ended somewhere else."""


@dataclasses.dataclass(frozen=True)
class Episode:
    """One recorded episode.

    Attributes:
      fingerprint: sha256 of the prepared start module (:attr:`PassState.fingerprint`).
      actions: action names, in order.
      op_counts: operation count after each action.
      initial_op_count: operation count of the prepared start module.
      final_fingerprint: sha256 of the final module's text.
    """

    fingerprint: str
    actions: tuple[str, ...]
    op_counts: tuple[int, ...]
    initial_op_count: int
    final_fingerprint: str

    @property
    def final_op_count(self) -> int:
        """Operation count at the end (the start's when no action was taken)."""
        return self.op_counts[-1] if self.op_counts else self.initial_op_count

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        """The inverse of :meth:`to_dict`."""
        return cls(
            fingerprint=str(data["fingerprint"]),
            actions=tuple(data["actions"]),
            op_counts=tuple(int(c) for c in data["op_counts"]),
            initial_op_count=int(data["initial_op_count"]),
            final_fingerprint=str(data["final_fingerprint"]),
        )

    def save(self, path: str | Path) -> None:
        """Writes the episode as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Episode:
        """Reads an episode written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))


def record(start: PassState, states: Sequence[PassState]) -> Episode:
    """The episode that went from ``start`` through ``states`` (one per action)."""
    final = states[-1] if states else start
    return Episode(
        fingerprint=start.fingerprint,
        actions=final.history[len(start.history) :],
        op_counts=tuple(s.op_count for s in states),
        initial_op_count=start.initial_op_count,
        final_fingerprint=final.module_fingerprint,
    )


def run_actions(
    start: PassState, actions: Sequence[str | int], config: PassEnvConfig = DEFAULT_CONFIG
) -> tuple[PassState, Episode]:
    """Applies ``actions`` from ``start``; returns the final state and the recorded episode.

    ``config.max_steps`` does not cut the sequence short here (it bounds learning
    episodes, not replays).
    """
    unbounded = dataclasses.replace(config, max_steps=max(config.max_steps, len(actions), 1))
    state, states = start, []
    for action in actions:
        state, _, _, _ = step(state, action, unbounded)
        states.append(state)
    return state, record(start, states)


def replay(
    module: HloModule | str, episode: Episode, config: PassEnvConfig = DEFAULT_CONFIG
) -> PassState:
    """Replays ``episode`` on ``module`` and checks it ends where it ended before.

    Raises:
      ReplayError: the prepared module, an intermediate op count or the final
        module differs from the recording.
    """
    start = reset(module)
    if start.fingerprint != episode.fingerprint:
        raise ReplayError(
            f"episode was recorded on module {episode.fingerprint[:12]}, this one prepares to "
            f"{start.fingerprint[:12]}"
        )
    final, again = run_actions(start, episode.actions, config)
    if again.op_counts != episode.op_counts:
        raise ReplayError(f"op counts {again.op_counts} differ from recorded {episode.op_counts}")
    if again.final_fingerprint != episode.final_fingerprint:
        raise ReplayError(
            f"final module {again.final_fingerprint[:12]} differs from recorded "
            f"{episode.final_fingerprint[:12]}"
        )
    return final
