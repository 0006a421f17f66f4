"""Search agents over pass orders (random search, greedy, beam search) and XLA's default order.

Every agent gets a budget of environment steps (pass applications, memoized ones
included) and returns the best episode it found: the prefix of an episode with
the lowest operation count.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from hlo_go.passes.catalog import default_sequence
from hlo_go.passes.env import DEFAULT_CONFIG, PassEnvConfig, PassState, run_default_order, step
from hlo_go.passes.episode import Episode, record, run_actions

Progress = Callable[[str], None]
"""Called with a one-line progress message."""


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What an agent found on one module.

    Attributes:
      agent: "random", "greedy", "beam", "ppo" or "default".
      episode: the best episode (for "default": no actions; see ``op_count``).
      op_count: its final operation count.
      initial_op_count: the prepared module's count.
      steps: environment steps used.
      seconds: wall time.
      curve: best operation count so far after each episode (or greedy round).
      text: the best module's HLO text.
    """

    agent: str
    episode: Episode
    op_count: int
    initial_op_count: int
    steps: int
    seconds: float
    curve: tuple[int, ...]
    text: str = dataclasses.field(repr=False, default="")


def _best_prefix(start: PassState, states: list[PassState]) -> tuple[Episode, PassState]:
    """The prefix of an episode that ends at its lowest op count (earliest such)."""
    if not states:
        return record(start, []), start
    counts = [s.op_count for s in states]
    best = int(np.argmin(counts))
    if counts[best] >= start.op_count:
        return record(start, []), start
    return record(start, states[: best + 1]), states[best]


class _Best:
    def __init__(self, start: PassState) -> None:
        self.episode = record(start, [])
        self.state = start

    def offer(self, start: PassState, states: list[PassState]) -> None:
        episode, state = _best_prefix(start, states)
        better = state.op_count < self.state.op_count
        shorter = state.op_count == self.state.op_count and len(episode.actions) < len(
            self.episode.actions
        )
        if better or shorter:
            self.episode, self.state = episode, state

    def result(
        self, agent: str, start: PassState, used: int, t0: float, curve: list[int]
    ) -> SearchResult:
        """The agent's answer: this best episode, after ``used`` steps since ``t0``."""
        return SearchResult(
            agent, self.episode, self.state.op_count, start.initial_op_count, used,
            time.perf_counter() - t0, tuple(curve), self.state.text,
        )  # fmt: skip


def default_order(start: PassState, config: PassEnvConfig = DEFAULT_CONFIG) -> SearchResult:
    """The baseline: XLA's default order of the action set's passes, applied step by
    step in the environment (:func:`hlo_go.passes.catalog.default_sequence`). Its
    op count is that of the END of the sequence (XLA does not stop early)."""
    t0 = time.perf_counter()
    sequence = default_sequence(config.action_names)
    final, episode = run_actions(start, sequence, config)
    return SearchResult(
        "default", episode, final.op_count, start.initial_op_count, len(sequence),
        time.perf_counter() - t0, (final.op_count,), final.text,
    )  # fmt: skip


def default_single_compile(
    start: PassState, config: PassEnvConfig = DEFAULT_CONFIG
) -> tuple[str, int]:
    """The same default order as ONE XLA compile (no StableHLO round trips between
    passes); see :func:`hlo_go.passes.env.run_default_order`. Returns ``(text, op_count)``."""
    return run_default_order(start, config)


def random_search(
    start: PassState,
    budget: int,
    config: PassEnvConfig = DEFAULT_CONFIG,
    *,
    seed: int = 0,
    progress: Progress | None = None,
) -> SearchResult:
    """Uniformly random episodes of ``config.max_steps`` actions until ``budget`` steps."""
    rng = np.random.default_rng(seed)
    num_actions = len(config.action_names)
    best = _Best(start)
    used, curve, t0 = 0, [], time.perf_counter()
    while used < budget:
        state, states = start, []
        for _ in range(min(config.max_steps, budget - used)):
            state, _, _, _ = step(state, int(rng.integers(num_actions)), config)
            states.append(state)
            used += 1
        best.offer(start, states)
        curve.append(best.state.op_count)
        if progress:
            progress(f"random: {used}/{budget} steps, best {best.state.op_count}")
    return best.result("random", start, used, t0, curve)


