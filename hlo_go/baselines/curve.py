"""``Curve``: best-so-far simulated step time against evaluations and wall-clock time.

Every search records one point per simulator evaluation, so a learned optimizer's
training curve can be laid next to it at equal evaluation counts or equal seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Curve:
    """Best-so-far objective of a search, one point per evaluation.

    Attributes:
      evaluations: ``int64[K]`` 1, 2, ..., K (simulator calls so far).
      seconds: ``float64[K]`` wall-clock seconds since the search started.
      best_step_time: ``float64[K]`` the best objective seen so far (simulated step time
        in seconds; a candidate that runs out of memory scores its step time × (2 + the
        worst device's overflow ratio), so any fitting candidate beats it).
    """

    evaluations: np.ndarray
    seconds: np.ndarray
    best_step_time: np.ndarray

    def __post_init__(self) -> None:
        k = len(self.evaluations)
        if len(self.seconds) != k or len(self.best_step_time) != k:
            raise ValueError(
                f"Curve arrays differ in length: evaluations {k}, seconds {len(self.seconds)}, "
                f"best_step_time {len(self.best_step_time)}"
            )

    def __len__(self) -> int:
        return len(self.evaluations)

    def __iter__(self) -> Iterator[tuple[int, float, float]]:
        """Yields ``(evaluations, seconds, best_step_time)`` tuples."""
        return zip(
            self.evaluations.tolist(),
            self.seconds.tolist(),
            self.best_step_time.tolist(),
            strict=True,
        )

    def at_evaluations(self, evaluations: int) -> float:
        """The best objective after ``evaluations`` simulator calls (inf before the first).

        Args:
          evaluations: a count of evaluations.

        Returns:
          The best-so-far value, the last one when the search stopped earlier.
        """
        i = int(np.searchsorted(self.evaluations, evaluations, side="right")) - 1
        return float(self.best_step_time[i]) if i >= 0 else float("inf")

    def at_seconds(self, seconds: float) -> float:
        """The best objective after ``seconds`` of wall-clock time (inf before the first).

        Args:
          seconds: elapsed time.

        Returns:
          The best-so-far value then.
        """
        i = int(np.searchsorted(self.seconds, seconds, side="right")) - 1
        return float(self.best_step_time[i]) if i >= 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able lists."""
        return {
            "evaluations": self.evaluations.tolist(),
            "seconds": self.seconds.tolist(),
            "best_step_time": self.best_step_time.tolist(),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Curve:
        """The inverse of :meth:`to_dict`.

        Args:
          data: a dict with ``evaluations``, ``seconds`` and ``best_step_time`` lists.

        Returns:
          The curve.
        """
        return Curve(
            np.asarray(data["evaluations"], dtype=np.int64),
            np.asarray(data["seconds"], dtype=np.float64),
            np.asarray(data["best_step_time"], dtype=np.float64),
        )

    def plot(self, ax: Any = None, *, x: str = "evaluations", label: str | None = None) -> Any:
        """Draws the curve (step time in ms) on a matplotlib axis.

        Args:
          ax: a matplotlib ``Axes`` (default: a new figure's).
          x: ``"evaluations"`` or ``"seconds"``.
          label: the legend label.

        Returns:
          The axis.

        Raises:
          ValueError: unknown ``x``.
        """
        if x not in ("evaluations", "seconds"):
            raise ValueError(f"x must be 'evaluations' or 'seconds', got {x!r}")
        if ax is None:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(6, 4))
        ax.step(getattr(self, x), self.best_step_time * 1e3, where="post", label=label)
        ax.set_xlabel(x)
        ax.set_ylabel("best simulated step time (ms)")
        return ax
