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


# The name in Options.candidates that stands for Options.policy.
POLICY = "policy"
# Clocks the decorator can time with (Options.clock).
CLOCKS = ("auto", "cpu", "wall")


@dataclasses.dataclass(frozen=True)
class Options:
    """How :func:`hlo_go.jit` decides, checks, measures and keeps an optimized executable.

    Attributes:
      policy: the learned (or named) decider measured as the ``"policy"`` candidate: a
        shipped policy name (``"host-cpu"``, ``"default"``, see
        :func:`hlo_go.pretrained.shipped_names`), a policy checkpoint file or run
        directory, a baseline method name of :mod:`hlo_go.baselines` (e.g.
        ``"critical-path+xla-cpu-like"``), or ``"searched"`` (simulated annealing over the
        simulator).
      candidates: the decisions measured against ``jax.jit`` on the first call of each
        signature, in the order they are compiled (the strongest first: the compile
        budget may leave the last ones out): baseline fusion heuristics of
        :mod:`hlo_go.baselines` (lowered with XLA's own order) and ``"policy"``
        (:attr:`policy`). Candidates whose fused modules are identical are measured once.
      tasks: the decisions lowered into XLA's compile: a subset of
        ``("fusion", "scheduling")``. Without ``"fusion"`` the XLA:CPU-like heuristic
        fuses (and only :attr:`policy` is a candidate); without ``"scheduling"`` XLA keeps
        its own order (so it does for a search's or policy's order on a one-device
        cluster, which the simulator cannot tell apart: ``decide.decides_order``).
      cluster: the simulator's cluster preset decisions are made for (one core here).
      budget: a policy's budget: 0 decides zero-shot; N (1..50) fine-tunes N PPO steps on
        the function's graph first. For ``policy="searched"``, its simulator
        evaluations (0: the search's default).
      samples: zero-shot, also draw this many decision sets from the policy and keep the
        one the simulator scores best (0: the greedy decisions alone).
      measure: time the candidates against ``jax.jit`` and keep the fastest only when it
        wins by the rule of :mod:`hlo_go.api.verdict`; False keeps the first candidate
        whose outputs match, unmeasured.
      min_gain: keep a candidate only when the lower confidence bound of its speedup
        over ``jax.jit`` exceeds ``1 + min_gain``.
      confidence: one-sided confidence of that bound (divided among the candidates and
        the looks at the data, :class:`hlo_go.api.verdict.Rule`).
      repeats: at most this many interleaved rounds per signature (a round times one
        block of ``jax.jit``'s calls and one of each candidate's, a block being as many
        calls as take about 20 ms, :mod:`hlo_go.api.measure`).
      measure_budget_s: seconds the interleaved rounds of one signature may take...
      measure_budget_ratio: ...or this multiple of ``jax.jit``'s own first call
        (lowering, compile and one call), when that is longer: a function slow to
        compile is usually slow to run, and needs longer for the same number of rounds.
        A function too slow for four rounds of ``jax.jit`` and every candidate in that
        budget races only the candidates whose checked call was fastest (at least one),
        and the budget is never shorter than the four rounds the rule needs before it
        first looks, so a long training step is judged on a few rounds rather than on
        none.
      compile_budget_ratio: candidates are decided, lowered and compiled, in order, while
        that fits in this multiple of ``jax.jit``'s first call plus the measurement
        budget, each expected to take as long as the longest so far (the first one always
        is; the policy's one-time compile in a process counts, so a cold policy is left
        out when it would not fit).
      min_call_s: a function whose ``jax.jit`` call takes less than this (seconds) is too
        fast to time reliably, and gains too little to matter: it stays with
        ``jax.jit``, undecided.
      confirm_budget_s: seconds the re-check of a cached "kept" verdict may take in a
        new process (at least three rounds).
      clock: ``"cpu"`` (process CPU time: honest when the process is pinned to one core,
        as other processes' turns on the core are not counted), ``"wall"``, or
        ``"auto"``: CPU time when this process may use one core only, else wall time.
      cache_dir: where decisions and verdicts are cached (:mod:`hlo_go.api.cache`), so
        another process reuses them; None: this process's memory only.
      seed: seed of sampling, fine-tuning, searches and of redrawn check inputs.
      verbose: deprecated (goes in 0.3.0): each decision is logged to the
        ``hlo_go.api.jit`` logger at INFO; True logs it at WARNING, so it shows without
        logging set up.
    """

    policy: str = "host-cpu"
    candidates: tuple[str, ...] = ("fuse-all-legal", "xla-cpu-like", "priority-fusion", POLICY)
    tasks: tuple[str, ...] = LOWERABLE_TASKS
    cluster: str = "host-cpu-1"
    budget: int = 0
    samples: int = 0
    measure: bool = True
    min_gain: float = 0.02
    confidence: float = 0.99
    repeats: int = 200
    measure_budget_s: float = 4.0
    measure_budget_ratio: float = 1.0
    compile_budget_ratio: float = 1.0
    min_call_s: float = 1e-4
    confirm_budget_s: float = 1.0
    clock: str = "auto"
    cache_dir: str | os.PathLike | None = dataclasses.field(default_factory=default_cache_dir)
    seed: int = 0
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
        candidates = tuple(dict.fromkeys(self.candidates))
        if not candidates:
            raise ValueError("Options.candidates must name at least one candidate")
        object.__setattr__(self, "candidates", candidates)
        if self.budget < 0:
            raise ValueError(f"Options.budget must be >= 0, got {self.budget}")
        for name in ("samples", "repeats"):
            if getattr(self, name) < (3 if name == "repeats" else 0):
                raise ValueError(f"Options.{name} out of range: {getattr(self, name)}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"Options.min_gain must be in [0, 1), got {self.min_gain}")
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"Options.confidence must be in (0.5, 1), got {self.confidence}")
        for name in ("measure_budget_s", "measure_budget_ratio", "compile_budget_ratio",
                     "min_call_s", "confirm_budget_s"):  # fmt: skip
            if not getattr(self, name) >= 0:
                raise ValueError(f"Options.{name} must be >= 0, got {getattr(self, name)}")
        if self.clock not in CLOCKS:
            raise ValueError(f"Options.clock must be one of {CLOCKS}, got {self.clock!r}")

    def replace(self, **changes: object) -> Options:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def key(self) -> str:
        """The settings that change a verdict, as text (part of the cache key)."""
        return (
            f"policy={self.policy};candidates={','.join(self.candidates)};"
            f"tasks={','.join(self.tasks)};cluster={self.cluster};budget={self.budget};"
            f"samples={self.samples};seed={self.seed};measure={self.measure};"
            f"min_gain={self.min_gain};confidence={self.confidence};min_call_s={self.min_call_s}"
        )
