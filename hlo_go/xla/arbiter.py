"""The float64 arbiter: is a float32 result as accurate as XLA's one-device compile?

Two valid float32 evaluations of one program can disagree by far more than a fixed
tolerance when the program is ill-conditioned (a sum of large terms that cancel, a
normalization by a small variance): SPMD partial sums add in another order, MPMD
segments put kernel boundaries (and so roundings and fusion decisions) elsewhere. A
fixed ``rtol`` cannot tell such a result from a wrong one; an exact answer can.

:func:`float64_outputs` evaluates a module with every ``f32`` widened to ``f64`` (the
same program, evaluated near-exactly). :func:`as_accurate_as_reference` accepts a
float32 output that failed the normal tolerance only when its error against that
evaluation is at most :data:`WIDENING_FACTOR` times the reference's own error (the
one-device float32 compile of the same module), or within ``rtol`` of the output's
scale; any other output must pass the normal tolerance. A genuinely wrong result is far
from the float64 value while the reference is close, so it is still rejected.

Some outputs are discontinuous in the program's values: max-pooling's gradient
(``select-and-scatter``) routes each window's gradient to its maximum, and where two
window elements nearly tie, any rounding (one device's or another) may pick either, which
moves a whole gradient contribution. There one device's compile is no yardstick: it may
happen to pick the same element as float64. :func:`input_rounding_runs` measures what
float32 rounding alone does to such an output: the one-device compile run at inputs
moved by at most one unit in the last place (seeded draws). An element beyond the
tolerance then passes only where one of these runs is more than one rounding's error
from the float64 value too (rounding crosses a discontinuity there) and the element has
that run's value, to within two roundings (:data:`ROUNDING_MATCH_FACTOR`): the value the
other side of the discontinuity gives. Element by element, because a max-norm bar set by
one discontinuous element would excuse an error as large anywhere else; and by value,
not by distance from float64, because moving the inputs of an ill-conditioned but
continuous output (a cancelling sum) spreads its values widely without any of them
being what a rounding of the evaluation at these inputs gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlo_go.xla._jaxlib import compile_hlo_text, lowered_kept_arguments, run_executable

# Relative and absolute tolerances by element type of an output: the normal test
# (:func:`hlo_go.xla.outputs_match`) before the arbiter is asked.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "complex64": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}
WIDENING_FACTOR = 4.0
"""The float64 arbiter's slack: a float32 output that fails the normal tolerance passes
when its error against the float64 evaluation is at most this many times the one-device
float32 compile's own error (or within ``rtol`` of the output's scale)."""

_MESSAGE_LIMIT = 600


def widened(text: str) -> str:
    """The module with every float32 shape widened to float64 (constants, parameters,
    converts and all: the same program evaluated more exactly)."""
    return text.replace("f32[", "f64[")


def widened_arguments(args: Sequence[Any]) -> list[np.ndarray]:
    """The arguments with float32 arrays widened to float64 (others unchanged)."""
    out = []
    for a in args:
        a = np.asarray(a)
        out.append(a.astype(np.float64) if a.dtype == np.float32 else a)
    return out


def float64_outputs(text: str, args: Sequence[Any]) -> list[np.ndarray]:
    """Evaluates a single-device module with float32 widened to float64.

    Args:
      text: HLO text of a single-device module (no shardings) that
        :func:`hlo_go.xla.bridge.compile_hlo_text` compiles.
      args: one array per entry parameter (float32 ones are widened).

    Returns:
      The outputs (float32 outputs come back as float64).

    Raises:
      Exception: the widened module does not compile or run (e.g. a
        ``bitcast-convert`` from a 32-bit integer, which has no 64-bit meaning).
    """
    executable = compile_hlo_text(widened(text))
    return [np.asarray(x) for x in run_executable(executable, widened_arguments(args), x64=True)]


def lowered_source(lowered: Any, flat_args: Sequence[Any]) -> tuple[str, list[Any]]:
    """A ``jax.stages.Lowered``'s HLO text and its entry parameters: the inputs of
    :func:`float64_outputs` for a function ``jax.jit`` lowered.

    Args:
      lowered: ``jax.jit(f).lower(...)``.
      flat_args: the call's dynamic arguments, flattened (``jax.tree.leaves``); those
        ``jax.jit`` dropped as unused are left out.
    """
    kept = lowered_kept_arguments(lowered, len(flat_args))
    return lowered.compiler_ir("hlo").as_hlo_text(), [flat_args[k] for k in kept]


INPUT_ROUNDING_DRAWS = 4
"""Draws of :func:`input_rounding_runs`: one-device runs at inputs moved by one ulp."""

ROUNDING_MATCH_FACTOR = 2.0
"""Two float32 evaluations of one value, each within the bar of it, differ by at most
about this many bars: how close an element must be to a moved run's to have its value."""

INPUT_ROUNDING_REFERENCE = "one device's float32 compile at inputs moved by one ulp"
"""The name the arbiter's messages give :func:`input_rounding_runs`' bar."""


