"""A search that measures in the loop: fusion and schedule decisions timed on this host.

:func:`measured_search` trusts no model. It lowers every candidate into XLA
(:meth:`hlo_go.xla.Program.lower`), checks its outputs against XLA's default compile
(``jax.jit``'s), and times it against the incumbent on this machine:

1. **Start.** Each heuristic of :data:`MEASURED_STARTS` (``xla-cpu-like``,
   ``priority-fusion``, ``fuse-all-legal``) decides, is lowered with XLA's own order,
   checked, and timed in one interleaving (``start_rounds`` rounds); the fastest median
   is the incumbent.
2. **Propose.** One move (:data:`MOVES`) changes the incumbent's decisions. Fusion groups
   are what the one fusion rule makes of the priorities
   (:func:`hlo_go.decisions.fusion_groups`: edges tried in decreasing priority, merged
   when legal), so every move is a priority edit with a group-level meaning:

   * ``split``: a member of a fused group leaves fusion (priority 0); the group falls
     apart around it. Members are drawn by the square root of their bytes read and
     written, so moves land on the kernels that move the most memory.
   * ``merge``: a data edge between two groups where one end is out of fusion: that end
     takes the other's priority, so the producer joins its consumer's group (or the
     consumer its producer's) where legal.
   * ``move``: a data edge between two fused groups that did not merge (illegal as a
     whole, or refused in the order tried): both ends get the top priority, so that edge
     fuses first and the node changes group; what remains of its old group merges
     around it where legal.
   * ``fusion-range``: :meth:`hlo_go.baselines.search.SearchSpace.mutate`'s fusion move
     (simulated annealing's): fusion off, on, or re-randomized over a topological range.
   * ``hoist`` / ``sink``: one kernel (a fused group or a lone node) runs as early / as
     late as its dependencies allow (its members' schedule priority above / below every
     other); ``schedule-range``: ``SearchSpace.mutate``'s schedule move. The order is
     imposed after XLA's scheduler (:func:`hlo_go.xla.schedule.list_schedule`); before
     the first schedule move a candidate keeps XLA's own order.

   A proposal whose grouping and kernel priorities equal the incumbent's or an already
   measured candidate's is not lowered (``unchanged``).
3. **Check.** The candidate is lowered and run once. A lowering XLA or our checks refuse,
   or outputs that differ from XLA's default beyond tolerance (and the float64 arbiter,
   :mod:`hlo_go.xla.arbiter`), make it ``illegal``: skipped and counted, not measured.
   A lowering whose fusion groups and order turn out the incumbent's is ``unchanged``.
4. **Measure.** Incumbent and candidate are timed interleaved
   (:func:`hlo_go.xla.timing.time_interleaved`, rotating who goes first), giving one
   paired ratio candidate / incumbent per round. Screening takes ``screen_rounds``
   rounds; a candidate faster in every one, by a median of at least ``min_gain``, gets
   ``confirm_rounds`` more. It replaces the incumbent only when at least ``quorum`` of
   all its rounds favour it and the median ratio is still at most ``1 - min_gain``
   (:func:`accepts`). A lone fast sample never decides.

The budget is the number of measured candidates (``budget``) and, optionally, seconds
(``time_limit``). Proposals depend only on ``seed`` and the incumbent, so a search is
deterministic given its seed apart from the timings that choose the incumbent. At the
end the incumbent is lowered afresh and its outputs checked against XLA's default once
more.

Measure in a process pinned to one core, by CPU time
(:func:`hlo_go.xla.timing.in_pinned_process`, ``clock="cpu"``): other processes then
stretch no sample. ``benchmarks/bench_headroom.py`` does so for corpus graphs.
"""

from __future__ import annotations

