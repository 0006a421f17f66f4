"""The action set: XLA's target-independent HLO passes, as the CPU pipeline has them.

An action names one XLA pass (or a whole simplification pipeline) and the
pipeline it runs in. Applying it compiles the module with
``xla_enable_hlo_passes_only`` set to the pass and its enclosing nested pipelines
(see :mod:`hlo_go.xla.passes`), so XLA runs the pass wherever its own pipeline
has it among the enabled pipelines:

* a pass in a top-level pipeline (``cse``, ``dce``, ``tuple-simplifier``, ...)
  runs once at each top-level place the CPU pipeline has it (``dce`` and
  ``tuple-simplifier`` have two such places, ``cse`` one);
* a pass in the ``simplification`` pipeline (``algsimp``, ``reshape-mover``, ...)
  runs inside that ``HloPassFix`` pipeline, i.e. repeatedly until it changes
  nothing more;
* ``simplification`` runs the whole pipeline (its optimization passes; not its
  ``gather_expander`` / ``tree_reduction_rewriter`` lowerings) to its fixed point.

Passes that lower or canonicalize for the backend (expanders, decomposers,
float normalization, layout assignment, fusion) are not actions: they are not
optimizations, and the backend needs them whatever the order. Nor is XLA's late
``simplification after layout assignment`` pipeline: its layout-sensitive
``algsimp`` turns reshapes into layout-dependent bitcasts, and run before layout
assignment it yields modules XLA then rejects ("layout minor_to_major field
contains 4 elements, but shape has 3 dimensions"), found by the output check.

Where each pass sits is read from XLA itself (:func:`hlo_go.xla.passes.discover_pipeline`),
not written down here. The pipeline depends on the jaxlib and on XLA's flags (XLA:CPU runs
``gather_simplifier`` only with its fusion emitters on, for one), so the actions offered
are those this process's pipeline runs: :func:`action_names` lists them,
:func:`unavailable_actions` says which catalog actions are left out and why, and asking for
one of those raises :class:`UnknownPassError` with that reason. A whole-pipeline action
runs the members its pipeline has (and is left out only when it has none).
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from hlo_go.errors import HloGoError
from hlo_go.xla.passes import PipelinePass, discover_pipeline

logger = logging.getLogger(__name__)


class UnknownPassError(ValueError, HloGoError):
    """An action or pass name that is not in the catalog, or not in this jaxlib's pipeline."""


@dataclasses.dataclass(frozen=True)
class PassSpec:
    """An action before it is resolved against XLA's pipeline.

    Attributes:
      name: the action's name (what agents, episodes and the CLI use).
      passes: XLA pass names it enables.
      pipeline: the innermost pipeline those passes are taken from: a nested
        pipeline's name, or "" for a top-level one.
      description: one line for humans.
    """

    name: str
    passes: tuple[str, ...]
    pipeline: str
    description: str


_SIMPLIFICATION_MEMBERS = (
    "algsimp",
    "simplify-sorts",
    "dce",
    "gather_simplifier",
    "zero_sized_hlo_elimination",
    "while-loop-invariant-code-motion",
    "tuple-simplifier",
    "while-loop-constant-sinking",
    "simplify-while-loops",
    "reshape-mover",
    "constant_folding",
    "simplify-conditional",
)

