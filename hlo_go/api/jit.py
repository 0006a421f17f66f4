"""``@hlo_go.jit``: ``jax.jit`` with learned fusion and scheduling, never wrong, never slower.

The first call of each input signature (pytree structure, shapes, dtypes, static
values) does, in order:

1. lower the function with ``jax.jit`` (errors in the function surface exactly as
   ``jax.jit``'s);
2. look the lowered module's fingerprint up in the disk cache (:mod:`hlo_go.api.cache`);
3. otherwise decide fusion and schedule for the module XLA would fuse
   (:func:`hlo_go.api.decide.decide`: a GO policy, a search or a baseline);
4. lower the decisions into XLA's own compile (:meth:`hlo_go.xla.Program.lower`);
5. run ours and ``jax.jit``'s executable on the same inputs and compare the outputs
   (dtype tolerances of :func:`hlo_go.xla.outputs_match`);
6. time both interleaved (medians) and keep ours only if it is faster by
   ``Options.min_gain``;
7. store the verdict (and decisions) in the cache.

Any failure on the way, a mismatch or a loss keeps ``jax.jit``'s executable for that
signature, and :meth:`OptimizedFunction.explain` says why. Later calls with the
signature go straight to the kept executable: ``jax.jit`` itself, or the
``jax.stages.Compiled`` of ours (both dispatch in C++); the decorator adds one
signature lookup.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from hlo_go import methods
from hlo_go.api.cache import DecisionCache, fingerprint
from hlo_go.api.decide import decide, decides_order
from hlo_go.api.options import Options
from hlo_go.api.record import HLO_GO, JAX_JIT, Record
from hlo_go.api.signature import Signature, resolve_static
from hlo_go.decisions import Decisions
from hlo_go.xla import Program, outputs_match
from hlo_go.xla.timing import Timing, time_interleaved

logger = logging.getLogger(__name__)

# Measuring: a timed sample of a short function is several calls, about this long...
SAMPLE_S = 0.01
# ...and at most this many calls.
MAX_CALLS_PER_SAMPLE = 200


class _Entry(NamedTuple):
    call: Callable[..., Any]
    record: Record


def _describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    def leaf(x: Any) -> str:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return f"{jnp.dtype(x.dtype).name}{list(x.shape)}"
        return repr(x)

    parts = [str(jax.tree.map(leaf, a)) for a in args]
    parts += [f"{k}={jax.tree.map(leaf, v)}" for k, v in kwargs.items()]
    text = ("(" + ", ".join(parts) + ")").replace("'", "")
    return text if len(text) <= 300 else text[:297] + "..."


def _has_tracer(tree: Any) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _copy_arrays(tree: Any) -> Any:
    return jax.tree.map(lambda x: jnp.array(x, copy=True) if isinstance(x, jax.Array) else x, tree)


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
        self._cache = (
            DecisionCache(self.options.cache_dir) if self.options.cache_dir is not None else None
        )
        functools.update_wrapper(self, fun)

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
        signature = _describe(*self._signature.dynamic(args, kwargs))
        if _has_tracer((args, kwargs)):  # inside another transformation: jax.jit composes
            record = Record(signature, JAX_JIT, "called under a jax transformation (traced)")
            return self._keep(key, _Entry(self.jitted, record))
        try:
            lowered = self.jitted.lower(*args, **kwargs)
        except Exception:
            # The function itself fails to trace: let jax.jit raise exactly its error.
            return _Entry(self.jitted, Record(signature, JAX_JIT, "lowering failed"))
        try:
            entry = self._optimize(lowered, signature, args, kwargs)
        except Exception as error:  # never wrong: every failure falls back to jax.jit
            reason = f"fell back: {type(error).__name__}: {str(error).strip()[:500]}"
            entry = _Entry(self.jitted, Record(signature, JAX_JIT, reason))
        logger.log(
            logging.WARNING if self.options.verbose else logging.INFO,
            "hlo_go.jit(%s) %s",
            getattr(self.fun, "__name__", self.fun),
            entry.record.describe(),
        )
        return self._keep(key, entry)

    def _keep(self, key: Hashable, entry: _Entry) -> _Entry:
        self._entries[key] = entry
        return entry

    # -- deciding --------------------------------------------------------------------------

    def _program(self, lowered: Any) -> Program:
        name = lowered.compiler_ir("hlo").as_hlo_module().name
        return Program(
            name,
            lambda options: lowered.compile(compiler_options=options or None),
            lambda compiled: compiled,
            (),
            source_kind="function",
        )

    def _optimize(
        self, lowered: Any, signature: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _Entry:
        options = self.options
        key = fingerprint(lowered, options.key())
        cached = self._cache.load(key) if self._cache is not None else None
        if cached is not None and cached[0].kept == JAX_JIT:
            record = cached[0]._replace(signature=signature, source="cache", fingerprint=key)
            return _Entry(self.jitted, record)
        program = self._program(lowered)
        if cached is not None and cached[1] is not None:
            decisions: Decisions = cached[1]
            base = cached[0]._replace(signature=signature, source="cache", fingerprint=key)
        else:
            decided = decide(program, options)
            decisions = decided.decisions
            base = Record(
                signature, JAX_JIT, "", fingerprint=key, method=decided.method,
                simulated_s=decided.simulated_s, nodes=program.graph.num_nodes,
                decide_s=decided.seconds,
            )  # fmt: skip
        began = time.perf_counter()
        fusion = decisions
        if "fusion" not in options.tasks:
            fusion = methods.decide(
                program.graph, "xla-cpu-like", cluster=options.cluster, seed=options.seed
            )
        executable = program.lower(
            fusion=fusion, schedule=decisions if decides_order(options) else None
        )
        compiled = executable.compiled
        base = base._replace(compile_s=time.perf_counter() - began, fusions=executable.num_fusions)
        call = self._call_compiled(compiled)
        inputs = self._inputs(lowered, args, kwargs)
        args_a, kwargs_a = inputs()
        want = self.jitted(*args_a, **kwargs_a)  # also compiles jax.jit's: the fallback
        args_b, kwargs_b = self._signature.dynamic(*inputs())
        got = compiled(*args_b, **kwargs_b)
        correct, mismatch = outputs_match(got, want)
        base = base._replace(correct=correct)
        if not correct:
            record = base._replace(kept=JAX_JIT, reason=f"outputs differ from jax.jit: {mismatch}")
        elif base.source == "cache":
            record = base._replace(
                kept=HLO_GO, reason="decisions and verdict from the cache; outputs checked again"
            )
        elif options.measure:
            record = self._measured(base, compiled, inputs)
        else:
            record = base._replace(
                kept=HLO_GO, reason="outputs match; not measured (measure=False)"
            )
        if self._cache is not None and record.source == "decided":
            kept_decisions = decisions if record.kept == HLO_GO else None
            self._cache.store(key, record, kept_decisions)
        return _Entry(call if record.kept == HLO_GO else self.jitted, record)

    def _inputs(
        self, lowered: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
        """Inputs for checking and timing calls: the caller's own arrays, or fresh copies
        of them when any is donated (the caller's must survive until the real call)."""
        donated = any(info.donated for info in jax.tree.leaves(lowered.args_info))
        if not donated:
            return lambda: (args, kwargs)
        return lambda: (_copy_arrays(args), _copy_arrays(kwargs))

    def _measured(self, base: Record, compiled: Any, inputs: Callable[[], Any]) -> Record:
        """Times ours and jax.jit's interleaved, twice; ours is kept only if both rounds
        find it faster by ``min_gain`` (a noisy host must not make a loss look like a win).

        Each round times ``options.repeats`` samples of each; for a short function a
        sample is several calls in a row (about 10 ms of work, at most 200 calls), so the
        clock's and the collector's overheads do not swamp the difference.
        """
        options = self.options
        a, k = inputs()  # jax.jit's executable is warm: it ran for the output check
        began = time.perf_counter()
        jax.block_until_ready(self.jitted(*a, **k))
        one_call = max(time.perf_counter() - began, 1e-7)
        calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_S / one_call)))
        samples = options.repeats

        def one_round() -> tuple[Timing, Timing]:
            ours = [self._signature.dynamic(*inputs()) for _ in range((samples + 2) * calls)]
            theirs = [inputs() for _ in range((samples + 2) * calls)]

            def run_ours() -> Any:
                out = None
                for _ in range(calls):
                    a, k = ours.pop()
                    out = compiled(*a, **k)
                return jax.block_until_ready(out)

            def run_jit() -> Any:
                out = None
                for _ in range(calls):
                    a, k = theirs.pop()
                    out = self.jitted(*a, **k)
                return jax.block_until_ready(out)

            t = time_interleaved({JAX_JIT: run_jit, HLO_GO: run_ours}, repeats=samples, warmup=2)
            return (
                Timing(JAX_JIT, tuple(x / calls for x in t[JAX_JIT].samples)),
                Timing(HLO_GO, tuple(x / calls for x in t[HLO_GO].samples)),
            )

        def wins(jit_t: Timing, ours_t: Timing) -> bool:
            return ours_t.median <= jit_t.median * (1 - options.min_gain)

        jit_t, ours_t = one_round()
        rounds = 1
        if wins(jit_t, ours_t):
            jit_2, ours_2 = one_round()
            rounds = 2
            confirmed = wins(jit_2, ours_2)
            jit_t = Timing(JAX_JIT, jit_t.samples + jit_2.samples)
            ours_t = Timing(HLO_GO, ours_t.samples + ours_2.samples)
        else:
            confirmed = False
        jit_s, ours_s = jit_t.median, ours_t.median
        record = base._replace(jit_time_s=jit_s, hlo_go_time_s=ours_s)
        timed = f"{rounds} round(s) of {samples} interleaved samples of {calls} call(s)"
        if confirmed:
            return record._replace(
                kept=HLO_GO,
                reason=f"outputs match and {jit_s / ours_s:.3f}x faster than jax.jit ({timed})",
            )
        return record._replace(
            kept=JAX_JIT,
            reason=f"outputs match but not faster than jax.jit by {options.min_gain:.0%} in "
            f"every round ({jit_s / ours_s:.3f}x over {timed})",
        )

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
        """What was decided, measured and kept for each input signature, and why."""
        name = getattr(self.fun, "__name__", repr(self.fun))
        if not self._entries:
            return f"hlo_go.jit({name}): not called yet"
        body = "\n".join(r.describe() for r in self.records)
        return f"hlo_go.jit({name}) with {self.options.policy!r}:\n{body}"

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

    def clear_cache(self) -> None:
        """Forgets this process's decisions (the disk cache stays)."""
        self._entries.clear()

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # Decorating a method: bind the instance as the first argument, as jax.jit does.
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"hlo_go.jit({getattr(self.fun, '__name__', self.fun)!r}, {self.options!r})"


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
