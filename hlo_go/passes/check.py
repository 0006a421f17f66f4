"""Checking that a pass order kept a module's meaning: compile both, run, compare."""

from __future__ import annotations

import dataclasses
from typing import Any

from hlo_go.hlo import HloModule, parse_hlo
from hlo_go.xla import outputs_match
from hlo_go.xla.bridge import compile_hlo_text, run_executable
from hlo_go.xla.inputs import training_inputs


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """Result of :func:`check_outputs`.

    Attributes:
      ok: every output matched within the dtype's tolerance.
      message: why not, or "".
      outputs: number of output arrays compared.
    """

    ok: bool
    message: str
    outputs: int


@dataclasses.dataclass(frozen=True)
class Reference:
    """The original module's inputs and outputs, computed once for many checks."""

    inputs: list[Any]
    outputs: list[Any]


def _text(module: HloModule | str) -> str:
    return module if isinstance(module, str) else module.to_text()


def reference_outputs(original: HloModule | str, *, seed: int = 0) -> Reference:
    """Compiles ``original`` with XLA's full CPU pipeline and runs it on random inputs
    (:func:`hlo_go.xla.training_inputs` with ``seed``)."""
    text = _text(original)
    inputs = training_inputs(parse_hlo(text), seed=seed)
    return Reference(inputs, run_executable(compile_hlo_text(text), inputs))


def check_outputs(
    original: HloModule | str,
    optimized: HloModule | str,
    *,
    seed: int = 0,
    reference: Reference | None = None,
) -> OutputCheck:
    """Compiles both modules with XLA's full CPU pipeline, runs them on the same random
    inputs and compares every output (tolerances of :func:`hlo_go.xla.outputs_match`).

    Args:
      original: the module before any pass (e.g. the corpus's unoptimized stage).
      optimized: the module an episode ended with.
      seed: seed of the random inputs.
      reference: ``reference_outputs(original, seed=seed)``, to skip recomputing it.
    """
    if reference is None:
        reference = reference_outputs(original, seed=seed)
    got = run_executable(compile_hlo_text(_text(optimized)), reference.inputs)
    ok, message = outputs_match(got, reference.outputs)
    return OutputCheck(ok, message, len(reference.outputs))