def greedy_search(
    start: PassState,
    budget: int,
    config: PassEnvConfig = DEFAULT_CONFIG,
    *,
    progress: Progress | None = None,
) -> SearchResult:
    """Each round tries every action on the current module and keeps the one with the
    lowest op count; stops when no action lowers it, after ``config.max_steps``
    rounds, or when the budget runs out."""
    best = _Best(start)
    state, states = start, []
    used, curve, t0 = 0, [], time.perf_counter()
    names = config.action_names
    for _ in range(config.max_steps):
        if used + len(names) > budget:
            break
        trials = []
        for name in names:
            # Tried from a state with room for one more step whatever max_steps says.
            probe = dataclasses.replace(config, max_steps=len(state.history) + 1)
            nxt, _, _, info = step(state, name, probe)
            used += 1
            if info["error"] is None:
                trials.append((nxt.op_count, len(trials), nxt))
        if not trials:
            break
        count, _, chosen = min(trials, key=lambda t: (t[0], t[1]))
        if count >= state.op_count:
            break
        state = chosen
        states.append(state)
        best.offer(start, states)
        curve.append(best.state.op_count)
        if progress:
            progress(f"greedy: {used}/{budget} steps, {state.history[-1]} -> {count}")
    return best.result("greedy", start, used, t0, curve)


def beam_search(
    start: PassState,
    budget: int,
    config: PassEnvConfig = DEFAULT_CONFIG,
    *,
    width: int = 4,
    progress: Progress | None = None,
) -> SearchResult:
    """Greedy's breadth-limited generalization: keeps the ``width`` modules of lowest op
    count at each depth.

    Each level applies every action to every module in the beam and keeps the
    ``width`` lowest-count distinct modules among the results (by module
    fingerprint; a module met before, at any depth, is not kept again), whether
    or not they improve on their parent. That lets an order through a step that
    pays off later, which greedy never takes: ``call-inliner`` lowers the count
    less than ``simplification`` at first, but simplification then finds more
    to remove. Stops after ``config.max_steps`` levels, when a level yields no
    new module, or when the budget cannot pay for the next expansion.
    """
    if width < 1:
        raise ValueError(f"beam width must be at least 1, got {width}")
    best = _Best(start)
    beam: list[tuple[PassState, tuple[PassState, ...]]] = [(start, ())]
    seen = {start.module_fingerprint}
    used, curve, t0 = 0, [], time.perf_counter()
    names = config.action_names
    for depth in range(config.max_steps):
        children: list[tuple[int, int, PassState, tuple[PassState, ...]]] = []
        probe = dataclasses.replace(config, max_steps=depth + 1)
        for state, path in beam:
            if used + len(names) > budget:
                break
            for name in names:
                nxt, _, _, info = step(state, name, probe)
                used += 1
                if info["error"] is not None or nxt.module_fingerprint in seen:
                    continue
                seen.add(nxt.module_fingerprint)
                children.append((nxt.op_count, len(children), nxt, (*path, nxt)))
        if not children:
            break
        children.sort(key=lambda c: (c[0], c[1]))
        beam = [(state, path) for _, _, state, path in children[:width]]
        for _, path in beam:
            best.offer(start, list(path))
        curve.append(best.state.op_count)
        if progress:
            progress(
                f"beam: depth {depth + 1}, {used}/{budget} steps, "
                f"beam {[s.op_count for s, _ in beam]}, best {best.state.op_count}"
            )
    return best.result("beam", start, used, t0, curve)
