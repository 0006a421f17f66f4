"""Sharding strategies: the ways one HLO instruction can run split over a mesh.

A :class:`Strategy` says how the instruction's output is split, how each operand must be
split for it, over which mesh axes its work is divided, and which collectives it runs
inside (a ``dot`` split along its contracting dimension all-reduces its output). The
strategies of an instruction depend on its opcode and shapes:

* elementwise ops, ``parameter``, ``constant``, ``iota``, ``copy``: any split of the
  output; operands of the same rank split alike.
* ``broadcast``, ``transpose``, ``reshape``: any split of the output whose dimensions map
  to operand dimensions (for ``reshape``: the major dimension of a merged or split group).
* ``reduce``: any split of the input; axes on reduced dimensions all-reduce the output.
* ``dot``: the Alpa / XLA auto-sharding space: mesh axes on batch, left free, right free
  and (the first) contracting dimension; a contracting split all-reduces the output.
* ``convolution``: axes on batch, output feature and input feature (contracting); spatial
  dimensions stay whole (halo exchange is not modelled).
* ``slice``, ``pad``, ``concatenate``, ``reverse``, ``dynamic-slice``,
  ``dynamic-update-slice``, ``reduce-window``: splits of the dimensions they leave whole.
* everything else (``gather``, ``scatter``, ``sort``, ``while``, custom calls, ...):
  replicated only. The ROOT ``tuple`` takes its operands as they are.

Every instruction has the replicated strategy, first. A mesh axis is used at most once per
strategy, and only on a dimension its size divides.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

from hlo_go.hlo import ELEMENTWISE_OPCODES, HloInstruction, HloModule, Shape
from hlo_go.hlo.attributes import dim_labels, int_list, slice_ranges, window
from hlo_go.sharding.mesh import Mesh
from hlo_go.sharding.spec import ShardSpec, replicated, spec_name

# The most strategies kept per instruction (replicated first, then by decreasing split).
MAX_STRATEGIES = 32

# Collective run inside an instruction: (kind, per-device bytes, mesh axes).
Collective = tuple[str, float, tuple[int, ...]]

# Ops with no operand whose output can be split any way.
_SOURCES = frozenset({"parameter", "constant", "iota", "rng"})
# Ops that read operands of the output's rank elementwise.
_ELEMENTWISE = ELEMENTWISE_OPCODES | {"copy", "bitcast-convert"}


class Strategy(NamedTuple):
    """One way to run an instruction over a mesh.

    Attributes:
      output: the spec of the output array, or ``None`` for tuple and token outputs.
      operands: per operand, the spec it must arrive in, or ``None`` to take it as its
        producer wrote it (tuple operands, the ROOT tuple's operands).
      work_axes: mesh axes the instruction's work is divided over (its compute time is
        divided by their product; other axes repeat the work).
      collectives: collectives the instruction runs itself, as ``(kind, per-device
        bytes, axes)``.
      name: short text, e.g. ``"S0,R"`` or ``"dot b=0 i=1 k=-"``.
    """

    output: ShardSpec | None
    operands: tuple[ShardSpec | None, ...]
    work_axes: tuple[int, ...]
    collectives: tuple[Collective, ...] = ()
    name: str = ""


def assignments(sizes: Sequence[int], mesh: Mesh) -> list[tuple[tuple[int, ...], ...]]:
    """Every way to put mesh axes on dimensions of the given sizes.

    Each axis of size > 1 goes on at most one dimension whose size the dimension's axes
    divide; a dimension's axes are in increasing order.

    Returns:
      Per way, the axes of each dimension; the all-unsplit way first, then by decreasing
      number of pieces.
    """
    axes = [a for a, s in enumerate(mesh.shape) if s > 1]
    out: list[tuple[tuple[int, ...], ...]] = []
    for where in itertools.product(range(-1, len(sizes)), repeat=len(axes)):
        dims: list[list[int]] = [[] for _ in sizes]
        for axis, dim in zip(axes, where, strict=True):
            if dim >= 0:
                dims[dim].append(axis)
        if all(sizes[d] % mesh.axes_size(tuple(dims[d])) == 0 for d in range(len(sizes))):
            out.append(tuple(tuple(d) for d in dims))
    # The unsplit way first, then by decreasing number of pieces.
    out.sort(key=lambda a: (bool(_axes(a)), -mesh.axes_size(_axes(a))))
    return out


def _axes(assignment: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    return tuple(sorted(a for dim in assignment for a in dim))


def _array_rank(shape: Shape) -> int | None:
    return shape.rank if shape.is_array else None


def replicated_only(
    instr: HloInstruction, operand_shapes: Sequence[Shape], *, take_operands: bool = False
) -> list[Strategy]:
    """The single strategy of an instruction that runs whole on every device."""
    out_rank = _array_rank(instr.shape)
    operands = tuple(
        None if take_operands or (rank := _array_rank(s)) is None else replicated(rank)
        for s in operand_shapes
    )
    output = None if out_rank is None else replicated(out_rank)
    return [Strategy(output, operands, (), (), "R")]


def _same_split(
    instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh, splittable: Sequence[bool]
) -> list[Strategy]:
    """Output split on the ``splittable`` dimensions; operands of the output's rank alike,
    other operands replicated."""
    dims = instr.shape.dims
    sizes = [s if ok else 1 for s, ok in zip(dims, splittable, strict=True)]
    out: list[Strategy] = []
    for spec in assignments(sizes, mesh):
        operands = tuple(
            spec if s.is_array and s.rank == len(dims) else _replicated_or_none(s)
            for s in operand_shapes
        )
        out.append(Strategy(spec, operands, _axes(spec), (), spec_name(spec)))
    return out


def _replicated_or_none(shape: Shape) -> ShardSpec | None:
    return replicated(shape.rank) if shape.is_array else None


def _mapped(
    instr: HloInstruction,
    operand_shapes: Sequence[Shape],
    mesh: Mesh,
    out_to_operand: dict[int, int],
    *,
    new_dims_free: bool = False,
) -> list[Strategy]:
    """Output dimensions split where they map to an operand dimension (transpose, reshape
    groups), or anywhere with ``new_dims_free`` (broadcast: a dimension the operand lacks
    is sliced locally); operand 0 split alike, other operands replicated."""
    dims = instr.shape.dims
    operand = operand_shapes[0]
    sizes = [dims[d] if new_dims_free or d in out_to_operand else 1 for d in range(len(dims))]
    out: list[Strategy] = []
    for spec in assignments(sizes, mesh):
        operand_spec: list[tuple[int, ...]] = [()] * operand.rank
        ok = True
        for d, axes in enumerate(spec):
            if axes and d in out_to_operand:
                od = out_to_operand[d]
                if operand.dims[od] % mesh.axes_size(axes):
                    ok = False
                operand_spec[od] = axes
        if not ok:
            continue
        rest = tuple(_replicated_or_none(s) for s in operand_shapes[1:])
        out.append(Strategy(spec, (tuple(operand_spec), *rest), _axes(spec), (), spec_name(spec)))
    return out


def reshape_dim_map(src: Sequence[int], dst: Sequence[int]) -> dict[int, int]:
    """Output dimension -> input dimension of a reshape, where splitting one splits the
    other alike: the major dimensions of each group of dimensions that merge or split.

    Size-1 dimensions map nowhere.
    """
    out: dict[int, int] = {}
    i = j = 0
    while i < len(src) and j < len(dst):
        if src[i] == 1:
            i += 1
            continue
        if dst[j] == 1:
            j += 1
            continue
        out[j] = i
        a, b = src[i], dst[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                if i >= len(src):
                    return out
                a *= src[i]
                i += 1
            else:
                if j >= len(dst):
                    return out
                b *= dst[j]
                j += 1
    return out


def _reduce(instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh) -> list[Strategy]:
    if not instr.shape.is_array or len(operand_shapes) != 2:
        return replicated_only(instr, operand_shapes)
    source = operand_shapes[0]
    reduced = set(int_list(instr.attributes.get("dimensions")))
    kept = [d for d in range(source.rank) if d not in reduced]
    out: list[Strategy] = []
    for spec in assignments(source.dims, mesh):
        output = tuple(spec[d] for d in kept)
        summed = tuple(sorted(a for d in reduced for a in spec[d]))
        collectives: tuple[Collective, ...] = ()
        if summed:
            nbytes = instr.shape.byte_size() / mesh.axes_size(_axes(output))
            collectives = (("all-reduce", nbytes, summed),)
        name = spec_name(spec) + (f" +allreduce{''.join(map(str, summed))}" if summed else "")
        out.append(Strategy(output, (spec, ()), _axes(spec), collectives, name))
    return out


def _dot(instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh) -> list[Strategy]:
    lhs, rhs = operand_shapes
    attrs = instr.attributes
    lb, rb = int_list(attrs.get("lhs_batch_dims")), int_list(attrs.get("rhs_batch_dims"))
    lc, rc = (
        int_list(attrs.get("lhs_contracting_dims")),
        int_list(attrs.get("rhs_contracting_dims")),
    )
    lfree = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    if len(lb) + len(lfree) + len(rfree) != instr.shape.rank:
        return replicated_only(instr, operand_shapes)
    # Iteration dimensions: output dimensions (batch, lhs free, rhs free), then the first
    # contracting dimension.
    sizes = [instr.shape.dims[d] for d in range(instr.shape.rank)]
    sizes.append(lhs.dims[lc[0]] if lc else 1)
    nb, nl = len(lb), len(lfree)
    out: list[Strategy] = []
    for spec in assignments(sizes, mesh):
        output, contract = spec[:-1], spec[-1]
        lspec: list[tuple[int, ...]] = [()] * lhs.rank
        rspec: list[tuple[int, ...]] = [()] * rhs.rank
        for k in range(nb):
            lspec[lb[k]] = rspec[rb[k]] = output[k]
        for k, d in enumerate(lfree):
            lspec[d] = output[nb + k]
        for k, d in enumerate(rfree):
            rspec[d] = output[nb + nl + k]
        if lc:
            lspec[lc[0]] = rspec[rc[0]] = contract
        collectives: tuple[Collective, ...] = ()
        if contract:
            nbytes = instr.shape.byte_size() / mesh.axes_size(_axes(output))
            collectives = (("all-reduce", nbytes, contract),)
        name = spec_name(output) + (f" k{''.join(map(str, contract))}" if contract else "")
        out.append(Strategy(output, (tuple(lspec), tuple(rspec)), _axes(spec), collectives, name))
    return out


def _convolution(
    instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh
) -> list[Strategy]:
    lhs, rhs = operand_shapes
    try:
        dims = dim_labels(instr.attributes.get("dim_labels", ""))
    except ValueError:
        return replicated_only(instr, operand_shapes)
    groups = int(instr.attributes.get("feature_group_count", "1"))
    batch_groups = int(instr.attributes.get("batch_group_count", "1"))
    if batch_groups != 1:
        return replicated_only(instr, operand_shapes)
    out_shape = instr.shape
    # Iteration dimensions: batch, output feature, input feature (contracting).
    sizes = [
        out_shape.dims[dims.out_batch],
        out_shape.dims[dims.out_feature] if groups == 1 else 1,
        rhs.dims[dims.kernel_input_feature] if groups == 1 else 1,
    ]
    out: list[Strategy] = []
    for batch, feature, contract in assignments(sizes, mesh):
        output: list[tuple[int, ...]] = [()] * out_shape.rank
        lspec: list[tuple[int, ...]] = [()] * lhs.rank
        rspec: list[tuple[int, ...]] = [()] * rhs.rank
        output[dims.out_batch] = lspec[dims.lhs_batch] = batch
        output[dims.out_feature] = rspec[dims.kernel_output_feature] = feature
        lspec[dims.lhs_feature] = rspec[dims.kernel_input_feature] = contract
        collectives: tuple[Collective, ...] = ()
        if contract:
            nbytes = out_shape.byte_size() / mesh.axes_size(batch + feature)
            collectives = (("all-reduce", nbytes, contract),)
        name = spec_name(tuple(output)) + (f" k{''.join(map(str, contract))}" if contract else "")
        out.append(
            Strategy(
                tuple(output),
                (tuple(lspec), tuple(rspec)),
                tuple(sorted(batch + feature + contract)),
                collectives,
                name,
            )
        )
    return out


def _index_dims(indices: Shape, index_vector_dim: int) -> list[int]:
    """The dimensions of a gather's or scatter's indices that enumerate lookups."""
    return [d for d in range(indices.rank) if d != index_vector_dim]


def _batching(attrs: dict, operand_key: str, indices_key: str) -> dict[int, int]:
    """Indices dimension -> operand dimension of a gather's or scatter's batching dims."""
    return dict(
        zip(int_list(attrs.get(indices_key)), int_list(attrs.get(operand_key)), strict=False)
    )


def _gather(instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh) -> list[Strategy]:
    """Split the lookups: output batch dimensions and the indices alike; the table is
    replicated, except its batching dimensions, split with the indices'."""
    attrs = instr.attributes
    if len(operand_shapes) != 2:
        return replicated_only(instr, operand_shapes)
    table, indices = operand_shapes
    offset = set(int_list(attrs.get("offset_dims")))
    batch = [d for d in range(instr.shape.rank) if d not in offset]
    lookups = _index_dims(indices, int(attrs.get("index_vector_dim", str(indices.rank))))
    batching = _batching(attrs, "operand_batching_dims", "start_indices_batching_dims")
    if len(batch) != len(lookups):
        return replicated_only(instr, operand_shapes)
    # Offset (window) dimensions that take a whole table dimension split with it.
    windowed = [
        d for d in range(table.rank)
        if d not in set(int_list(attrs.get("collapsed_slice_dims"))) and d not in batching.values()
    ]  # fmt: skip
    slice_sizes = int_list(attrs.get("slice_sizes"))
    whole = {
        o: t
        for o, t in zip(sorted(offset), windowed, strict=False)
        if t < len(slice_sizes) and slice_sizes[t] == table.dims[t]
    }
    sizes = [
        instr.shape.dims[d] if d in batch or d in whole else 1 for d in range(instr.shape.rank)
    ]
    out: list[Strategy] = []
    for spec in assignments(sizes, mesh):
        ispec: list[tuple[int, ...]] = [()] * indices.rank
        tspec: list[tuple[int, ...]] = [()] * table.rank
        for d, i in zip(batch, lookups, strict=True):
            ispec[i] = spec[d]
            if i in batching:
                tspec[batching[i]] = spec[d]
        for o, t in whole.items():
            tspec[t] = spec[o]
        if any(table.dims[t] % mesh.axes_size(a) for t, a in enumerate(tspec)):
            continue
        operands = (tuple(tspec), tuple(ispec))
        out.append(Strategy(spec, operands, _axes(spec), (), spec_name(spec)))
    return out