import hashlib
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.baselines.registry import get
from hlo_go.baselines.search import SearchSpace
from hlo_go.decisions import DEFAULT_LIMITS, Decisions, DecisionsError, FusionLimits, fusible_nodes
from hlo_go.decisions.legality import OUTPUT_ONLY, large_matrix_nodes
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph
from hlo_go.sim import KERNEL, Cluster, get_cluster, node_kinds
from hlo_go.xla.arbiter import as_accurate_as_reference
from hlo_go.xla.lowering import DecisionsMismatchError, Executable, Program
from hlo_go.xla.measure import Variant, outputs_match
from hlo_go.xla.timing import Clock, time_call, time_interleaved

logger = logging.getLogger(__name__)

MEASURED_STARTS: tuple[str, ...] = ("xla-cpu-like", "priority-fusion", "fuse-all-legal")
"""The heuristics a measured search measures first; the fastest is its start."""
DEFAULT_CANDIDATES = 100
"""Measured candidates of a search when no budget is given."""
START_CLUSTER = "host-cpu-1"
"""The cluster the starting heuristics decide for (``priority-fusion`` simulates on it)."""


class MeasuredSearchError(RuntimeError, HloGoError):
    """A measured search that cannot start: no starting heuristic lowered correctly."""


class Candidate(NamedTuple):
    """Decisions as a measured search lowers them.

    Attributes:
      decisions: for the program's pre-fusion graph: its fusion priority (large dots and
        convolutions out) and, where ``ordered``, its schedule priority.
      ordered: whether the schedule priority is imposed; else XLA keeps its own order.
    """

    decisions: Decisions
    ordered: bool = False

    def variant(self, label: str | None = None) -> Variant:
        """What :func:`hlo_go.xla.measure_many` takes to lower and time it."""
        return Variant(self.decisions, self.decisions if self.ordered else None, label)

    def lower(self, prog: Program, *, limits: FusionLimits = DEFAULT_LIMITS) -> Executable:
        """The candidate compiled (:meth:`hlo_go.xla.Program.lower`)."""
        schedule = self.decisions if self.ordered else None
        return prog.lower(fusion=self.decisions, schedule=schedule, limits=limits)


Move = Callable[["SearchContext", Candidate, np.ndarray, np.random.Generator], "Candidate | None"]
"""A move: ``move(context, incumbent, groups, rng)`` -> a new candidate, or None where
it does not apply (``groups``: the incumbent's fusion group of every node)."""


@dataclass
class SearchContext:
    """What the moves of a measured search read: the graph and its fusion facts.

    Attributes:
      graph: the program's pre-fusion graph.
      output_dims: exact output-dimension keys (:attr:`hlo_go.xla.Program.output_dims`).
      limits: fusion grouping limits.
      large: ``bool[N]`` large dots and convolutions (never fused by the lowering).
      can_fuse: ``bool[N]`` nodes that may fuse (fusible, not a large matrix op).
      edge_ok: ``bool[E]`` data edges that may fuse (both ends may, no reduction read).
      is_kernel: ``bool[N]`` nodes that run as kernels (:func:`hlo_go.sim.node_kinds`).
      node_weight: ``float64[N]`` square root of bytes read and written.
      edge_weight: ``float64[E]`` square root of the edge's bytes.
      fusion_space: random-key space of fusion priorities (range moves).
      schedule_space: random-key space of schedule priorities (range moves).
    """

    graph: OpGraph
    output_dims: np.ndarray
    limits: FusionLimits
    large: np.ndarray = field(init=False)
    can_fuse: np.ndarray = field(init=False)
    edge_ok: np.ndarray = field(init=False)
    is_kernel: np.ndarray = field(init=False)
    node_weight: np.ndarray = field(init=False)
    edge_weight: np.ndarray = field(init=False)
    fusion_space: SearchSpace = field(init=False)
    schedule_space: SearchSpace = field(init=False)

    def __post_init__(self) -> None:
        g = self.graph
        self.large = large_matrix_nodes(g)
        self.can_fuse = fusible_nodes(g) & ~self.large
        src, dst = g.senders, g.receivers
        self.edge_ok = self.can_fuse[src] & self.can_fuse[dst] & ~OUTPUT_ONLY[g.opcode[src]]
        self.is_kernel = node_kinds(g) == KERNEL
        self.node_weight = np.sqrt(g.bytes_read + g.bytes_written + 1.0)
        self.edge_weight = np.sqrt(g.edge_bytes.astype(np.float64) + 1.0)
        cluster = get_cluster(START_CLUSTER)
        self.fusion_space = SearchSpace(g, cluster, tasks=("fusion",))
        self.schedule_space = SearchSpace(g, cluster, tasks=("scheduling",))

    def groups(self, decisions: Decisions) -> np.ndarray:
        """``int32[N]``: the fusion group of every node under ``decisions``."""
        return decisions.fusion_groups(self.graph, output_dims=self.output_dims, limits=self.limits)

    def key(self, candidate: Candidate, groups: np.ndarray) -> str:
        """What makes two candidates lower alike: their groups, and the priority of each
        kernel (the largest of its members) where the order is imposed."""
        digest = hashlib.sha256(np.ascontiguousarray(groups, np.int32).tobytes())
        if candidate.ordered:
            kernel = np.full(self.graph.num_nodes, -np.inf)
            np.maximum.at(kernel, groups, candidate.decisions.schedule_priority.astype(np.float64))
            digest.update(kernel.tobytes())
        return digest.hexdigest()


