"""Cluster presets by name: the paper's GPU boxes, newer GPU and TPU machines, this host.

``get_cluster(name)`` returns a :class:`~hlo_go.sim.Cluster`; ``names()`` lists them.
Figures are the vendors' datasheet peaks (dense, no sparsity), cited next to each
device. Launch overheads and link latencies are not datasheet figures: they are
typical measured orders of magnitude, marked as such, and are what calibration
(:func:`hlo_go.sim.calibrate`) replaces for a device that can be measured.

Interconnects, as those machines had them:

* ``p100x2``, ``p100x4``: Tesla P100 PCIe boards in one PCIe 3.0 x16 tree (the
  workstations of the device-placement papers); a transfer runs peer to peer over
  the sender's x16 uplink, one transfer per uplink at a time.
* ``v100x4``: DGX Station, four V100 fully connected by NVLink 2.0 (two links per pair).
* ``v100x8``: DGX-1 with V100, NVLink 2.0 hybrid cube-mesh (one or two links per
  connected pair); the other pairs go over PCIe and the CPUs' QPI link.
* ``a100x8`` / ``h100x8``: DGX A100 / DGX H100, every GPU on NVSwitch; a transfer is
  limited by the sender's NVLink bandwidth, one transfer per sender port at a time.
* ``tpu-v4-8``: four TPU v4 chips (8 TensorCores, as ``v4-8`` names them) in a 2x2
  mesh of ICI links; ``tpu-v5e-8``: eight TPU v5e chips in a 2x4 mesh. Neighbours
  talk over one ICI link; farther chips are routed (dimension order), paying a hop
  latency per hop and sharing the sender's first-hop link.
* ``host-cpu-N`` (N = 1..8): this host's CPU split into N virtual XLA devices
  (``--xla_force_host_platform_device_count``), values moved by ``jax.device_put``,
  with the efficiencies and launch overhead calibrated on this host
  (:data:`HOST_CORE_CALIBRATED`). The virtual devices share the host's cores and
  memory: each is given the calibrated single-device figures and 1/N of the memory, so
  predicted multi-device speedups are optimistic. Kernels are priced by the calibrated
  roofline; ``host_cpu(n, kernel_model=HOST_KERNEL_MODEL)`` prices them with the learned
  kernel cost model (:mod:`hlo_go.sim.learned`) instead, which is not the default until
  it ranks fusion variants better than the roofline (docs/cost_model.md).
* ``host-cpu-N-learned`` (N = 1..8): ``host-cpu-N`` with its kernels priced by the shipped
  learned kernel cost model (``host_cpu(n, kernel_model=HOST_KERNEL_MODEL)``), by name, so
  that whatever takes a preset name (teacher jobs, ``--cluster``) can simulate with it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable

from hlo_go.sim.cluster import Cluster, Device, Link

T = 1e12
G = 1e9
GiB = 1 << 30
US = 1e-6

# Kernel launch overhead of CUDA GPUs: a few microseconds from host submission to the
# kernel running (typical measured order of magnitude, not a datasheet figure).
GPU_LAUNCH_S = 5 * US
# A TPU runs the whole program on the device; per-op overhead is a sub-microsecond
# pipeline bubble (assumed order of magnitude).
TPU_LAUNCH_S = 0.5 * US

# NVIDIA Tesla P100 PCIe 16 GB datasheet (2016): 4.7 TFLOPS FP64, 9.3 TFLOPS FP32,
# 18.7 TFLOPS FP16; 16 GB CoWoS HBM2 at 732 GB/s. No tensor cores.
P100_PCIE = Device(
    name="NVIDIA Tesla P100-PCIE-16GB",
    peak_flops={"f64": 4.7 * T, "f32": 9.3 * T, "f16": 18.7 * T, "int": 9.3 * T},
    memory_bandwidth=732 * G,
    memory_capacity=16 * GiB,
    launch_overhead=GPU_LAUNCH_S,
)
# NVIDIA Tesla V100 SXM2 datasheet / Volta whitepaper (2017): 7.8 TFLOPS FP64,
# 15.7 TFLOPS FP32, 31.4 TFLOPS FP16 (vector), 125 TFLOPS tensor (FP16 in);
# 16 GB HBM2 at 900 GB/s. No bf16 units (bf16 runs at the f32 rate).
V100_SXM2 = Device(
    name="NVIDIA Tesla V100-SXM2-16GB",
    peak_flops={"f64": 7.8 * T, "f32": 15.7 * T, "f16": 31.4 * T, "int": 15.7 * T},
    matrix_flops={"f16": 125 * T},
    memory_bandwidth=900 * G,
    memory_capacity=16 * GiB,
    launch_overhead=GPU_LAUNCH_S,
)
# NVIDIA A100 Tensor Core GPU datasheet and Ampere whitepaper (2020), SXM4 40 GB:
# 9.7 TFLOPS FP64 (19.5 on tensor cores), 19.5 TFLOPS FP32, 78 TFLOPS FP16 and
# 39 TFLOPS BF16 on the vector units; tensor cores 156 TFLOPS TF32 (what XLA uses for
# f32 dots by default), 312 TFLOPS BF16/FP16, 624 TOPS INT8; HBM2 1,555 GB/s.
A100_SXM4 = Device(
    name="NVIDIA A100-SXM4-40GB",
    peak_flops={"f64": 9.7 * T, "f32": 19.5 * T, "f16": 78 * T, "bf16": 39 * T, "int": 19.5 * T},
    matrix_flops={"f64": 19.5 * T, "f32": 156 * T, "f16": 312 * T, "bf16": 312 * T, "int": 624 * T},
    memory_bandwidth=1555 * G,
    memory_capacity=40 * GiB,
    launch_overhead=GPU_LAUNCH_S,
)
# NVIDIA H100 Tensor Core GPU datasheet and Hopper whitepaper (2022), SXM5 80 GB:
# 34 TFLOPS FP64 (67 on tensor cores), 67 TFLOPS FP32, 133.8 TFLOPS FP16/BF16 on the
# vector units; tensor cores (dense) 494.7 TFLOPS TF32, 989.4 TFLOPS BF16/FP16,
# 1,979 TOPS INT8; HBM3 3.35 TB/s.
H100_SXM5 = Device(
    name="NVIDIA H100-SXM5-80GB",
    peak_flops={"f64": 34 * T, "f32": 67 * T, "f16": 133.8 * T, "bf16": 133.8 * T, "int": 33.5 * T},
    matrix_flops={
        "f64": 67 * T,
        "f32": 494.7 * T,
        "f16": 989.4 * T,
        "bf16": 989.4 * T,
        "int": 1979 * T,
    },
    memory_bandwidth=3350 * G,
    memory_capacity=80 * GiB,
    launch_overhead=GPU_LAUNCH_S,
)
# Google Cloud TPU v4 documentation (system architecture) and Jouppi et al., "TPU v4",
# ISCA 2023: 275 TFLOPS bf16 (and int8) per chip on the MXUs; 32 GiB HBM2 at
# 1,200 GB/s. XLA's default precision runs f32 dots as bf16 passes, so f32 dots get
# the bf16 rate. The vector units' rate is not published; 1/16 of the MXU peak is an
# assumption.
TPU_V4 = Device(
    name="Google TPU v4",
    peak_flops={"f32": 275 / 16 * T, "bf16": 275 / 16 * T},
    matrix_flops={"f32": 275 * T, "bf16": 275 * T, "int": 275 * T},
    memory_bandwidth=1200 * G,
    memory_capacity=32 * GiB,
    launch_overhead=TPU_LAUNCH_S,
)
# Google Cloud TPU v5e documentation: 197 TFLOPS bf16, 394 TOPS int8 per chip;
# 16 GiB HBM2 at 819 GB/s. Vector rate assumed 1/16 of the MXU peak, as for v4.
TPU_V5E = Device(
    name="Google TPU v5e",
    peak_flops={"f32": 197 / 16 * T, "bf16": 197 / 16 * T},
    matrix_flops={"f32": 197 * T, "bf16": 197 * T, "int": 394 * T},
    memory_bandwidth=819 * G,
    memory_capacity=16 * GiB,
    launch_overhead=TPU_LAUNCH_S,
)

# PCIe 3.0 x16: 8 GT/s x 16 lanes, 128b/130b encoding = 15.75 GB/s per direction
# (PCI-SIG PCIe 3.0 specification). Peer-to-peer latency through a PCIe switch about
# 10 us per cudaMemcpyPeerAsync (measured order of magnitude, e.g. Li et al.,
# "Evaluating Modern GPU Interconnect", IEEE TPDS 2020).
PCIE3_BW = 15.75 * G
PCIE3_LATENCY = 10 * US
# NVLink 2.0: 25 GB/s per link per direction, six links per V100 (V100 datasheet:
# 300 GB/s total bidirectional). Latency: measured order of magnitude, about 5 us per
# cudaMemcpyPeerAsync (Li et al., TPDS 2020).
NVLINK2_BW = 25 * G
NVLINK_LATENCY = 5 * US
# CPU-routed path (PCIe to the root complex, then the two Xeons' QPI link): the PCIe
# bandwidth at best, with extra latency (assumed 15 us).
SYS_LATENCY = 15 * US
# NVLink 3.0 in DGX A100: 12 links x 25 GB/s = 300 GB/s per direction per GPU through
# NVSwitch (A100 datasheet: 600 GB/s total). NVLink 4.0 in DGX H100: 18 links,
# 450 GB/s per direction (H100 datasheet: 900 GB/s total).
NVLINK3_GPU_BW = 300 * G
NVLINK4_GPU_BW = 450 * G
# ICI: 50 GB/s per link per direction (TPU v4: six links per chip, 2,400 Gbps per chip
# per Google's TPU v4 documentation; TPU v5e: four links, 1,600 Gbps per chip, per the
# v5e documentation). Per-hop latency: assumed 2 us for a host-visible transfer.
ICI_LINK_BW = 50 * G
ICI_HOP_LATENCY = 2 * US

# DGX-1 (V100) hybrid cube-mesh: NVLink count between connected GPU pairs, as
# `nvidia-smi topo -m` reports it (NV1 / NV2); the DGX-1 V100 system architecture
# whitepaper (WP-08437-002) shows the same topology: two fully connected quads
# (0-3, 4-7) and links i <-> i+4. Each GPU uses its six links.
DGX1_NVLINKS: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}  # fmt: skip

# This host (where ``hlo-go`` is developed): 2 vCPUs of an AMD EPYC (Zen 3, family 25),
# about 2.45 GHz, AVX2 with two 256-bit FMA pipes: 32 f32 / 16 f64 FLOP per cycle per
# core (AMD Zen 3 software optimization guide); 23 GiB of memory. Measured here: about
# 12 GB/s for a large numpy copy (read + write) on one core; jax.device_put between
# virtual CPU devices 2-4 GB/s for large arrays and about 130 us for small ones; XLA
# runs each thunk for about 1-2 us of overhead. Calibration replaces these figures.
HOST_CORE = Device(
    name="host CPU core (AMD EPYC Zen 3, AVX2)",
    peak_flops={"f64": 39 * G, "f32": 78 * G, "bf16": 78 * G, "f16": 78 * G, "int": 78 * G},
    memory_bandwidth=12 * G,
    memory_capacity=23 * GiB,
    launch_overhead=1.5 * US,
    transcendentals_per_s=2 * G,
    # our lowering keeps large dots and convolutions out of fusions on XLA:CPU
    fuses_large_matrices=False,
)
# HOST_CORE calibrated on this host (python -m hlo_go.calibration, 2026-11-24; the host
# now reports AMD EPYC family 25 model 17, AVX-512): fitted to 15,040 kernels of 18 corpus
# training steps compiled by XLA (per-thunk trace events, one pinned core, CPU time) and
# their step times, dots and convolutions as separate classes; launch overhead = 0.87 us
# per kernel + 1.85 us of runtime gap between kernels; "fused_matrix" fitted to the step
# times of 14 fusion variants of rnnlm_l2_scan and gnmt_l2_scan (a dot inside a loop
# fusion runs as plain loops, about 65x slower than XLA's library call). Efficiencies
# above 1 mean faster than the base figures (YNNPACK dots reach about 95 GFLOP/s on one
# core; mid-sized elementwise kernels run from cache). The fit's errors are in
# benchmarks/results/sim_calibration.json. window_reads_per_s (2026-11-29): XLA:CPU runs a
# reduce-window as scalar loops at a median 0.28 ns per window read (inception_v3_small's 27
# reduce-windows run unfused in two variants, 54 kernels, 0.26-0.31 ns interquartile;
# resnet_26's 12 in the kernel dataset run 0.47-1.35 ns), where the roofline priced
# 0.013 ns and 3x too little.
HOST_CORE_CALIBRATED = HOST_CORE.replace(
    name="host CPU core (AMD EPYC Zen 3, AVX2), calibrated",
    launch_overhead=2.72 * US,
    window_reads_per_s=3.6 * G,
    compute_efficiency={
        "matrix": 1.03,
        "convolution": 0.623,
        "elementwise": 0.805,
        "data_movement": 2.74,
        "other": 0.665,
        "fused_matrix": 0.0154,
    },
    memory_efficiency={
        "matrix": 0.318,
        "convolution": 0.122,
        "elementwise": 2.10,
        "data_movement": 0.954,
        "other": 2.54,
    },
)
HOST_DEVICE_PUT_BW = 3 * G
HOST_DEVICE_PUT_LATENCY = 130 * US
# The shipped learned kernel cost model of this host's XLA:CPU kernels (hlo_go.sim.learned):
# host_cpu(n, kernel_model=HOST_KERNEL_MODEL) prices kernels with it, the roofline above
# being its input and fallback. Opt-in: on held-out families it ranks fusion variants no
# better than the roofline (benchmarks/results/cost_model.json).
HOST_KERNEL_MODEL = "host-cpu"


def _all_pairs(d: int, link: Callable[[int, int], Link]) -> tuple[Link, ...]:
    return tuple(link(i, j) for i, j in itertools.permutations(range(d), 2))


def _pcie_box(name: str, device: Device, d: int) -> Cluster:
    links = _all_pairs(
        d, lambda i, j: Link(i, j, PCIE3_BW, PCIE3_LATENCY, channel=f"pcie-uplink-{i}")
    )
    return Cluster(
        name,
        (device,) * d,
        links,
        f"{d} x {device.name} on PCIe 3.0 x16 (peer to peer, one transfer per uplink)",
    )


def _v100x4() -> Cluster:
    links = _all_pairs(4, lambda i, j: Link(i, j, 2 * NVLINK2_BW, NVLINK_LATENCY))
    return Cluster(
        "v100x4",
        (V100_SXM2,) * 4,
        links,
        "DGX Station: 4 x V100-SXM2-16GB fully connected by NVLink 2.0 (2 links per pair)",
    )


def _v100x8() -> Cluster:
    def link(i: int, j: int) -> Link:
        count = DGX1_NVLINKS.get((min(i, j), max(i, j)), 0)
        if count:
            return Link(i, j, count * NVLINK2_BW, NVLINK_LATENCY)
        # No NVLink: PCIe to the CPU, QPI across sockets; shares the GPU's PCIe uplink.
        return Link(i, j, PCIE3_BW, SYS_LATENCY, channel=f"pcie-uplink-{i}")

    return Cluster(
        "v100x8",
        (V100_SXM2,) * 8,
        _all_pairs(8, link),
        "DGX-1 (V100): 8 x V100-SXM2-16GB, NVLink 2.0 hybrid cube-mesh, other pairs via PCIe/QPI",
    )


def _nvswitch_box(name: str, device: Device, bandwidth: float, system: str) -> Cluster:
    links = _all_pairs(
        8, lambda i, j: Link(i, j, bandwidth, NVLINK_LATENCY, channel=f"nvlink-port-{i}")
    )
    return Cluster(name, (device,) * 8, links, f"{system}: 8 x {device.name} on NVSwitch")


def _tpu_mesh(name: str, device: Device, shape: tuple[int, int], system: str) -> Cluster:
    rows, cols = shape
    coords = [(r, c) for r in range(rows) for c in range(cols)]

    def link(i: int, j: int) -> Link:
        (ri, ci), (rj, cj) = coords[i], coords[j]
        hops = abs(ri - rj) + abs(ci - cj)
        # Dimension-order routing: the first hop moves along the row dimension if it
        # differs, else along the column; that link is the channel the transfer occupies.
        first = (ri + (1 if rj > ri else -1), ci) if ri != rj else (ri, ci + (1 if cj > ci else -1))
        return Link(
            i,
            j,
            ICI_LINK_BW,
            hops * ICI_HOP_LATENCY,
            channel=f"ici-{i}->{coords.index(first)}",
        )

    return Cluster(
        name,
        (device,) * (rows * cols),
        _all_pairs(rows * cols, link),
        f"{system}: {rows * cols} x {device.name} chips in a {rows}x{cols} ICI mesh",
    )


def host_cpu(n: int, *, kernel_model: str = "") -> Cluster:
    """This host's CPU as ``n`` virtual XLA devices (``host-cpu-N``).

    Args:
      n: the number of devices, 1 to 8.
      kernel_model: a learned kernel cost model pricing the kernels
        (:data:`HOST_KERNEL_MODEL`, measured on this host, or a model file); ``""`` (the
        default) for the calibrated roofline alone.

    Returns:
      The cluster: each device :data:`HOST_CORE_CALIBRATED` with 1/n of the memory and
      the kernel model; links are ``jax.device_put`` between virtual devices (through
      host memory, all sharing one channel).
    """
    if not 1 <= n <= 8:
        raise ValueError(f"host-cpu-N needs 1 <= N <= 8, got {n}")
    device = HOST_CORE_CALIBRATED.replace(
        memory_capacity=HOST_CORE.memory_capacity / n, kernel_model=kernel_model
    )
    links = _all_pairs(
        n,
        lambda i, j: Link(i, j, HOST_DEVICE_PUT_BW, HOST_DEVICE_PUT_LATENCY, channel="host-memory"),
    )
    return Cluster(
        f"host-cpu-{n}",
        (device,) * n,
        links,
        f"this host's CPU as {n} virtual XLA device(s), calibrated on this host",
    )


def host_cpu_learned(n: int) -> Cluster:
    """``host-cpu-N-learned``: :func:`host_cpu` priced by the shipped learned kernel cost
    model (:data:`HOST_KERNEL_MODEL`), named apart from the roofline's ``host-cpu-N``."""
    cluster = host_cpu(n, kernel_model=HOST_KERNEL_MODEL)
    return dataclasses.replace(
        cluster,
        name=f"host-cpu-{n}-learned",
        description=f"{cluster.description}; kernels priced by the learned cost model",
    )


