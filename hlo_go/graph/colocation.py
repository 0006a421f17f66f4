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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from hlo_go.graph.vocab import OPCODE_VOCAB

# Opcodes that must be placed with their first operand.
COLOCATED_WITH_OPERAND: frozenset[str] = frozenset(
    {"get-tuple-element", "bitcast", "add-dependency", "domain", "async-update", "async-done"}
    | {name for name in OPCODE_VOCAB if name.endswith("-done")}
)

_COLOCATED = np.array([name in COLOCATED_WITH_OPERAND for name in OPCODE_VOCAB], dtype=bool)


def colocation_groups(
    opcode: np.ndarray, first_operand: np.ndarray, topo_order: np.ndarray | None = None
) -> np.ndarray:
    """The colocation group of every node.

    The groups are the connected components of the edges from each colocated node to
    its first operand.

    Args:
      opcode: ``int32[N]`` vocabulary ids.
      first_operand: ``int32[N]`` node id of each node's first operand, -1 for none.
      topo_order: deprecated and ignored (components need no order).

    Returns:
      ``int32[N]``: for each node, the smallest node id in its group (its own id
      when it is free).
    """
    n = opcode.shape[0]
    bound = np.flatnonzero(_COLOCATED[opcode] & (first_operand >= 0))
    if not bound.size:
        return np.arange(n, dtype=np.int32)
    edges = csr_matrix(
        (np.ones(bound.size, dtype=np.int8), (bound, first_operand[bound])), shape=(n, n)
    )
    _, label = connected_components(edges, directed=False)
    smallest = np.full(n, n, dtype=np.int64)
    np.minimum.at(smallest, label, np.arange(n))
    return smallest[label].astype(np.int32)