def _pick(rng: np.random.Generator, items: np.ndarray, weight: np.ndarray) -> int | None:
    """One of ``items`` drawn with probability proportional to ``weight`` (None if empty)."""
    if items.size == 0:
        return None
    p = weight / weight.sum()
    return int(items[rng.choice(items.size, p=p)])


def _with_fusion(candidate: Candidate, priority: np.ndarray) -> Candidate:
    return candidate._replace(
        decisions=candidate.decisions._replace(fusion_priority=priority.astype(np.float32))
    )


def _with_schedule(candidate: Candidate, priority: np.ndarray) -> Candidate:
    return Candidate(
        candidate.decisions._replace(schedule_priority=priority.astype(np.float32)), True
    )


def split_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """A member of a fused group leaves fusion (module docstring)."""
    sizes = np.bincount(groups, minlength=ctx.graph.num_nodes)
    fused = np.flatnonzero(sizes[groups] > 1)
    node = _pick(rng, fused, ctx.node_weight[fused])
    if node is None:
        return None
    priority = incumbent.decisions.fusion_priority.copy()
    priority[node] = 0.0
    return _with_fusion(incumbent, priority)


def _cross_group_edge(
    ctx: SearchContext, groups: np.ndarray, rng: np.random.Generator, wanted: np.ndarray
) -> tuple[int, int] | None:
    """The ends of a fusable data edge between two groups where ``wanted`` (``bool[E]``),
    picked by bytes moved; None when there is none."""
    g = ctx.graph
    edges = np.flatnonzero(ctx.edge_ok & (groups[g.senders] != groups[g.receivers]) & wanted)
    edge = _pick(rng, edges, ctx.edge_weight[edges])
    return None if edge is None else (int(g.senders[edge]), int(g.receivers[edge]))


def merge_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """A node out of fusion joins the group across one of its data edges."""
    priority = incumbent.decisions.fusion_priority.copy()
    on = priority > 0
    ends = _cross_group_edge(ctx, groups, rng, ~on[ctx.graph.senders] | ~on[ctx.graph.receivers])
    if ends is None:
        return None
    u, v = ends
    value = max(float(priority[u]), float(priority[v]))
    if value <= 0:  # both out: a fresh priority, tried before every other edge
        value = float(priority.max(initial=0.0)) + 1.0
    priority[u] = priority[u] if priority[u] > 0 else value
    priority[v] = priority[v] if priority[v] > 0 else value
    return _with_fusion(incumbent, priority)