def moved_by_one_ulp(args: Sequence[Any], *, seed: int) -> list[np.ndarray]:
    """The arguments with each float32 element moved by -1, 0 or +1 unit in the last
    place (uniformly, seeded); other arrays unchanged."""
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        a = np.asarray(a)
        if a.dtype == np.float32:
            step = rng.integers(-1, 2, size=a.shape).astype(np.float32)
            a = (a + step * np.spacing(np.abs(a))).astype(np.float32)
        out.append(a)
    return out


def input_rounding_runs(
    run: Callable[[list[np.ndarray]], Sequence[Any]],
    args: Sequence[Any],
    *,
    draws: int = INPUT_ROUNDING_DRAWS,
) -> list[Callable[[], list[np.ndarray]]]:
    """The ``moved`` runs of :func:`as_accurate_as_reference`: the one-device compile at
    inputs within one ulp of ``args``.

    Args:
      run: runs the one-device float32 compile of the module on a list of arguments.
      args: the arguments the outputs under test were computed from.
      draws: how many perturbed runs (seeds ``0..draws-1`` of :func:`moved_by_one_ulp`).

    Returns:
      One function per draw, returning its outputs, computed on the first call only.
    """

    def one(seed: int) -> Callable[[], list[np.ndarray]]:
        return computed_once(
            lambda: [np.asarray(x) for x in run(moved_by_one_ulp(args, seed=seed))]
        )

    return [one(seed) for seed in range(draws)]


def computed_once(compute: Callable[[], list[np.ndarray]]) -> Callable[[], list[np.ndarray]]:
    """``compute`` evaluated on the first call only; a failure is remembered and raised
    again (the arbiter then keeps its verdict without compiling again)."""
    state: dict[str, Any] = {}

    def outputs() -> list[np.ndarray]:
        if "outputs" not in state and "error" not in state:
            try:
                state["outputs"] = compute()
            except Exception as error:  # the arbiter reports it with its verdict
                state["error"] = error
        if "error" in state:
            raise state["error"]
        return state["outputs"]

    return outputs


def float64_once(
    source: Callable[[], tuple[str, Sequence[Any]]],
) -> Callable[[], list[np.ndarray]]:
    """A function returning :func:`float64_outputs` of ``source()``'s ``(text, args)``,
    evaluated on the first call only (:func:`computed_once`)."""
    return computed_once(lambda: float64_outputs(*source()))