def _scatter(instr: HloInstruction, operand_shapes: Sequence[Shape], mesh: Mesh) -> list[Strategy]:
    """Split the updates (and indices) along their lookups. A split of a batching
    dimension splits the operand and output alike; any other split makes each device
    scatter its part (XLA's partitioner scatters into the combiner's identity) and
    all-reduce the output. Only for scatters that add."""
    attrs = instr.attributes
    if len(operand_shapes) != 3 or not instr.shape.is_array or attrs.get("to_apply") is None:
        return replicated_only(instr, operand_shapes)
    table, indices, updates = operand_shapes
    window_dims = set(int_list(attrs.get("update_window_dims")))
    scatter_dims = [d for d in range(updates.rank) if d not in window_dims]
    lookups = _index_dims(indices, int(attrs.get("index_vector_dim", str(indices.rank))))
    batching = _batching(attrs, "input_batching_dims", "scatter_indices_batching_dims")
    if len(scatter_dims) != len(lookups):
        return replicated_only(instr, operand_shapes)
    # Window dimensions of the updates that cover a whole operand dimension split with it.
    inserted = set(int_list(attrs.get("inserted_window_dims")))
    windowed = [d for d in range(table.rank) if d not in inserted and d not in batching.values()]
    whole = {
        w: t
        for w, t in zip(sorted(window_dims), windowed, strict=False)
        if updates.dims[w] == table.dims[t]
    }
    sizes = [updates.dims[d] if d in scatter_dims or d in whole else 1 for d in range(updates.rank)]
    out: list[Strategy] = []
    for spec in assignments(sizes, mesh):
        ispec: list[tuple[int, ...]] = [()] * indices.rank
        tspec: list[tuple[int, ...]] = [()] * table.rank
        for w, t in whole.items():
            tspec[t] = spec[w]
        summed: list[int] = []
        for d, i in zip(scatter_dims, lookups, strict=True):
            ispec[i] = spec[d]
            if i in batching:
                tspec[batching[i]] = spec[d]
            else:
                summed.extend(spec[d])
        if any(table.dims[t] % mesh.axes_size(a) for t, a in enumerate(tspec)):
            continue
        output = tuple(tspec)
        reduce_axes = tuple(sorted(summed))
        collectives: tuple[Collective, ...] = ()
        if reduce_axes:
            nbytes = instr.shape.byte_size() / mesh.axes_size(_axes(output))
            collectives = (("all-reduce", nbytes, reduce_axes),)
        name = "updates " + spec_name(spec)
        name += f" +allreduce{''.join(map(str, reduce_axes))}" if reduce_axes else ""
        out.append(Strategy(output, (output, tuple(ispec), spec), _axes(spec), collectives, name))
    return out


