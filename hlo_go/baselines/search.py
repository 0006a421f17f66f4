"""Search over the joint decision space, scored by the simulator.

:class:`SearchSpace` encodes placement, schedule and fusion of a graph as one vector of
*random keys* in ``[0, 1)`` (the encoding BRKGA uses; REGAL, Paliwal et al., ICLR 2020):

* ``U`` placement keys, one per *unit*: the graph's colocation groups partitioned by
  METIS into ``U = min(groups, 16 · D)`` compute-balanced, few-bytes-cut pieces
  (:func:`hlo_go.baselines.placement.metis_parts`). Unit ``u`` runs on device
  ``floor(key · D)``. Searching per unit rather than per node keeps a 58k-node graph's
  placement space searchable in thousands of evaluations (Mirhoseini et al.'s
  hierarchical placer groups ops the same way). The units balance half compute, half
  node count, so none is empty;
* ``N`` fusion keys: node ``i`` has fusion priority ``key`` if ``key ≥`` :data:`FUSION_OFF`,
  else 0 (out of fusion);
* ``N`` schedule keys: the schedule priority itself.

Decisions from elsewhere (a heuristic's) are encoded exactly for fusion and schedule
(rank-preserving: the edge visiting order and the ready-queue order are unchanged) and
by majority compute per unit for placement; :func:`run_search` splits the units by its
starts' placements, so those are encoded exactly too and a search never ends worse than
its best start.

Searches (:func:`run_search`), each given a budget of simulator evaluations and
optionally a wall-clock limit, recording every evaluation in a :class:`Curve`:

* ``random-search``: independent uniformly random key vectors.
* ``simulated-annealing``: from the best of its starts (by default the heuristics in
  :data:`DEFAULT_STARTS`, each scored as one evaluation of the budget), one move per
  evaluation: re-deal 1-3
  units to random devices, or switch fusion off / on / re-randomize it over a random
  topological range of nodes (log-uniform length up to N/8), or re-randomize schedule
  keys over such a range; a worse candidate is accepted with probability
  ``exp(-(relative worsening) / T)``, T falling geometrically from 3% to 0.01%.
* ``evolutionary``: BRKGA (Gonçalves & Resende, 2011) as in REGAL: a population of key
  vectors (the starts plus random ones); each generation keeps the best 20% (elites),
  adds 15% random mutants, and fills the rest with children of one elite and one
  non-elite parent, each key taken from the elite with probability 0.7.

A search can be limited to some of the three tasks (``tasks=("placement",)`` for a
placement-only comparison): the other tasks then keep ``fixed``'s decisions (default
:meth:`Decisions.default`: FIFO order, no fusion) in every candidate, and moves only
touch the searched tasks' keys.

The objective is the simulated step time; a candidate that runs out of memory scores
its step time × (2 + the worst device's peak / capacity), so any candidate that fits
beats it.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from hlo_go.baselines.costs import compute_weights
from hlo_go.baselines.curve import Curve
from hlo_go.baselines.placement import metis_parts
from hlo_go.baselines.registry import get, register_search
from hlo_go.baselines.result import SearchResult
from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim import Cluster, SimResult, simulate

FUSION_OFF = 0.25
DEFAULT_STARTS: tuple[str, ...] = (
    "single-device+critical-path+xla-cpu-like",
    "single-device+critical-path+fuse-all-legal",
    "metis+critical-path+xla-cpu-like",
    "expert+critical-path+xla-cpu-like",
)
DEFAULT_BUDGET = 2000
SEARCH_METHODS = ("random-search", "simulated-annealing", "evolutionary")
SEARCH_TASKS: tuple[str, ...] = ("placement", "scheduling", "fusion")
"""The tasks a search can decide (:mod:`hlo_go.gonet`'s ``TASKS``, in that order)."""


def search_tasks_for(cluster: Cluster) -> tuple[str, ...]:
    """The tasks worth searching on ``cluster``: on one device the simulator runs one
    kernel at a time and moves nothing between devices, so the order of the entry changes
    no simulated step time (only memory), and only fusion is searched; else all three."""
    return ("fusion",) if len(cluster.devices) == 1 else SEARCH_TASKS


class SearchSpace:
    """The random-key encoding of a graph's decisions on a cluster (module docstring).

    Attributes:
      graph: the graph.
      cluster: the cluster.
      units: ``int64[N]`` the placement unit of every node (colocation groups whole).
      num_units: U.
      size: the key vector's length, ``U + 2N``.
      tasks: the tasks searched; the others are ``fixed``'s.
      fixed: the decisions of the tasks not searched.
    """

    def __init__(
        self,
        graph: OpGraph,
        cluster: Cluster,
        *,
        units_per_device: int = 16,
        seed: int = 0,
        refine: Sequence[np.ndarray] = (),
        tasks: Sequence[str] = SEARCH_TASKS,
        fixed: Decisions | None = None,
    ) -> None:
        """Builds the space.

        Args:
          graph: an OpGraph.
          cluster: the cluster.
          units_per_device: placement units per device (METIS parts).
          seed: METIS's seed.
          refine: placements (``int[N]``, colocation respected) the space must represent
            exactly: units are split until each of these placements is constant on every
            unit (so a search started from them starts exactly there).
          tasks: the tasks searched (a non-empty subset of :data:`SEARCH_TASKS`).
          fixed: decisions for the other tasks (default :meth:`Decisions.default`).

        Raises:
          ValueError: an unknown or empty set of tasks.
        """
        unknown = sorted(set(tasks) - set(SEARCH_TASKS))
        if unknown or not tasks:
            raise ValueError(
                f"search tasks must be a non-empty subset of {SEARCH_TASKS}, got {tuple(tasks)}"
            )
        self.graph = graph
        self.cluster = cluster
        self.tasks = tuple(t for t in SEARCH_TASKS if t in tasks)
        self.fixed = (
            Decisions.default(graph)
            if fixed is None
            else fixed.validate(graph, cluster.num_devices)
        )
        n = graph.num_nodes
        d = cluster.num_devices
        if d > 1:
            # Half compute, half node count: units of similar cost that are never empty.
            weight = compute_weights(graph, cluster)
            weight = weight / max(weight.sum(), 1e-30) + 1.0 / max(n, 1)
            parts = metis_parts(graph, weight, units_per_device * d, seed=seed)
            _, units = np.unique(parts, return_inverse=True)
            self.units = units.astype(np.int64)
        else:
            self.units = np.zeros(n, dtype=np.int64)
        if refine and n:
            key = self.units.copy()
            for placement in refine:
                key = key * d + np.asarray(placement, dtype=np.int64)
                _, key = np.unique(key, return_inverse=True)
            self.units = key.astype(np.int64)
        self.num_units = int(self.units.max()) + 1 if n else 1
        self.size = self.num_units + 2 * n
        self._topo = graph.topo_order.astype(np.int64)
        self._weight = compute_weights(graph, cluster) + 1e-12

    def split(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The three parts of a key vector.

        Args:
          keys: ``float[size]``.

        Returns:
          Views ``(placement keys [U], fusion keys [N], schedule keys [N])``.
        """
        u, n = self.num_units, self.graph.num_nodes
        return keys[:u], keys[u : u + n], keys[u + n :]

    def decode(self, keys: np.ndarray) -> Decisions:
        """The decisions a key vector stands for.

        Args:
          keys: ``float[size]`` in ``[0, 1)``.

        Returns:
          Valid decisions (colocation respected).

        Raises:
          ValueError: wrong length.
        """
        keys = np.asarray(keys, dtype=np.float64)
        if keys.shape != (self.size,):
            raise ValueError(f"key vector must have shape ({self.size},), got {keys.shape}")
        d = self.cluster.num_devices
        place, fuse, sched = self.split(keys)
        fixed = self.fixed
        if "placement" in self.tasks:
            device = np.minimum((place * d).astype(np.int64), d - 1).astype(np.int32)
            placement = device[self.units]
        else:
            placement = fixed.placement
        return Decisions(
            placement,
            sched.astype(np.float32) if "scheduling" in self.tasks else fixed.schedule_priority,
            np.where(fuse >= FUSION_OFF, fuse, 0.0).astype(np.float32)
            if "fusion" in self.tasks
            else fixed.fusion_priority,
        )

    def encode(self, decisions: Decisions) -> np.ndarray:
        """A key vector for given decisions (exact for fusion and schedule order;
        placement by each unit's majority of compute).

        Args:
          decisions: decisions for this space's graph.

        Returns:
          ``float64[size]``.
        """
        d = self.cluster.num_devices
        u = self.num_units
        votes = np.bincount(
            self.units * d + np.asarray(decisions.placement, dtype=np.int64),
            weights=self._weight,
            minlength=u * d,
        ).reshape(u, d)
        place = (votes.argmax(axis=1) + 0.5) / d
        fusion = np.asarray(decisions.fusion_priority, dtype=np.float64)
        fuse = np.zeros_like(fusion)
        on = fusion > 0
        if on.any():
            values, rank = np.unique(fusion[on], return_inverse=True)
            fuse[on] = FUSION_OFF + (1 - FUSION_OFF) * (rank + 1) / (values.size + 1)
        values, rank = np.unique(
            np.asarray(decisions.schedule_priority, np.float64), return_inverse=True
        )
        sched = (rank + 0.5) / max(values.size, 1)
        return np.concatenate([place, fuse, sched])

    def random(self, rng: np.random.Generator) -> np.ndarray:
        """A uniformly random key vector.

        Args:
          rng: the random generator.

        Returns:
          ``float64[size]`` in ``[0, 1)``.
        """
        return rng.random(self.size)

    def mutate(self, keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One simulated-annealing move (module docstring).

        Args:
          keys: the current key vector (not modified).
          rng: the random generator.

        Returns:
          A new key vector differing in one unit group, fusion range or schedule range.
        """
        out = keys.copy()
        place, fuse, sched = self.split(out)
        n = self.graph.num_nodes
        d = self.cluster.num_devices
        kinds = [
            k
            for k, task in ((0, "placement"), (1, "fusion"), (2, "scheduling"))
            if task in self.tasks and (k or d > 1)
        ] or [0]
        kind = kinds[rng.integers(len(kinds))]
        if kind == 0 or n == 0:
            chosen = rng.choice(self.num_units, size=min(self.num_units, 1 + rng.integers(3)))
            place[chosen] = (rng.integers(d, size=chosen.size) + 0.5) / d
            return out
        length = int(math.exp(rng.uniform(0.0, math.log(max(2.0, n / 8)))))
        start = int(rng.integers(0, max(1, n - length + 1)))
        nodes = self._topo[start : start + length]
        if kind == 1:
            how = rng.integers(3)
            if how == 0:
                fuse[nodes] = 0.0
            elif how == 1:
                fuse[nodes] = rng.uniform(FUSION_OFF, 1.0, size=nodes.size)
            else:
                fuse[nodes] = rng.random(nodes.size)
        else:
            sched[nodes] = rng.random(nodes.size)
        return out


def score(result: SimResult) -> float:
    """The search objective.

    Args:
      result: a simulation result.

    Returns:
      The step time in seconds, × (2 + the worst device's peak / capacity) when out of
      memory.
    """
    if not result.oom:
        return result.step_time
    ratio = float(np.max(result.peak_memory / result.memory_capacity))
    return result.step_time * (2.0 + ratio)


class _Recorder:
    """Evaluates candidates, keeps the best and the curve, enforces the limits."""

    def __init__(
        self,
        space: SearchSpace,
        budget: int,
        time_limit: float | None,
        started: float,
        progress: Callable[[int, float], None] | None,
    ) -> None:
        self.space = space
        self.budget = budget
        self.time_limit = time_limit
        self.started = started
        self.progress = progress
        self.count = 0
        self.best = math.inf
        self.best_keys: np.ndarray | None = None
        self.best_oom = False
        self.first = math.inf
        self.seconds: list[float] = []
        self.values: list[float] = []
        self.stopped_by = "budget"

    def more(self) -> bool:
        if self.count >= self.budget:
            self.stopped_by = "budget"
            return False
        if self.time_limit is not None and time.perf_counter() - self.started >= self.time_limit:
            self.stopped_by = "time"
            return False
        return True

    def fraction(self) -> float:
        """How much of the budget (evaluations or time, whichever is further) is spent."""
        f = self.count / self.budget
        if self.time_limit:
            f = max(f, (time.perf_counter() - self.started) / self.time_limit)
        return min(f, 1.0)

    def __call__(self, keys: np.ndarray) -> float:
        space = self.space
        result = simulate(space.graph, space.cluster, space.decode(keys), validate=False)
        value = score(result)
        self.count += 1
        if self.count == 1:
            self.first = value
        if value < self.best:
            self.best = value
            self.best_keys = keys
            self.best_oom = result.oom
        self.seconds.append(time.perf_counter() - self.started)
        self.values.append(self.best)
        if self.progress is not None:
            self.progress(self.count, self.best)
        return value


def _random_search(
    space: SearchSpace, rec: _Recorder, rng: np.random.Generator, starts: list[np.ndarray]
) -> None:
    del starts
    while rec.more():
        rec(space.random(rng))


def _simulated_annealing(
    space: SearchSpace, rec: _Recorder, rng: np.random.Generator, starts: list[np.ndarray]
) -> None:
    t_start, t_end = 0.03, 1e-4
    current, current_value = None, math.inf
    for keys in starts or [space.random(rng)]:
        if not rec.more():
            return
        value = rec(keys)
        if value < current_value:
            current, current_value = keys, value
    while rec.more():
        temperature = t_start * (t_end / t_start) ** rec.fraction()
        candidate = space.mutate(current, rng)
        value = rec(candidate)
        worse = value / current_value - 1.0 if current_value > 0 else 0.0
        if worse <= 0 or rng.random() < math.exp(-worse / temperature):
            current, current_value = candidate, value


def _evolutionary(
    space: SearchSpace, rec: _Recorder, rng: np.random.Generator, starts: list[np.ndarray]
) -> None:
    size = max(int(np.clip(rec.budget // 40, 8, 50)), len(starts) + 2)
    n_elite = max(2, int(0.2 * size))
    n_mutant = max(1, int(0.15 * size))
    rho = 0.7
    population = list(starts)
    population += [space.random(rng) for _ in range(size - len(population))]
    fitness = []
    for keys in population:
        if not rec.more():
            return
        fitness.append(rec(keys))
    while rec.more():
        order = np.argsort(fitness, kind="stable")
        elites = [population[i] for i in order[:n_elite]]
        others = [population[i] for i in order[n_elite:]]
        elite_fit = [fitness[i] for i in order[:n_elite]]
        children = [space.random(rng) for _ in range(n_mutant)]
        while len(children) < size - n_elite:
            a = elites[rng.integers(len(elites))]
            b = others[rng.integers(len(others))] if others else space.random(rng)
            children.append(np.where(rng.random(space.size) < rho, a, b))
        population, fitness = list(elites), list(elite_fit)
        for keys in children:
            if not rec.more():
                return
            population.append(keys)
            fitness.append(rec(keys))


_STRATEGIES = {
    "random-search": _random_search,
    "simulated-annealing": _simulated_annealing,
    "evolutionary": _evolutionary,
}


def start_decisions(
    graph: OpGraph,
    cluster: Cluster,
    start: Decisions | str | Sequence[Decisions | str] | None,
    *,
    seed: int = 0,
) -> list[Decisions]:
    """The decisions a search starts from.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      start: decisions, or a name: ``"default"`` for :meth:`Decisions.default`,
        ``"random"`` for a random key vector (no decisions), any other name a heuristic
        (:func:`hlo_go.baselines.get`); or a sequence of those; None for
        :data:`DEFAULT_STARTS`.
      seed: the heuristics' seed.

    Returns:
      The starts (validated); empty for a random start.

    Raises:
      ValueError: a search named as a start.
    """
    if start is None:
        start = DEFAULT_STARTS
    if isinstance(start, Decisions | str):
        start = [start]
    out = []
    for item in start:
        if isinstance(item, Decisions):
            out.append(item.validate(graph, cluster.num_devices))
        elif item == "default":
            out.append(Decisions.default(graph))
        elif item != "random":
            method = get(item)
            if method.kind == "search":
                raise ValueError(f"a search cannot start from another search ({method.name!r})")
            out.append(method(graph, cluster, seed=seed))
    return out


def run_search(
    graph: OpGraph,
    cluster: Cluster,
    method: str = "simulated-annealing",
    *,
    budget: int | None = None,
    time_limit: float | None = None,
    seed: int = 0,
    start: Decisions | str | Sequence[Decisions | str] | None = None,
    space: SearchSpace | None = None,
    progress: bool = False,
    tasks: Sequence[str] = SEARCH_TASKS,
    fixed: Decisions | None = None,
) -> SearchResult:
    """Runs one search and records its convergence.

    Args:
      graph: an OpGraph.
      cluster: the cluster.
      method: ``"random-search"``, ``"simulated-annealing"`` or ``"evolutionary"``.
      budget: simulator evaluations (default :data:`DEFAULT_BUDGET`).
      time_limit: wall-clock seconds (setup included), or None for no limit; the search
        stops at whichever limit comes first.
      seed: the random seed.
      start: what simulated annealing starts from (the best of them) and what seeds
        BRKGA's population (:func:`start_decisions`; default :data:`DEFAULT_STARTS`);
        random search ignores it. Each start costs one evaluation.
      space: a prebuilt :class:`SearchSpace` for this graph and cluster (reused across
        searches to share its METIS units). Default: one whose units are refined by the
        starts' placements, so the starts are represented exactly.
      progress: show a tqdm progress bar.
      tasks: the tasks searched (default all three); the others keep ``fixed``'s
        decisions (default :meth:`Decisions.default`). Ignored when ``space`` is given
        (the space's own are used).
      fixed: decisions for the tasks not searched.

    Returns:
      The :class:`SearchResult`; ``.curve`` is the best-so-far curve.

    Raises:
      KeyError: unknown method (the message lists the known ones).
      ValueError: a budget below 1, a space for another graph or cluster.
    """
    if method == "hdp":
        raise KeyError("'hdp' is a learned placer: run it with hlo_go.baselines.run_hdp")
    if method not in _STRATEGIES:
        raise KeyError(f"unknown search method {method!r}; known: {', '.join(_STRATEGIES)}")
    budget = DEFAULT_BUDGET if budget is None else int(budget)
    if budget < 1:
        raise ValueError(f"budget must be at least 1 evaluation, got {budget}")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    begin = [] if method == "random-search" else start_decisions(graph, cluster, start, seed=seed)
    if space is None:
        space = SearchSpace(
            graph,
            cluster,
            seed=seed,
            refine=[d.placement for d in begin],
            tasks=tasks,
            fixed=fixed,
        )
    elif space.graph is not graph or space.cluster != cluster:
        raise ValueError("the SearchSpace was built for another graph or cluster")
    starts = [space.encode(d) for d in begin]
    bar = None
    update = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=budget, desc=method, unit="eval", leave=False)

        def update(count: int, best: float) -> None:
            bar.update(1)
            if count % 50 == 0:
                bar.set_postfix(best_ms=f"{best * 1e3:.4g}")

    rec = _Recorder(space, budget, time_limit, started, update)
    try:
        _STRATEGIES[method](space, rec, rng, starts)
    finally:
        if bar is not None:
            bar.close()
    if rec.best_keys is None:  # the time limit struck before any evaluation
        rec.time_limit = None
        rec.budget = rec.count + 1
        rec(starts[0] if starts else space.random(rng))
    best = space.decode(rec.best_keys).validate(graph, cluster.num_devices)
    curve = Curve(
        np.arange(1, rec.count + 1, dtype=np.int64),
        np.asarray(rec.seconds, dtype=np.float64),
        np.asarray(rec.values, dtype=np.float64),
    )
    return SearchResult(
        method=method,
        graph=graph.module_name,
        cluster=cluster.name,
        best=best,
        best_step_time=rec.best,
        best_oom=rec.best_oom,
        start_step_time=rec.first,
        curve=curve,
        evaluations=rec.count,
        seconds=time.perf_counter() - started,
        seed=seed,
        stopped_by=rec.stopped_by,
    )


for _name in _STRATEGIES:
    register_search(_name, functools.partial(run_search, method=_name))