def _within_tolerance(
    got: np.ndarray, want: np.ndarray, rtol: float | None, atol: float | None
) -> bool:
    """The normal test of one output: elementwise within the dtype's (or given)
    tolerance for inexact types, equal otherwise."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if not (np.issubdtype(want.dtype, np.inexact) or want.dtype.name == "bfloat16"):
        return bool(np.array_equal(got, want))
    default_rtol, default_atol = TOLERANCES.get(want.dtype.name, (1e-4, 1e-5))
    r = default_rtol if rtol is None else rtol
    a = default_atol if atol is None else atol
    wide = np.complex128 if np.iscomplexobj(want) else np.float64
    return bool(np.allclose(got.astype(wide), want.astype(wide), rtol=r, atol=a, equal_nan=True))


def _max_error(a: np.ndarray, exact: np.ndarray) -> float:
    return float(np.nanmax(np.abs(a.astype(np.float64) - exact))) if exact.size else 0.0


Outputs = Sequence[Any] | Callable[[], Sequence[Any]]


def _evaluated(outputs: Outputs) -> list[np.ndarray]:
    return [np.asarray(x) for x in (outputs() if callable(outputs) else outputs)]


def _each_element_as_some_rounding(
    got: np.ndarray,
    exact: np.ndarray,
    k: int,
    moved: Sequence[Outputs],
    *,
    bar: float,
    tolerance: float,
) -> bool:
    """Whether every element of output ``k`` is within ``tolerance`` of the float64
    value, or has the value of one of the ``moved`` runs where that run is more than
    ``bar`` (one rounding's error) from the float64 value: within
    ``ROUNDING_MATCH_FACTOR * bar`` of it. The runs are evaluated one by one until each
    element passes."""
    got = got.astype(np.float64)
    passed = _close(got, exact, tolerance)
    for run in moved:
        theirs = _evaluated(run)
        if k >= len(theirs) or theirs[k].shape != exact.shape:
            return False
        other = theirs[k].astype(np.float64)
        crossed = ~_close(other, exact, bar)
        passed |= crossed & _close(got, other, ROUNDING_MATCH_FACTOR * bar)
        if passed.all():
            return True
    return bool(passed.all())


def _close(a: np.ndarray, b: np.ndarray, tolerance: float) -> np.ndarray:
    """Elementwise ``|a - b| <= tolerance``, NaN matching NaN."""
    return (np.abs(a - b) <= tolerance) | (np.isnan(a) & np.isnan(b))


def as_accurate_as_reference(
    got: Sequence[Any],
    want: Sequence[Any],
    exact: Outputs,
    *,
    others: Sequence[tuple[str, Outputs]] = (),
    moved: Sequence[Outputs] = (),
    rtol: float | None = None,
    atol: float | None = None,
    message: str = "",
) -> tuple[bool, str]:
    """Judges outputs that failed the normal tolerance against a float64 evaluation.

    Every output must pass the normal test (:func:`_within_tolerance`: the dtype's
    tolerances of :func:`hlo_go.xla.outputs_match`, or ``rtol``/``atol``), except that a
    float32 output failing it passes when ``max |got - exact| <= max(WIDENING_FACTOR *
    max |want - exact|, rtol * max |exact|)``: no less accurate than the reference.
    Where that fails, each of ``others`` (other valid float32 compiles of the same
    module, such as XLA's own with fusion off) may set the bar instead: the output passes
    when it is no less accurate than one of XLA's own compiles. Where that fails too,
    ``moved`` (the reference compile run at inputs one ulp away,
    :func:`input_rounding_runs`) is the last resort, element by element: the output
    passes when each element is within the tolerance so far (``WIDENING_FACTOR`` times
    the bar, or ``rtol`` of the scale) of the float64 value or, where a ``moved`` run is
    more than the bar from it (a discontinuity rounding crosses), has that run's value
    (within ``ROUNDING_MATCH_FACTOR`` times the bar).

    Args:
      got: the outputs under test (e.g. a partitioned or placed run).
      want: the reference outputs: the one-device float32 compile of the same module.
      exact: the module's float64 outputs (:func:`float64_outputs`), or a function
        computing them (called only when some float32 output needs arbitration; an
        exception it raises keeps the original verdict).
      others: ``(name, outputs)`` of other valid compiles of the module, outputs given
        or computed on first need (an exception keeps the verdict so far).
      moved: outputs (or functions computing them on first need) of the reference
        compile at inputs one ulp away from the outputs' own.
      rtol: relative tolerance; None: by element type (float32: 1e-4).
      atol: absolute tolerance; None: by element type (float32: 1e-5).
      message: why the normal test failed (kept in the returned message).

    Returns:
      ``(accepted, message)``; the message says how the arbiter decided.
    """
    got = [np.asarray(g) for g in got]
    want = [np.asarray(w) for w in want]
    if len(got) != len(want):
        return False, message or f"{len(got)} outputs, expected {len(want)}"
    failing = [
        k
        for k, (g, w) in enumerate(zip(got, want, strict=True))
        if not _within_tolerance(g, w, rtol, atol)
    ]
    if not failing:
        return True, message
    for k in failing:
        if want[k].dtype != np.float32 or got[k].shape != want[k].shape:
            return False, message or f"output {k} outside tolerance (not float32: no arbiter)"
    try:
        exact = _evaluated(exact)
    except Exception as error:  # the arbiter cannot run: keep the original verdict
        return False, f"{message}; the float64 arbiter could not run: {error}"[:_MESSAGE_LIMIT]
    if len(exact) != len(got):
        return False, f"{message}; the float64 evaluation has {len(exact)} outputs"
    r = TOLERANCES["float32"][0] if rtol is None else rtol
    worst = 1.0
    barred_by: set[str] = set()
    for k in failing:
        x = exact[k].astype(np.float64)
        if x.shape != got[k].shape:
            return False, f"{message}; output {k} has another shape in float64"
        scale = float(np.nanmax(np.abs(x))) if x.size else 0.0
        placed, single = _max_error(got[k], x), _max_error(want[k], x)
        bar, name = single, "one device's float32 compile"
        for other_name, other in others:
            if placed <= max(WIDENING_FACTOR * bar, r * scale):
                break
            try:
                theirs = _evaluated(other)
            except Exception as error:
                return False, f"{message}; {other_name} could not run: {error}"[:_MESSAGE_LIMIT]
            if len(theirs) == len(got) and theirs[k].shape == x.shape:
                error = _max_error(theirs[k], x)
                if error > bar:
                    bar, name = error, other_name
        limit = max(WIDENING_FACTOR * bar, r * scale)
        if not placed <= limit and moved:
            try:
                each = _each_element_as_some_rounding(
                    got[k], x, k, moved, bar=max(bar, r * scale), tolerance=limit
                )
            except Exception as error:
                why = f"{message}; {INPUT_ROUNDING_REFERENCE} could not run: {error}"
                return False, why[:_MESSAGE_LIMIT]
            if each:
                barred_by.add(f"{INPUT_ROUNDING_REFERENCE} (element by element)")
                continue
        if not placed <= limit:
            return (
                False,
                f"{message}; against float64, output {k}'s error {placed:.3g} exceeds "
                f"{WIDENING_FACTOR:g}x the float32 error of {name} ({bar:.3g})"
                + (
                    f", and some element matches no run of {INPUT_ROUNDING_REFERENCE}"
                    if moved
                    else ""
                ),
            )
        if bar > single:
            barred_by.add(name)
        worst = max(worst, placed / bar if bar else 1.0)
    judged_by = " or ".join(["one device's float32 compile", *sorted(barred_by)])
    return True, (
        f"matches as accurately as {judged_by}, judged against a float64 evaluation "
        f"({len(failing)} output(s) arbitrated, error ratio at most {worst:.2g}); "
        f"elementwise: {message}"
    )
