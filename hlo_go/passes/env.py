"""The pass-ordering environment: pure functions over immutable states.

``reset(module) -> state`` prepares a module (XLA's mandatory normalization
passes, then the HLO → StableHLO → HLO round trip every compile starts with, so
that later steps measure passes only). ``step(state, action) -> (state, reward,
done, info)`` applies one action (:mod:`hlo_go.passes.catalog`) with XLA's own
code and recaptures the module. The reward is the reduction in operation count
(instructions in all computations) as a fraction of the prepared module's count
(or, with ``reward="sim_time"``, the simulated step-time reduction); a pass that
changes nothing earns exactly zero.

Results of ``(module text, action)`` are memoized per process (XLA's passes are
deterministic), so searches that revisit prefixes pay once.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import zlib
from typing import Any

from hlo_go.hlo import HloModule
from hlo_go.passes.catalog import (
    PREPARATION_PASSES,
    PassAction,
    action_names,
    default_order_enabled,
    get_action,
)
from hlo_go.xla.passes import (
    PassFailedError,
    canonicalize_hlo,
    module_summary,
    run_hlo_passes,
    verify_pass_runs,
)


@dataclasses.dataclass(frozen=True)
class PassEnvConfig:
    """Options of the environment.

    Attributes:
      max_steps: actions per episode.
      actions: the action names agents choose from (None: the whole catalog).
      verify: before an action's first use in this process, prove with XLA's own
        dumps that each of its passes is scheduled (a silently ignored name would
        otherwise look like a pass that changes nothing).
      cache_entries: memoized ``(module, action)`` results kept per process.
      reward: "op_count" (the paper's metric: op-count reduction / the prepared
        module's op count) or "sim_time" (simulated step time reduction / the
        previous module's simulated time, by :mod:`hlo_go.sim` on ``sim_cluster``
        with default decisions: one device, FIFO, no fusion).
      sim_cluster: cluster preset for ``reward="sim_time"``.
    """

    max_steps: int = 12
    actions: tuple[str, ...] | None = None
    verify: bool = True
    cache_entries: int = 1024
    reward: str = "op_count"
    sim_cluster: str = "host-cpu-1"

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.reward not in ("op_count", "sim_time"):
            raise ValueError(f"reward must be 'op_count' or 'sim_time', got {self.reward!r}")
        if self.actions is not None:
            if not self.actions:
                raise ValueError("actions must not be empty")
            for name in self.actions:
                get_action(name)  # raises UnknownPassError

    @property
    def action_names(self) -> tuple[str, ...]:
        """The action names, in index order."""
        return self.actions if self.actions is not None else action_names()


DEFAULT_CONFIG = PassEnvConfig()


@dataclasses.dataclass(frozen=True)
class PassState:
    """Where an episode stands.

    Attributes:
      text: the current module, as XLA prints it.
      op_count: its instructions (all computations).
      initial_op_count: the prepared module's instructions.
      history: action names applied so far.
      fingerprint: the prepared module's fingerprint (identifies the episode's start).
      module_fingerprint: the current module's fingerprint.

    Fingerprints are :func:`fingerprint`: sha256 of XLA's canonical print, blind
    to instruction names (which every StableHLO round trip changes).
    """

    text: str
    op_count: int
    initial_op_count: int
    history: tuple[str, ...]
    fingerprint: str
    module_fingerprint: str


def fingerprint(text: str) -> str:
    """sha256 of XLA's canonical print of a module (instruction names canonicalized)."""
    return module_summary(text)[1]


def _as_text(module: HloModule | str) -> str:
    return module if isinstance(module, str) else module.to_text()


def prepare(module: HloModule | str) -> str:
    """The module every episode on ``module`` starts from: XLA's normalization passes
    (:data:`~hlo_go.passes.catalog.PREPARATION_PASSES`) applied (the compile's own
    StableHLO round trip included), then round-tripped through StableHLO again until
    the module stops changing (its :func:`fingerprint`; at most 3 more times).

    Raises:
      RuntimeError: the round trip keeps changing the module.
    """
    text = run_hlo_passes(_as_text(module), PREPARATION_PASSES)
    digest = fingerprint(text)
    for _ in range(3):
        again = canonicalize_hlo(text)
        again_digest = fingerprint(again)
        if again_digest == digest:
            return text
        text, digest = again, again_digest
    raise RuntimeError("the HLO -> StableHLO -> HLO round trip does not reach a fixed point")


def reset(module: HloModule | str) -> PassState:
    """A fresh episode on ``module`` (an HloModule or HLO text, usually unoptimized)."""
    text = prepare(module)
    count, digest = module_summary(text)
    return PassState(text, count, count, (), digest, digest)


class _Cache:
    """Process-wide LRU of ``(module fingerprint, action) -> (text, op_count, fingerprint)``,
    the text zlib-compressed."""

    def __init__(self) -> None:
        self._data: collections.OrderedDict[tuple[str, str], tuple[bytes, int, str]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str]) -> tuple[str, int, str] | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
        return zlib.decompress(value[0]).decode(), value[1], value[2]

    def put(self, key: tuple[str, str], text: str, count: int, digest: str, limit: int) -> None:
        packed = zlib.compress(text.encode(), 1)
        with self._lock:
            self._data[key] = (packed, count, digest)
            while len(self._data) > max(limit, 0):
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


