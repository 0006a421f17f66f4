"""The opcode vocabulary: HLO opcode names ⇄ the integer ids of ``OpGraph.opcode``."""

from __future__ import annotations

import numpy as np

from hlo_go.hlo import OPCODES

# Id 0 is every opcode hlo-go does not know; ids 1.. are XLA's opcodes in sorted
# name order, so a given OPCODES set always gives the same ids.
UNKNOWN_OPCODE = "<unknown>"
OPCODE_VOCAB: tuple[str, ...] = (UNKNOWN_OPCODE, *sorted(OPCODES))
OPCODE_IDS: dict[str, int] = {name: i for i, name in enumerate(OPCODE_VOCAB)}
NUM_OPCODES = len(OPCODE_VOCAB)


_ASYNC_SUGAR = (("-start", "async-start"), ("-update", "async-update"), ("-done", "async-done"))


def canonical_opcode(opcode: str) -> str:
    """The vocabulary name of an opcode as the text writes it.

    XLA's async sugar ``X-start``/``X-update``/``X-done`` (e.g. ``custom-call-start``, an
    ``async-start`` wrapping a ``custom-call``) maps to ``async-start``/``async-update``/
    ``async-done`` unless it is an opcode of its own (``all-reduce-start``, ``copy-done``).

    Args:
      opcode: an HLO opcode text name.

    Returns:
      A name in :data:`OPCODE_VOCAB` (``"<unknown>"`` when there is none).
    """
    if opcode in OPCODE_IDS:
        return opcode
    for suffix, generic in _ASYNC_SUGAR:
        if opcode.endswith(suffix) and opcode[: -len(suffix)] in OPCODE_IDS:
            return generic
    return UNKNOWN_OPCODE


def opcode_id(opcode: str) -> int:
    """The vocabulary id of an opcode name.

    Args:
      opcode: an HLO opcode text name, e.g. ``"add"`` or ``"custom-call"``.

    Returns:
      The index in :data:`OPCODE_VOCAB` of :func:`canonical_opcode` of it; 0
      (``"<unknown>"``) for names it does not know.
    """
    found = OPCODE_IDS.get(opcode)
    return found if found is not None else OPCODE_IDS[canonical_opcode(opcode)]


def opcode_ids(opcodes: list[str] | tuple[str, ...]) -> np.ndarray:
    """Vocabulary ids of many opcode names.

    Args:
      opcodes: opcode text names.

    Returns:
      ``int32[len(opcodes)]`` ids, as :func:`opcode_id` gives them.
    """
    return np.fromiter((opcode_id(op) for op in opcodes), dtype=np.int32, count=len(opcodes))
