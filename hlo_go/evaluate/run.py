"""Evaluating optimizers on many HLO inputs: one :class:`EvalRow` per input, whatever
goes wrong with it.

For each input (an HLO text file or a corpus graph name) :func:`evaluate` builds the
:class:`~hlo_go.graph.OpGraph`, runs the baselines (:func:`hlo_go.baselines.report.run_method`
each) and the GO policy (:func:`hlo_go.rl.infer` zero-shot, or :func:`hlo_go.rl.finetune`
for a few steps), simulates every method's decisions on the cluster and compares them
with the reference :data:`REFERENCE` (one device, FIFO, no fusion:
:meth:`Decisions.default <hlo_go.decisions.Decisions.default>`) and with the best
baseline. With ``measure`` each method also decides for the graph XLA:CPU actually
fuses on this host (:attr:`hlo_go.xla.Program.graph`, cluster ``host-cpu-1``), and
:func:`hlo_go.xla.measure_many` lowers those decisions into XLA's compile, checks the
outputs and times them against XLA's default compile (:func:`measure_input`), in a
child process pinned to one core and timed by CPU time: XLA aborts the process on some
modules it cannot compile, and that ends only the child.

Failures never stop a run. An input that cannot be read, parsed, built into a graph or
simulated on the reference gets a row with ``status="error"`` and a one-line reason
(a parse error reads ``file:line:column: ...``); a method that fails on a good input
gets that cell's ``status="error"`` and reason, and a failed measurement that cell's
``measure_reason``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.hlo import HloParseError
from hlo_go.rl.checkpoint import Checkpoint
from hlo_go.rl.trainer import policy_decisions
from hlo_go.sim import Cluster, SimResult

REFERENCE = "single-device"
"""The method every speedup is measured against: one device, FIFO, no fusion."""

HLO_SUFFIXES = (".hlo", ".hlo.gz", ".txt")
"""File names a directory argument contributes (sorted)."""

MAX_REASON = 300
"""Longest reason kept (characters)."""


class MethodResult(NamedTuple):
    """One method on one input.

    Attributes:
      method: the method's name (a baseline name, or ``GO ...`` for the policy).
      kind: ``"reference"``, ``"baseline"`` or ``"policy"``.
      status: ``"ok"``, or ``"error"`` when the method failed (``reason`` says why).
      reason: why it failed, one line.
      step_time: simulated step time, seconds.
      oom: its decisions run out of memory.
      seconds: wall-clock seconds the method took to decide.
      kernels: kernels launched in the simulation.
      bytes_moved: bytes sent between devices.
      devices_used: devices that got at least one node.
      speedup: reference step time / this step time (> 1: faster than one device).
      vs_best_baseline: best baseline's step time / this step time.
      best: the best method of the input (the fastest that fits in memory).
      measured_correct: lowered into XLA:CPU, its outputs matched XLA's default compile
        (None: not measured).
      measured_speedup: XLA default's measured time / this method's (> 1: faster).
      measure_reason: why it was not measured or not correct, or a timing note.
    """

    method: str
    kind: str
    status: str
    reason: str = ""
    step_time: float | None = None
    oom: bool = False
    seconds: float = 0.0
    kernels: int | None = None
    bytes_moved: int | None = None
    devices_used: int | None = None
    speedup: float | None = None
    vs_best_baseline: float | None = None
    best: bool = False
    measured_correct: bool | None = None
    measured_speedup: float | None = None
    measure_reason: str = ""


class EvalRow(NamedTuple):
    """One input of :func:`evaluate`.

    Attributes:
      source: the input as given (a file path or a corpus graph name).
      name: its name in tables (the file name, or the corpus name).
      status: ``"ok"``, or ``"error"`` when the input could not be evaluated at all.
      reason: why (one line); for an ``"ok"`` row, the methods that failed, if any.
      nodes: nodes of its graph (None if it was not built).
      cluster: the cluster's name.
      methods: one :class:`MethodResult` per method, the reference first.
      best: the best method's name.
      seconds: wall-clock seconds spent on the input.
      measured_nodes: nodes of the graph XLA fuses (``measure`` only).
      timeline: the best method's simulation (its timeline is drawn by
        :func:`hlo_go.evaluate.plot_timelines`; not serialized).
    """

    source: str
    name: str
    status: str
    reason: str
    nodes: int | None
    cluster: str
    methods: tuple[MethodResult, ...] = ()
    best: str | None = None
    seconds: float = 0.0
    measured_nodes: int | None = None
    timeline: SimResult | None = None

    def method(self, name: str) -> MethodResult | None:
        """The result of the method called ``name``, or None."""
        return next((m for m in self.methods if m.method == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-able fields (methods as a list of dicts; no timeline)."""
        out = self._asdict()
        out.pop("timeline")
        out["methods"] = [m._asdict() for m in self.methods]
        return out


