"""Teachers: strong search results per (graph, cluster), as independent, resumable jobs.

The first half of the GO policy's learning recipe (teachers → imitation → PPO,
``docs/rl.md``): for every training graph and cluster preset, a search over the simulator
(:func:`hlo_go.baselines.run_search`, simulated annealing or BRKGA) with a large budget
finds decisions the policy is then taught to make (:mod:`hlo_go.rl.imitation`).

A :class:`TeacherJob` names one search. :func:`run_teacher` runs it: the search starts
from the fastest standard heuristic on that graph and cluster (the one
:func:`hlo_go.rl.prior.prior_decisions` picks for ``"best"``) and its result is never
slower than that start (the heuristic's decisions are kept where the search did not
beat them). On one device the simulated step time does not depend on the order, so
there the search decides fusion only and keeps the heuristic's schedule (as the
``searched`` method does, :func:`hlo_go.baselines.search.search_tasks_for`).

A search changes many decisions that do not matter (a node moved to another device and
back in effect, a priority that orders nothing): as imitation targets they are noise.
:func:`revert_needless_changes` then takes back every change from the heuristic that the
step time does not need (within :data:`REVERT_TOLERANCE`), so a teacher is the heuristic
plus the changes that make it faster.

:func:`make_teachers` runs many jobs and keeps one small ``.npz`` file per finished job
in a store directory, named by a hash of the job's fields and :data:`STORE_VERSION`.
Jobs already stored are loaded, not rerun, so a killed run resumes where it stopped; the
others run in a process pool (``workers > 1``, spawn context) or in this process. The
jobs share nothing, so the same list can be split across hosts (``jax.distributed``
processes or Ray tasks, each running :func:`make_teachers` on its share into a shared
store).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hlo_go.baselines.search import run_search, score, search_tasks_for
from hlo_go.decisions import ARRAY_FIELDS, Decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import OpGraph
from hlo_go.sim import get_cluster, simulate

logger = logging.getLogger(__name__)

STORE_VERSION = 3
"""Version of the teacher store's files; part of every file's name and contents."""

STORE_FORMAT = "hlo-go-teacher"
"""The ``format`` field of every teacher file."""

TEACHER_METHODS: tuple[str, ...] = ("simulated-annealing", "evolutionary")
"""The searches a teacher may run."""

CHANGED_BITS: dict[str, int] = {"placement": 1, "scheduling": 2, "fusion": 4}
"""Bits of :attr:`Teacher.changed`, by task."""

_CHANGED_FIELDS = {"placement": "placement", "scheduling": "schedule_priority",
                   "fusion": "fusion_priority"}  # fmt: skip

REVERT_BUDGET = 4
"""Simulations :func:`revert_needless_changes` may run, per evaluation of the search."""

REVERT_TOLERANCE = 1e-3
"""How much slower (relative) than the search's result a teacher may get by taking back
changes (:func:`revert_needless_changes`)."""


class TeacherStoreError(ValueError, HloGoError):
    """A teacher store file is corrupt, from another store version or another job, or
    made for another graph or cluster than the one given (the message names the file and
    says which)."""


class TeacherJobError(RuntimeError, HloGoError):
    """Teacher jobs failed (the message names each; the finished ones are stored)."""


@dataclasses.dataclass(frozen=True)
class TeacherJob:
    """One teacher search.

    Attributes:
      graph: a corpus graph name (:mod:`hlo_go.corpus`, any split), or a name the
        caller maps to an :class:`~hlo_go.graph.OpGraph` (``graphs=`` of
        :func:`make_teachers`).
      cluster: a cluster preset name (:func:`hlo_go.sim.get_cluster`), e.g. ``"v100x4"``.
      method: a search of :data:`TEACHER_METHODS`.
      evaluations: the search's budget of simulator evaluations.
      seed: the search's seed.
    """

    graph: str
    cluster: str
    method: str = "simulated-annealing"
    evaluations: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.graph or not self.cluster:
            raise ValueError(f"a teacher job needs a graph and a cluster name, got {self}")
        if self.method not in TEACHER_METHODS:
            raise ValueError(
                f"teacher method must be one of {', '.join(TEACHER_METHODS)}, got {self.method!r}"
            )
        if int(self.evaluations) < 1:
            raise ValueError(f"evaluations must be >= 1, got {self.evaluations}")

    @property
    def label(self) -> str:
        """``graph@cluster``."""
        return f"{self.graph}@{self.cluster}"

    def to_dict(self) -> dict[str, Any]:
        """The job's fields (JSON-friendly)."""
        return dataclasses.asdict(self)

    def key(self) -> str:
        """A hash of the job's fields and :data:`STORE_VERSION` (24 hex digits)."""
        data = json.dumps({**self.to_dict(), "version": STORE_VERSION}, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:24]

    @property
    def filename(self) -> str:
        """The job's file name in a store."""
        return f"teacher-v{STORE_VERSION}-{self.key()}.npz"


