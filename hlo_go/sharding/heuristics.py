"""The hand-written sharding methods: replicated, data parallel, Megatron-style, greedy.

Each is ``method(sg: ShardingGraph, *, seed=0, time_limit_s=None) -> np.ndarray`` (a
strategy index per node); :mod:`hlo_go.sharding.methods` registers them by name beside the
ILP and the learned policy.

* ``replicated``: every node whole on every device (the unsharded program, repeated).
* ``dp``: data parallel over the whole mesh. The batch size is the leading dimension of
  the integer inputs (token ids, labels), or else of the inputs a ``dot`` or
  ``convolution`` reads as left operand (:func:`infer_batch_size`); inputs with that
  leading dimension are split on it over all mesh axes together, and the split
  propagates as XLA's sharding propagation would: a node whose operands arrive split
  stays split (over all axes at once, as its operands arrive), other nodes are
  replicated (so weights stay replicated and weight gradients, contracted over the
  batch, are all-reduced); among the splits, the cheapest in program order.
* ``megatron``: Megatron-LM's layout on a mesh ``data x model``: inputs split on the
  batch over axis 0, each 2-D weight feeding a ``dot`` split over the last axis by columns
  if it widens (``n > k``: QKV, MLP up) and by rows otherwise (attention out, MLP down),
  everything else chosen greedily in program order given those.
* ``greedy``: cheapest strategy per node in program order given its producers, then
  coordinate descent (:func:`hlo_go.sharding.greedy.solve_greedy`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from hlo_go.hlo import HloModule
from hlo_go.sharding.build import ShardingGraph
from hlo_go.sharding.greedy import solve_greedy
from hlo_go.sharding.problem import total_cost
from hlo_go.sharding.simulate import fits_memory
from hlo_go.sharding.spec import ShardSpec

Method = Callable[..., np.ndarray]
"""A sharding method: ``method(sg, *, seed=0, time_limit_s=None) -> int64[n]``."""


def replicated(
    sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None
) -> np.ndarray:
    """Strategy 0 (replicated) everywhere."""
    del seed, time_limit_s
    return np.zeros(sg.num_nodes, dtype=np.int64)


def cheapest(sg: ShardingGraph, choices: list[np.ndarray]) -> np.ndarray:
    """The choice with the lowest ILP objective among those that fit the memory budget at
    every program position (among all when none fits)."""
    fitting = [c for c in choices if fits_memory(sg, c)] or choices
    costs = [total_cost(sg.problem, c) for c in fitting]
    return fitting[int(np.argmin(costs))]


def greedy(sg: ShardingGraph, *, seed: int = 0, time_limit_s: float | None = None) -> np.ndarray:
    """Greedy in program order, then coordinate descent; replicated if that is cheaper."""
    del seed, time_limit_s
    found = np.asarray(solve_greedy(sg.problem), dtype=np.int64)
    return cheapest(sg, [found, np.zeros(sg.num_nodes, dtype=np.int64)])


def infer_batch_size(module: HloModule) -> int | None:
    """The batch size of a training or inference step, read from its inputs.

    The most common leading dimension of its integer inputs (token ids, labels); else of
    its inputs that a ``dot`` or ``convolution`` reads as left operand (activations, not
    weights); else of its highest-rank input. None for a module without array inputs.
    """
    params = [p for p in module.entry.parameters if p.shape.is_array and p.shape.rank >= 1]
    if not params:
        return None
    integer = [p.shape.dims[0] for p in params if p.shape.dtype[0] in "su"]
    if not integer:
        names = {p.name for p in params}
        lhs = {
            x.operands[0]
            for _, x in module.instructions()
            if x.opcode in ("dot", "convolution") and x.operands
        }
        integer = [p.shape.dims[0] for p in params if p.name in lhs and p.name in names]
    if integer:
        common = Counter(integer).most_common()
        best = max(count for _, count in common)
        return max(d for d, count in common if count == best)
    top = max(params, key=lambda p: (p.shape.rank, p.shape.byte_size()))
    return top.shape.dims[0]


def _masked_greedy(sg: ShardingGraph, allowed: list[list[int]]) -> np.ndarray:
    """Greedy over the allowed strategies only (others priced out)."""
    cost = sg.problem.node_cost.copy()
    for v, ks in enumerate(allowed):
        keep = np.zeros(cost.shape[1], dtype=bool)
        keep[ks] = True
        cost[v, ~keep] = np.inf
    return np.asarray(solve_greedy(sg.problem._replace(node_cost=cost)), dtype=np.int64)


def _input_spec(sg: ShardingGraph, v: int, spec: ShardSpec) -> int | None:
    """The strategy of parameter ``v`` whose output is ``spec`` (None if it has none)."""
    for k, s in enumerate(sg.strategies[v]):
        if s.output == spec:
            return k
    return None


def _batch_inputs(sg: ShardingGraph, batch: int | None, axes: tuple[int, ...]) -> dict[int, int]:
    """Parameter node -> its strategy splitting the leading (batch) dimension over ``axes``."""
    out: dict[int, int] = {}
    if batch is None:
        return out
    for v, instr in enumerate(sg.module.entry.instructions):
        shape = instr.shape
        if instr.opcode == "parameter" and shape.is_array and shape.rank and shape.dims[0] == batch:
            k = _input_spec(sg, v, (axes,) + ((),) * (shape.rank - 1))
            if k is not None:
                out[v] = k
    return out


def data_parallel(
    sg: ShardingGraph,
    *,
    seed: int = 0,
    time_limit_s: float | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """Data parallel over all mesh axes (see the module docstring)."""
    del seed, time_limit_s
    group = tuple(a for a, s in enumerate(sg.mesh.shape) if s > 1)
    batch = batch_size if batch_size is not None else infer_batch_size(sg.module)
    inputs = _batch_inputs(sg, batch, group)
    instructions = sg.module.entry.instructions
    allowed: list[list[int]] = []
    # Specs each node may write: propagated from the batch-split inputs.
    writes: list[set[ShardSpec | None]] = []
    for v, instr in enumerate(instructions):
        options = sg.strategies[v]
        if instr.opcode == "parameter":
            ks = [inputs.get(v, 0)]
        else:
            ks = []
            for k, s in enumerate(options):
                if s.work_axes not in ((), group):
                    continue
                if all(
                    need is None or not any(need) or need in writes[u]
                    for need, u in zip(s.operands, sg.operands[v], strict=True)
                ):
                    ks.append(k)
            # Where the batch arrives split, the node stays split (sharding propagation).
            carried = [k for k in ks if any(need and any(need) for need in options[k].operands)]
            ks = carried or ks or [0]
        allowed.append(ks)
        writes.append({options[k].output for k in ks})
    return _masked_greedy(sg, allowed)


def megatron(
    sg: ShardingGraph,
    *,
    seed: int = 0,
    time_limit_s: float | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """Megatron-LM's layout on a ``data x model`` mesh (see the module docstring)."""
    del seed, time_limit_s
    mesh = sg.mesh
    model = mesh.num_axes - 1
    data = tuple(a for a in range(model) if mesh.shape[a] > 1)
    batch = batch_size if batch_size is not None else infer_batch_size(sg.module)
    fixed = _batch_inputs(sg, batch, data) if data else {}
    instructions = sg.module.entry.instructions
    for v, instr in enumerate(instructions):
        if instr.opcode != "dot" or len(instr.operands) != 2:
            continue
        w = sg.operands[v][1]
        weight = instructions[w]
        if weight.opcode != "parameter" or weight.shape.rank != 2 or w in fixed:
            continue
        if instr.attributes.get("rhs_contracting_dims", "").strip("{} ") != "0":
            continue
        k, n = weight.shape.dims
        spec: ShardSpec = ((), (model,)) if n > k else ((model,), ())
        found = _input_spec(sg, w, spec)
        if found is not None:
            fixed[w] = found
    allowed = [
        [fixed[v]] if v in fixed else list(range(len(options)))
        for v, options in enumerate(sg.strategies)
    ]
    return _masked_greedy(sg, allowed)


HEURISTICS: dict[str, Method] = {
    "replicated": replicated,
    "dp": data_parallel,
    "megatron": megatron,
    "greedy": greedy,
}
"""The hand-written methods by name."""
