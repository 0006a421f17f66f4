"""``Options``: every setting of :func:`hlo_go.jit`, in one frozen dataclass."""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

# Decisions :func:`hlo_go.jit` can lower into XLA's compile of one device.
LOWERABLE_TASKS = ("fusion", "scheduling")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hlo-go/jit`` (``~/.cache/hlo-go/jit`` when it is unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "hlo-go" / "jit"


@dataclasses.dataclass(frozen=True)
class Options:
    """How :func:`hlo_go.jit` decides, checks and keeps an optimized executable."""

    # Who decides: a shipped policy name ("host-cpu", "default", see
    # hlo_go.pretrained.shipped_names), a policy checkpoint file or run directory, a
    # baseline method name of hlo_go.baselines (e.g. "xla-cpu-like",
    # "critical-path+priority-fusion"), or "searched" (simulated annealing over the
    # simulator).
    policy: str = "host-cpu"
    # The decisions lowered into XLA's compile: a subset of ("fusion", "scheduling").
    # Without "fusion" the XLA:CPU-like fusion heuristic fuses; without "scheduling"
    # XLA keeps its own order (so it does for a search's or policy's order on a
    # one-device cluster, which the simulator cannot tell apart: decide.decides_order).
    tasks: tuple[str, ...] = LOWERABLE_TASKS
    # The simulator's cluster preset the decisions are made for (one core of this host).
    cluster: str = "host-cpu-1"
    # A policy's budget: 0 decides zero-shot; N (1..50) fine-tunes the policy N PPO
    # steps on the function's graph first. For a search (policy="searched"), its
    # simulator evaluations (0: the search's default).
    budget: int = 0
    # Zero-shot: also draw this many decision sets from the policy and keep the one the
    # simulator scores best (0: the greedy decisions alone).
    samples: int = 0
    # Time the optimized executable against jax.jit (interleaved, medians) and keep it
    # only if it is faster; False keeps it whenever its outputs match, unmeasured.
    measure: bool = True
    # Timed samples of each executable per measuring round (a sample of a short function
    # is several calls: hlo_go.api.jit.SAMPLE_S).
    repeats: int = 15
    # Keep the optimized executable only if its median is at least this fraction below
    # jax.jit's, in each of two interleaved rounds (guards against keeping noise).
    min_gain: float = 0.02
    # Where decisions and verdicts are cached by HLO fingerprint, so another process
    # reuses them; None: no disk cache.
    cache_dir: str | os.PathLike | None = dataclasses.field(default_factory=default_cache_dir)
    # Seed of sampling, fine-tuning and searches.
    seed: int = 0
    # Deprecated (one release): hlo_go.jit logs one line per decision made to the
    # "hlo_go.api.jit" logger at INFO; configure logging to see it. True warns
    # DeprecationWarning and logs those lines at WARNING, so they show without logging set up.
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.verbose:
            warnings.warn(
                "Options(verbose=True) is deprecated: hlo_go.jit logs each decision to the"
                " 'hlo_go.api.jit' logger at INFO (e.g. logging.basicConfig(level=logging.INFO))",
                DeprecationWarning,
                stacklevel=3,
            )
        tasks = tuple(self.tasks)
        unknown = [t for t in tasks if t not in LOWERABLE_TASKS]
        if unknown or not tasks:
            raise ValueError(
                f"Options.tasks must be a non-empty subset of {LOWERABLE_TASKS}, got {tasks}"
                " (placement over several devices: hlo_go.xla.run_placed)"
            )
        object.__setattr__(self, "tasks", tasks)
        if self.budget < 0:
            raise ValueError(f"Options.budget must be >= 0, got {self.budget}")
        for name in ("samples", "repeats"):
            if getattr(self, name) < (1 if name == "repeats" else 0):
                raise ValueError(f"Options.{name} out of range: {getattr(self, name)}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"Options.min_gain must be in [0, 1), got {self.min_gain}")

    def replace(self, **changes: object) -> Options:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def key(self) -> str:
        """The settings that change a decision, as text (part of the cache key)."""
        return (
            f"policy={self.policy};tasks={','.join(self.tasks)};cluster={self.cluster};"
            f"budget={self.budget};samples={self.samples};seed={self.seed};"
            f"measure={self.measure};min_gain={self.min_gain}"
        )
