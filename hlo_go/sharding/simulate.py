"""Simulated step time, collectives and per-device memory of a sharding choice.

SPMD runs one program on every device, one op after another, so a choice's step time is
the sum, over nodes, of launch + one-device time / pieces + the node's own collectives,
plus the collectives that reshard producers' outputs for their consumers: one reshard per
producer and spec its consumers need (the lowering writes one resharding ``copy`` for
each, and consumers that need the same spec share it). The ILP charges every edge its
own reshard, an upper bound of this. Peak memory is the most bytes
per device live at once in program order (outputs from definition to last use,
parameters from the start, the program's outputs to the end).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from hlo_go.sharding.build import ShardingGraph, live_bytes
from hlo_go.sharding.mesh import COLLECTIVES
from hlo_go.sharding.spec import ShardSpec, reshard_collectives
from hlo_go.sharding.strategies import Collective


class ShardingResult(NamedTuple):
    """What a sharding choice costs, per device.

    Attributes:
      step_time_s: simulated seconds of one run.
      compute_s: the part spent computing (launches included).
      communication_s: the part spent in collectives.
      collectives: collectives charged, by kind (:data:`hlo_go.sharding.COLLECTIVES`).
      collective_bytes: per-device bytes those collectives carry, by kind.
      peak_memory: most bytes live on one device at once.
      memory_capacity: the device's memory.
      oom: ``peak_memory > memory_capacity``.
    """

    step_time_s: float
    compute_s: float
    communication_s: float
    collectives: dict[str, int]
    collective_bytes: dict[str, float]
    peak_memory: float
    memory_capacity: float
    oom: bool


def reshards(
    sg: ShardingGraph, choice: np.ndarray
) -> dict[tuple[int, ShardSpec], list[tuple[int, int]]]:
    """``(producer, spec) -> [(consumer, operand slot), ...]`` for every operand that must
    be resharded under ``choice`` (its producer writes another spec than it reads)."""
    out: dict[tuple[int, ShardSpec], list[int]] = {}
    edges = zip(
        sg.problem.edge_src.tolist(),
        sg.problem.edge_dst.tolist(),
        sg.edge_slot.tolist(),
        strict=True,
    )
    for u, v, j in edges:
        src = sg.strategies[u][int(choice[u])].output
        dst = sg.strategies[v][int(choice[v])].operands[j]
        if src is not None and dst is not None and src != dst:
            out.setdefault((u, dst), []).append((v, j))
    return out


def charged_collectives(sg: ShardingGraph, choice: np.ndarray) -> list[Collective]:
    """Every collective the choice is charged for: the nodes' own, then one reshard per
    producer and needed spec."""
    out: list[Collective] = []
    for v, k in enumerate(choice.tolist()):
        out.extend(sg.strategies[v][k].collectives)
    instructions = sg.module.entry.instructions
    for u, dst in reshards(sg, choice):
        src = sg.strategies[u][int(choice[u])].output
        assert src is not None
        out.extend(reshard_collectives(src, dst, instructions[u].shape.byte_size(), sg.mesh))
    return out


def peak_memory(sg: ShardingGraph, choice: np.ndarray) -> float:
    """Most bytes live on one device at once under ``choice``."""
    n = sg.num_nodes
    if n == 0:
        return 0.0
    nbytes = sg.problem.node_memory[np.arange(n), choice]
    return float(live_bytes(sg.live_first, sg.live_last, nbytes).max())


def fits_memory(sg: ShardingGraph, choice: np.ndarray) -> bool:
    """Whether ``choice``'s peak over every program position fits ``sg``'s memory budget
    (the problem's own check, :func:`hlo_go.sharding.problem.is_memory_feasible`, looks
    at sampled positions only)."""
    return peak_memory(sg, choice) <= sg.problem.memory_budget


def simulate_sharding(sg: ShardingGraph, choice: np.ndarray) -> ShardingResult:
    """Simulates a sharding choice.

    Args:
      sg: the prepared module (:func:`hlo_go.sharding.build_sharding`).
      choice: ``int[N]`` a strategy index per node.

    Returns:
      The :class:`ShardingResult`.

    Raises:
      ValueError: ``choice`` has the wrong shape or an index out of range (naming the node).
    """
    choice = validate(sg, choice)
    n = sg.num_nodes
    pieces = np.array(
        [sg.mesh.axes_size(sg.strategies[v][k].work_axes) for v, k in enumerate(choice.tolist())],
        dtype=np.float64,
    )
    compute = float((sg.launch_s + sg.base_s / pieces).sum()) if n else 0.0
    counts: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    communication = 0.0
    for kind, size, axes in charged_collectives(sg, choice):
        if sg.mesh.axes_size(axes) <= 1:
            continue
        counts[kind] += 1
        nbytes[kind] += size
        communication += sg.links.cost(kind, size, axes)
    peak = peak_memory(sg, choice)
    capacity = float(sg.problem.memory_budget)
    return ShardingResult(
        step_time_s=compute + communication,
        compute_s=compute,
        communication_s=communication,
        collectives={k: counts[k] for k in COLLECTIVES if counts[k]},
        collective_bytes={k: float(nbytes[k]) for k in COLLECTIVES if counts[k]},
        peak_memory=peak,
        memory_capacity=capacity,
        oom=peak > capacity,
    )


def validate(sg: ShardingGraph, choice: np.ndarray) -> np.ndarray:
    """Checks a choice's shape and ranges; returns it as ``int64[N]``."""
    choice = np.asarray(choice)
    if choice.shape != (sg.num_nodes,) or not np.issubdtype(choice.dtype, np.integer):
        raise ValueError(
            f"a sharding choice is int[{sg.num_nodes}], got {choice.dtype}{list(choice.shape)}"
        )
    bad = np.flatnonzero((choice < 0) | (choice >= sg.problem.num_strategies))
    if bad.size:
        v = int(bad[0])
        name = sg.module.entry.instructions[v].name
        raise ValueError(
            f"sharding choice {int(choice[v])} for node {v} ({name!r}) is not one of its "
            f"{int(sg.problem.num_strategies[v])} strategies"
        )
    return choice.astype(np.int64)
