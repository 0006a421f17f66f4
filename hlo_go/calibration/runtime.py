"""The MPMD runtime's overheads, measured, and the simulator preset that uses them.

The simulator (:mod:`hlo_go.sim`) charges each kernel its device's launch overhead and
each cross-device tensor ``latency + bytes / bandwidth`` of its link. The MPMD runtime
(:mod:`hlo_go.xla.placed`) adds what a simulator of kernels does not see:

* a host **dispatch cost per segment** (one PJRT ``execute`` call from Python);
* **transfers** by ``jax.device_put``, whose latency and bandwidth on this host's
  virtual CPU devices differ from the datasheet-style figures of ``host-cpu-N``.

:func:`calibrate_runtime` measures both on real devices; :func:`mpmd_host_cluster` is
the ``host-cpu-N`` preset with its links replaced by the measured transfer figures
(the *host preset variant* for this runtime); :func:`predict_placed` is the predicted
step time of a placed program: the simulated step on that cluster plus the dispatch
cost of its segments (dispatch runs on one host thread, so it adds up).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from hlo_go.decisions import Decisions
from hlo_go.graph import OpGraph
from hlo_go.sim.cluster import Cluster, Link
from hlo_go.sim.presets import host_cpu
from hlo_go.sim.simulate import simulate
from hlo_go.xla._jaxlib import compile_hlo_text


class RuntimeCalibration(NamedTuple):
    """Measured overheads of the MPMD runtime on one kind of device.

    Attributes:
      dispatch_s: host seconds per segment dispatch (asynchronous ``execute`` of a
        tiny executable, averaged over a burst).
      transfer_latency_s: seconds of a ``jax.device_put`` between two devices on top of
        its bytes (the smallest transfer's time).
      transfer_bandwidth: bytes per second of ``jax.device_put`` between two devices
        (between the two largest transfers).
      samples: the raw measurements (``transfer``: ``[bytes, seconds]`` pairs).
    """

    dispatch_s: float
    transfer_latency_s: float
    transfer_bandwidth: float
    samples: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "dispatch_s": self.dispatch_s,
            "transfer_latency_s": self.transfer_latency_s,
            "transfer_bandwidth": self.transfer_bandwidth,
            "samples": self.samples,
        }


# Measured on this host (2 vCPUs of an AMD EPYC, 8 virtual CPU devices, jaxlib 0.10.2,
# other jobs sharing the cores) by ``python -m benchmarks mpmd`` on 2026-11-22
# (benchmarks/results/mpmd.json, "calibration"): 11 us per dispatch; device_put 107 us for
# 4 KiB, 0.22 ms for 1 MiB (~4.7 GB/s), but 8 MiB -> 32 MiB at 0.45 GB/s (large fresh
# buffers), which is the bandwidth kept: the big activations dominate transferred bytes.
HOST_MPMD = RuntimeCalibration(
    dispatch_s=11e-6,
    transfer_latency_s=107e-6,
    transfer_bandwidth=0.45e9,
)

_TINY = """HloModule tiny

ENTRY %main (x: f32[4]) -> (f32[4]) {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} add(%x, %x)
  ROOT %out = (f32[4]{0}) tuple(%y)
}
"""


def _median_time(fn: Any, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def calibrate_runtime(
    devices: Sequence[Any],
    *,
    sizes: Sequence[int] = (1 << 12, 1 << 16, 1 << 20, 1 << 23, 1 << 25),
    repeats: int = 15,
    burst: int = 200,
) -> RuntimeCalibration:
    """Measures dispatch cost and transfer latency/bandwidth on real devices.

    Args:
      devices: at least two jax devices (transfers go from ``devices[0]`` to ``devices[1]``).
      sizes: transfer sizes in bytes.
      repeats: timed repetitions per measurement (the median is kept).
      burst: executes per dispatch measurement.

    Returns:
      The :class:`RuntimeCalibration` for ``seconds = latency + bytes / bandwidth``:
      latency the smallest transfer's median time, bandwidth the slope between the two
      largest.

    Raises:
      ValueError: fewer than two devices.
    """
    if len(devices) < 2:
        raise ValueError(f"calibration needs two devices, got {len(devices)}")
    src, dst = devices[0], devices[1]
    exe = compile_hlo_text(_TINY, device=src)
    x = jax.device_put(np.ones(4, np.float32), src)
    jax.block_until_ready(exe.execute([x]))

    def dispatch_burst() -> None:
        outs = None
        for _ in range(burst):
            outs = exe.execute([x])
        jax.block_until_ready(outs)

    dispatch_s = _median_time(dispatch_burst, repeats) / burst

    pairs: list[list[float]] = []
    for size in sizes:
        array = jax.device_put(np.ones(size // 4, np.float32), src)
        jax.block_until_ready(jax.device_put(array, dst))
        seconds = _median_time(lambda a=array: jax.device_put(a, dst).block_until_ready(), repeats)
        pairs.append([float(size), seconds])
    data = np.asarray(sorted(pairs))
    # The smallest transfer is all latency; the two largest fix the bandwidth (a least
    # squares line is dominated by either end and mis-states the other on this host).
    latency = float(data[0, 1])
    (b0, t0), (b1, t1) = data[-2], data[-1]
    bandwidth = float((b1 - b0) / (t1 - t0)) if t1 > t0 else float(b1 / max(t1 - latency, 1e-9))
    return RuntimeCalibration(
        dispatch_s=float(dispatch_s),
        transfer_latency_s=latency,
        transfer_bandwidth=bandwidth,
        samples={"transfer": pairs, "burst": burst, "repeats": repeats},
    )


def mpmd_host_cluster(n: int, calibration: RuntimeCalibration = HOST_MPMD) -> Cluster:
    """``host-cpu-N`` with links that move tensors as this runtime does.

    Args:
      n: devices, 1 to 8.
      calibration: the measured overheads (default :data:`HOST_MPMD`).

    Returns:
      A :class:`~hlo_go.sim.Cluster` named ``host-cpu-N-mpmd``: the calibrated host
      devices of ``host-cpu-N``, every link ``jax.device_put`` at the measured latency
      and bandwidth, all sharing one host-memory channel.
    """
    base = host_cpu(n)
    links = tuple(
        Link(
            link.src,
            link.dst,
            calibration.transfer_bandwidth,
            calibration.transfer_latency_s,
            channel="host-memory",
        )
        for link in base.links
    )
    return Cluster(
        f"host-cpu-{n}-mpmd",
        base.devices,
        links,
        f"{base.description}; links calibrated for the MPMD runtime's jax.device_put "
        f"({calibration.transfer_bandwidth / 1e9:.2f} GB/s, "
        f"{calibration.transfer_latency_s * 1e6:.0f} us)",
    )


def predict_placed(
    graph: OpGraph,
    decisions: Decisions,
    num_segments: int,
    *,
    cluster: Cluster | None = None,
    calibration: RuntimeCalibration = HOST_MPMD,
) -> float:
    """Predicted step time of a placed program: simulated step + segment dispatches.

    Args:
      graph: the placed graph.
      decisions: the decisions simulated (placement, schedule, fusion).
      num_segments: segments the runtime dispatches per step
        (:attr:`hlo_go.xla.placed.PlacedProgram.num_segments`).
      cluster: the simulated cluster (default :func:`mpmd_host_cluster` for the
        placement's device count).
      calibration: the runtime overheads.

    Returns:
      Seconds.
    """
    if cluster is None:
        cluster = mpmd_host_cluster(int(decisions.placement.max()) + 1, calibration)
    result = simulate(graph, cluster, decisions)
    return float(result.step_time) + num_segments * calibration.dispatch_s