def one_line(error: BaseException) -> str:
    """A one-line reason for an exception.

    Args:
      error: the exception.

    Returns:
      An :class:`~hlo_go.hlo.HloParseError`'s ``file:line:column: message`` line, or
      ``TypeName: first line of the message``; at most :data:`MAX_REASON` characters.
    """
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    line = first if isinstance(error, HloParseError) else f"{type(error).__name__}: {first}"
    line = line.rstrip(": ")
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."


def expand_sources(sources: Sequence[str | Path]) -> list[str]:
    """The inputs of a command line: a directory stands for its HLO files.

    Args:
      sources: file paths, directories and corpus graph names.

    Returns:
      The sources in order, each directory replaced by its files whose names end in
      one of :data:`HLO_SUFFIXES`, sorted (a directory without any stays itself, so it
      gets an error row).
    """
    out: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files = sorted(
                str(f) for f in path.iterdir() if f.is_file() and f.name.endswith(HLO_SUFFIXES)
            )
            out.extend(files or [str(source)])
        else:
            out.append(str(source))
    return out


def load_input(source: str, *, stage: str = "prefusion") -> OpGraph:
    """The graph of an HLO file or a corpus graph name.

    Args:
      source: a file path or a corpus graph name.
      stage: the corpus stage of a corpus name.

    Returns:
      The OpGraph.

    Raises:
      FileNotFoundError: neither a file nor a corpus graph, or a directory without
        HLO files.
      HloParseError: malformed text (``file:line:column``).
    """
    from hlo_go.sources import load_graph

    if Path(source).is_dir():
        raise FileNotFoundError(
            f"directory {source!r} holds no HLO files ({', '.join(HLO_SUFFIXES)})"
        )
    return load_graph(source, stage)[1]


def policy_label(
    *, samples: int = 0, finetune_steps: int = 0, moves: int = 0, cuts: bool = False
) -> str:
    """The GO policy's method name in rows and tables.

    Args:
      samples: zero-shot samples besides the greedy decisions.
      finetune_steps: fine-tuning steps (0: zero-shot).
      moves: zero-shot moves of the policy's move head tried besides.
      cuts: zero-shot confidence cuts tried besides (:mod:`hlo_go.rl.cuts`).

    Returns:
      ``"GO zero-shot"``, or what it tries besides the greedy decisions, e.g. ``"GO
      zero-shot (greedy + cuts + K samples + M moves)"``; or ``"GO fine-tuned (N
      steps)"``.
    """
    if finetune_steps:
        return f"GO fine-tuned ({finetune_steps} steps)"
    tried = (
        ["cuts"] * cuts
        + [f"{samples} samples"] * bool(samples)
        + [f"{moves} move" + "s" * (moves != 1)] * bool(moves)
    )
    return "GO zero-shot" + (f" (greedy + {' + '.join(tried)})" if tried else "")


def method_names(baselines: Sequence[str] | None = None) -> list[str]:
    """The baselines to run, the reference first.

    Args:
      baselines: names of :func:`hlo_go.baselines.get` (``+`` combinations included);
        None: the heuristics (:func:`hlo_go.rl.compare.heuristic_names`).

    Returns:
      The names, :data:`REFERENCE` first, without repeats.

    Raises:
      UnknownMethodError: a name that names no baseline.
    """
    from hlo_go.baselines import get
    from hlo_go.rl.compare import heuristic_names

    chosen = heuristic_names() if baselines is None else [b.strip() for b in baselines]
    names = list(dict.fromkeys([REFERENCE, *(b for b in chosen if b)]))
    for name in names:
        get(name)
    return names