def move_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """The two ends of a data edge between fused groups fuse first."""
    priority = incumbent.decisions.fusion_priority.copy()
    on = priority > 0
    ends = _cross_group_edge(ctx, groups, rng, on[ctx.graph.senders] & on[ctx.graph.receivers])
    if ends is None:
        return None
    top = float(priority.max()) + 1.0
    priority[list(ends)] = top
    return _with_fusion(incumbent, priority)


def fusion_range_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """:meth:`SearchSpace.mutate`'s fusion move over a topological range."""
    del groups
    space = ctx.fusion_space
    keys = space.mutate(space.encode(incumbent.decisions), rng)
    return _with_fusion(incumbent, space.decode(keys).fusion_priority)


def _kernel_members(
    ctx: SearchContext, groups: np.ndarray, rng: np.random.Generator
) -> np.ndarray | None:
    """The members of one kernel (a group), drawn by its members' weight."""
    kernels = np.flatnonzero(ctx.is_kernel)
    node = _pick(rng, kernels, ctx.node_weight[kernels])
    if node is None:
        return None
    return np.flatnonzero(groups == groups[node])


def _schedule_of(incumbent: Candidate) -> np.ndarray:
    """The incumbent's schedule priority, or uniform ones where XLA keeps its order (ties
    keep XLA's order)."""
    if incumbent.ordered:
        return incumbent.decisions.schedule_priority.astype(np.float64)
    return np.zeros(incumbent.decisions.schedule_priority.shape, np.float64)


def hoist_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """One kernel runs as soon as its operands are ready."""
    members = _kernel_members(ctx, groups, rng)
    if members is None:
        return None
    priority = _schedule_of(incumbent)
    priority[members] = priority.max() + 1.0
    return _with_schedule(incumbent, priority)


def sink_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """One kernel runs as late as its users allow."""
    members = _kernel_members(ctx, groups, rng)
    if members is None:
        return None
    priority = _schedule_of(incumbent)
    priority[members] = priority.min() - 1.0
    return _with_schedule(incumbent, priority)


def schedule_range_move(
    ctx: SearchContext, incumbent: Candidate, groups: np.ndarray, rng: np.random.Generator
) -> Candidate | None:
    """:meth:`SearchSpace.mutate`'s schedule move over a topological range."""
    del groups
    space = ctx.schedule_space
    current = incumbent.decisions._replace(schedule_priority=_schedule_of(incumbent))
    keys = space.mutate(space.encode(current), rng)
    return _with_schedule(incumbent, space.decode(keys).schedule_priority)


MOVES: dict[str, tuple[Move, float]] = {
    "split": (split_move, 3.0),
    "merge": (merge_move, 3.0),
    "move": (move_move, 2.0),
    "fusion-range": (fusion_range_move, 1.0),
    "hoist": (hoist_move, 0.75),
    "sink": (sink_move, 0.75),
    "schedule-range": (schedule_range_move, 0.5),
}
"""The moves of a measured search: name -> (move, weight of drawing it)."""
SCHEDULE_MOVES = frozenset({"hoist", "sink", "schedule-range"})
"""The moves that change the order (left out with ``schedule=False``)."""


def accepts(ratios: Sequence[float], *, min_gain: float, quorum: float) -> bool:
    """Whether paired ratios (candidate / incumbent, one per interleaved round) show the
    candidate faster: at least ``quorum`` of them below 1, and their median at most
    ``1 - min_gain``.

    Args:
      ratios: the paired ratios.
      min_gain: the least relative gain of the median, e.g. 0.003.
      quorum: the least fraction of rounds the candidate must win, in (0, 1].

    Returns:
      The verdict (False for no ratios).
    """
    if not ratios:
        return False
    wins = sum(r < 1.0 for r in ratios)
    return wins >= math.ceil(quorum * len(ratios) - 1e-9) and statistics.median(ratios) <= (
        1.0 - min_gain
    )