def _adds(instr: HloInstruction, module: HloModule | None) -> bool:
    """Whether a scatter's combiner is a plain ``add`` of its two parameters."""
    name = (instr.attributes.get("to_apply") or "").strip().lstrip("%")
    if module is None or name not in module.computations:
        return False
    return module.computations[name].root.opcode == "add"


def _whole_dims(instr: HloInstruction, operand_shapes: Sequence[Shape]) -> list[bool] | None:
    """Per output dimension, whether the op leaves it whole (so it can be split), for ops
    that split alike across operands of the output's rank; None for other ops."""
    op, attrs, dims = instr.opcode, instr.attributes, instr.shape.dims
    if op == "slice":
        ranges = slice_ranges(attrs.get("slice", ""))
        source = operand_shapes[0].dims
        if len(ranges) != len(dims):
            return None
        return [r == (0, source[d], 1) for d, r in enumerate(ranges)]
    if op == "concatenate":
        concat = set(int_list(attrs.get("dimensions")))
        return [d not in concat for d in range(len(dims))]
    if op == "pad":
        pads = attrs.get("padding", "").split("x")
        return [p.strip() in ("0_0", "0_0_0") for p in pads] if len(pads) == len(dims) else None
    if op == "reverse":
        rev = set(int_list(attrs.get("dimensions")))
        return [d not in rev for d in range(len(dims))]
    if op in ("dynamic-slice", "dynamic-update-slice"):
        source = operand_shapes[0].dims
        sub = dims if op == "dynamic-slice" else operand_shapes[1].dims
        return [sub[d] == source[d] for d in range(len(dims))]
    if op == "reduce-window":
        if not instr.shape.is_array or len(operand_shapes) != 2:
            return None
        try:
            win = window(attrs.get("window"))
        except ValueError:
            return None
        if len(win) != len(dims):
            return None
        return [
            w.size == 1 and w.stride == 1 and w.pad_low == 0 and w.pad_high == 0
            and w.lhs_dilate == 1 and w.rhs_dilate == 1
            for w in win
        ]  # fmt: skip
    return None