SPECS: tuple[PassSpec, ...] = (
    PassSpec("algsimp", ("algsimp",), "simplification", "AlgebraicSimplifier, to its fixed point"),
    PassSpec("cse", ("cse",), "", "HloCSE: common subexpression elimination"),
    PassSpec("dce", ("dce",), "", "HloDCE: dead code and dead computation elimination"),
    PassSpec("tuple-simplifier", ("tuple-simplifier",), "", "TupleSimplifier"),
    PassSpec("call-inliner", ("call-inliner",), "", "CallInliner: inline `call`s"),
    PassSpec("flatten-call-graph", ("flatten-call-graph",), "", "FlattenCallGraph"),
    PassSpec("reshape-mover", ("reshape-mover",), "simplification", "ReshapeMover"),
    PassSpec("constant-folding", ("constant_folding",), "simplification", "HloConstantFolding"),
    PassSpec("simplify-sorts", ("simplify-sorts",), "simplification", "SortSimplifier"),
    PassSpec(
        "zero-sized-elimination", ("zero_sized_hlo_elimination",), "", "ZeroSizedHloElimination"
    ),
    PassSpec(
        "while-licm",
        ("while-loop-invariant-code-motion",),
        "simplification",
        "WhileLoopInvariantCodeMotion",
    ),
    PassSpec(
        "while-constant-sinking",
        ("while-loop-constant-sinking",),
        "simplification",
        "WhileLoopConstantSinking",
    ),
    PassSpec(
        "simplify-while-loops", ("simplify-while-loops",), "simplification", "WhileLoopSimplifier"
    ),
    PassSpec(
        "simplify-conditional", ("simplify-conditional",), "simplification", "ConditionalSimplifier"
    ),
    PassSpec("gather-simplifier", ("gather_simplifier",), "simplification", "GatherSimplifier"),
    PassSpec("transpose-folding", ("transpose-folding",), "", "TransposeFolding into dots"),
    PassSpec(
        "batch-dot-simplification", ("batch-dot-simplification",), "", "BatchDotSimplification"
    ),
    PassSpec(
        "dynamic-dimension-simplifier",
        ("dynamic-dimension-simplifier",),
        "",
        "DynamicDimensionSimplifier",
    ),
    PassSpec(
        "simplification",
        _SIMPLIFICATION_MEMBERS,
        "simplification",
        "the whole simplification pipeline, to its fixed point",
    ),
)

# Passes XLA must run before any action can: the CPU pipeline runs them first,
# and AlgebraicSimplifier fails on gathers with batching dimensions without them.
PREPARATION_PASSES: tuple[str, ...] = ("batched_gather_scatter_normalizer",)


@dataclasses.dataclass(frozen=True)
class PassAction:
    """An action resolved against this jaxlib's CPU pipeline.

    Attributes:
      name: the action's name.
      enabled: every name for ``xla_enable_hlo_passes_only`` (nested pipelines, passes).
      entries: the pipeline entries (pass placements) that the action runs.
      description: one line for humans.
    """

    name: str
    enabled: tuple[str, ...]
    entries: tuple[PipelinePass, ...]
    description: str


def _entries_of(
    spec: PassSpec, pass_name: str, pipeline: tuple[PipelinePass, ...]
) -> list[PipelinePass]:
    return [
        p
        for p in pipeline
        if p.name == pass_name
        and ((len(p.pipelines) == 1) if not spec.pipeline else p.pipelines[-1] == spec.pipeline)
    ]


def _resolve(spec: PassSpec, pipeline: tuple[PipelinePass, ...]) -> PassAction | str:
    """The action, or why this pipeline cannot run it (none of its passes are there)."""
    entries: list[PipelinePass] = []
    enabled: list[str] = []
    missing: list[str] = []
    for pass_name in spec.passes:
        matches = _entries_of(spec, pass_name, pipeline)
        if not matches:
            missing.append(pass_name)
            continue
        entry = matches[0]
        entries.append(entry)
        for name in (*entry.nested_in, entry.name):
            if name not in enabled:
                enabled.append(name)
    where = f"pipeline {spec.pipeline!r}" if spec.pipeline else "a top-level pipeline"
    if not entries:
        return (
            f"action {spec.name!r}: XLA's CPU pipeline in this process (this jaxlib and its "
            f"XLA flags) has no pass {', '.join(map(repr, missing))} in {where}"
        )
    if missing:
        logger.info("action %r runs without %s: not in %s here", spec.name, missing, where)
    return PassAction(spec.name, tuple(enabled), tuple(entries), spec.description)