def check_outputs(prog: Program, got: Any, want: Any) -> tuple[bool, str]:
    """Whether outputs equal XLA's default's (:func:`hlo_go.xla.outputs_match`), a float32
    output beyond tolerance judged by the float64 arbiter as :func:`hlo_go.xla.measure` does.

    Returns:
      ``(correct, why not)``.
    """
    ok, message = outputs_match(got, want)
    if ok:
        return True, ""
    return as_accurate_as_reference(
        jax.tree.leaves(got), jax.tree.leaves(want), prog.float64_outputs, message=message
    )


def calls_per_sample(run: Callable[[], Any], min_sample_s: float, *, clock: Clock) -> int:
    """How many calls one timed sample makes so that it lasts ``min_sample_s`` at least
    (one call of ``run`` timed once; at most 10,000)."""
    once = time_call(run, clock=clock)
    if once <= 0:
        return 10_000
    return int(min(10_000, max(1, math.ceil(min_sample_s / once))))


def paired_ratios(
    first: Callable[[], Any], second: Callable[[], Any], *, rounds: int, clock: Clock
) -> tuple[list[float], list[float], list[float]]:
    """Times two calls interleaved (rotating who goes first) without warm-up.

    Returns:
      ``(second / first per round, first's samples, second's samples)``, seconds.
    """
    timings = time_interleaved({"a": first, "b": second}, repeats=rounds, warmup=0, clock=clock)
    a, b = timings["a"].samples, timings["b"].samples
    return [y / x for x, y in zip(a, b, strict=True)], list(a), list(b)


def race(
    incumbent: Callable[[], Any],
    candidate: Callable[[], Any],
    *,
    screen_rounds: int,
    confirm_rounds: int,
    min_gain: float,
    quorum: float,
    clock: Clock,
) -> tuple[list[float], bool]:
    """Screens a candidate against the incumbent and confirms a promising one.

    ``screen_rounds`` paired rounds first; a candidate that won every one by a median of
    at least ``min_gain`` gets ``confirm_rounds`` more, and is accepted when all its
    rounds together pass :func:`accepts`.

    Args:
      incumbent: one run of the incumbent.
      candidate: one run of the candidate.
      screen_rounds: rounds every candidate gets.
      confirm_rounds: rounds a promising candidate gets on top.
      min_gain: see :func:`accepts`.
      quorum: see :func:`accepts`.
      clock: the timing clock.

    Returns:
      ``(paired ratios candidate / incumbent, accepted)``.
    """
    ratios, _, _ = paired_ratios(incumbent, candidate, rounds=screen_rounds, clock=clock)
    promising = all(r < 1.0 for r in ratios) and statistics.median(ratios) <= 1.0 - min_gain
    if not promising:
        return ratios, False
    if confirm_rounds:
        more, _, _ = paired_ratios(incumbent, candidate, rounds=confirm_rounds, clock=clock)
        ratios += more
    return ratios, accepts(ratios, min_gain=min_gain, quorum=quorum)


