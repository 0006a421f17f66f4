"""Decoders for attribute values (and constant literals) that HLO keeps as text.

``HloInstruction.attributes`` holds values verbatim (``"{0,1}"``,
``"{size=3x3 stride=2x2 pad=1_1x1_1}"``, ``"b01f_01io->b01f"``); these functions
turn the common ones into numbers.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from hlo_go.hlo.ir import HloInstruction


def int_list(value: str | None) -> tuple[int, ...]:
    """Decodes an integer list attribute.

    Args:
      value: attribute text such as ``"{0,1}"`` (``dimensions=``,
        ``lhs_contracting_dims=``, ...), or None when the attribute is absent.

    Returns:
      The integers, e.g. ``(0, 1)``; ``()`` for ``"{}"`` or None.
    """
    if value is None:
        return ()
    body = value.strip().strip("{}").strip()
    return tuple(int(x) for x in body.split(",")) if body else ()


def int_literal(instr: HloInstruction) -> int | None:
    """The value of a scalar integer constant (``s32[] constant(3)``), else None."""
    shape = instr.shape
    if shape.dims or not shape.dtype.startswith(("s", "u")) or instr.literal is None:
        return None
    try:
        return int(instr.literal.strip().strip("{}").strip())
    except ValueError:
        return None


def int_attr(value: str | None, default: int) -> int:
    """Decodes an integer attribute such as ``feature_group_count=2``.

    Args:
      value: the attribute text, or None when absent.
      default: what an absent attribute means.

    Returns:
      The integer.
    """
    return default if value is None else int(value)


class WindowDim(NamedTuple):
    """One dimension of a ``window={...}`` attribute."""

    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilate: int = 1
    rhs_dilate: int = 1
    reversal: bool = False


def window(value: str | None) -> tuple[WindowDim, ...]:
    """Decodes a ``window={...}`` attribute.

    Args:
      value: text such as ``"{size=3x3 stride=2x2 pad=1_1x1_1 rhs_dilate=2x2}"``
        (fields: size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal), or None.

    Returns:
      One :class:`WindowDim` per window dimension (missing fields take their
      defaults); ``()`` for None or ``"{}"``.
    """
    if value is None:
        return ()
    fields: dict[str, list[str]] = {}
    for key, val in re.findall(r"(\w+)=(\S+)", value.strip().strip("{}")):
        fields[key] = val.split("x")
    rank = max((len(v) for v in fields.values()), default=0)

    def ints(key: str, default: int) -> list[int]:
        return [int(v) for v in fields[key]] if key in fields else [default] * rank

    size, stride = ints("size", 1), ints("stride", 1)
    lhs, rhs = ints("lhs_dilate", 1), ints("rhs_dilate", 1)
    pads = [p.split("_") for p in fields["pad"]] if "pad" in fields else [["0", "0"]] * rank
    rev = [v == "1" for v in fields["rhs_reversal"]] if "rhs_reversal" in fields else [False] * rank
    return tuple(
        WindowDim(size[i], stride[i], int(pads[i][0]), int(pads[i][1]), lhs[i], rhs[i], rev[i])
        for i in range(rank)
    )


class ConvDims(NamedTuple):
    """Convolution dimension numbers decoded from ``dim_labels``.

    Spatial tuples are ordered by spatial index (the digits 0, 1, ... in the labels).
    """

    lhs_batch: int
    lhs_feature: int
    lhs_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    out_batch: int
    out_feature: int
    out_spatial: tuple[int, ...]


def dim_labels(value: str) -> ConvDims:
    """Decodes a convolution's ``dim_labels`` attribute.

    Args:
      value: text such as ``"b01f_01io->b01f"``: input, kernel and output labels,
        where b is batch, f feature, i/o kernel input/output feature and digits
        the spatial dimensions.

    Returns:
      The :class:`ConvDims`.

    Raises:
      ValueError: the text is not of that form.
    """
    m = re.fullmatch(r"([0-9bf?]+)_([0-9io?]+)->([0-9bf?]+)", value.strip())
    if m is None:
        raise ValueError(f"bad dim_labels {value!r}")
    lhs, rhs, out = m.groups()

    def spatial(labels: str) -> tuple[int, ...]:
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        return tuple(i for _, i in digits)

    return ConvDims(
        lhs.index("b"), lhs.index("f"), spatial(lhs),
        rhs.index("i"), rhs.index("o"), spatial(rhs),
        out.index("b"), out.index("f"), spatial(out),
    )  # fmt: skip


def slice_ranges(value: str) -> tuple[tuple[int, int, int], ...]:
    """Decodes a ``slice={...}`` attribute.

    Args:
      value: text such as ``"{[0:2], [1:9:2]}"``.

    Returns:
      ``(start, limit, stride)`` per dimension, e.g. ``((0, 2, 1), (1, 9, 2))``.
    """
    out = []
    for part in re.findall(r"\[([^\]]*)\]", value):
        nums = [int(x) for x in part.split(":")]
        out.append((nums[0], nums[1], nums[2] if len(nums) > 2 else 1))
    return tuple(out)


def known_trip_count(backend_config: str | None) -> int | None:
    """The ``known_trip_count`` a ``while``'s backend_config gives, if any.

    Args:
      backend_config: ``HloInstruction.backend_config`` as written: a JSON object
        (``{"known_trip_count":{"n":"5"}}``) or a quoted string holding one
        (``"{\\"known_trip_count\\":{\\"n\\":\\"5\\"}}"``).

    Returns:
      The trip count, or None when the config is absent, does not give one, or
      is not valid JSON.
    """
    if not backend_config or "known_trip_count" not in backend_config:
        return None
    config = _json_config(backend_config)
    try:
        return int(config["known_trip_count"]["n"])  # type: ignore[index]
    except (ValueError, KeyError, TypeError):
        return None


class DotDims(NamedTuple):
    """A matrix product's dimension numbers (each a tuple of dimension indices)."""

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]