class Teacher(NamedTuple):
    """A finished teacher job.

    Attributes:
      job: the job.
      decisions: the teacher's decisions (priorities in ``[0, 1]``, as the policy's bins
        read them), marked as made for the graph.
      step_time: their simulated step time, seconds.
      best_heuristic: the name of the fastest standard heuristic, the search's start.
      best_heuristic_time: its simulated step time (``step_time`` is never above it).
      evaluations: simulator evaluations the search and the reverts made.
      seconds: wall-clock seconds of the job (heuristics and search).
      oom: whether the decisions run out of memory.
      graph_fingerprint: :attr:`hlo_go.graph.OpGraph.fingerprint` of the graph.
      changes: decisions (a colocation group's device, a node's schedule or fusion
        priority) that differ from the best heuristic's.
      reverted: changes of the search taken back (:func:`revert_needless_changes`).
      changed: ``uint8[N]`` which of each node's decisions differ from the best
        heuristic's: bit :data:`CHANGED_BITS` ``["placement"]`` (its colocation group's
        device), ``["schedule"]``, ``["fusion"]`` (its priorities); None: not known.
    """

    job: TeacherJob
    decisions: Decisions
    step_time: float
    best_heuristic: str
    best_heuristic_time: float
    evaluations: int
    seconds: float
    oom: bool
    graph_fingerprint: str
    changes: int = 0
    reverted: int = 0
    changed: np.ndarray | None = None

    @property
    def speedup(self) -> float:
        """``best_heuristic_time / step_time`` (≥ 1)."""
        return self.best_heuristic_time / self.step_time


def job_graph(job: TeacherJob, graphs: Mapping[str, OpGraph] | None = None) -> OpGraph:
    """The graph a job names: ``graphs[job.graph]``, else the corpus graph's pre-fusion stage.

    Raises:
      hlo_go.corpus.UnknownGraphError: neither given nor a corpus graph (a ``KeyError``).
      hlo_go.corpus.VariantNotBuiltError: a variant graph not built yet.
    """
    if graphs is not None and job.graph in graphs:
        return graphs[job.graph]
    from hlo_go import corpus
    from hlo_go.graph import build_graph

    return build_graph(corpus.load(job.graph, "prefusion"))


def _unit_scale(priority: np.ndarray) -> np.ndarray:
    """Non-negative priorities divided by their largest (same order, same zeros)."""
    priority = np.asarray(priority, np.float64)
    top = float(priority.max(initial=0.0))
    return (priority / top if top > 0 else priority).astype(np.float32)


def run_teacher(job: TeacherJob, graph: OpGraph | None = None) -> Teacher:
    """Runs one teacher search.

    Args:
      job: the job.
      graph: the job's graph (default: :func:`job_graph`, the corpus graph).

    Returns:
      The :class:`Teacher`: the search's best decisions, or the best heuristic's where
      the search found nothing faster.
    """
    from hlo_go.rl.prior import BEST, prior_decisions

    began = time.perf_counter()
    graph = job_graph(job) if graph is None else graph
    cluster = get_cluster(job.cluster)
    heuristic, start = prior_decisions(graph, cluster, BEST)
    start = start.validate(graph, cluster.num_devices)
    start_result = simulate(graph, cluster, start)
    result = run_search(
        graph,
        cluster,
        job.method,
        budget=int(job.evaluations),
        seed=int(job.seed),
        start=[start],
        tasks=search_tasks_for(cluster),
        fixed=start,
    )
    found = result.best.validate(graph, cluster.num_devices)
    found_result = simulate(graph, cluster, found)
    changes = reverted = 0
    evaluations = int(result.evaluations)
    if score(found_result) < score(start_result):
        found, reverts = revert_needless_changes(
            graph, cluster, found, start, budget=REVERT_BUDGET * int(job.evaluations)
        )
        found_result = simulate(graph, cluster, found)
        changes, reverted, evaluations = (
            reverts.kept,
            reverts.reverted,
            evaluations + reverts.evaluations,
        )
    changed = np.zeros(graph.num_nodes, np.uint8)
    if score(found_result) < score(start_result):
        for task, field in _CHANGED_FIELDS.items():  # raw arrays: before the unit scaling
            differ = np.asarray(getattr(found, field)) != np.asarray(getattr(start, field))
            changed[differ] |= CHANGED_BITS[task]
        decisions, sim = (
            Decisions(
                found.placement,
                _unit_scale(found.schedule_priority),
                _unit_scale(found.fusion_priority),
            ).for_graph(graph),
            found_result,
        )
    else:
        decisions, sim, changes = start, start_result, 0
    return Teacher(
        job,
        decisions,
        float(sim.step_time),
        heuristic,
        float(start_result.step_time),
        evaluations,
        time.perf_counter() - began,
        bool(sim.oom),
        graph.fingerprint,
        changes,
        reverted,
        changed,
    )