@dataclass
class MeasuredSearchResult:
    """What :func:`measured_search` found and what it cost.

    Attributes:
      best: the incumbent at the end (its decisions lower as :meth:`Candidate.lower`).
      start: the best heuristic's name (the search's start).
      start_candidate: the best heuristic's decisions (XLA's order).
      heuristics: per starting heuristic: ``median_s`` (None when it failed), ``correct``,
        ``message``.
      measured: candidates timed against the incumbent (the budget counts these).
      illegal: proposals the lowering refused or whose outputs differed, not timed.
      unchanged: proposals that lowered like the incumbent or an earlier candidate (or a
        move that did not apply), not timed.
      accepted: candidates that replaced the incumbent.
      proposals: moves drawn.
      estimated_gain: the product of the accepted candidates' median paired gains
        (incumbent / candidate); biased upward by the selection, so re-measure.
      stopped_by: ``"budget"``, ``"time"`` or ``"proposals"``.
      seconds: wall-clock seconds, the heuristics' measurement included.
      clock: the timing clock.
      seed: the proposals' seed.
      calls_per_sample: calls of a program per timed sample (:func:`calls_per_sample`).
      final_correct: the final lowering's outputs equal XLA's default's (where they do
        not, ``best`` is the start).
      final_message: why not, if not.
      history: one dict per measured or illegal candidate.
    """

    best: Candidate
    start: str
    start_candidate: Candidate
    heuristics: dict[str, dict[str, Any]]
    measured: int = 0
    illegal: int = 0
    unchanged: int = 0
    accepted: int = 0
    proposals: int = 0
    estimated_gain: float = 1.0
    stopped_by: str = "budget"
    seconds: float = 0.0
    clock: str = "cpu"
    seed: int = 0
    calls_per_sample: int = 1
    final_correct: bool = True
    final_message: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def decisions(self) -> Decisions:
        """The best decisions. Where the search kept XLA's order (``best.ordered`` False)
        their schedule priority is uniform, which list scheduling leaves in XLA's order."""
        return self.best.decisions

    def summary(self) -> dict[str, Any]:
        """JSON-able counts and outcome (no decisions)."""
        return {
            "start": self.start,
            "heuristics": self.heuristics,
            "measured": self.measured,
            "illegal": self.illegal,
            "unchanged": self.unchanged,
            "accepted": self.accepted,
            "proposals": self.proposals,
            "ordered": self.best.ordered,
            "estimated_gain": self.estimated_gain,
            "stopped_by": self.stopped_by,
            "seconds": self.seconds,
            "clock": self.clock,
            "seed": self.seed,
            "calls_per_sample": self.calls_per_sample,
            "final_correct": self.final_correct,
            "final_message": self.final_message,
            "history": self.history,
        }


def _start_candidates(
    prog: Program, starts: Sequence[str], cluster: Cluster, seed: int
) -> dict[str, Candidate]:
    """The starting heuristics' decisions (large matrix ops out of fusion, XLA's order)."""
    graph = prog.graph
    large = large_matrix_nodes(graph)
    out = {}
    for name in starts:
        decided = get(name)(graph, cluster, seed=seed).for_graph(graph)
        priority = np.where(large, 0.0, decided.fusion_priority).astype(np.float32)
        uniform = np.zeros(graph.num_nodes, np.float32)
        out[name] = Candidate(
            decided._replace(fusion_priority=priority, schedule_priority=uniform), False
        )
    return out


def _lower_and_check(
    prog: Program, candidate: Candidate, want: Any, limits: FusionLimits
) -> tuple[Executable | None, str]:
    """The candidate compiled and run once; None and why where the lowering was refused
    or its outputs differ."""
    try:
        executable = candidate.lower(prog, limits=limits)
        got = executable(*prog.args)
    except DecisionsMismatchError:
        raise
    except Exception as error:  # a lowering XLA or our checks refuse: counted, not raised
        return None, f"not lowered: {type(error).__name__}: {str(error)[:300]}"
    ok, message = check_outputs(prog, got, want)
    if not ok:
        return None, f"outputs differ: {message[:300]}"
    return executable, ""