@dataclasses.dataclass(frozen=True)
class _Evaluator:
    """The settings of one :func:`evaluate` call and the work on one input."""

    cluster: Cluster
    methods: list[str]
    checkpoint: Checkpoint | None
    samples: int
    finetune_steps: int
    measure: bool
    repeats: int
    stage: str
    seed: int
    work_dir: Path
    cpu: int | None
    say: Callable[[str], None]
    timeout: float | None = None
    moves: int = 0
    cuts: bool = False

    @property
    def label(self) -> str:
        """The policy's method name in rows (:func:`policy_label`)."""
        return policy_label(
            samples=self.samples, finetune_steps=self.finetune_steps, moves=self.moves,
            cuts=self.cuts,
        )  # fmt: skip

    def row(self, source: str, index: int) -> EvalRow:
        """The row of one input (``index``: its position, naming its work files)."""
        started = time.perf_counter()
        name = Path(source).name or source
        nodes = None
        try:
            self.say(f"{name}: loading")
            graph = load_input(source, stage=self.stage)
            nodes = graph.num_nodes
            results, decided = self._simulated(name, graph, index)
            winner = next((m for m in results if m.best), None)
            timeline = _simulate(graph, self.cluster, decided[winner.method]) if winner else None
            measured_nodes = None
            if self.measure:
                results, measured_nodes = self._measured(source, name, results, index)
        except Exception as error:  # every failure of an input is its row, never the run's
            return EvalRow(
                source, name, "error", one_line(error), nodes, self.cluster.name,
                seconds=time.perf_counter() - started,
            )  # fmt: skip
        failed = "; ".join(f"{m.method}: {m.reason}" for m in results if m.status == "error")
        return EvalRow(
            source, name, "ok", failed, nodes, self.cluster.name, tuple(results),
            winner.method if winner else None, time.perf_counter() - started,
            measured_nodes, timeline,
        )  # fmt: skip

    def _simulated(
        self, name: str, graph: OpGraph, index: int
    ) -> tuple[list[MethodResult], dict[str, Decisions]]:
        from hlo_go.baselines.report import run_method

        results: list[MethodResult] = []
        decided: dict[str, Decisions] = {}
        for method in self.methods:
            self.say(f"{name}: {method}")
            kind = "reference" if method == REFERENCE else "baseline"
            found: list[Decisions] = []
            try:
                row = run_method(
                    graph, self.cluster, method, graph_name=name, seed=self.seed,
                    decisions_out=found,
                )  # fmt: skip
            except Exception as error:
                if method == REFERENCE:
                    raise  # no reference: the input itself cannot be evaluated
                results.append(MethodResult(method, kind, "error", one_line(error)))
                continue
            decided[method] = found[0]
            results.append(
                MethodResult(
                    method,
                    kind,
                    "ok",
                    step_time=float(row.step_time),
                    oom=bool(row.oom),
                    seconds=float(row.seconds),
                    kernels=int(row.kernels),
                    bytes_moved=int(row.bytes_moved),
                    devices_used=int(row.devices_used),
                )
            )
        if self.checkpoint is not None:
            self.say(f"{name}: {self.label}")
            try:
                decisions, seconds = self._policy(name, graph, self.cluster, f"{index:03d}")
                result = _simulate(graph, self.cluster, decisions)
            except Exception as error:  # a policy that cannot decide for this graph
                results.append(MethodResult(self.label, "policy", "error", one_line(error)))
            else:
                decided[self.label] = decisions
                results.append(
                    MethodResult(
                        self.label,
                        "policy",
                        "ok",
                        step_time=float(result.step_time),
                        oom=bool(result.oom),
                        seconds=float(seconds),
                        kernels=int(result.num_kernels),
                        bytes_moved=int(result.bytes_moved),
                        devices_used=int(np.unique(decisions.placement).size),
                    )
                )
        return _compared(results), decided

    def _policy(
        self, name: str, graph: OpGraph, cluster: Cluster, tag: str
    ) -> tuple[Decisions, float]:
        assert self.checkpoint is not None
        return policy_decisions(
            self.checkpoint, name, graph, cluster, samples=self.samples,
            finetune_steps=self.finetune_steps, seed=self.seed,
            out_dir=self.work_dir / f"finetune_{tag}", moves=self.moves,
        )  # fmt: skip

    def _measured(
        self, source: str, name: str, results: list[MethodResult], index: int
    ) -> tuple[list[MethodResult], int | None]:
        """Each method measured in XLA:CPU, in a child process pinned to one core (an XLA
        crash ends that process, not the run)."""
        from concurrent.futures.process import BrokenProcessPool

        from hlo_go.xla.timing import MeasureTimeoutError, default_cpu, in_pinned_process

        self.say(f"{name}: measuring in XLA:CPU (pinned child process)")
        policy = self.checkpoint if any(m.kind == "policy" for m in results) else None
        with tempfile.TemporaryDirectory(prefix="hlo-go-measure-") as tmp:
            log = Path(tmp) / "stderr.log"
            try:
                measured, nodes = in_pinned_process(
                    measure_input,
                    source,
                    [m.method for m in results if m.kind != "policy"],
                    cpu=default_cpu() if self.cpu is None else self.cpu,
                    policy=policy,
                    policy_method=self.label,
                    samples=self.samples,
                    moves=self.moves,
                    finetune_steps=self.finetune_steps,
                    work_dir=self.work_dir / f"finetune_{index:03d}_host",
                    repeats=self.repeats,
                    seed=self.seed,
                    stderr=log,
                    timeout=self.timeout,
                    limit_self=self.timeout is None,
                )
            except MeasureTimeoutError as error:
                reason = f"not measured: {error}"
                return [m._replace(measure_reason=reason) for m in results], None
            except BrokenProcessPool:
                reason = f"not measured: the measuring process died: {_crash_reason(log)}"
                return [m._replace(measure_reason=reason) for m in results], None
            except Exception as error:
                reason = f"not measured: {one_line(error)}"
                return [m._replace(measure_reason=reason) for m in results], None
        out = []
        for m in results:
            correct, speedup, reason = measured.get(m.method, (None, None, "not measured"))
            out.append(
                m._replace(
                    measured_correct=correct, measured_speedup=speedup, measure_reason=reason
                )
            )
        return out, nodes


