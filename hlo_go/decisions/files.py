"""Decisions from user values and files (``.npz`` / ``.json``), checked before any cast.

A value of 2**32 + 3 cast to int32 is device 3, and 1.7 cast to an integer is device 1:
both would run, silently wrong. So every value is checked in the type it came in, and
only then converted to the :class:`~hlo_go.decisions.Decisions` dtypes.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hlo_go.decisions.decisions import Decisions, DecisionsError
from hlo_go.graph import OpGraph

# Field -> the dtype Decisions holds it in.
FIELDS: dict[str, type[np.generic]] = {
    "placement": np.int32,
    "schedule_priority": np.float32,
    "fusion_priority": np.float32,
}
_INT32_MAX = int(np.iinfo(np.int32).max)


def _placement(value: Any, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise DecisionsError(
            f"{where}placement must hold integers (device numbers), got dtype {array.dtype}"
            + (f" (e.g. {array.flat[0]!r})" if array.size and array.dtype.kind in "fc" else "")
        )
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < 0:
            raise DecisionsError(f"{where}placement has a negative device number {low}")
        if high > _INT32_MAX:
            raise DecisionsError(
                f"{where}placement value {high} does not fit int32 (device numbers are small)"
            )
    return array.astype(np.int32)


def _priority(field: str, value: Any, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or array.dtype.kind not in "iuf":
        raise DecisionsError(f"{where}{field} must hold real numbers, got dtype {array.dtype}")
    if array.size and not np.isfinite(array.astype(np.float64)).all():
        raise DecisionsError(f"{where}{field} has values that are not finite (NaN or inf)")
    if array.size and np.abs(array.astype(np.float64)).max() > np.finfo(np.float32).max:
        raise DecisionsError(f"{where}{field} has values beyond float32's range")
    return array.astype(np.float32)


def decisions_from_values(
    values: Mapping[str, Any], graph: OpGraph, *, source: str = ""
) -> Decisions:
    """Decisions for ``graph`` from arrays, lists or single numbers, checked before casting.

    Args:
      values: any of ``placement``, ``schedule_priority`` and ``fusion_priority``: one
        value per node, or one value for all; the missing ones take
        :meth:`Decisions.default`'s values.
      graph: the graph they are for.
      source: where the values came from (a file name), for messages.

    Returns:
      The decisions (placement int32, priorities float32); not yet checked against a
      cluster (:meth:`Decisions.validate` does that).

    Raises:
      DecisionsError: an unknown field, a non-integer or out-of-range placement, a
        non-finite or non-numeric priority, or a wrong length.
    """
    where = f"{source}: " if source else ""
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise DecisionsError(f"{where}unknown fields {unknown}; known: {sorted(FIELDS)}")
    default = Decisions.default(graph)
    out: dict[str, np.ndarray] = {}
    for field in FIELDS:
        if field not in values:
            out[field] = getattr(default, field)
            continue
        try:
            raw = np.asarray(values[field])
        except (TypeError, ValueError) as error:  # ragged lists
            raise DecisionsError(f"{where}{field} is not an array: {error}") from None
        if raw.dtype == object:
            raise DecisionsError(f"{where}{field} must hold numbers, got mixed values")
        array = _placement(raw, where) if field == "placement" else _priority(field, raw, where)
        if array.ndim == 0:
            array = np.full(graph.num_nodes, array, dtype=array.dtype)
        if array.shape != (graph.num_nodes,):
            raise DecisionsError(
                f"{where}{field} has shape {array.shape}; the graph has {graph.num_nodes} nodes"
            )
        out[field] = array
    return Decisions(**out)


def load_decisions(path: str | Path, graph: OpGraph) -> Decisions:
    """Reads decisions for a graph from a ``.npz`` or ``.json`` file.

    Args:
      path: the file: arrays (``.npz``) or an object of lists or numbers (``.json``)
        under the names of the :class:`Decisions` fields.
      graph: the graph they are for.

    Returns:
      The decisions (:func:`decisions_from_values`).

    Raises:
      FileNotFoundError: no such file.
      DecisionsError: a file that is not a zip / JSON object, or bad values; the
        message names the file.
    """
    path = Path(path)
    raw: Mapping[str, Any]
    try:
        if path.suffix == ".npz":
            if path.is_file() and not zipfile.is_zipfile(path):
                raise DecisionsError(f"{path}: not a .npz file (not a zip archive)")
            with np.load(path, allow_pickle=False) as data:
                raw = {k: data[k] for k in data.files}
        else:
            raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, EOFError) as error:
        raise DecisionsError(f"{path}: not a readable .npz (zip) file: {error}") from None
    except (ValueError, OSError) as error:  # bad JSON, pickled objects, truncated arrays
        raise DecisionsError(f"{path}: cannot read decisions: {error}") from None
    if not isinstance(raw, Mapping):
        raise DecisionsError(
            f"{path}: expected an object of named fields, got {type(raw).__name__}"
        )
    return decisions_from_values(raw, graph, source=str(path))
