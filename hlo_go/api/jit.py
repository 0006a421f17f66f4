"""``@hlo_go.jit``: ``jax.jit`` with measured fusion and scheduling, never wrong, never slower.

The first call of each input signature (pytree structure, shapes, dtypes, static
values) does, in order:

1. lower the function with ``jax.jit`` (errors in the function surface exactly as
   ``jax.jit``'s) and run ``jax.jit``'s executable once: the reference outputs, on the
   call's inputs, or on fresh finite ones when those hold NaN or infinity
   (:mod:`hlo_go.api.inputs`);
2. a function faster than :attr:`Options.min_call_s` a call stays with ``jax.jit``;
3. look the lowered module's fingerprint up in the cache (:mod:`hlo_go.api.cache`); a
   "kept" verdict from another process is re-checked by a short interleaved timing
   (:func:`hlo_go.api.measure.recheck`) and dropped when it fails;
4. otherwise decide the candidates of :attr:`Options.candidates` in order
   (:func:`hlo_go.api.decide.decide_candidate`: the heuristics, then the policy), fuse
   each and compile the distinct ones, within a compile budget
   (:attr:`Options.compile_budget_ratio`; a cold policy's one-time compile counts, and
   a function too slow to time every candidate compiles one more than it can race);
5. check each one's outputs against ``jax.jit``'s (dtype tolerances of
   :func:`hlo_go.xla.outputs_match`); a float32 output outside them is judged against
   the module evaluated in float64 (:func:`hlo_go.xla.arbiter.as_accurate_as_reference`:
   it passes when no less accurate than ``jax.jit``'s, as moved kernel boundaries round
   an ill-conditioned program differently); any other mismatch is out;
6. time the correct ones against ``jax.jit`` in interleaved rounds of short blocks of
   calls (:func:`hlo_go.api.measure.race`) and keep the fastest only when it wins by the
   rule of :mod:`hlo_go.api.verdict`, within the measurement budget
   (:attr:`Options.measure_budget_s`);
7. store the verdict (and the kept decisions) in the cache.

Any failure on the way, a mismatch or a loss keeps ``jax.jit``'s executable for that
signature, and :meth:`OptimizedFunction.explain` says why. Later calls with the
signature go straight to the kept executable: ``jax.jit`` itself, or the
``jax.stages.Compiled`` of ours (both dispatch in C++); the decorator adds one
signature lookup.

Under another transformation (``jax.grad``, ``jax.vmap``, an outer ``jax.jit``) the
function is traced, not called: there is no concrete input to check or time on, so
``jax.jit``'s own tracing is used (the outer transformation's compile decides fusion).
:meth:`OptimizedFunction.explain` says so once.

Progress goes to ``logging.getLogger("hlo_go.api")`` (INFO), and to one line of stderr
when it is a terminal.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hlo_go.api.cache import DecisionCache, fingerprint, shared_cache
from hlo_go.api.decide import (
    Candidate,
    candidate_names,
    decide_candidate,
    decides_order,
    method_decisions,
    policy_compile_estimate,
    warm_up,
)
from hlo_go.api.inputs import call_platform, finite_like, has_nonfinite
from hlo_go.api.measure import (
    WARMUP_BELOW_S,
    calls_per_sample,
    choose_clock,
    race,
    recheck,
)
from hlo_go.api.options import POLICY, Options
from hlo_go.api.record import HLO_GO, JAX_JIT, Record
from hlo_go.api.signature import Signature, resolve_static
from hlo_go.api.verdict import KEEP, Rule, describe
from hlo_go.decisions import Decisions
from hlo_go.xla import Program, outputs_match
from hlo_go.xla.arbiter import as_accurate_as_reference, float64_once, lowered_source
from hlo_go.xla.lowering import lowering_unsupported
from hlo_go.xla.timing import CLOCKS

logger = logging.getLogger(__name__)

# Interleaved rounds before the keep rule first looks (hlo_go.api.verdict.Rule.min_pairs).
MIN_ROUNDS = 4
# Seconds spent timing jax.jit's calls to size the timed blocks (one call at least).
ONE_CALL_TIMING_S = 0.5
# The reason of every signature first seen under another transformation.
TRACED = "called under a jax transformation (traced): jax.jit's tracing is used"

LOGGED_SIGNATURE_CHARS = 400
"""The log line of a decision shows this much of a long signature (a model's parameter
pytree can run to tens of thousands of characters); :meth:`OptimizedFunction.explain`
shows it whole."""


class _Entry(NamedTuple):
    call: Callable[..., Any]
    record: Record


class _Expected(NamedTuple):
    """What a candidate's outputs are checked against.

    Attributes:
      outputs: ``jax.jit``'s outputs on the check's inputs.
      exact: the lowered module evaluated in float64 on the same inputs
        (:func:`hlo_go.xla.arbiter.float64_once`: computed on first need), for outputs
        that fail the elementwise tolerance (:func:`hlo_go.xla.arbiter.as_accurate_as_reference`).
    """

    outputs: Any
    exact: Callable[[], list[np.ndarray]]


class _Progress:
    """One line on stderr, rewritten in place, when stderr is a terminal; log lines."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.shown = False
        try:
            self.tty = sys.stderr.isatty()
        except (AttributeError, ValueError):
            self.tty = False

    def __call__(self, message: str) -> None:
        logger.info("hlo_go.jit(%s): %s", self.name, message)
        if self.tty:
            line = f"hlo_go.jit({self.name}): {message}"[:120]
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def _leaf_text(x: Any) -> str:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{jnp.dtype(x.dtype).name}{list(x.shape)}"
    return repr(x)