def enumerate_strategies(
    instr: HloInstruction,
    operand_shapes: Sequence[Shape],
    mesh: Mesh,
    *,
    is_root: bool = False,
    module: HloModule | None = None,
    max_strategies: int = MAX_STRATEGIES,
) -> list[Strategy]:
    """The strategies of one instruction over a mesh (replicated first).

    Args:
      instr: the instruction.
      operand_shapes: the shapes of its operands, in order.
      mesh: the mesh.
      is_root: the instruction is the entry computation's root (a root ``tuple`` takes
        its operands as they are).
      module: the module, to read called computations (a scatter's combiner); without
        it scatters are replicated.
      max_strategies: keep at most this many (the most-split ones after replicated).

    Returns:
      The strategies; always at least the replicated one.
    """
    op, shape = instr.opcode, instr.shape
    if op == "tuple":
        return replicated_only(instr, operand_shapes, take_operands=is_root)
    if op == "get-tuple-element" or not shape.is_array or shape.dynamic:
        return replicated_only(instr, operand_shapes, take_operands=op == "get-tuple-element")
    if any(s.is_array and s.dynamic for s in operand_shapes):
        return replicated_only(instr, operand_shapes)
    if op in _SOURCES or op in _ELEMENTWISE:
        if any(s.is_array and s.rank not in (0, shape.rank) for s in operand_shapes):
            strategies = replicated_only(instr, operand_shapes)
        else:
            strategies = _same_split(instr, operand_shapes, mesh, [True] * shape.rank)
    elif op == "broadcast":
        dims = int_list(instr.attributes.get("dimensions"))
        strategies = _mapped(
            instr, operand_shapes, mesh, {d: i for i, d in enumerate(dims)}, new_dims_free=True
        )
    elif op == "transpose":
        perm = int_list(instr.attributes.get("dimensions"))
        strategies = _mapped(instr, operand_shapes, mesh, dict(enumerate(perm)))
    elif op == "reshape":
        strategies = _mapped(
            instr, operand_shapes, mesh, reshape_dim_map(operand_shapes[0].dims, shape.dims)
        )
    elif op == "reduce":
        strategies = _reduce(instr, operand_shapes, mesh)
    elif op == "dot" and len(operand_shapes) == 2:
        strategies = _dot(instr, operand_shapes, mesh)
    elif op == "convolution" and len(operand_shapes) == 2:
        strategies = _convolution(instr, operand_shapes, mesh)
    elif op == "gather":
        strategies = _gather(instr, operand_shapes, mesh)
    elif op == "scatter" and _adds(instr, module):
        strategies = _scatter(instr, operand_shapes, mesh)
    elif (whole := _whole_dims(instr, operand_shapes)) is not None:
        strategies = _same_split(instr, operand_shapes, mesh, whole)
    else:
        strategies = replicated_only(instr, operand_shapes)
    return strategies[:max_strategies]
