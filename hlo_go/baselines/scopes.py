"""Framework scopes from HLO metadata: which layer or stage each node belongs to.

JAX writes every instruction's origin into ``metadata={op_name=...}``, e.g.
``jit(gpt2_l2)/transpose(jvp(GPT2))/h_0/mlp/dot_general``: transformation wrappers
(``jit(...)``, ``jvp(...)``, ``transpose(...)``, ``vmap(...)``, ``remat(...)``, ...)
around module names, then submodule names, then the primitive. Forward and backward
ops of one layer share its scope path (the backward one sits inside ``transpose``),
which is what a human expert's "put each layer, forward and backward, on one device"
placement needs.
"""

from __future__ import annotations

import re

import numpy as np

from hlo_go.graph import OpGraph

# Wrappers JAX puts around scope names; "jit(f)" and "pjit(f)" also carry a name.
_TRANSFORMS = frozenset({
    "jit", "pjit", "jvp", "transpose", "vmap", "pmap", "xmap", "remat", "checkpoint",
    "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "shard_map", "xla_call",
    "named_call", "core_call", "cond", "while", "scan", "body", "branch",
})  # fmt: skip
_WRAPPED = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$")


def split_op_name(op_name: str) -> list[str]:
    """Splits an op_name at ``/`` outside parentheses.

    Args:
      op_name: e.g. ``"jit(f)/transpose(jvp(Model))/dense/dot_general"``.

    Returns:
      The components, e.g. ``["jit(f)", "transpose(jvp(Model))", "dense", "dot_general"]``.
    """
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(op_name):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "/" and depth == 0:
            parts.append(op_name[start:i])
            start = i + 1
    parts.append(op_name[start:])
    return [p for p in parts if p]


def _unwrap(component: str) -> str:
    """``transpose(jvp(Model))`` → ``Model``; other components unchanged."""
    while True:
        match = _WRAPPED.match(component)
        if match is None or match.group(1) not in _TRANSFORMS or not match.group(2):
            return component
        component = match.group(2)


def scope_path(op_name: str) -> tuple[str, ...]:
    """The scope of an op: its op_name without wrappers and without the primitive.

    Args:
      op_name: an HLO ``op_name`` metadata string.

    Returns:
      E.g. ``("gpt2_l2", "GPT2", "h_0", "mlp")`` for
      ``"jit(gpt2_l2)/transpose(jvp(GPT2))/h_0/mlp/dot_general"``; ``()`` for an empty
      name or a bare primitive.
    """
    parts = [_unwrap(p) for p in split_op_name(op_name)]
    return tuple(parts[:-1])


def scope_ids(
    graph: OpGraph,
    *,
    min_scopes: int,
    weights: np.ndarray | None = None,
    max_share: float = 1.0,
) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Labels every node with a scope: shallowest depth with enough scopes, heavy ones split.

    The depth ``k`` is the smallest whose distinct ``path[:k]`` prefixes number at least
    ``min_scopes`` (the deepest if none does). Then, as an expert splits a too-big stage,
    any scope holding more than ``max_share`` of the total weight is replaced by its
    sub-scopes one level deeper (nodes whose path ends there stay), until none is too big
    or none can be split.

    Args:
      graph: an OpGraph with ``op_names``.
      min_scopes: how many scopes the split needs (e.g. 2 × devices).
      weights: ``float[N]`` node weights for ``max_share`` (default all 1).
      max_share: the largest fraction of the total weight one scope may hold if it can be
        split.

    Returns:
      ``(ids, scopes)``: ``int64[N]`` index into ``scopes`` per node, -1 for nodes without
      an op_name; ``scopes`` the distinct prefixes.
    """
    n = graph.num_nodes
    paths_by_name: dict[str, tuple[str, ...]] = {}
    paths = []
    for name in graph.op_names or ("",) * n:
        path = paths_by_name.get(name)
        if path is None:
            path = paths_by_name[name] = scope_path(name)
        paths.append(path)
    named = [p for p in paths if p]
    if not named:
        return np.full(n, -1, np.int64), []
    deepest = max(len(p) for p in named)
    chosen = deepest
    for depth in range(1, deepest + 1):
        if len({p[:depth] for p in named}) >= min_scopes:
            chosen = depth
            break
    weight = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    limit = max_share * float(weight[[i for i, p in enumerate(paths) if p]].sum())
    depth_of = [min(chosen, len(p)) for p in paths]
    for _ in range(deepest):
        totals: dict[tuple[str, ...], float] = {}
        splittable: set[tuple[str, ...]] = set()
        for i, path in enumerate(paths):
            if path:
                key = path[: depth_of[i]]
                totals[key] = totals.get(key, 0.0) + weight[i]
                if len(path) > depth_of[i]:
                    splittable.add(key)
        heavy = {key for key, total in totals.items() if total > limit and key in splittable}
        if not heavy:
            break
        for i, path in enumerate(paths):
            if path and len(path) > depth_of[i] and path[: depth_of[i]] in heavy:
                depth_of[i] += 1
    table: dict[tuple[str, ...], int] = {}
    ids = np.full(n, -1, np.int64)
    for i, path in enumerate(paths):
        if path:
            ids[i] = table.setdefault(path[: depth_of[i]], len(table))
    return ids, list(table)