class Reverts(NamedTuple):
    """What :func:`revert_needless_changes` did.

    Attributes:
      kept: changes left (each a colocation group's device or a node's priority).
      reverted: changes taken back.
      evaluations: simulations it ran.
    """

    kept: int
    reverted: int
    evaluations: int


def _changes(graph: OpGraph, found: Decisions, start: Decisions) -> list[tuple[str, np.ndarray]]:
    """The decisions ``found`` changed from ``start``, as ``(field, nodes)``: a whole
    colocation group's device, or one node's schedule or fusion priority."""
    group = np.asarray(graph.colocation_group)
    out: list[tuple[str, np.ndarray]] = []
    moved = np.flatnonzero(np.asarray(found.placement) != np.asarray(start.placement))
    if moved.size:
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.unique(group[moved]))
        ends = np.searchsorted(group[order], np.unique(group[moved]), side="right")
        out += [("placement", order[a:b]) for a, b in zip(bounds, ends, strict=True)]
    for field in ("schedule_priority", "fusion_priority"):
        differ = np.flatnonzero(
            np.asarray(getattr(found, field)) != np.asarray(getattr(start, field))
        )
        out += [(field, np.array([i])) for i in differ]
    return out


def revert_needless_changes(
    graph: OpGraph,
    cluster: Any,
    found: Decisions,
    start: Decisions,
    *,
    tolerance: float = REVERT_TOLERANCE,
    budget: int = 2000,
) -> tuple[Decisions, Reverts]:
    """``found`` with the changes from ``start`` it does not need taken back.

    A change is a colocation group's device or one node's schedule or fusion priority
    that differs. Changes are tried in blocks (eight per field to start with, in node
    order): a block whose reversal keeps the search objective
    (:func:`hlo_go.baselines.search.score`) within ``1 + tolerance`` of ``found``'s is
    taken back whole; otherwise it is halved and each half tried, down to single changes
    (as delta debugging does). What is left when ``budget`` simulations are spent is kept.

    Args:
      graph: the graph.
      cluster: the cluster the decisions are for.
      found: a search's decisions.
      start: the decisions the search started from (the best heuristic's).
      tolerance: how much slower than ``found`` the result may be, relative.
      budget: most simulations to run.

    Returns:
      ``(decisions, Reverts)``: never slower than ``found`` by more than ``tolerance``.
    """
    changes = _changes(graph, found, start)
    bound = score(simulate(graph, cluster, found)) * (1.0 + tolerance)
    arrays = {f: np.array(getattr(found, f)) for f in ARRAY_FIELDS}
    origin = {f: np.asarray(getattr(start, f)) for f in arrays}
    blocks: collections.deque[list[int]] = collections.deque()
    for field in arrays:  # each field's changes in eight blocks to start with
        mine = [k for k, (f, _) in enumerate(changes) if f == field]
        size = max(1, -(-len(mine) // 8))
        blocks.extend(mine[i : i + size] for i in range(0, len(mine), size))
    reverted = evaluations = 0
    while blocks and evaluations < budget:
        block = blocks.popleft()
        trial = {f: a.copy() for f, a in arrays.items()}
        for k in block:
            field, nodes = changes[k]
            trial[field][nodes] = origin[field][nodes]
        evaluations += 1
        if score(simulate(graph, cluster, Decisions(**trial).for_graph(graph))) <= bound:
            arrays, reverted = trial, reverted + len(block)
        elif len(block) > 1:
            half = len(block) // 2
            blocks.extendleft([block[half:], block[:half]])
    decisions = Decisions(**arrays).for_graph(graph)
    return decisions, Reverts(len(changes) - reverted, reverted, evaluations)


# -- the store ---------------------------------------------------------------------------


def save_teacher(store: str | Path, teacher: Teacher) -> Path:
    """Writes a teacher into ``store`` atomically (its job's :attr:`~TeacherJob.filename`).

    Returns:
      The file's path.
    """
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    target = store / teacher.job.filename
    meta = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "job": teacher.job.to_dict(),
        "step_time": teacher.step_time,
        "best_heuristic": teacher.best_heuristic,
        "best_heuristic_time": teacher.best_heuristic_time,
        "evaluations": teacher.evaluations,
        "seconds": teacher.seconds,
        "oom": teacher.oom,
        "graph_fingerprint": teacher.graph_fingerprint,
        "num_nodes": int(np.shape(teacher.decisions.placement)[0]),
        "changes": teacher.changes,
        "reverted": teacher.reverted,
    }
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        np.savez(
            handle,
            meta=np.asarray(json.dumps(meta, sort_keys=True)),
            **teacher.decisions.arrays(),
            **(
                {}
                if teacher.changed is None
                else {"changed": np.asarray(teacher.changed, np.uint8)}
            ),
        )
    os.replace(tmp, target)
    return target


def load_teacher(path: str | Path, job: TeacherJob | None = None) -> Teacher:
    """Reads a teacher file.

    Args:
      path: the file.
      job: the job it must hold (default: whichever it holds).

    Raises:
      FileNotFoundError: no such file.
      TeacherStoreError: not a teacher file (corrupt, truncated, foreign), another store
        version, or another job's.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no teacher file at {path}")

    def refuse(why: str) -> TeacherStoreError:
        return TeacherStoreError(
            f"{path}: {why}; delete it to run its job again (teacher store version {STORE_VERSION})"
        )

    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {
                "placement": np.asarray(data["placement"], np.int32),
                "schedule_priority": np.asarray(data["schedule_priority"], np.float32),
                "fusion_priority": np.asarray(data["fusion_priority"], np.float32),
            }
            changed = np.asarray(data["changed"], np.uint8) if "changed" in data else None
        if not isinstance(meta, dict):
            raise TypeError("meta is not an object")
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as error:
        raise refuse(f"not a readable teacher file ({type(error).__name__}: {error})") from None
    if meta.get("format") != STORE_FORMAT:
        raise refuse(f"not a teacher file (format {meta.get('format')!r})")
    if meta.get("version") != STORE_VERSION:
        raise refuse(f"teacher store version {meta.get('version')!r}, not {STORE_VERSION}")
    try:
        stored = TeacherJob(**meta["job"])
        n = int(meta["num_nodes"])
        fields = (
            float(meta["step_time"]), str(meta["best_heuristic"]),
            float(meta["best_heuristic_time"]), int(meta["evaluations"]),
            float(meta["seconds"]), bool(meta["oom"]), str(meta["graph_fingerprint"]),
            int(meta["changes"]), int(meta["reverted"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise refuse(f"incomplete teacher metadata ({type(error).__name__}: {error})") from None
    if job is not None and stored != job:
        raise refuse(f"it holds job {stored}, not {job}")
    if any(a.shape != (n,) for a in arrays.values()):
        raise refuse(f"decision arrays of shapes {[a.shape for a in arrays.values()]}, not ({n},)")
    if changed is not None and changed.shape != (n,):
        raise refuse(f"a changed mask of shape {changed.shape}, not ({n},)")
    decisions = Decisions(**arrays, graph_fingerprint=fields[6])
    return Teacher(stored, decisions, *fields, changed)


def check_teacher_graph(teacher: Teacher, graph: OpGraph) -> None:
    """Refuses a teacher made for another graph than ``graph``.

    Raises:
      TeacherStoreError: naming both fingerprints and node counts.
    """
    if teacher.graph_fingerprint != graph.fingerprint:
        raise TeacherStoreError(
            f"teacher {teacher.job.label} was made for graph {teacher.graph_fingerprint} "
            f"({np.shape(teacher.decisions.placement)[0]} nodes), not {graph.fingerprint} "
            f"({graph.num_nodes} nodes): the graph changed since (another jax version, or "
            "another graph under that name); use another store or delete its file"
        )


def _run_and_store(job: TeacherJob, graph: OpGraph | None, store: str) -> Teacher:
    """A pool worker's task: run the job and store it (so it survives the parent)."""
    teacher = run_teacher(job, graph)
    save_teacher(store, teacher)
    return teacher


def make_teachers(
    jobs: Sequence[TeacherJob],
    *,
    store: str | Path,
    workers: int = 1,
    graphs: Mapping[str, OpGraph] | None = None,
    progress: bool = False,
) -> list[Teacher]:
    """Runs the jobs not yet in ``store`` and loads the others.

    Args:
      jobs: the jobs (repeats run once).
      store: the directory of teacher files (created if missing).
      workers: processes to run jobs in (spawn context); 1: in this process.
      graphs: graph name -> OpGraph for jobs whose graph is not a corpus name (and to
        check stored teachers against: a stored teacher of a given graph must match it).
      progress: show a tqdm progress bar.

    Returns:
      One :class:`Teacher` per job, in order.

    Raises:
      ValueError: ``workers < 1``.
      KeyError: an unknown cluster preset, or a graph neither given nor in the corpus
        (:class:`hlo_go.corpus.UnknownGraphError`).
      hlo_go.corpus.VariantNotBuiltError: a job's corpus graph is not built (the message
        names the command that builds it).
      TeacherStoreError: a store file that is corrupt, foreign, or for another graph.
      TeacherJobError: jobs that failed (the others are stored; the first failure is the
        cause).
    """
    from tqdm.auto import tqdm

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    unique = list(dict.fromkeys(jobs))
    for job in unique:
        get_cluster(job.cluster)  # an unknown preset fails here, before any search
    done: dict[TeacherJob, Teacher] = {}
    pending: list[TeacherJob] = []
    for job in unique:
        path = store / job.filename
        if path.exists():
            teacher = load_teacher(path, job)
            if graphs is not None and job.graph in graphs:
                check_teacher_graph(teacher, graphs[job.graph])
            done[job] = teacher
        else:
            pending.append(job)
    for job in pending:  # an unknown or unbuilt graph fails here, before any search
        if graphs is None or job.graph not in graphs:
            from hlo_go import corpus

            corpus.path(job.graph, "prefusion")
    logger.info(
        "teachers: %d stored in %s, %d to run on %d worker(s)",
        len(done), store, len(pending), workers,
    )  # fmt: skip
    failures: list[tuple[TeacherJob, BaseException]] = []
    bar = tqdm(total=len(unique), initial=len(done), desc="teachers", disable=not progress)

    def finished(job: TeacherJob, teacher: Teacher) -> None:
        done[job] = teacher
        bar.update(1)
        logger.info(
            "teacher %s (%s, %d evaluations): %.4g s vs %s %.4g s (%.3fx) in %.1f s",
            job.label, job.method, teacher.evaluations, teacher.step_time,
            teacher.best_heuristic, teacher.best_heuristic_time, teacher.speedup,
            teacher.seconds,
        )  # fmt: skip

    def given(job: TeacherJob) -> OpGraph | None:
        return graphs.get(job.graph) if graphs is not None else None

    try:
        if workers == 1 or len(pending) <= 1:
            for job in pending:
                try:
                    finished(job, _run_and_store(job, given(job), str(store)))
                except Exception as error:  # reported below; the others go on
                    logger.error("teacher %s failed: %s", job.label, error)
                    failures.append((job, error))
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
                futures = {
                    pool.submit(_run_and_store, job, given(job), str(store)): job for job in pending
                }
                for future in concurrent.futures.as_completed(futures):
                    job = futures[future]
                    try:
                        finished(job, future.result())
                    except Exception as error:  # reported below
                        logger.error("teacher %s failed: %s", job.label, error)
                        failures.append((job, error))
    finally:
        bar.close()
    if failures:
        names = ", ".join(f"{job.label} ({job.method}, seed {job.seed})" for job, _ in failures)
        raise TeacherJobError(
            f"{len(failures)} of {len(pending)} teacher jobs failed: {names}; the "
            f"{len(done)} finished are stored in {store}, rerun to retry the others"
        ) from failures[0][1]
    return [done[job] for job in jobs]
