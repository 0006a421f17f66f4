"""Running XLA's own HLO passes, a chosen few at a time.

XLA has no Python API that runs one pass, but its pass pipelines honour two
debug options: ``xla_enable_hlo_passes_only`` (run only the listed passes) and
``xla_disable_hlo_passes`` (skip the listed ones; the two cannot be combined).
Facts measured on jaxlib 0.10.2, CPU:

* ``xla_enable_hlo_passes_only`` filters only top-level pipelines usefully: a pass
  inside a nested pipeline (``simplification``, ...) runs only if the pipeline's
  name is listed, and listing a pipeline's name enables ALL its passes.
* ``xla_disable_hlo_passes`` is applied in every pipeline, nested ones included.
  So :func:`run_hlo_passes` runs exactly a chosen set of passes by disabling every
  other pass name of the CPU pipeline (read from XLA by :func:`discover_pipeline`),
  keeping ``apply-xla-transforms`` (the pass that calls the module-transformation
  hook; ``apply-xla-transforms-0`` and ``-1`` since jaxlib 0.12), and captures the module at the pre-scheduler hook, stopping the compile
  there. A kept nested pipeline that is a ``HloPassFix`` iterates its kept passes
  to their joint fixed point.
* Unknown names are accepted silently. :func:`discover_pipeline` reads the names
  and nesting of every pass XLA's CPU compiler runs (from XLA's own pass-pipeline
  log, in a child process); :func:`passes_run` lists the passes a compile really
  ran (same log); :func:`verify_passes_run` proves, in-process, that a kept pass
  was scheduled by asking XLA to dump the module before that pass.
* Every compile of HLO text first converts it to StableHLO and back. That
  conversion is not the identity (it may, e.g., split a multi-dimensional
  ``iota`` into ``iota`` + ``broadcast``), but it reaches a fixed point after one
  application; :func:`canonicalize_hlo` applies it on its own.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

from hlo_go.errors import HloGoError
from hlo_go.xla._jaxlib import (
    CPU_COMPILE_SCRIPT,
    canonical_print,
    compile_hlo_text,
    hlo_module_from_text,
    hlo_text_to_proto,
    module_from_proto,
    stablehlo_round_trip,
)
from hlo_go.xla.hooks import hlo_hook

# The pass that runs the module-transformation hook; it must be enabled for a capture.
# jaxlib 0.12 runs one per hook stage, numbered: "apply-xla-transforms-0", "-1".
HOOK_PASS = "apply-xla-transforms"
_HOOK_PASS_NAME = re.compile(rf"^{re.escape(HOOK_PASS)}(-\d+)?$")


def is_hook_pass(name: str) -> bool:
    """Whether ``name`` is a pass that runs the module-transformation hooks."""
    return _HOOK_PASS_NAME.match(name) is not None


# Options added to every pass-only compile: matmuls stay plain dots.
_BASE_OPTIONS: dict[str, Any] = {"xla_cpu_experimental_ynn_fusion_type": ""}


class PassNotRunError(RuntimeError, HloGoError):
    """XLA accepted a pass name but never ran the pass (the name is not in its pipeline)."""


class PassFailedError(RuntimeError, HloGoError):
    """XLA raised an error while running the requested passes (message is XLA's)."""


@dataclasses.dataclass(frozen=True)
class PipelinePass:
    """One pass as XLA's compiler schedules it.

    Attributes:
      name: the pass's name (what ``xla_enable_hlo_passes_only`` matches).
      pipelines: enclosing pipelines, outermost (a top-level pipeline the compiler
        runs directly) first; every one but the first must be enabled for the pass
        to run.
      position: index of this entry in the compiler's order.
    """

    name: str
    pipelines: tuple[str, ...]
    position: int

    @property
    def nested_in(self) -> tuple[str, ...]:
        """The nested pipelines that must be enabled too (all but the top-level one)."""
        return self.pipelines[1:]


# A small module used to probe XLA's pipeline (any valid module works: the CPU
# pipeline's passes do not depend on the module's contents).
PROBE_HLO = """HloModule hlo_go_pass_probe, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

ENTRY main {
  p = f32[4,4]{1,0} parameter(0)
  one = f32[] constant(1)
  b = f32[4,4]{1,0} broadcast(one), dimensions={}
  a = f32[4,4]{1,0} add(p, b)
  ROOT m = f32[4,4]{1,0} multiply(a, a)
}
"""


_LOG_PREFIX = re.compile(r"hlo_pass_pipeline\.cc:\d+\] (.*)$")
_RUNNING = re.compile(r"Running HLO pass pipeline on module [^:]*: (.*)$")
_PASS = re.compile(r"^  HLO pass (.*)$")
_PASS_DONE = re.compile(r"^HLO pass: (.*) time: ")
# jaxlib 0.12 logs a filtered-out pass as scheduled, then this line.
_SKIPPED = re.compile(r"^\s*Skipping HLO pass \(.*\): (.*)$")


def parse_pipeline_log(log: str) -> tuple[PipelinePass, ...]:
    """The passes of XLA's pass-pipeline log (``TF_CPP_VMODULE=hlo_pass_pipeline=2``).

    Args:
      log: stderr of a compile with that logging on.

    Returns:
      Each distinct (pipelines, name) once, in first-run order.
    """
    stack: list[str] = []
    last_pass: str | None = None
    seen: dict[tuple[tuple[str, ...], str], int] = {}
    added: tuple[tuple[str, ...], str] | None = None  # the key the last pass line added
    for raw in log.splitlines():
        match = _LOG_PREFIX.search(raw)
        if match is None:
            continue
        line = match.group(1)
        if running := _RUNNING.match(line):
            pipeline = running.group(1)
            if stack and stack[-1] == pipeline and last_pass != pipeline:
                continue  # a fixed-point pipeline's next iteration
            if last_pass == pipeline and stack:
                stack.append(pipeline)  # a nested pipeline, run as a pass of its parent
            else:
                stack = [pipeline]  # a top-level pipeline
            last_pass = None
        elif passed := _PASS.match(line):
            last_pass = passed.group(1)
            key = (tuple(stack), last_pass)
            added = None if key in seen else key
            seen.setdefault(key, len(seen))
        elif (skipped := _SKIPPED.match(line)) and added and added[1] == skipped.group(1):
            del seen[added]  # filtered out: it did not run
            added = None
        elif done := _PASS_DONE.match(line):
            if len(stack) > 1 and done.group(1) == stack[-1]:
                stack.pop()
            last_pass = None
    return tuple(
        PipelinePass(name=name, pipelines=pipelines, position=pos)
        for (pipelines, name), pos in sorted(seen.items(), key=lambda kv: kv[1])
    )


@functools.lru_cache(maxsize=4)
def discover_pipeline(*, timeout_s: float = 300.0) -> tuple[PipelinePass, ...]:
    """Every pass XLA's CPU compiler runs in this jaxlib, with its nesting, in order.

    Compiles :data:`PROBE_HLO` in a child process with XLA's pass-pipeline
    logging on and parses the log. Cached per process.

    Raises:
      RuntimeError: the child failed or logged no passes.
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="hlo_pass_pipeline=2")
    proc = subprocess.run(
        [sys.executable, "-c", CPU_COMPILE_SCRIPT],
        input=PROBE_HLO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    passes = parse_pipeline_log(proc.stderr)
    if proc.returncode != 0 or not passes:
        raise RuntimeError(
            f"could not read XLA's pass pipeline (exit code {proc.returncode}): "
            f"{proc.stderr[-800:]}"
        )
    return passes


def canonicalize_hlo(text: str) -> str:
    """HLO text → StableHLO → HLO text: the conversion every compile of HLO text
    starts with, applied on its own (no passes)."""
    return stablehlo_round_trip(hlo_text_to_proto(text))


class _Captured(Exception):
    """Raised inside XLA's compile once the module is captured (stops the compile)."""


def _module_name(text: str) -> str:
    match = re.match(r"\s*HloModule\s+([^\s,]+)", text)
    if match is None:
        raise ValueError("HLO text does not start with 'HloModule NAME'")
    return match.group(1)


def run_hlo_passes(
    text: str,
    passes: Iterable[str],
    *,
    verify: Sequence[str] = (),
    canonicalize: bool = True,
) -> str:
    """Runs exactly the given XLA passes on a module, with XLA's own code.

    Args:
      text: HLO module text.
      passes: names of the passes to run, with the nested pipelines that hold them
        (:data:`HOOK_PASS` is added); every other pass of XLA's CPU pipeline is
        disabled.
      verify: names that must be seen scheduled by XLA (checked from XLA's
        between-pass dumps); raises :class:`PassNotRunError` otherwise. Costs a
        dump of the module per listed pass, so verify once per name, not per step.
      canonicalize: pass the result through :func:`canonicalize_hlo`, so that the
        next compile's StableHLO round trip changes nothing.

    Returns:
      The module after the passes, as XLA prints it.

    Raises:
      PassFailedError: XLA failed while running the passes.
      PassNotRunError: a name in ``verify`` was never scheduled.
    """
    names = [n for n in passes if not is_hook_pass(n)]
    for name in names:
        if not name or "," in name:
            raise ValueError(f"bad pass name {name!r}")
    options = dict(_BASE_OPTIONS)
    options["xla_disable_hlo_passes"] = ",".join(disabled_for(names))
    captured: list[bytes] = []

    def keep(module: Any) -> None:
        captured.append(module.as_serialized_hlo_module_proto())
        raise _Captured

    with tempfile.TemporaryDirectory(prefix="hlo_go_passes_") as dump_dir:
        if verify:
            options["xla_dump_to"] = dump_dir
            options["xla_dump_hlo_pass_re"] = "^(" + "|".join(re.escape(v) for v in verify) + ")$"
        with hlo_hook(keep, module_name=_module_name(text)):
            try:
                compile_hlo_text(text, compiler_options=options)
            except Exception as e:  # XLA's own errors, or our _Captured
                if not captured:
                    raise PassFailedError(f"XLA failed running {names}: {e}") from None
        if not captured:
            raise PassFailedError(f"XLA's compile never reached the {HOOK_PASS} hook")
        if verify:
            dumped = " ".join(os.listdir(dump_dir))
            missing = [v for v in verify if not _dumped_around(v, dumped)]
            if missing:
                raise PassNotRunError(
                    f"XLA accepted but never ran {missing} (enabled: {names}); the names are "
                    "not in this jaxlib's CPU pipeline, or their enclosing pipeline is not enabled"
                )
    if canonicalize:
        return stablehlo_round_trip(captured[-1])
    return module_from_proto(captured[-1]).to_string()


def _dumped_around(name: str, dumped: str) -> bool:
    """Whether XLA's between-pass dump names (``dumped``) show pass ``name`` ran: a dump
    ``.before_NAME.`` (jaxlib 0.10) or ``.after_NAME.`` (jaxlib 0.12)."""
    name = name.replace(" ", "_")
    return f".before_{name}." in dumped or f".after_{name}." in dumped


def disabled_for(passes: Iterable[str]) -> list[str]:
    """The ``xla_disable_hlo_passes`` list that leaves only ``passes`` (and the hooks) running."""
    keep = set(passes)
    return sorted(
        {p.name for p in discover_pipeline() if p.name not in keep and not is_hook_pass(p.name)}
    )


_verified: set[tuple[str, ...]] = set()


def verify_pass_runs(name: str, nested_in: Sequence[str] = ()) -> None:
    """Checks, once per process, that XLA schedules pass ``name`` when it is kept
    together with its enclosing nested pipelines ``nested_in`` (on the tiny
    :data:`PROBE_HLO` module, from XLA's between-pass dump).

    Raises:
      PassNotRunError: XLA never scheduled the pass.
    """
    key = (*nested_in, name)
    if key in _verified:
        return
    run_hlo_passes(PROBE_HLO, key, verify=(name,), canonicalize=False)
    _verified.add(key)


_PASSES_RUN_SCRIPT = """
import json, sys
from hlo_go.xla.passes import run_hlo_passes
request = json.loads(sys.stdin.read())
run_hlo_passes(request["text"], request["passes"], canonicalize=False)
"""


def passes_run(text: str, passes: Sequence[str], *, timeout_s: float = 300.0) -> list[PipelinePass]:
    """Every pass XLA really ran while :func:`run_hlo_passes` kept ``passes`` on ``text``,
    read from XLA's pass-pipeline log in a child process (slow: a diagnostic).

    Returns:
      One entry per run pass (fixed-point iterations counted once), in order.
    """
    import json

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="hlo_pass_pipeline=2")
    proc = subprocess.run(
        [sys.executable, "-c", _PASSES_RUN_SCRIPT],
        input=json.dumps({"text": text, "passes": list(passes)}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child compile failed ({proc.returncode}): {proc.stderr[-800:]}")
    return list(parse_pipeline_log(proc.stderr))


def instruction_count(text: str) -> int:
    """Instructions in all computations of a module, counted by XLA's parser."""
    return module_summary(text)[0]


_TOKEN = re.compile(r"[\w.\-]+")


def module_summary(text: str) -> tuple[int, str]:
    """``(instructions, fingerprint)`` of a module, from one parse by XLA.

    The fingerprint is the sha256 of XLA's canonical print of the module
    (``HloPrintOptions.canonical()``: instruction names canonicalized, no
    metadata) with computation names replaced by their index in XLA's order, so
    modules that differ only in names (each StableHLO round trip renames
    instructions and computations) share it.
    """
    import hashlib

    module = hlo_module_from_text(text)
    computations = module.computations()
    count = sum(len(c.instructions()) for c in computations)
    canonical = canonical_print(module)
    rename = {c.name: f"computation_{k}" for k, c in enumerate(computations)}
    canonical = _TOKEN.sub(lambda m: rename.get(m.group(0), m.group(0)), canonical)
    return count, hashlib.sha256(canonical.encode()).hexdigest()