_PRESETS: dict[str, Callable[[], Cluster]] = {
    "p100x2": lambda: _pcie_box("p100x2", P100_PCIE, 2),
    "p100x4": lambda: _pcie_box("p100x4", P100_PCIE, 4),
    "v100x4": _v100x4,
    "v100x8": _v100x8,
    "a100x8": lambda: _nvswitch_box("a100x8", A100_SXM4, NVLINK3_GPU_BW, "DGX A100"),
    "h100x8": lambda: _nvswitch_box("h100x8", H100_SXM5, NVLINK4_GPU_BW, "DGX H100"),
    "tpu-v4-8": lambda: _tpu_mesh("tpu-v4-8", TPU_V4, (2, 2), "Cloud TPU v4-8"),
    "tpu-v5e-8": lambda: _tpu_mesh("tpu-v5e-8", TPU_V5E, (2, 4), "Cloud TPU v5litepod-8"),
    **{f"host-cpu-{n}": functools.partial(host_cpu, n) for n in range(1, 9)},
    **{f"host-cpu-{n}-learned": functools.partial(host_cpu_learned, n) for n in range(1, 9)},
}


def names() -> list[str]:
    """The preset names :func:`get_cluster` knows."""
    return list(_PRESETS)


@functools.cache
def get_cluster(name: str) -> Cluster:
    """A cluster preset by name.

    Args:
      name: one of :func:`names` (``p100x2``, ``v100x8``, ``h100x8``, ``tpu-v5e-8``,
        ``host-cpu-4``, ...).

    Returns:
      The :class:`~hlo_go.sim.Cluster` (the same object on every call).

    Raises:
      KeyError: an unknown name; the message lists the known ones.
    """
    try:
        factory = _PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown cluster {name!r}; presets: {', '.join(_PRESETS)}") from None
    return factory()