def measure_input(
    source: str,
    methods: Sequence[str],
    *,
    policy: Checkpoint | None = None,
    policy_method: str = "",
    samples: int = 0,
    moves: int = 0,
    finetune_steps: int = 0,
    work_dir: str | Path | None = None,
    repeats: int = 5,
    seed: int = 0,
    clock: str = "cpu",
    stderr: str | Path | None = None,
    limit_self: bool = False,
) -> tuple[dict[str, tuple[bool | None, float | None, str]], int]:
    """Measures methods' decisions for one input in XLA:CPU against XLA's default compile.

    Every method decides for the graph XLA fuses (:attr:`hlo_go.xla.Program.graph` of
    the file, or of a corpus graph's unoptimized module) on ``host-cpu-1``; the decisions
    are lowered, checked and timed by :func:`hlo_go.xla.measure_many`. Module-level so
    that :func:`evaluate` runs it in a pinned child process
    (:func:`hlo_go.xla.timing.in_pinned_process`, hence the ``"cpu"`` clock).

    Args:
      source: an HLO file or a corpus graph name.
      methods: baseline names.
      policy: a GO policy checkpoint, measured as ``policy_method``.
      policy_method: the policy's method name.
      samples: zero-shot samples of the policy.
      moves: zero-shot moves of the policy's move head (:func:`hlo_go.rl.infer`).
      finetune_steps: fine-tune the policy this many steps instead (0: zero-shot).
      work_dir: the fine-tuning run directory (default: a temporary one).
      repeats: timed rounds.
      seed: seed of the methods, the policy and the random inputs.
      clock: ``"cpu"`` or ``"wall"``.
      stderr: a file to send this process's standard error to (XLA's crash messages).
      limit_self: arm this process's deadline in proportion to XLA's default compile
        (:func:`hlo_go.xla.timing.deadline_after`; for a measuring child).

    Returns:
      ``({method: (correct, XLA default time / method time, reason)}, nodes of XLA's
      graph)``.

    Raises:
      Exception: the program could not be built (unreadable file, XLA refused it).
    """
    import os

    from hlo_go import methods as named
    from hlo_go import xla
    from hlo_go.sim import get_cluster

    if stderr is not None:
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    prog = xla.program(_measure_source(source), seed=seed)
    graph = prog.graph
    variants = named.variants(graph, {m: (m, m) for m in methods}, seed=seed)
    if limit_self:
        from hlo_go.xla.timing import deadline_after

        start = time.process_time()
        reference = prog.default()
        compile_s = time.process_time() - start
        runs = (len(variants) + 2) * (repeats + 4)
        deadline_after(lambda: reference(*prog.args), runs=runs, compile_s=compile_s)
    out: dict[str, tuple[bool | None, float | None, str]] = {}
    if policy is not None:
        try:
            decisions, _ = policy_decisions(
                policy, policy_method, graph, get_cluster(named.HOST_CLUSTER), samples=samples,
                finetune_steps=finetune_steps, seed=seed, out_dir=work_dir, moves=moves,
            )  # fmt: skip
            variants[policy_method] = xla.Variant(fusion=decisions, schedule=decisions)
        except Exception as error:
            out[policy_method] = (None, None, f"no decisions for XLA's graph: {one_line(error)}")
    measured = xla.measure_many(
        prog, variants, repeats=repeats, seed=seed, clock=clock, skip_factor=10.0
    )  # type: ignore[arg-type]
    if limit_self:
        from hlo_go.xla.timing import arm_deadline

        arm_deadline(None)
    for method, got in measured.items():
        note = got.message.strip().splitlines()[0] if got.message.strip() else ""
        speedup = None if got.speedup is None else float(got.speedup)
        out[method] = (bool(got.correct), speedup, note[:MAX_REASON])
    return out, graph.num_nodes


