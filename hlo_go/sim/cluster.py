"""``Device``, ``Link`` and ``Cluster``: the machine a simulation runs on.

Figures are peak (datasheet) numbers unless a preset says it is calibrated; the
efficiencies scale them to what kernels achieve. Units are SI: seconds, bytes,
bytes per second, FLOP per second.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlo_go.graph import DTYPE_CLASSES
from hlo_go.hlo import FrozenDict

# Operation classes the efficiencies are given per (see :func:`hlo_go.sim.op_classes`);
# "convolution" is separate from "matrix" (dots), as their library kernels differ, and
# "grouped_convolution" (grouped or depthwise: feature/batch group count > 1) from both;
# "fused_matrix" is a dot or convolution inside a fused group of two or more nodes, which
# may lose its library kernel (on XLA:CPU a dot in a loop fusion is emitted as plain loops).
OP_CLASSES: tuple[str, ...] = (
    "matrix",
    "convolution",
    "grouped_convolution",
    "elementwise",
    "reduction",
    "data_movement",
    "other",
    "fused_matrix",
)


MAX_DEVICES = 256
"""The most devices a cluster may have (the simulator keeps ``[D, D]`` link tables and
``D²`` links; the GO policy's placement head is built for a few devices)."""


def _frozen(mapping: Mapping[str, float] | None, what: str, keys: tuple[str, ...]) -> FrozenDict:
    items = dict(mapping or {})
    unknown = sorted(set(items) - set(keys))
    if unknown:
        raise ValueError(f"{what}: unknown keys {unknown}; known: {list(keys)}")
    for key, value in items.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise ValueError(f"{what}[{key!r}] must be a positive number, got {value!r}")
    return FrozenDict((k, float(items[k])) for k in keys if k in items)


@dataclass(frozen=True)
class Device:
    """One accelerator (or CPU device) of a cluster.

    Attributes:
      name: the model, e.g. ``"NVIDIA V100-SXM2-16GB"``.
      peak_flops: FLOP/s of the vector units per output element type class (keys from
        :data:`hlo_go.graph.DTYPE_CLASSES`: ``f32``, ``bf16``, ``f16``, ``f64``, ``int``,
        ``pred``, ``other``); ``f32`` is required and stands in for missing classes.
      memory_bandwidth: bytes/s between the device and its memory.
      memory_capacity: bytes of device memory.
      launch_overhead: seconds every kernel pays before it starts working.
      matrix_flops: FLOP/s of ``dot`` and ``convolution`` per element type class (tensor
        cores, MXUs); a class missing here falls back to ``peak_flops``.
      transcendentals_per_s: transcendental functions (exp, log, tanh, ...) per second;
        0 means ``peak_flops["f32"] / 4``.
      compute_efficiency: per op class (:data:`OP_CLASSES`), the fraction of peak FLOP/s
        kernels of that class achieve (missing: 1; a missing ``convolution`` or
        ``fused_matrix`` takes ``matrix``'s value, ``grouped_convolution``
        ``convolution``'s).
      memory_efficiency: per op class, the fraction of memory bandwidth they achieve
        (missing: as for ``compute_efficiency``).
      window_reads_per_s: window reads a ``reduce-window`` makes per second (each window
        tap of each output element: a load and a reducer call); 0 prices it by its flops
        as any reduction. XLA:CPU emits reduce-windows as scalar loops, far below the
        vector units' rate. A producer fused into the window loop is priced once per read
        on top (:mod:`hlo_go.sim.simulate`).
      kernel_model: a learned per-kernel cost model that prices this device's kernels
        instead of the roofline (:mod:`hlo_go.sim.learned`): a shipped model's name
        (:func:`hlo_go.sim.learned.shipped_models`) or a model file's path; empty: the
        roofline alone.
      fuses_large_matrices: whether a dot or convolution larger than XLA:CPU fuses
        (:func:`hlo_go.decisions.large_matrix_nodes`) may join a fused kernel on this
        device. False for XLA:CPU: :meth:`hlo_go.xla.Program.lower` keeps large ones out
        of every fusion (library calls), so the simulator prices them alone, as they run,
        whatever the decisions' fusion priority says.
    """

    name: str
    peak_flops: Mapping[str, float]
    memory_bandwidth: float
    memory_capacity: float
    launch_overhead: float
    matrix_flops: Mapping[str, float] = field(default_factory=FrozenDict)
    transcendentals_per_s: float = 0.0
    compute_efficiency: Mapping[str, float] = field(default_factory=FrozenDict)
    memory_efficiency: Mapping[str, float] = field(default_factory=FrozenDict)
    kernel_model: str = ""
    fuses_large_matrices: bool = True
    window_reads_per_s: float = 0.0

    def __post_init__(self) -> None:
        what = f"device {self.name!r}"
        if not isinstance(self.fuses_large_matrices, bool):
            raise ValueError(
                f"{what}: fuses_large_matrices must be true or false, "
                f"got {self.fuses_large_matrices!r}"
            )
        if not isinstance(self.kernel_model, str):
            raise ValueError(f"{what}: kernel_model must be a string, got {self.kernel_model!r}")
        peak = _frozen(self.peak_flops, f"{what} peak_flops", DTYPE_CLASSES)
        if "f32" not in peak:
            raise ValueError(f"{what}: peak_flops needs an 'f32' entry")
        object.__setattr__(self, "peak_flops", peak)
        object.__setattr__(
            self, "matrix_flops", _frozen(self.matrix_flops, f"{what} matrix_flops", DTYPE_CLASSES)
        )
        for name in ("compute_efficiency", "memory_efficiency"):
            object.__setattr__(
                self, name, _frozen(getattr(self, name), f"{what} {name}", OP_CLASSES)
            )
        for name in ("memory_bandwidth", "memory_capacity"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{what}: {name} must be a positive number, got {value!r}")
        for name in ("launch_overhead", "transcendentals_per_s", "window_reads_per_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"{what}: {name} must be a number >= 0, got {value!r}")

    def efficiencies(self) -> tuple[np.ndarray, np.ndarray]:
        """``(compute, memory)`` efficiencies as ``float64[len(OP_CLASSES)]`` arrays, with
        the documented defaults filled in."""
        out = []
        for table in (self.compute_efficiency, self.memory_efficiency):
            values = [table.get(c, 1.0) for c in OP_CLASSES]
            # Missing: a grouped convolution as a convolution, that (and a fused matrix
            # op) as a dot.
            for like, fallback in (
                ("convolution", "matrix"),
                ("grouped_convolution", "convolution"),
                ("fused_matrix", "matrix"),
            ):
                values[OP_CLASSES.index(like)] = table.get(like, values[OP_CLASSES.index(fallback)])
            out.append(np.array(values, dtype=np.float64))
        return out[0], out[1]

    def flops_rate(self, dtype_class: str, matrix: bool) -> float:
        """Peak FLOP/s for one element type class, on the matrix or the vector units."""
        if matrix and dtype_class in self.matrix_flops:
            return self.matrix_flops[dtype_class]
        return self.peak_flops.get(dtype_class, self.peak_flops["f32"])

    @property
    def transcendental_rate(self) -> float:
        """Transcendental functions per second (the default applied)."""
        return self.transcendentals_per_s or self.peak_flops["f32"] / 4

    def replace(self, **changes: Any) -> Device:
        """A copy with some fields changed."""
        return Device(**{**self.__dict__, **changes})


@dataclass(frozen=True)
class Link:
    """A directed connection between two devices of a cluster.

    Attributes:
      src: sending device index.
      dst: receiving device index.
      bandwidth: bytes/s of one transfer on it.
      latency: seconds every transfer pays on top of ``bytes / bandwidth``.
      channel: links with the same non-empty channel name share one physical path (a
        PCIe uplink, a switch port, a first-hop torus link): only one transfer runs on
        the channel at a time. Empty: the link is a channel of its own.
    """

    src: int
    dst: int
    bandwidth: float
    latency: float
    channel: str = ""

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"link {self.src} -> {self.dst} connects a device to itself")
        if not self.bandwidth > 0 or not self.latency >= 0:
            raise ValueError(
                f"link {self.src} -> {self.dst}: bandwidth must be > 0 and latency >= 0, got "
                f"{self.bandwidth!r} and {self.latency!r}"
            )


@dataclass(frozen=True)
class Cluster:
    """Devices and the links between them.

    Every ordered pair of distinct devices has exactly one :class:`Link`; at most
    :data:`MAX_DEVICES` devices.

    Attributes:
      name: the preset or file name.
      devices: the devices, indexed by ``Decisions.placement``.
      links: one link per ordered pair of distinct devices.
      description: where the figures come from.
    """

    name: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "links", tuple(self.links))
        d = len(self.devices)
        if d == 0:
            raise ValueError(f"cluster {self.name!r} has no devices")
        if d > MAX_DEVICES:
            raise ValueError(
                f"cluster {self.name!r} has {d} devices; at most {MAX_DEVICES} are supported"
            )
        seen: set[tuple[int, int]] = set()
        for link in self.links:
            pair = (link.src, link.dst)
            if not (0 <= link.src < d and 0 <= link.dst < d):
                raise ValueError(
                    f"cluster {self.name!r}: link {pair} names a device outside 0..{d - 1}"
                )
            if pair in seen:
                raise ValueError(f"cluster {self.name!r}: two links {pair}")
            seen.add(pair)
        missing = [(i, j) for i in range(d) for j in range(d) if i != j and (i, j) not in seen]
        if missing:
            raise ValueError(
                f"cluster {self.name!r}: no link for device pairs {missing[:6]}"
                f"{' ...' if len(missing) > 6 else ''} (every ordered pair needs one)"
            )

    @property
    def num_devices(self) -> int:
        """The number of devices."""
        return len(self.devices)

    @functools.cached_property
    def link_arrays(self) -> LinkArrays:
        """The links as ``[D, D]`` matrices (computed once)."""
        d = self.num_devices
        bandwidth = np.ones((d, d), dtype=np.float64)
        latency = np.zeros((d, d), dtype=np.float64)
        channel = np.full((d, d), -1, dtype=np.int64)
        names: dict[str, int] = {}
        for link in self.links:
            bandwidth[link.src, link.dst] = link.bandwidth
            latency[link.src, link.dst] = link.latency
            key = link.channel or f"\0{link.src}->{link.dst}"
            channel[link.src, link.dst] = names.setdefault(key, len(names))
        for array in (bandwidth, latency, channel):
            array.flags.writeable = False
        return LinkArrays(bandwidth, latency, channel, tuple(names))


@dataclass(frozen=True)
class LinkArrays:
    """A cluster's links as matrices indexed ``[src, dst]``.

    Attributes:
      bandwidth: ``float64[D, D]`` bytes/s (1 on the diagonal, unused).
      latency: ``float64[D, D]`` seconds.
      channel: ``int64[D, D]`` channel id of each link (-1 on the diagonal).
      channel_names: the channel of each id (a link's own channel is ``"\\0src->dst"``).
    """

    bandwidth: np.ndarray
    latency: np.ndarray
    channel: np.ndarray
    channel_names: tuple[str, ...]

    @property
    def num_channels(self) -> int:
        """The number of channels."""
        return len(self.channel_names)

    def channel_label(self, channel: int) -> str:
        """A readable name of a channel (``"0->1"`` for a link's own channel)."""
        name = self.channel_names[channel]
        return name[1:] if name.startswith("\0") else name