CACHE = _Cache()


def apply_enabled(
    text: str, digest: str, enabled: tuple[str, ...], key: str, cache_entries: int
) -> tuple[str, int, str]:
    """Runs the XLA passes ``enabled`` on ``text`` (fingerprint ``digest``), memoized
    under ``(digest, key)``; returns ``(text, op_count, fingerprint)`` of the result."""
    cache_key = (digest, key)
    cached = CACHE.get(cache_key) if cache_entries > 0 else None
    if cached is not None:
        return cached
    new_text = run_hlo_passes(text, enabled)
    count, new_digest = module_summary(new_text)
    if cache_entries > 0:
        CACHE.put(cache_key, new_text, count, new_digest, cache_entries)
    return new_text, count, new_digest


def resolve_action(action: str | int, config: PassEnvConfig = DEFAULT_CONFIG) -> PassAction:
    """An action by name or by index into ``config.action_names``."""
    if isinstance(action, str):
        return get_action(action)
    names = config.action_names
    if not 0 <= int(action) < len(names):
        raise IndexError(f"action index {action} out of range 0..{len(names) - 1}")
    return get_action(names[int(action)])


def step(
    state: PassState, action: str | int, config: PassEnvConfig = DEFAULT_CONFIG
) -> tuple[PassState, float, bool, dict[str, Any]]:
    """Applies one action with XLA's own passes.

    Args:
      state: the current state.
      action: an action name, or an index into ``config.action_names``.
      config: environment options.

    Returns:
      ``(next_state, reward, done, info)``: reward is
      ``(state.op_count - next.op_count) / state.initial_op_count``; ``done`` once
      ``config.max_steps`` actions are applied; ``info`` has ``action``,
      ``op_count``, ``changed`` (the module's fingerprint changed), ``seconds`` and ``error`` (XLA's message when the
      pass failed; the module is then left unchanged and the reward is 0).

    Raises:
      UnknownPassError: unknown action name.
      PassNotRunError: XLA does not schedule the action's passes.
      ValueError: the episode is already done.
    """
    if len(state.history) >= config.max_steps:
        raise ValueError(f"episode is done ({config.max_steps} steps); call reset")
    resolved = resolve_action(action, config)
    if config.verify:
        for entry in resolved.entries:
            verify_pass_runs(entry.name, entry.nested_in)
    start = time.perf_counter()
    error: str | None = None
    try:
        text, count, digest = apply_enabled(
            state.text, state.module_fingerprint, resolved.enabled, resolved.name,
            config.cache_entries,
        )  # fmt: skip
    except PassFailedError as e:
        text, count, digest, error = state.text, state.op_count, state.module_fingerprint, str(e)
    next_state = dataclasses.replace(
        state,
        text=text,
        op_count=count,
        history=(*state.history, resolved.name),
        module_fingerprint=digest,
    )
    if config.reward == "sim_time":
        before = simulated_step_time(state.text, state.module_fingerprint, config.sim_cluster)
        after = simulated_step_time(text, digest, config.sim_cluster)
        reward = (before - after) / before if before > 0 else 0.0
    else:
        reward = (state.op_count - count) / max(state.initial_op_count, 1)
    info = {
        "action": resolved.name,
        "op_count": count,
        "changed": digest != state.module_fingerprint,
        "seconds": time.perf_counter() - start,
        "error": error,
    }
    return next_state, reward, len(next_state.history) >= config.max_steps, info


_sim_times: collections.OrderedDict[tuple[str, str], float] = collections.OrderedDict()


def simulated_step_time(text: str, digest: str, cluster: str) -> float:
    """Simulated step time of a module (:func:`hlo_go.sim.simulate`, default decisions),
    memoized by module fingerprint and cluster."""
    key = (digest, cluster)
    if key not in _sim_times:
        from hlo_go.decisions import Decisions
        from hlo_go.graph import build_graph
        from hlo_go.hlo import parse_hlo
        from hlo_go.sim import get_cluster, simulate

        graph = build_graph(parse_hlo(text))
        result = simulate(graph, get_cluster(cluster), Decisions.default(graph))
        _sim_times[key] = float(result.step_time)
        while len(_sim_times) > 4096:
            _sim_times.popitem(last=False)
    return _sim_times[key]


def run_default_order(state: PassState, config: PassEnvConfig = DEFAULT_CONFIG) -> tuple[str, int]:
    """XLA's default order of the action set, applied to ``state``'s module.

    One compile with ``xla_enable_hlo_passes_only`` = every name the actions enable
    (:func:`~hlo_go.passes.catalog.default_order_enabled`): XLA runs exactly those
    passes, in its CPU pipeline's order and as often as its pipelines do (their
    fixed-point loops included).

    Returns:
      ``(text, op_count)`` of the result.
    """
    enabled = default_order_enabled(config.action_names)
    text, count, _ = apply_enabled(
        state.text, state.module_fingerprint, enabled, "default:" + ",".join(enabled),
        config.cache_entries,
    )  # fmt: skip
    return text, count
