"""Colocation groups: which nodes of an OpGraph must run on the same device.

A node must share its device with its first operand when it does not compute a
new value but names (part of) the operand's buffer, or finishes what the operand
started:

* ``get-tuple-element``: an element of the operand tuple's buffer;
* ``bitcast``: the operand's bytes reinterpreted in place;
* ``add-dependency`` and ``domain``: their operand passed through unchanged;
* ``async-update``, ``async-done`` and every ``*-done`` (``all-reduce-done``,
  ``copy-done``, ``send-done``, ...): the second half of an asynchronous operation
  started by the operand.

The relation is closed transitively (a ``get-tuple-element`` of a ``get-tuple-element``
of a ``while`` all go with the ``while``). Everything else is free: a ``tuple``
only gathers pointers, so it does not pin its operands, and parameters and
constants can be placed (or copied) anywhere. A group is named by its smallest
node id, so a free node's group is its own id.
"""

from __future__ import annotations

import numpy as np

from hlo_go.graph.vocab import OPCODE_VOCAB

# Opcodes that must be placed with their first operand.
COLOCATED_WITH_OPERAND: frozenset[str] = frozenset(
    {"get-tuple-element", "bitcast", "add-dependency", "domain", "async-update", "async-done"}
    | {name for name in OPCODE_VOCAB if name.endswith("-done")}
)

_COLOCATED = np.array([name in COLOCATED_WITH_OPERAND for name in OPCODE_VOCAB], dtype=bool)


def colocation_groups(
    opcode: np.ndarray, first_operand: np.ndarray, topo_order: np.ndarray
) -> np.ndarray:
    """The colocation group of every node.

    Args:
      opcode: ``int32[N]`` vocabulary ids.
      first_operand: ``int32[N]`` node id of each node's first operand, -1 for none.
      topo_order: ``int32[N]`` a topological order of the nodes.

    Returns:
      ``int32[N]``: for each node, the smallest node id in its group (its own id
      when it is free).
    """
    n = opcode.shape[0]
    group = np.arange(n, dtype=np.int64)
    bound = _COLOCATED[opcode] & (first_operand >= 0)
    if bound.any():
        position = np.empty(n, dtype=np.int64)
        position[topo_order] = np.arange(n)
        nodes = np.flatnonzero(bound)
        nodes = nodes[np.argsort(position[nodes], kind="stable")]
        # Operands precede users in topological order, so each operand's group is final
        # by the time its user copies it.
        parents = first_operand.tolist()
        groups = group.tolist()
        for node in nodes.tolist():
            groups[node] = groups[parents[node]]
        group = np.asarray(groups, dtype=np.int64)
        smallest = np.full(n, n, dtype=np.int64)
        np.minimum.at(smallest, group, np.arange(n))
        group = smallest[group]
    return group.astype(np.int32)