def measured_search(
    prog: Program,
    *,
    budget: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
    starts: Sequence[str] = MEASURED_STARTS,
    cluster: str | Cluster = START_CLUSTER,
    schedule: bool = True,
    screen_rounds: int = 3,
    confirm_rounds: int = 6,
    start_rounds: int = 5,
    min_gain: float = 0.003,
    quorum: float = 0.85,
    clock: Clock = "cpu",
    min_sample_s: float = 0.02,
    limits: FusionLimits = DEFAULT_LIMITS,
    moves: Mapping[str, tuple[Move, float]] | None = None,
    max_proposals: int | None = None,
) -> MeasuredSearchResult:
    """Searches fusion (and schedule) decisions by timing each candidate (module docstring).

    Args:
      prog: the program (:func:`hlo_go.xla.program`); decisions are for ``prog.graph``.
      budget: candidates to measure (default :data:`DEFAULT_CANDIDATES`); illegal and
        unchanged proposals do not count.
      time_limit: wall-clock seconds for the whole search (heuristics included), or None.
      seed: the proposals' random seed (and the heuristics').
      starts: the heuristics measured first (:func:`hlo_go.baselines.get` names).
      cluster: the cluster the heuristics decide for.
      schedule: whether moves change the order too.
      screen_rounds: paired rounds every candidate gets.
      confirm_rounds: more rounds for a candidate that won every screening round.
      start_rounds: interleaved rounds timing the heuristics.
      min_gain: the least relative gain of the median paired ratio to accept.
      quorum: the least fraction of rounds a candidate must win to be accepted.
      clock: ``"cpu"`` (for a process pinned to one core) or ``"wall"``.
      min_sample_s: one timed sample runs a program this many seconds at least: a
        program faster than that (XLA's default's one call) is called repeatedly per
        sample (:func:`calls_per_sample`).
      limits: fusion grouping limits.
      moves: name -> (move, weight); default :data:`MOVES` (without the schedule's where
        ``schedule`` is False).
      max_proposals: the most moves drawn (default ``50 * budget + 100``), so a search
        whose proposals keep repeating ends.

    Returns:
      The :class:`MeasuredSearchResult`.

    Raises:
      ValueError: a budget below 1, a bad setting, or no move to draw.
      MeasuredSearchError: no starting heuristic lowered with correct outputs.
      KeyError: an unknown heuristic name in ``starts``.
    """
    budget = DEFAULT_CANDIDATES if budget is None else int(budget)
    if budget < 1:
        raise ValueError(f"budget must be at least 1 measured candidate, got {budget}")
    if screen_rounds < 1 or confirm_rounds < 0 or start_rounds < 1:
        raise ValueError("screen_rounds and start_rounds must be >= 1, confirm_rounds >= 0")
    if not 0.0 < quorum <= 1.0:
        raise ValueError(f"quorum must be in (0, 1], got {quorum}")
    table = dict(MOVES if moves is None else moves)
    if not schedule:
        table = {k: v for k, v in table.items() if k not in SCHEDULE_MOVES}
    if not table or any(w <= 0 for _, w in table.values()):
        raise ValueError("give at least one move, each with a weight > 0")
    started = time.perf_counter()
    target = get_cluster(cluster) if isinstance(cluster, str) else cluster
    max_proposals = 50 * budget + 100 if max_proposals is None else int(max_proposals)
    rng = np.random.default_rng(seed)
    ctx = SearchContext(prog.graph, prog.output_dims, limits)

    reference = prog.default()
    reference(*prog.args)  # warm
    want = reference(*prog.args)
    repeat = calls_per_sample(lambda: reference(*prog.args), min_sample_s, clock=clock)
    args = prog.args

    def runner(executable: Executable) -> Callable[[], Any]:
        if repeat == 1:
            return lambda: executable(*args)
        return lambda: [executable(*args) for _ in range(repeat)]

    # 1. the heuristics, measured
    heuristics: dict[str, dict[str, Any]] = {}
    lowered: dict[str, Executable] = {}
    candidates = _start_candidates(prog, starts, target, seed)
    for name, candidate in candidates.items():
        executable, why = _lower_and_check(prog, candidate, want, limits)
        heuristics[name] = {"median_s": None, "correct": executable is not None, "message": why}
        if executable is not None:
            lowered[name] = executable
        else:
            logger.warning("%s: heuristic %s: %s", prog.name, name, why)
    if not lowered:
        raise MeasuredSearchError(f"{prog.name}: no starting heuristic lowered correctly")
    timings = time_interleaved(
        {n: runner(e) for n, e in lowered.items()},
        repeats=start_rounds,
        warmup=1,
        clock=clock,
    )
    for name, timing in timings.items():
        heuristics[name]["median_s"] = timing.median / repeat
    start = min(timings, key=lambda n: timings[n].median)
    logger.info(
        "%s: heuristics %s; start from %s",
        prog.name,
        ", ".join(f"{n} {t.median:.4g} s" for n, t in timings.items()),
        start,
    )
    incumbent, inc_exe = candidates[start], lowered[start]
    del lowered
    result = MeasuredSearchResult(
        best=incumbent, start=start, start_candidate=incumbent, heuristics=heuristics,
        clock=clock, seed=seed, calls_per_sample=repeat,
    )  # fmt: skip

    # 2-4. propose, check, measure
    inc_groups = ctx.groups(incumbent.decisions)
    seen = {ctx.key(incumbent, inc_groups)}
    names = list(table)
    weights = np.array([table[n][1] for n in names], dtype=np.float64)
    weights /= weights.sum()
    while True:
        if result.measured >= budget:
            result.stopped_by = "budget"
            break
        if time_limit is not None and time.perf_counter() - started >= time_limit:
            result.stopped_by = "time"
            break
        if result.proposals >= max_proposals:
            result.stopped_by = "proposals"
            break
        result.proposals += 1
        move = names[int(rng.choice(len(names), p=weights))]
        candidate = table[move][0](ctx, incumbent, inc_groups, rng)
        if candidate is None:
            result.unchanged += 1
            continue
        candidate = _with_fusion(  # the lowering keeps large matrix ops out anyway
            candidate, np.where(ctx.large, 0.0, candidate.decisions.fusion_priority)
        )
        try:
            candidate = Candidate(candidate.decisions.validate(ctx.graph, 1), candidate.ordered)
        except DecisionsError as error:
            result.illegal += 1
            result.history.append({"move": move, "illegal": f"DecisionsError: {error}"[:300]})
            continue
        groups = ctx.groups(candidate.decisions)
        key = ctx.key(candidate, groups)
        if key in seen:
            result.unchanged += 1
            continue
        seen.add(key)
        began = time.perf_counter()
        executable, why = _lower_and_check(prog, candidate, want, limits)
        compile_s = time.perf_counter() - began
        if executable is None:
            result.illegal += 1
            result.history.append({"move": move, "illegal": why})
            logger.info("%s: %s: illegal (%s)", prog.name, move, why[:120])
            continue
        if executable.groups == inc_exe.groups and executable.order == inc_exe.order:
            result.unchanged += 1
            continue
        result.measured += 1
        ratios, accepted = race(
            runner(inc_exe),
            runner(executable),
            screen_rounds=screen_rounds,
            confirm_rounds=confirm_rounds,
            min_gain=min_gain,
            quorum=quorum,
            clock=clock,
        )
        median = statistics.median(ratios)
        result.history.append(
            {
                "move": move,
                "ratio": round(median, 5),
                "rounds": len(ratios),
                "accepted": accepted,
                "compile_s": round(compile_s, 3),
            }
        )
        logger.info(
            "%s: [%d/%d] %s: %.4f over %d rounds%s",
            prog.name,
            result.measured,
            budget,
            move,
            median,
            len(ratios),
            ", accepted" if accepted else "",
        )
        if accepted:
            incumbent, inc_exe, inc_groups = candidate, executable, groups
            result.accepted += 1
            result.estimated_gain /= median
        del executable

    # the end: the incumbent lowered afresh and checked once more
    result.best = incumbent
    final, why = _lower_and_check(prog, incumbent, want, limits)
    result.final_correct = final is not None
    result.final_message = why
    if final is None:
        logger.warning(
            "%s: the found decisions failed their final check (%s); returning the start",
            prog.name,
            why,
        )
        result.best = result.start_candidate
    result.seconds = time.perf_counter() - started
    logger.info(
        "%s: measured %d, illegal %d, unchanged %d, accepted %d (estimated %.3fx) in %.0f s",
        prog.name,
        result.measured,
        result.illegal,
        result.unchanged,
        result.accepted,
        result.estimated_gain,
        result.seconds,
    )
    return result
