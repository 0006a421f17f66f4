"""``ShardSpec``: how one array is split over a mesh, its HLO text, and resharding costs.

A spec has one entry per array dimension: the mesh axes that dimension is split over,
major to minor (``()``: not split). Mesh axes no dimension uses replicate the array.
On a ``2x4`` mesh, ``((0,), (), (1,))`` splits dimension 0 in 2 and dimension 2 in 4;
``((0, 1),)`` splits a vector in 8; ``((), ())`` is replicated.
"""

from __future__ import annotations

from hlo_go.sharding.mesh import AxisLinks, Mesh

ShardSpec = tuple[tuple[int, ...], ...]


def replicated(rank: int) -> ShardSpec:
    """The replicated spec of an array of the given rank."""
    return ((),) * rank


def used_axes(spec: ShardSpec) -> tuple[int, ...]:
    """Mesh axes the spec splits over, in dimension order."""
    return tuple(a for dim in spec for a in dim)


def shards(spec: ShardSpec, mesh: Mesh) -> int:
    """Pieces the array is cut into (each device holds one)."""
    return mesh.axes_size(used_axes(spec))


def spec_name(spec: ShardSpec) -> str:
    """Short text: ``R`` per unsplit dimension, ``S`` + axes per split one, e.g. ``S0,R,S1``."""
    if not spec:
        return "scalar"
    return ",".join("S" + "".join(str(a) for a in dim) if dim else "R" for dim in spec)


def spec_text(spec: ShardSpec, mesh: Mesh) -> str:
    """The HLO ``sharding=`` text of a spec (V2 iota tile assignment).

    Examples on a ``2x4`` mesh: ``((0,), ())`` → ``{devices=[2,1,4]<=[8]
    last_tile_dim_replicate}``; ``((1,), (0,))`` → ``{devices=[4,2]<=[2,4]T(1,0)}``.
    """
    used = used_axes(spec)
    if mesh.axes_size(used) == 1:
        return "{replicated}"
    unused = [a for a in range(mesh.num_axes) if a not in used]
    perm = [*used, *unused]
    tile = [mesh.axes_size(dim) for dim in spec]
    replicate = mesh.axes_size(tuple(unused))
    dims = tile + ([replicate] if replicate > 1 else [])
    if perm == sorted(perm):
        iota = f"<=[{mesh.size}]"
    else:
        iota = f"<=[{','.join(map(str, mesh.shape))}]T({','.join(map(str, perm))})"
    suffix = " last_tile_dim_replicate" if replicate > 1 else ""
    return f"{{devices=[{','.join(map(str, dims))}]{iota}{suffix}}}"


def _position(spec: ShardSpec) -> dict[int, tuple[int, int]]:
    """Mesh axis -> (dimension, position within that dimension's axes)."""
    return {a: (d, i) for d, dim in enumerate(spec) for i, a in enumerate(dim)}


def reshard_collectives(
    src: ShardSpec, dst: ShardSpec, nbytes: float, mesh: Mesh
) -> list[tuple[str, float, tuple[int, ...]]]:
    """The collectives that turn an array split as ``src`` into one split as ``dst``.

    Axes that split the same dimension at the same position in both stay; the axes only
    ``src`` uses are all-gathered (one all-gather over all of them, as XLA's partitioner
    emits it); axes both use, differently, are exchanged by one all-to-all; axes only
    ``dst`` uses are a local slice (no communication).

    Args:
      src: the spec the producer wrote.
      dst: the spec the consumer reads.
      nbytes: bytes of the whole (global) array.
      mesh: the mesh.

    Returns:
      ``(kind, per-device bytes, axes)`` per collective, in the order they run.
    """
    if src == dst:
        return []
    have, want = _position(src), _position(dst)
    per_device = nbytes / shards(src, mesh)
    out: list[tuple[str, float, tuple[int, ...]]] = []
    gathered = tuple(sorted(a for a in have if a not in want and mesh.shape[a] > 1))
    if gathered:
        per_device *= mesh.axes_size(gathered)
        out.append(("all-gather", per_device, gathered))
    moved = tuple(sorted(a for a, p in have.items() if a in want and want[a] != p))
    if moved and mesh.axes_size(moved) > 1:
        out.append(("all-to-all", per_device, moved))
    return out


def reshard_cost(src: ShardSpec, dst: ShardSpec, nbytes: float, links: AxisLinks) -> float:
    """Seconds to reshard an array of ``nbytes`` from ``src`` to ``dst`` (see
    :func:`reshard_collectives`)."""
    return sum(
        links.cost(kind, size, axes)
        for kind, size, axes in reshard_collectives(src, dst, nbytes, links.mesh)
    )
