"""Measured kernel times of corpus workloads, aligned with the graphs the simulator prices.

:func:`measure_workload` profiles a corpus training step compiled by XLA's default
pipeline on this host (:func:`hlo_go.xla.profile.profile_lowered`: XLA's own per-thunk
trace events); :func:`profiled_graph` turns such a profile into a
:class:`~hlo_go.sim.calibrate.ProfiledGraph`: the graph of the compiled module with the
measured time of each of its kernels, the input of :func:`hlo_go.sim.calibrate`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np

from hlo_corpus import get_workload
from hlo_go.graph import build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.sim.calibrate import ProfiledGraph
from hlo_go.xla.inputs import random_arguments
from hlo_go.xla.profile import InstructionProfile, profile_lowered
from hlo_go.xla.timing import Clock


def profiled_graph(profile: InstructionProfile, name: str = "") -> ProfiledGraph:
    """Aligns an :class:`~hlo_go.xla.profile.InstructionProfile` with the graph of its module.

    A ``while`` or ``conditional`` node's time is its own event's plus the events of
    every instruction in the computations it calls (its body, condition or branches,
    nested ones included): XLA's runtime traces those thunks one by one.

    Args:
      profile: from :func:`hlo_go.xla.profile.profile_lowered`.
      name: a label (default the module name).

    Returns:
      The :class:`~hlo_go.sim.calibrate.ProfiledGraph`.
    """
    module = parse_hlo(profile.hlo_text)
    graph = build_graph(module)
    times = profile.instruction_s
    measured = np.full(graph.num_nodes, np.nan)
    for instruction, seconds in times.items():
        node = graph.node_index.get(instruction)
        if node is not None:
            measured[node] = seconds
    for instr in module.entry.instructions:
        node = graph.node_index.get(instr.name)
        if node is None or instr.opcode not in ("while", "conditional"):
            continue
        inside = 0.0
        stack, seen = list(instr.called_computations), set()
        while stack:
            name_ = stack.pop()
            if name_ in seen or name_ not in module.computations:
                continue
            seen.add(name_)
            for inner in module.computations[name_].instructions:
                inside += times.get(inner.name, 0.0)
                stack.extend(inner.called_computations)
        measured[node] = np.nan_to_num(measured[node]) + inside
    return ProfiledGraph(name or profile.module_name, graph, measured, float(profile.step_s))


def concrete_arguments(abstract: Any, *, seed: int = 0) -> Any:
    """Random arrays for a tree of ``jax.ShapeDtypeStruct`` (integers in [0, 4), floats
    N(0, 0.1), booleans fair: :func:`hlo_go.xla.inputs.random_arguments`)."""
    return random_arguments(abstract, seed=seed, scale=0.1)


def measure_workload(name: str, *, repeats: int = 5, clock: Clock = "cpu") -> InstructionProfile:
    """Profiles one corpus workload compiled by XLA's default pipeline on this host.

    Run it through :func:`hlo_go.xla.timing.in_pinned_process` for a one-core measurement.

    Args:
      name: a corpus graph name.
      repeats: timed and profiled runs (after one warm-up).
      clock: ``"cpu"`` (CPU time, for a pinned process) or ``"wall"``.

    Returns:
      The :class:`~hlo_go.xla.profile.InstructionProfile` (turn it into a graph with
      measured kernel times with :func:`profiled_graph`).
    """
    step, abstract = get_workload(name).make()
    lowered = jax.jit(step).lower(*abstract)
    return profile_lowered(
        lowered,
        concrete_arguments(abstract),
        repeats=repeats,
        clock=clock,
    )


def save_profiles(profiles: dict[str, InstructionProfile], path: str | Path) -> None:
    """Writes measured profiles (name -> InstructionProfile) to a JSON file."""
    Path(path).write_text(json.dumps({name: p._asdict() for name, p in profiles.items()}))


def load_profiles(path: str | Path) -> dict[str, InstructionProfile]:
    """Reads profiles written by :func:`save_profiles`."""
    return {
        name: InstructionProfile(**fields)
        for name, fields in json.loads(Path(path).read_text()).items()
    }
