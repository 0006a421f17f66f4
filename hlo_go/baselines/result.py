"""What a search returns: the best decisions it found and how it converged."""

from __future__ import annotations

from dataclasses import dataclass

from hlo_go.baselines.curve import Curve
from hlo_go.decisions import Decisions


@dataclass(frozen=True)
class SearchResult:
    """What a search found, and how fast.

    Attributes:
      method: the search's name.
      graph: the graph's module name.
      cluster: the cluster's name.
      best: the best decisions found (validated).
      best_step_time: their objective (simulated step time in seconds; see
        :func:`hlo_go.baselines.search.score`).
      best_oom: whether the best still runs out of memory.
      start_step_time: the objective of the first evaluation.
      curve: best-so-far per evaluation.
      evaluations: simulator calls made.
      seconds: wall-clock seconds (setup included).
      seed: the random seed.
      stopped_by: ``"budget"`` or ``"time"``.
    """

    method: str
    graph: str
    cluster: str
    best: Decisions
    best_step_time: float
    best_oom: bool
    start_step_time: float
    curve: Curve
    evaluations: int
    seconds: float
    seed: int
    stopped_by: str

    def summary(self) -> dict[str, object]:
        """JSON-able headline numbers (the curve included)."""
        return {
            "method": self.method,
            "graph": self.graph,
            "cluster": self.cluster,
            "best_step_time_s": self.best_step_time,
            "best_oom": self.best_oom,
            "start_step_time_s": self.start_step_time,
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "seed": self.seed,
            "stopped_by": self.stopped_by,
            "curve": self.curve.to_dict(),
        }
