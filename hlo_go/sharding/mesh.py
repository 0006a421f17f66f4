"""``Mesh``: a logical device mesh, and what collectives along its axes cost on a cluster.

A mesh of shape ``(2, 4)`` numbers its 8 devices row-major: the device at mesh
coordinates ``(i, j)`` is cluster device ``4 * i + j``. Axis ``a`` groups devices that
differ only in coordinate ``a``; collectives over a set of axes run in each group of
devices that agree on every other coordinate.

Collectives use the alpha-beta model of the algorithms collective libraries pick for
them (Thakur, Rabenseifner and Gropp 2005): ``n`` devices, per-device payload ``S`` bytes,
per-step latency ``alpha`` (the largest link latency in the group), bandwidth ``beta``
(its slowest link), ``L = ceil(log2 n)`` steps of recursive doubling / halving::

    all-gather      L * alpha + (n - 1) / n * S_out / beta     S_out: gathered result
    reduce-scatter  L * alpha + (n - 1) / n * S_in / beta      S_in: unreduced input
    all-reduce      2 * (L * alpha + (n - 1) / n * S / beta)   (reduce-scatter + all-gather)
    all-to-all      L * alpha + (n - 1) / n * S / beta         S: per-device array

Small collectives cost latency steps, large ones the bytes each device must move.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hlo_go.sim import Cluster

# Collective kinds the cost model and the lowering count.
COLLECTIVES: tuple[str, ...] = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


@dataclass(frozen=True)
class Mesh:
    """A logical mesh of devices.

    Attributes:
      shape: devices along each axis, e.g. ``(2, 4)``; the product is the device count.
    """

    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.shape or any(not isinstance(s, int) or s < 1 for s in self.shape):
            raise ValueError(
                f"a mesh shape is a non-empty tuple of positive ints, got {self.shape}"
            )

    @staticmethod
    def parse(text: str) -> Mesh:
        """A mesh from text such as ``"2x4"``, ``"8"`` or ``"2,2,2"``.

        Raises:
          ValueError: the text is not of that form.
        """
        if not re.fullmatch(r"\s*\d+(\s*[x,]\s*\d+)*\s*", text):
            raise ValueError(f"bad mesh {text!r}: expected sizes joined by 'x', e.g. '2x4'")
        return Mesh(tuple(int(s) for s in re.split(r"[x,]", text.replace(" ", ""))))

    @property
    def size(self) -> int:
        """Number of devices."""
        return math.prod(self.shape)

    @property
    def num_axes(self) -> int:
        return len(self.shape)

    def axes_size(self, axes: tuple[int, ...] | frozenset[int]) -> int:
        """Devices in one group of the given axes (the product of their sizes)."""
        return math.prod(self.shape[a] for a in axes)

    @cached_property
    def device_ids(self) -> np.ndarray:
        """``int[*shape]``: the device at each mesh coordinate (row-major)."""
        return np.arange(self.size).reshape(self.shape)

    def __str__(self) -> str:
        return "x".join(str(s) for s in self.shape)


@dataclass(frozen=True)
class AxisLinks:
    """Latency and bandwidth of collectives along each mesh axis of a cluster.

    Attributes:
      mesh: the mesh.
      alpha: per-axis seconds per step (the largest link latency between the devices
        along the axis).
      beta: per-axis bytes/s (the smallest link bandwidth between them).
    """

    mesh: Mesh
    alpha: tuple[float, ...]
    beta: tuple[float, ...]

    @staticmethod
    def of(cluster: Cluster, mesh: Mesh) -> AxisLinks:
        """Reads each axis's links from the cluster's link table: the largest latency and
        smallest bandwidth between any two devices that differ only along the axis.

        Raises:
          ValueError: the cluster has fewer devices than the mesh.
        """
        if cluster.num_devices < mesh.size:
            raise ValueError(
                f"mesh {mesh} needs {mesh.size} devices; cluster {cluster.name!r} has "
                f"{cluster.num_devices}"
            )
        links = cluster.link_arrays
        ids = mesh.device_ids
        alpha, beta = [], []
        for axis in range(mesh.num_axes):
            groups = np.moveaxis(ids, axis, -1).reshape(-1, mesh.shape[axis])
            src = np.repeat(groups, mesh.shape[axis], axis=1).reshape(-1)
            dst = np.tile(groups, (1, mesh.shape[axis])).reshape(-1)
            pair = src != dst
            if not pair.any():
                alpha.append(0.0)
                beta.append(math.inf)
                continue
            alpha.append(float(links.latency[src[pair], dst[pair]].max()))
            beta.append(float(links.bandwidth[src[pair], dst[pair]].min()))
        return AxisLinks(mesh, tuple(alpha), tuple(beta))

    def _group(self, axes: tuple[int, ...]) -> tuple[int, float, float]:
        n = self.mesh.axes_size(axes)
        alpha = max((self.alpha[a] for a in axes), default=0.0)
        beta = min((self.beta[a] for a in axes), default=math.inf)
        return n, alpha, beta

    def cost(self, kind: str, nbytes: float, axes: tuple[int, ...]) -> float:
        """Seconds of one collective over ``axes``.

        Args:
          kind: one of :data:`COLLECTIVES`.
          nbytes: per-device payload: the gathered result (all-gather), the unreduced
            input (reduce-scatter), the array (all-reduce, all-to-all).
          axes: the mesh axes the collective runs over; ``()`` costs nothing.

        Returns:
          Seconds.
        """
        n, alpha, beta = self._group(axes)
        if n <= 1:
            return 0.0
        one_pass = math.ceil(math.log2(n)) * alpha + (n - 1) / n * nbytes / beta
        if kind == "all-reduce":
            return 2.0 * one_pass
        if kind in COLLECTIVES:
            return one_pass
        raise ValueError(f"unknown collective {kind!r}; known: {COLLECTIVES}")