@functools.lru_cache(maxsize=1)
def _resolved() -> dict[str, PassAction | str]:
    pipeline = discover_pipeline()
    resolved = {spec.name: _resolve(spec, pipeline) for spec in SPECS}
    for reason in resolved.values():
        if isinstance(reason, str):
            logger.info("%s; the action is not offered", reason)
    return resolved


def catalog_names() -> tuple[str, ...]:
    """Names of every action of the catalog, in catalog order, whether or not this
    process's XLA pipeline can run it (no XLA call)."""
    return tuple(spec.name for spec in SPECS)


def action_names() -> tuple[str, ...]:
    """Names of the actions this process's XLA pipeline runs, in catalog order."""
    return tuple(n for n, a in _resolved().items() if isinstance(a, PassAction))


def unavailable_actions() -> dict[str, str]:
    """Catalog actions this process's XLA pipeline cannot run: name -> why."""
    return {n: a for n, a in _resolved().items() if isinstance(a, str)}


def get_action(name: str) -> PassAction:
    """The action called ``name``, resolved against XLA's pipeline.

    Raises:
      UnknownPassError: ``name`` is not an action, or this process's pipeline lacks its
        passes (the message says which).
    """
    if name not in catalog_names():
        raise UnknownPassError(
            f"unknown pass action {name!r}; known actions: {', '.join(catalog_names())}"
        )
    action = _resolved()[name]
    if isinstance(action, str):
        raise UnknownPassError(action)
    return action


def actions(names: tuple[str, ...] | None = None) -> tuple[PassAction, ...]:
    """Resolved actions (default: all), in the given order."""
    return tuple(get_action(n) for n in (names if names is not None else action_names()))


def default_order_enabled(names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The ``xla_enable_hlo_passes_only`` list of XLA's default order of ``names``'s passes:
    the union of the actions' enabled names, which XLA then runs in its own pipeline
    order, as many times as its pipelines (fixed-point loops included) run them."""
    enabled: list[str] = []
    for action in actions(names):
        for name in action.enabled:
            if name not in enabled:
                enabled.append(name)
    return tuple(enabled)


def default_sequence(names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """XLA's default order of the actions ``names`` (default: all), as a list of actions.

    Walks the top-level entries of XLA's CPU pipeline in order and emits, for each
    one the action set covers, the action that runs it: a top-level pass's
    single-pass action, or for a nested pipeline (``simplification``, ...) its
    whole-pipeline action when ``names`` has one, else the single-pass actions
    taken from that pipeline in the pipeline's own order. Applying this sequence
    in the environment reproduces one compile with all the actions' passes kept
    (:func:`default_order_enabled`) up to the StableHLO round trips between steps.
    """
    chosen = [get_action(n) for n in (names if names is not None else action_names())]
    specs = {spec.name: spec for spec in SPECS}
    pipeline = discover_pipeline()
    sequence: list[str] = []
    for entry in pipeline:
        if len(entry.pipelines) != 1:
            continue
        whole = [a for a in chosen if specs[a.name].pipeline == entry.name and len(a.entries) > 1]
        if whole:
            sequence.append(whole[0].name)
            continue
        members = [p for p in pipeline if p.pipelines[1:] == (entry.name,)]
        if members:
            for member in members:
                sequence.extend(
                    a.name
                    for a in chosen
                    if specs[a.name].pipeline == entry.name
                    and specs[a.name].passes == (member.name,)
                )
            continue
        sequence.extend(
            a.name
            for a in chosen
            if not specs[a.name].pipeline and specs[a.name].passes == (entry.name,)
        )
    return tuple(sequence)


def placements(action: PassAction) -> tuple[PipelinePass, ...]:
    """Every place in XLA's CPU pipeline where ``action``'s passes run: each entry
    whose name is kept and whose enclosing nested pipelines are all kept."""
    kept = set(action.enabled)
    return tuple(
        p for p in discover_pipeline() if p.name in kept and all(n in kept for n in p.nested_in)
    )