def describe_call(args: tuple[Any, ...], kwargs: dict[str, Any], signature: Signature) -> str:
    """A call's signature as text, whole: dynamic arguments as dtype[shape], static ones
    by value (marked ``static``)."""
    static_at = signature.static_positions(len(args))
    parts = []
    for i, a in enumerate(args):
        text = str(jax.tree.map(_leaf_text, a)).replace("'", "")
        parts.append(f"static {a!r}" if i in static_at else text)
    for k, v in kwargs.items():
        if k in signature.argnames:
            parts.append(f"{k}=static {v!r}")
        else:
            parts.append(f"{k}={jax.tree.map(_leaf_text, v)}".replace("'", ""))
    return "(" + ", ".join(parts) + ")"


def _has_tracer(tree: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _copy_arrays(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.array(x, copy=True) if isinstance(x, jax.Array) else x, tree)


def _short(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).strip()[:500]}"


class OptimizedFunction:
    """A function compiled by :func:`hlo_go.jit`: call it like the original.

    Attributes:
      fun: the original function.
      options: the :class:`~hlo_go.api.Options`.
      jitted: the ``jax.jit`` of ``fun`` (same static and donated arguments): the
        reference every decision is checked and timed against, and the fallback.
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Iterable[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Iterable[str] | None = None,
        options: Options | None = None,
    ) -> None:
        self.fun = fun
        self.options = options or Options()
        argnums, argnames = resolve_static(fun, static_argnums, static_argnames)
        self.jitted = jax.jit(
            fun,
            static_argnums=argnums or None,
            static_argnames=argnames or None,
            donate_argnums=donate_argnums,
            donate_argnames=donate_argnames,
        )
        self._signature = Signature(argnums, argnames)
        self._entries: dict[Hashable, _Entry] = {}
        self._cache: DecisionCache = shared_cache(self.options.cache_dir)
        functools.update_wrapper(self, fun)

    @property
    def _name(self) -> str:
        return getattr(self.fun, "__name__", type(self.fun).__name__)

    # -- calling ---------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            key = self._signature.key(args, kwargs)
        except TypeError:  # an unhashable static argument: jax.jit's own error
            return self.jitted(*args, **kwargs)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._first_call(key, args, kwargs)
        return entry.call(*args, **kwargs)

    def _first_call(self, key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Entry:
        signature = describe_call(args, kwargs, self._signature)
        if _has_tracer((args, kwargs)):  # inside another transformation: jax.jit composes
            return self._keep(key, _Entry(self.jitted, Record(signature, JAX_JIT, TRACED,
                                                              source="traced")))  # fmt: skip
        began = time.perf_counter()
        try:
            lowered = self.jitted.lower(*args, **kwargs)
        except Exception:
            # The function itself fails to trace: let jax.jit raise exactly its error.
            return _Entry(self.jitted, Record(signature, JAX_JIT, "lowering failed"))
        lower_s = time.perf_counter() - began
        progress = _Progress(self._name)
        try:
            entry = self._optimize(lowered, lower_s, signature, args, kwargs, progress)
        except Exception as error:  # never wrong: every failure falls back to jax.jit
            entry = _Entry(self.jitted, Record(signature, JAX_JIT, f"fell back: {_short(error)}"))
        finally:
            progress.done()
        logger.log(
            logging.WARNING if self.options.verbose else logging.INFO,
            "hlo_go.jit(%s) %s",
            self._name,
            entry.record.describe(signature_chars=LOGGED_SIGNATURE_CHARS),
        )
        return self._keep(key, entry)

    def _keep(self, key: Hashable, entry: _Entry) -> _Entry:
        self._entries[key] = entry
        return entry

    # -- deciding --------------------------------------------------------------------------

    def _program(self, lowered: Any, platform: str) -> Program:
        name = lowered.compiler_ir("hlo").as_hlo_module().name
        return Program(
            name,
            lambda options: lowered.compile(compiler_options=options or None),
            lambda compiled: compiled,
            (),
            source_kind="function",
            platform=platform,
        )

    def _optimize(
        self,
        lowered: Any,
        lower_s: float,
        signature: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        progress: _Progress,
    ) -> _Entry:
        options = self.options
        platform = call_platform((args, kwargs))
        key = fingerprint(lowered, options.key(), platform=platform)
        checked_on = "call inputs"
        if has_nonfinite((args, kwargs)):
            args, kwargs = finite_like((args, kwargs), seed=options.seed)
            checked_on = "redrawn finite inputs (the call's held NaN or infinity)"
        inputs = self._inputs(lowered, args, kwargs)
        progress("compiling jax.jit's executable (the reference)")
        began = time.perf_counter()
        # jax.jit's executable, held here: the reference every candidate is checked and
        # timed against, and the fallback, compiled once.
        reference = lowered.compile()
        a, k = self._signature.dynamic(*inputs())
        called = time.perf_counter()
        want = _Expected(
            jax.block_until_ready(reference(*a, **k)),
            float64_once(
                lambda: lowered_source(lowered, jax.tree.leaves(self._signature.dynamic(*inputs())))
            ),
        )
        first_run_s = time.perf_counter() - called
        jit_first_s = lower_s + time.perf_counter() - began
        fallback = self._call_compiled(reference)
        base = Record(signature, JAX_JIT, "", fingerprint=key, checked_on=checked_on)
        one_call = self._one_call_s(reference, inputs, first_run_s)
        if options.measure and one_call < options.min_call_s:
            record = base._replace(
                jit_time_s=one_call,
                reason=f"too fast to time reliably: jax.jit takes {one_call * 1e6:.1f} us a "
                f"call, below Options.min_call_s ({options.min_call_s * 1e6:.0f} us)",
            )
            self._cache.store(key, record, None)
            return _Entry(fallback, record)
        unsupported = lowering_unsupported(platform)
        if unsupported:
            return _Entry(fallback, base._replace(jit_time_s=one_call, reason=unsupported))
        cached = self._cache.load(key)
        dropped = ""
        if cached is not None:
            entry, dropped = self._from_cache(key, cached, lowered, signature, inputs, want,
                                              one_call, reference, platform, progress)  # fmt: skip
            if entry is not None:
                return entry
        record, decisions, call = self._decide(
            lowered, base, inputs, want, jit_first_s, one_call, reference, platform, progress
        )
        if dropped:
            record = record._replace(reason=f"{record.reason}; {dropped}")
        if record.correct is not None:  # failures to decide or lower are decided again
            self._cache.store(key, record, decisions if record.kept == HLO_GO else None)
        return _Entry(call if record.kept == HLO_GO else fallback, record)

    def _one_call_s(self, reference: Any, inputs: Callable[[], Any], first_run_s: float) -> float:
        """Seconds one call of ``jax.jit``'s executable takes in a timed block (its inputs
        made as the block makes them: copies of donated arrays included): the least of up
        to three calls, timed until they took :data:`ONE_CALL_TIMING_S`; the first call's
        time when that alone took as long (its one-time costs are small beside it)."""
        if first_run_s >= ONE_CALL_TIMING_S:
            return first_run_s
        one = self._sampler(reference, inputs, 1, dynamic=True)
        best, spent = math.inf, 0.0
        for _ in range(3):
            began = time.perf_counter()
            one()
            seconds = time.perf_counter() - began
            best, spent = min(best, seconds), spent + seconds
            if spent >= ONE_CALL_TIMING_S:
                break
        return best

    def _lower(self, program: Program, decisions: Decisions, schedule: bool) -> tuple[Any, Any]:
        """``(fused module, executable)`` of decisions (a cached verdict's)."""
        module = self._fused(program, decisions)
        executable = program.lower(fusion=module, schedule=decisions if schedule else None)
        return module, executable

    def _fused(self, program: Program, decisions: Decisions) -> Any:
        """The pre-fusion module fused by ``decisions`` (by ``xla-cpu-like`` when fusion is
        not among ``Options.tasks``)."""
        if "fusion" not in self.options.tasks:
            decisions = method_decisions(program, "xla-cpu-like", self.options)
        module, _ = program.fused_module(decisions)
        return module

    def _check(
        self, executable: Any, inputs: Callable[[], Any], want: _Expected, clock: str = "wall"
    ) -> tuple[bool, str, float]:
        """``(outputs match, mismatch, seconds of the call on clock)``: one call of ours,
        checked against ``jax.jit``'s outputs (:class:`_Expected`)."""
        a, k = self._signature.dynamic(*inputs())
        now = CLOCKS[clock]
        began = now()
        got = jax.block_until_ready(executable.compiled(*a, **k))
        seconds = now() - began
        ok, mismatch = outputs_match(got, want.outputs)
        if not ok:
            ok, mismatch = as_accurate_as_reference(
                jax.tree.leaves(got), jax.tree.leaves(want.outputs), want.exact, message=mismatch
            )
        return ok, mismatch, seconds

    def _from_cache(
        self,
        key: str,
        cached: tuple[Record, Decisions | None],
        lowered: Any,
        signature: str,
        inputs: Callable[[], Any],
        want: _Expected,
        one_call: float,
        reference: Any,
        platform: str,
        progress: _Progress,
    ) -> tuple[_Entry | None, str]:
        """A cached verdict, re-checked: ``(entry, "")``, or ``(None, why it was dropped)``."""
        record, decisions = cached
        record = record._replace(signature=signature, source="cache", fingerprint=key)
        if record.kept == JAX_JIT:
            return _Entry(self._call_compiled(reference), record), ""
        if decisions is None:
            return None, "cached verdict had no decisions: decided again"
        progress(f"re-checking the cached verdict ({record.candidate})")
        program = self._program(lowered, platform)
        schedule = record.candidate == POLICY and decides_order(self.options)
        _, executable = self._lower(program, decisions, schedule)
        correct, mismatch, _ = self._check(executable, inputs, want)
        if not correct:
            self._cache.drop(key)
            return None, f"cached verdict dropped: outputs differ from jax.jit ({mismatch})"
        call = self._call_compiled(executable.compiled)
        if not self.options.measure or self._cache.remembered(key):
            return _Entry(call, record._replace(
                kept=HLO_GO, reason="decisions and verdict from the cache; outputs checked again"
            )), ""  # fmt: skip
        calls = calls_per_sample(one_call)
        passed, estimate, rounds = recheck(
            self._sampler(reference, inputs, calls, dynamic=True),
            self._sampler(executable.compiled, inputs, calls, dynamic=True),
            budget_s=self.options.confirm_budget_s,
            clock=choose_clock(self.options.clock, platform),
            calls=calls,
        )
        seen = f"{describe(estimate)} over {rounds} rounds"
        if not passed:
            self._cache.drop(key)
            return (
                None,
                f"a cached verdict for {record.candidate} was dropped: re-check measured {seen}",
            )
        self._cache.store(key, record, decisions)  # remembered: not re-checked again here
        return _Entry(call, record._replace(
            kept=HLO_GO, reason=f"cached verdict re-confirmed ({seen}); outputs checked again"
        )), ""  # fmt: skip

    def _decide(
        self,
        lowered: Any,
        base: Record,
        inputs: Callable[[], Any],
        want: _Expected,
        jit_first_s: float,
        one_call: float,
        reference: Any,
        platform: str,
        progress: _Progress,
    ) -> tuple[Record, Decisions | None, Callable[..., Any]]:
        options = self.options
        program = self._program(lowered, platform)
        progress("capturing the pre-fusion graph")
        nodes = program.graph.num_nodes
        names = candidate_names(options)
        progress(f"deciding {len(names)} candidates for {nodes} nodes")
        warmup_s = warm_up(options)
        outcome: dict[str, str] = {}
        decide_s = policy_compile_s = compile_s = 0.0
        clock = choose_clock(options.clock, platform)
        measure_base_s = max(options.measure_budget_s, options.measure_budget_ratio * jit_first_s)
        compile_budget = options.compile_budget_ratio * (jit_first_s + measure_base_s)
        calls = calls_per_sample(one_call)
        block_s = calls * one_call
        # A function too slow for MIN_ROUNDS rounds of jax.jit and every candidate in the
        # budget races only as many as fit (the fastest checked calls, at least one), and
        # compiles one more to choose from.
        fit = max(1, int(measure_base_s / (MIN_ROUNDS * block_s)) - 1)
        seen: dict[str, str] = {}
        correct: list[tuple[Candidate, Any, float]] = []  # (candidate, executable, check s)
        any_differ = False
        longest_s = 0.0  # the longest a candidate took to decide and compile so far
        for name in names:
            spent = decide_s + policy_compile_s + compile_s
            if correct and not options.measure:
                break  # the first correct one is kept unmeasured
            expected = longest_s  # no candidate is started that would overrun the budget
            if correct and name == POLICY:
                expected += policy_compile_estimate(program, options)
            if correct and spent + expected > compile_budget:
                outcome[name] = "not decided (compile budget spent)"
                continue
            if correct and len(correct) > fit:
                outcome[name] = f"not decided (a call too slow to time more than {fit})"
                continue
            started = time.perf_counter()
            c = decide_candidate(program, name, options)
            if not isinstance(c, Candidate):
                outcome[c[0]] = f"failed to decide ({c[1]})"
                continue
            decide_s += c.decided.seconds
            policy_compile_s += c.decided.policy_compile_s
            progress(f"lowering candidate {c.name}")
            began = time.perf_counter()
            try:
                module, executable = self._lower_distinct(program, c, seen)
            except Exception as error:
                outcome[c.name] = f"failed to lower ({_short(error)[:200]})"
                continue
            finally:
                compile_s += time.perf_counter() - began
                longest_s = max(
                    longest_s, time.perf_counter() - started - c.decided.policy_compile_s
                )
            if executable is None:
                outcome[c.name] = f"same fusion as {module}"
                continue
            ok, mismatch, check_s = self._check(executable, inputs, want, clock)
            if not ok:
                outcome[c.name] = f"outputs differ from jax.jit ({mismatch})"
                any_differ = True
                continue
            judged = " as accurately as jax.jit's against float64" if mismatch else ""
            outcome[c.name] = f"{executable.num_fusions} fusions, outputs match{judged}"
            correct.append((c, executable, check_s))
        for name in names:  # left when measure=False keeps the first correct one
            outcome.setdefault(name, "not decided (measure=False)")
        base = base._replace(
            nodes=nodes, decide_s=decide_s, policy_compile_s=policy_compile_s,
            warmup_s=warmup_s, method=", ".join(c.decided.method for c, _, _ in correct),
        )  # fmt: skip
        # correct: None when nothing was checked (failures), False when outputs differed
        base = base._replace(
            compile_s=compile_s, correct=True if correct else (False if any_differ else None)
        )
        summary = lambda: "; ".join(f"{n}: {o}" for n, o in outcome.items())  # noqa: E731
        if not correct:
            reason = "no candidate lowered with outputs matching jax.jit"
            if any("differ" in o for o in outcome.values()):
                reason = "outputs differ from jax.jit for every candidate lowered"
            reason = f"fell back: {reason} ({summary()})"
            return (
                base._replace(candidates=summary(), reason=reason),
                None,
                self._call_compiled(reference),
            )
        if not options.measure:
            c, executable, _ = correct[0]
            record = base._replace(
                kept=HLO_GO, candidate=c.name, method=c.decided.method,
                simulated_s=c.decided.simulated_s, fusions=executable.num_fusions,
                candidates=summary(), reason="outputs match; not measured (measure=False)",
            )  # fmt: skip
            return record, c.decided.decisions, self._call_compiled(executable.compiled)
        raced = sorted(correct, key=lambda item: item[2])[:fit]
        raced = [item for item in correct if any(item is r for r in raced)]  # in order
        for c, _, check_s in correct:
            if all(c is not r[0] for r in raced):
                outcome[c.name] += f", not timed (a slower checked call, {check_s:.3g} s)"
        # at least time for the first look: MIN_ROUNDS rounds of jax.jit and every candidate
        warmup = block_s < WARMUP_BELOW_S
        first_look_s = (MIN_ROUNDS + warmup) * (1 + len(raced)) * block_s * 1.25
        budget_s = max(measure_base_s, first_look_s)
        progress(f"timing {len(raced)} candidate(s) against jax.jit (up to {budget_s:.0f} s)")
        rule = Rule(
            options.min_gain, options.confidence, min_pairs=MIN_ROUNDS,
            max_pairs=max(MIN_ROUNDS, options.repeats),
        )  # fmt: skip
        verdict, _, ref, measure_s = race(
            self._sampler(reference, inputs, calls, dynamic=True),
            {c.name: self._sampler(e.compiled, inputs, calls, dynamic=True)
             for c, e, _ in raced},
            rule, budget_s=budget_s, clock=clock, calls=calls,
            warmup=warmup, block_s=block_s,
        )  # fmt: skip
        for name, e in verdict.estimates.items():
            outcome[name] += f", {describe(e)}"
        best = verdict.best or raced[0][0].name
        c, executable = next((c, e) for c, e, _ in raced if c.name == best)
        estimate = verdict.estimates[best]
        record = base._replace(
            candidate=best, method=c.decided.method, simulated_s=c.decided.simulated_s,
            fusions=executable.num_fusions, candidates=summary(),
            jit_time_s=statistics.median(ref),
            hlo_go_time_s=statistics.median(ref) / estimate.speedup,
            speedup_lower=estimate.lower, rounds=len(ref), clock=clock, measure_s=measure_s,
        )  # fmt: skip
        if verdict.state == KEEP:
            record = record._replace(kept=HLO_GO, reason=f"outputs match and {verdict.reason}")
            return record, c.decided.decisions, self._call_compiled(executable.compiled)
        fallback = self._call_compiled(reference)
        return record._replace(reason=f"jax.jit kept: {verdict.reason}"), None, fallback

    def _lower_distinct(
        self, program: Program, candidate: Candidate, seen: dict[str, str]
    ) -> tuple[Any, Any]:
        """``(module, executable)`` of a candidate, or ``(name, None)`` when an earlier
        candidate ``name`` fused the module identically (and ordered it alike)."""
        decisions = candidate.decided.decisions
        module = self._fused(program, decisions)
        digest = hashlib.sha256(module.to_text().encode())
        if candidate.schedule:
            digest.update(decisions.schedule_priority.tobytes())
        if digest.hexdigest() in seen:
            return seen[digest.hexdigest()], None
        seen[digest.hexdigest()] = candidate.name
        executable = program.lower(
            fusion=module, schedule=decisions if candidate.schedule else None
        )
        return module, executable

    def _inputs(
        self, lowered: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
        """Inputs for checking and timing calls: the given arrays, or fresh copies of
        them when any is donated (the caller's must survive until the real call)."""
        donated = any(info.donated for info in jax.tree.leaves(lowered.args_info))
        if not donated:
            return lambda: (args, kwargs)
        return lambda: (_copy_arrays(args), _copy_arrays(kwargs))

    def _sampler(
        self, fn: Callable[..., Any], inputs: Callable[[], Any], calls: int, *, dynamic: bool
    ) -> Callable[[], Any]:
        """One timed sample: ``calls`` calls of ``fn`` (static arguments dropped for a
        compiled executable), blocking on the last."""
        split = self._signature.dynamic

        def run() -> Any:
            out = None
            for _ in range(calls):
                a, k = inputs()
                if dynamic:
                    a, k = split(a, k)
                out = fn(*a, **k)
            return jax.block_until_ready(out)

        return run

    def _call_compiled(self, compiled: Any) -> Callable[..., Any]:
        if not self._signature.argnums and not self._signature.argnames:
            return compiled
        dynamic = self._signature.dynamic

        def call(*args: Any, **kwargs: Any) -> Any:
            a, k = dynamic(args, kwargs)
            return compiled(*a, **k)

        return call

    # -- inspecting ------------------------------------------------------------------------

    @property
    def records(self) -> list[Record]:
        """One :class:`~hlo_go.api.Record` per input signature seen, in order."""
        return [entry.record for entry in self._entries.values()]

    def explain(self) -> str:
        """What was decided, measured and kept for each input signature, and why.

        One block per signature as shown (calls whose keys differ only in what the text
        does not show, e.g. numpy and jax arrays of one shape, share the first one's);
        signatures first seen under another transformation are summarized in one line.
        """
        if not self._entries:
            return f"hlo_go.jit({self._name}): not called yet"
        shown: dict[str, Record] = {}
        traced = 0
        for record in self.records:
            if record.source == "traced":
                traced += 1
            else:
                shown.setdefault(record.signature, record)
        blocks = [record.describe() for record in shown.values()]
        if traced:
            blocks.append(
                f"{traced} signature(s) seen under another transformation (jax.grad, "
                "jax.vmap, an outer jax.jit): traced, not called, so jax.jit's own tracing "
                "is used and the outer compile decides fusion"
            )
        head = f"hlo_go.jit({self._name}), candidates {', '.join(self.options.candidates)}"
        if POLICY in self.options.candidates:
            head += f" (policy {self.options.policy!r})"
        return head + ":\n" + "\n".join(blocks)

    def executable_for(self, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        """What calls with these arguments' signature run (deciding first if needed):
        ``jax.jit``'s function, or ours (a ``jax.stages.Compiled``, wrapped to drop
        static arguments when there are any)."""
        key = self._signature.key(args, kwargs)
        entry = self._entries.get(key) or self._first_call(key, args, kwargs)
        return entry.call

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.jit(fun).lower(...)``: the unoptimized lowering, as with ``jax.jit``."""
        return self.jitted.lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.jit(fun).trace(...)``: the traced function, as with ``jax.jit``."""
        return self.jitted.trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.jit(fun).eval_shape(...)``: output shapes and dtypes, nothing compiled."""
        return self.jitted.eval_shape(*args, **kwargs)

    def clear_cache(self) -> None:
        """Forgets this process's decisions (the disk cache stays)."""
        self._entries.clear()

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # Decorating a method: bind the instance as the first argument, as jax.jit does.
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<hlo_go.jit of {self._name}>"


def jit(
    fun: Callable[..., Any] | None = None,
    *,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Iterable[str] | None = None,
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: str | Iterable[str] | None = None,
    options: Options | None = None,
) -> Any:
    """``jax.jit`` with fusion and scheduling decided by a learned policy, checked and
    measured against ``jax.jit`` before it is used.

    Usable bare (``@hlo_go.jit``) or with arguments
    (``@hlo_go.jit(static_argnums=1, options=hlo_go.Options(policy="xla-cpu-like"))``).

    Args:
      fun: the function (omitted when used with arguments).
      static_argnums: as ``jax.jit``.
      static_argnames: as ``jax.jit``.
      donate_argnums: as ``jax.jit``; checking and timing run on copies of donated
        arrays, so the caller's are consumed only by the real call.
      donate_argnames: as ``jax.jit``.
      options: how to decide, check, measure and cache (:class:`~hlo_go.api.Options`).

    Returns:
      An :class:`OptimizedFunction` (or a decorator making one).
    """
    make = functools.partial(
        OptimizedFunction,
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        donate_argnums=donate_argnums,
        donate_argnames=donate_argnames,
        options=options,
    )
    return make if fun is None else make(fun)