GEMM_TARGET_PREFIX = "__cublas$"
"""``custom_call_target`` prefix of XLA:GPU's GEMM library calls (``__cublas$gemm``,
``__cublas$lt$matmul``, ...), whose backend_config carries a dot's dimension numbers."""


def _json_config(backend_config: str | None) -> dict | None:
    """A backend_config as written (a JSON object, or a quoted string holding one)."""
    if not backend_config:
        return None
    try:
        config = json.loads(backend_config.strip())
        if isinstance(config, str):
            config = json.loads(config)
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def dot_dims(instr: HloInstruction) -> DotDims | None:
    """The dimension numbers of a ``dot``, or of a GEMM library custom-call (from its
    ``gemm_backend_config.dot_dimension_numbers``); None for anything else or a config
    that does not give them."""
    if instr.opcode == "dot":
        a = instr.attributes
        return DotDims(
            int_list(a.get("lhs_contracting_dims")),
            int_list(a.get("rhs_contracting_dims")),
            int_list(a.get("lhs_batch_dims")),
            int_list(a.get("rhs_batch_dims")),
        )
    if instr.opcode != "custom-call":
        return None
    target = instr.attributes.get("custom_call_target", "").strip().strip('"')
    if not target.startswith(GEMM_TARGET_PREFIX):
        return None
    config = _json_config(instr.backend_config)
    numbers = (config or {}).get("gemm_backend_config", {}).get("dot_dimension_numbers")
    if not isinstance(numbers, dict):
        return None
    try:
        return DotDims(
            *(
                tuple(int(d) for d in numbers.get(f"{side}_{kind}_dimensions", ()))
                for kind, side in (
                    ("contracting", "lhs"),
                    ("contracting", "rhs"),
                    ("batch", "lhs"),
                    ("batch", "rhs"),
                )
            )
        )
    except (TypeError, ValueError):
        return None