def _crash_reason(log: Path) -> str:
    """XLA's fatal message (``Check failed: ...``) from a dead child's standard error."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no message"
    fatal = [line for line in lines if re.match(r"[FE]\d{4} ", line) or "Check failed" in line]
    text = (fatal or [line for line in lines if line.strip()] or ["no message"])[-1]
    text = re.sub(r"^[FE]\d{4} [\d:.]+\s+\d+ [^\]]*\] ", "", text.strip())
    return text[:MAX_REASON]


def _simulate(graph: OpGraph, cluster: Cluster, decisions: Decisions) -> SimResult:
    from hlo_go.sim import simulate

    return simulate(graph, cluster, decisions)


def _measure_source(source: str) -> Any:
    """What :func:`hlo_go.xla.program` compiles: the file, or a corpus graph's
    unoptimized module (so XLA runs its whole pipeline)."""
    if Path(source).is_file():
        return Path(source)
    from hlo_go import corpus

    return corpus.load(source, "unoptimized")


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _compared(results: list[MethodResult]) -> list[MethodResult]:
    """Fills in speedups over the reference and the best baseline, and the best flag."""
    from hlo_go.rl.compare import best

    done = [m for m in results if m.status == "ok"]
    reference = next(m for m in done if m.kind == "reference")
    baselines = [m for m in done if m.kind != "policy"]
    top = best(baselines)
    winner = best(done)
    return [
        m._replace(
            speedup=_ratio(reference.step_time, m.step_time),
            vs_best_baseline=_ratio(top.step_time, m.step_time),
            best=m is winner,
        )
        if m.status == "ok"
        else m
        for m in results
    ]


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int) -> Iterator[tuple[Callable[[str], None], Any]]:
    """A rich progress bar on stderr: ``(describe(text), advance())``."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.completed}/{task.total}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        disable=not enabled,
        transient=True,
    ) as progress:
        task = progress.add_task("eval", total=total)
        yield (
            lambda text: progress.update(task, description=text[:80]),
            lambda: progress.advance(task),
        )


