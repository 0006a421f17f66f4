"""Priority-based fusion grouping: which nodes run together as one fused kernel.

This is the one definition of fusion shared by the simulator (:mod:`hlo_go.sim`) and
the XLA lowering (:func:`hlo_go.xla.apply_fusion` takes :func:`fusion_group_names`).

The rule (as in GO, NeurIPS 2020, with XLA's legality constraints):

1. Every data edge ``producer → consumer`` gets the priority
   ``min(fusion_priority[producer], fusion_priority[consumer])`` (:func:`edge_priority`):
   an edge fuses only if *both* ends ask for it, so a node with priority 0 stays out of
   every fusion and a policy controls each node directly.
2. Edges with priority > 0 whose ends are both fusible and on the same device are
   visited in decreasing priority (ties: the graph's edge order, i.e. by consumer,
   then operand order).
3. The producer's group and the consumer's group are merged when the result is legal
   (:mod:`hlo_go.decisions.legality`): at most ``max_nodes`` members, no reduce read
   inside its group, all outputs of one dimension when there are several, and no cycle
   created.

The cycle check is exact: a topological numbering of the groups is kept up to date
(Pearce & Kelly's dynamic topological order, adapted to contracting an edge), so a
merge of groups ``A → B`` only searches the groups numbered between them for another
path ``A → … → B``. Producer→consumer edges are mostly local, so the searches are short;
one that would scan more than ``search_budget`` edges is abandoned and the merge
refused, which keeps grouping fast on 100k-node graphs (a refused merge is always
legal to refuse). The result is deterministic.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlo_go.decisions._jit import jit
from hlo_go.decisions.adjacency import adjacency
from hlo_go.decisions.legality import OUTPUT_ONLY, fusible_nodes, graph_output_dims
from hlo_go.graph import OpGraph


class FusionLimits(NamedTuple):
    """Limits of priority-based fusion grouping.

    Attributes:
      max_nodes: the most members one group may have.
      search_budget: the most edges one merge's cycle check may scan; a merge whose
        check needs more is refused.
    """

    max_nodes: int = 64
    search_budget: int = 4096


DEFAULT_LIMITS = FusionLimits()


def edge_priority(graph: OpGraph, fusion_priority: np.ndarray) -> np.ndarray:
    """The fusion priority of every data edge: the smaller of its two ends' priorities.

    Args:
      graph: an OpGraph.
      fusion_priority: ``float[N]`` per-node fusion priority.

    Returns:
      ``float32[E]``, aligned with ``graph.senders`` / ``graph.receivers``.
    """
    priority = np.asarray(fusion_priority, dtype=np.float32)
    return np.minimum(priority[graph.senders], priority[graph.receivers])


def candidate_edges(
    graph: OpGraph, placement: np.ndarray, fusion_priority: np.ndarray
) -> np.ndarray:
    """The data edges fusion grouping visits, in visiting order.

    Args:
      graph: an OpGraph.
      placement: ``int[N]`` device per node.
      fusion_priority: ``float[N]`` per-node fusion priority.

    Returns:
      ``int64[M]`` edge ids: priority > 0, both ends fusible and on one device, in
      decreasing priority (stable: ties keep the graph's edge order).
    """
    priority = edge_priority(graph, fusion_priority)
    src, dst = graph.senders, graph.receivers
    fusible = fusible_nodes(graph)
    placement = np.asarray(placement)
    keep = (priority > 0) & fusible[src] & fusible[dst] & (placement[src] == placement[dst])
    keep &= ~OUTPUT_ONLY[graph.opcode[src]]  # a reduce never fuses into its users
    edges = np.flatnonzero(keep)
    # One int64 sort key per edge: the priority's bits, flipped so that larger priorities
    # come first, then the edge id (a stable order without a slower stable sort).
    bits = priority[edges].view(np.int32).astype(np.int64)  # priorities here are > 0
    key = ((np.int64(0x7FFFFFFF) - bits) << 32) | edges
    return np.sort(key) & 0xFFFFFFFF


def fusion_groups(
    graph: OpGraph,
    placement: np.ndarray,
    fusion_priority: np.ndarray,
    *,
    output_dims: np.ndarray | None = None,
    limits: FusionLimits = DEFAULT_LIMITS,
) -> np.ndarray:
    """Groups nodes into fused kernels by priority (the module docstring gives the rule).

    Args:
      graph: an OpGraph.
      placement: ``int[N]`` device per node (``Decisions.placement``).
      fusion_priority: ``float[N]`` (``Decisions.fusion_priority``); only edges whose
        two ends both have priority > 0 fuse.
      output_dims: ``int64[N]`` keys of each node's output dimensions
        (:func:`~hlo_go.decisions.module_output_dims` for the exact ones); default the
        graph-only proxy :func:`~hlo_go.decisions.graph_output_dims`.
      limits: :class:`FusionLimits`.

    Returns:
      ``int32[N]``: for each node, the smallest node id of its group (a node fused with
      nothing is its own group, as in ``OpGraph.colocation_group``).
    """
    n = graph.num_nodes
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    edges = candidate_edges(graph, placement, fusion_priority)
    if edges.size == 0:
        return np.arange(n, dtype=np.int32)
    adj = adjacency(graph)
    dims = graph_output_dims(graph) if output_dims is None else np.asarray(output_dims, np.int64)
    return _group_nodes(
        n,
        graph.senders,
        graph.receivers,
        edges,
        OUTPUT_ONLY[graph.opcode],
        adj.succ_ptr,
        adj.succ,
        adj.pred_ptr,
        adj.pred,
        adj.data_succ_ptr,
        adj.data_succ,
        adj.position,
        dims,
        int(graph.root),
        int(limits.max_nodes),
        int(limits.search_budget),
    )


def fusion_group_names(graph: OpGraph, group: np.ndarray) -> list[list[str]]:
    """The groups of more than one node, as node names (for :func:`hlo_go.xla.apply_fusion`).

    Args:
      graph: the graph the grouping is for.
      group: ``int[N]`` group label per node, e.g. from :func:`fusion_groups`.

    Returns:
      One list of names per group with at least two members, members in node order,
      groups ordered by their smallest member.
    """
    group = np.asarray(group)
    order = np.argsort(group, kind="stable")
    _, starts, counts = np.unique(group[order], return_index=True, return_counts=True)
    names = graph.names
    return [
        [names[i] for i in order[s : s + c].tolist()]
        for s, c in zip(starts.tolist(), counts.tolist(), strict=True)
        if c > 1
    ]


@jit
def _merged_output_dims(
    a: int,
    b: int,
    leader: np.ndarray,
    nxt: np.ndarray,
    dsucc_ptr: np.ndarray,
    dsucc: np.ndarray,
    dims: np.ndarray,
    root: int,
) -> int:
    """The common output dimension key of the union of groups ``a`` and ``b``:
    -1 when it has no outputs, -2 when its outputs disagree."""
    found = -1
    has = False
    for start in (a, b):
        m = start
        while True:
            is_output = m == root
            if not is_output:
                for j in range(dsucc_ptr[m], dsucc_ptr[m + 1]):
                    g = leader[dsucc[j]]
                    if g != a and g != b:
                        is_output = True
                        break
            if is_output:
                if not has:
                    found = dims[m]
                    has = True
                elif dims[m] != found:
                    return -2
            m = nxt[m]
            if m == start:
                break
    return found


@jit
def _feeds(
    a: int,
    b: int,
    leader: np.ndarray,
    nxt: np.ndarray,
    dsucc_ptr: np.ndarray,
    dsucc: np.ndarray,
    output_only: np.ndarray,
) -> bool:
    """Whether an output-only member of group ``a`` has a data user in group ``b``."""
    m = a
    while True:
        if output_only[m]:
            for j in range(dsucc_ptr[m], dsucc_ptr[m + 1]):
                if leader[dsucc[j]] == b:
                    return True
        m = nxt[m]
        if m == a:
            return False


@jit
def _expand(
    x: int,
    a: int,
    b: int,
    leader: np.ndarray,
    nxt: np.ndarray,
    ptr: np.ndarray,
    adj: np.ndarray,
    t: np.ndarray,
    mark: np.ndarray,
    own: int,
    other: int,
    out: np.ndarray,
    count: int,
    scanned: int,
    budget: int,
    forward: bool,
) -> tuple[int, int]:
    """Visits the neighbours (successors if ``forward``, else predecessors) of group ``x``.

    Neighbour groups numbered strictly between ``a`` and ``b`` and not yet marked
    ``own`` are marked and appended to ``out``.

    Returns:
      ``(count, scanned)`` updated; ``count`` is -1 when a path ``a → … → b`` through
      another group shows up (a neighbour marked ``other`` by the opposite search, or
      ``b`` reached from a group other than ``a``) or the scan passes ``budget``.
    """
    lo = t[a]
    hi = t[b]
    start = a if forward else b
    target = b if forward else a
    m = x
    while True:
        lo_j = ptr[m]
        hi_j = ptr[m + 1]
        scanned += hi_j - lo_j
        if scanned > budget:
            return -1, scanned
        for j in range(lo_j, hi_j):
            g = leader[adj[j]]
            if g in (x, start):
                continue
            if g == target:
                if x != start:
                    return -1, scanned
                continue
            mg = mark[g]
            if mg == other:
                return -1, scanned
            if mg != own and lo < t[g] < hi:
                mark[g] = own
                out[count] = g
                count += 1
        m = nxt[m]
        if m == x:
            return count, scanned


@jit
def _between(
    a: int,
    b: int,
    leader: np.ndarray,
    nxt: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pred_ptr: np.ndarray,
    pred: np.ndarray,
    t: np.ndarray,
    mark: np.ndarray,
    epoch: int,
    fwd: np.ndarray,
    bwd: np.ndarray,
    budget: int,
) -> tuple[int, int]:
    """Searches the groups numbered between ``a`` and ``b`` (with an edge ``a → b``) for
    another path ``a → … → b``, forward from ``a`` and backward from ``b`` in turns.

    Returns:
      ``(nf, nb)``: ``nf = -1`` when such a path exists or the search passes ``budget``
      edges. Otherwise ``nf = 0`` when nothing between them is reachable from ``a``
      (``nb`` is then not computed), ``nb = 0`` when nothing between them reaches ``b``;
      else ``fwd[1:nf+1]`` holds every group between them reachable from ``a`` and
      ``bwd[1:nb+1]`` every group between them that reaches ``b``.
    """
    own_f = epoch
    own_b = epoch + 1
    fwd[0] = a
    bwd[0] = b
    fcount = 1
    bcount = 1
    fhead = 0
    bhead = 0
    scanned = 0
    while fhead < fcount and bhead < bcount:
        fcount, scanned = _expand(
            fwd[fhead], a, b, leader, nxt, succ_ptr, succ, t, mark, own_f, own_b, fwd, fcount,
            scanned, budget, True,
        )  # fmt: skip
        if fcount < 0:
            return -1, -1
        fhead += 1
        if fhead >= fcount:
            break
        bcount, scanned = _expand(
            bwd[bhead], a, b, leader, nxt, pred_ptr, pred, t, mark, own_b, own_f, bwd, bcount,
            scanned, budget, False,
        )  # fmt: skip
        if bcount < 0:
            return -1, -1
        bhead += 1
    if fhead >= fcount:  # every group reachable from a is known
        if fcount == 1:
            return 0, -1
        while bhead < bcount:
            bcount, scanned = _expand(
                bwd[bhead], a, b, leader, nxt, pred_ptr, pred, t, mark, own_b, own_f, bwd,
                bcount, scanned, budget, False,
            )  # fmt: skip
            if bcount < 0:
                return -1, -1
            bhead += 1
    else:  # every group that reaches b is known
        if bcount == 1:
            return fcount - 1, 0
        while fhead < fcount:
            fcount, scanned = _expand(
                fwd[fhead], a, b, leader, nxt, succ_ptr, succ, t, mark, own_f, own_b, fwd,
                fcount, scanned, budget, True,
            )  # fmt: skip
            if fcount < 0:
                return -1, -1
            fhead += 1
    return fcount - 1, bcount - 1


@jit
def _group_nodes(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    order: np.ndarray,
    output_only: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pred_ptr: np.ndarray,
    pred: np.ndarray,
    dsucc_ptr: np.ndarray,
    dsucc: np.ndarray,
    position: np.ndarray,
    dims: np.ndarray,
    root: int,
    max_nodes: int,
    budget: int,
) -> np.ndarray:
    leader = np.arange(n)  # each node's group, named by a member (its leader)
    nxt = np.arange(n)  # circular list of each group's members
    size = np.ones(n, np.int64)
    t = position.copy()  # topological number of each group (read at leaders)
    okey = np.full(n, -1, np.int64)  # common output-dims key of a group's outputs (-1: none)
    for v in range(n):
        if v == root or dsucc_ptr[v + 1] > dsucc_ptr[v]:
            okey[v] = dims[v]
    has_output_only = output_only.copy()  # the group holds an output-only member
    mark = np.zeros(n, np.int64)
    fwd = np.empty(n, np.int64)
    bwd = np.empty(n, np.int64)
    epoch = 1
    for i in range(order.shape[0]):
        e = order[i]
        a = leader[src[e]]
        b = leader[dst[e]]
        if a == b or size[a] + size[b] > max_nodes:
            continue
        if has_output_only[a] and _feeds(a, b, leader, nxt, dsucc_ptr, dsucc, output_only):
            continue
        ka = okey[a]
        kb = okey[b]
        if ka < 0 or kb < 0 or ka == kb:
            key = ka if ka >= 0 else kb
        else:
            key = _merged_output_dims(a, b, leader, nxt, dsucc_ptr, dsucc, dims, root)
            if key == -2:
                continue
        nf, nb = _between(
            a, b, leader, nxt, succ_ptr, succ, pred_ptr, pred, t, mark, epoch, fwd, bwd, budget
        )
        epoch += 2
        if nf < 0:
            continue
        if nf == 0:
            tm = t[b]  # nothing a reaches lies between them: the merged group takes b's slot
        elif nb == 0:
            tm = t[a]  # nothing between them reaches b: the merged group takes a's slot
        else:
            # Pearce-Kelly reorder: b's other predecessors, then the merged group, then
            # a's other successors, on the sorted slots they occupied.
            pool = np.empty(nf + nb + 2, np.int64)
            for j in range(nf + 1):
                pool[j] = t[fwd[j]]
            for j in range(nb + 1):
                pool[nf + 1 + j] = t[bwd[j]]
            pool.sort()
            before = bwd[1 : nb + 1][np.argsort(t[bwd[1 : nb + 1]])]
            after = fwd[1 : nf + 1][np.argsort(t[fwd[1 : nf + 1]])]
            for j in range(nb):
                t[before[j]] = pool[j]
            tm = pool[nb]
            for j in range(nf):
                t[after[j]] = pool[nb + 1 + j]
        keep, drop = (b, a) if size[a] < size[b] else (a, b)
        m = drop
        while True:
            leader[m] = keep
            m = nxt[m]
            if m == drop:
                break
        spliced = nxt[keep]
        nxt[keep] = nxt[drop]
        nxt[drop] = spliced
        size[keep] += size[drop]
        has_output_only[keep] = has_output_only[keep] or has_output_only[drop]
        t[keep] = tm
        okey[keep] = key
    smallest = np.full(n, n, np.int64)
    for v in range(n):
        g = leader[v]
        if v < smallest[g]:
            smallest[g] = v
    out = np.empty(n, np.int32)
    for v in range(n):
        out[v] = smallest[leader[v]]
    return out