def evaluate(
    sources: Sequence[str | Path],
    *,
    cluster: Cluster | str,
    baselines: Sequence[str] | None = None,
    policy: Checkpoint | str | Path | None = None,
    samples: int = 0,
    moves: int | None = None,
    finetune_steps: int = 0,
    measure: bool = False,
    repeats: int = 5,
    stage: str = "prefusion",
    seed: int = 0,
    work_dir: str | Path | None = None,
    cpu: int | None = None,
    progress: bool = True,
    timeout: float | None = None,
) -> list[EvalRow]:
    """Evaluates baselines and the GO policy on HLO inputs, one row per input.

    Args:
      sources: HLO files (``.hlo``, ``.hlo.gz``, ``.txt``), directories (their HLO
        files, sorted) and corpus graph names.
      cluster: a :class:`~hlo_go.sim.Cluster`, a preset name or a cluster file.
      baselines: baseline names (:func:`hlo_go.baselines.get`); None: the heuristics
        (:func:`hlo_go.rl.compare.heuristic_names`). :data:`REFERENCE` always runs.
      policy: a loaded :class:`~hlo_go.rl.Checkpoint`, a policy name or checkpoint path
        (:func:`hlo_go.pretrained.load_policy`), or None for no policy.
      samples: zero-shot: also draw this many samples and keep the best.
      moves: zero-shot: also try this many moves of the policy's move head (None: the
        policy's default, :func:`hlo_go.rl.policy_moves`).
      finetune_steps: 1..50 to fine-tune the policy on each input instead of zero-shot.
      measure: also lower each method's decisions into XLA:CPU and measure them
        (:func:`measure_input`, in a spawned child process: a script calling this must
        guard its top level with ``if __name__ == "__main__":``).
      repeats: timed rounds of a measurement.
      stage: the corpus stage of corpus names (measurements use ``"unoptimized"``).
      seed: seed of the methods, the policy's samples and random inputs.
      work_dir: where fine-tuning runs are written (default: a temporary directory).
      cpu: the core measurements run on, in a child process pinned to it, timed by CPU
        time (default: the highest-numbered core this process may use).
      progress: show a progress bar on stderr.
      timeout: seconds each input's measuring process may take (None: in proportion
        to the run time of XLA's default compile,
        :func:`hlo_go.xla.timing.deadline_after`); past it, the input is not measured
        and its cells say so.

    Returns:
      One :class:`EvalRow` per input (directories expanded), in order.

    Raises:
      KeyError: an unknown cluster preset or baseline name.
      FileNotFoundError: no such policy.
      ValueError: ``finetune_steps`` outside 0..50, fine-tuning without a policy, or
        moves for a policy without a move head.
    """
    from hlo_go.rl.trainer import MAX_FINETUNE_STEPS, policy_cuts, policy_moves
    from hlo_go.sources import load_cluster

    target = load_cluster(cluster) if isinstance(cluster, str) else cluster
    methods = method_names(baselines)
    if isinstance(policy, str | Path):
        from hlo_go.pretrained import load_policy

        policy = load_policy(policy)
    if not 0 <= finetune_steps <= MAX_FINETUNE_STEPS:
        raise ValueError(f"finetune_steps must be in 0..{MAX_FINETUNE_STEPS}, got {finetune_steps}")
    if finetune_steps and policy is None:
        raise ValueError("fine-tuning needs a policy")
    if policy is None or finetune_steps:
        moves, cuts = 0, False
    else:
        moves = policy_moves(policy, moves, num_devices=target.num_devices)
        cuts = policy_cuts(policy)
    inputs = expand_sources(sources)
    rows: list[EvalRow] = []
    with (
        tempfile.TemporaryDirectory(prefix="hlo-go-eval-") as tmp,
        _progress_bar(progress, len(inputs)) as (say, advance),
    ):
        evaluator = _Evaluator(
            target,
            methods,
            policy,
            samples=samples,
            finetune_steps=finetune_steps,
            measure=measure,
            repeats=repeats,
            stage=stage,
            seed=seed,
            work_dir=Path(work_dir) if work_dir else Path(tmp),
            cpu=cpu,
            say=say,
            timeout=timeout,
            moves=moves,
            cuts=cuts,
        )
        for index, source in enumerate(inputs):
            rows.append(evaluator.row(source, index))
            advance()
    return rows


__all__ = [
    "HLO_SUFFIXES",
    "REFERENCE",
    "EvalRow",
    "MethodResult",
    "evaluate",
    "expand_sources",
    "load_input",
    "measure_input",
    "method_names",
    "one_line",
    "policy_decisions",
    "policy_label",
]
