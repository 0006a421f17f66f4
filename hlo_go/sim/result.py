"""``SimResult`` and ``Timeline``: what a simulation reports."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Timeline(NamedTuple):
    """Everything that ran, when and where (``K`` kernels, ``T`` transfers, ``B`` buffers).

    Times are seconds from the start of the step. Kernel ids follow the topological
    position of each kernel's last member.

    Attributes:
      node_kernel: ``int32[N]`` the kernel each node ran in.
      kernel_ptr: ``int64[K+1]`` offsets into ``kernel_nodes``.
      kernel_nodes: ``int64[N]`` the member nodes of each kernel, in topological order.
      kernel_device: ``int32[K]`` the device each kernel ran on.
      kernel_start: ``float64[K]`` start times.
      kernel_end: ``float64[K]`` end times.
      kernel_priority: ``float64[K]`` the schedule priority (max over members).
      kernel_bytes: ``float64[K]`` bytes each kernel moved to and from memory.
      kernel_free: ``bool[K]`` kernels that are not launched: an unfused view (tuple,
        get-tuple-element, bitcast, ...) or holder (parameter, constant); they take no
        time and no device slot.
      transfer_node: ``int32[T]`` the node whose output each transfer moves.
      transfer_src: ``int32[T]`` the sending device.
      transfer_dst: ``int32[T]`` the receiving device.
      transfer_channel: ``int32[T]`` the channel it occupied (see ``channel_names``).
      transfer_bytes: ``int64[T]`` bytes moved.
      transfer_start: ``float64[T]`` start times (when the channel took it).
      transfer_end: ``float64[T]`` arrival times.
      buffer_node: ``int32[B]`` the node whose value each buffer holds.
      buffer_device: ``int32[B]`` the device holding it.
      buffer_bytes: ``int64[B]`` its size.
      buffer_alloc: ``float64[B]`` when it is allocated.
      buffer_free: ``float64[B]`` when it is freed (buffers alive to the end are freed at
        ``step_time``).
      buffer_copy: ``bool[B]`` True for a transferred copy on the receiving device.
      channel_names: readable name of each channel (``"0->1"`` for a link of its own).
    """

    node_kernel: np.ndarray
    kernel_ptr: np.ndarray
    kernel_nodes: np.ndarray
    kernel_device: np.ndarray
    kernel_start: np.ndarray
    kernel_end: np.ndarray
    kernel_priority: np.ndarray
    kernel_bytes: np.ndarray
    kernel_free: np.ndarray
    transfer_node: np.ndarray
    transfer_src: np.ndarray
    transfer_dst: np.ndarray
    transfer_channel: np.ndarray
    transfer_bytes: np.ndarray
    transfer_start: np.ndarray
    transfer_end: np.ndarray
    buffer_node: np.ndarray
    buffer_device: np.ndarray
    buffer_bytes: np.ndarray
    buffer_alloc: np.ndarray
    buffer_free: np.ndarray
    buffer_copy: np.ndarray
    channel_names: tuple[str, ...]

    @property
    def num_kernels(self) -> int:
        """K, the number of kernels (free ones included)."""
        return int(self.kernel_device.shape[0])

    @property
    def num_transfers(self) -> int:
        """T, the number of transfers."""
        return int(self.transfer_node.shape[0])

    def members(self, kernel: int) -> np.ndarray:
        """The node ids of one kernel, in topological order."""
        return self.kernel_nodes[self.kernel_ptr[kernel] : self.kernel_ptr[kernel + 1]]

    def memory_curve(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes in use on one device over time.

        Args:
          device: the device index.

        Returns:
          ``(times, bytes)``: the memory in use from ``times[i]`` until ``times[i+1]``
          (frees at a time are applied before allocations at it).
        """
        mine = (self.buffer_device == device) & (self.buffer_free > self.buffer_alloc)
        alloc, free = self.buffer_alloc[mine], self.buffer_free[mine]
        size = self.buffer_bytes[mine]
        times = np.concatenate([free, alloc])
        delta = np.concatenate([-size, size])
        order = np.lexsort((np.concatenate([np.zeros_like(free), np.ones_like(alloc)]), times))
        return times[order], np.cumsum(delta[order])


class SimResult(NamedTuple):
    """The simulated outcome of one set of decisions (``D`` devices).

    Attributes:
      step_time: seconds from the first kernel's start to the last kernel's or
        transfer's end.
      busy_time: ``float64[D]`` seconds each device spent running kernels.
      peak_memory: ``int64[D]`` the most bytes live at once on each device.
      memory_capacity: ``float64[D]`` each device's memory (bytes).
      oom: True when some device's peak memory exceeds its capacity.
      bytes_moved: total bytes of all transfers between devices.
      num_kernels: kernels launched (fused groups count once; free nodes not at all).
      fusion_group: ``int32[N]`` the fusion grouping simulated (smallest member id).
      timeline: the :class:`Timeline`.
      fallback_kernels: launched kernels on devices with a learned kernel model
        (``Device.kernel_model``) that the model could not featurize (too many members),
        priced by the roofline instead.
    """

    step_time: float
    busy_time: np.ndarray
    peak_memory: np.ndarray
    memory_capacity: np.ndarray
    oom: bool
    bytes_moved: int
    num_kernels: int
    fusion_group: np.ndarray
    timeline: Timeline
    fallback_kernels: int = 0

    @property
    def oom_devices(self) -> np.ndarray:
        """Indices of the devices whose peak memory exceeds their capacity."""
        return np.flatnonzero(self.peak_memory > self.memory_capacity)

    def summary(self) -> dict[str, Any]:
        """JSON-able headline numbers (no per-kernel arrays)."""
        timeline = self.timeline
        return {
            "step_time_s": self.step_time,
            "busy_time_s": self.busy_time.tolist(),
            "peak_memory_bytes": self.peak_memory.tolist(),
            "memory_capacity_bytes": self.memory_capacity.tolist(),
            "oom": self.oom,
            "oom_devices": self.oom_devices.tolist(),
            "bytes_moved": self.bytes_moved,
            "kernels": self.num_kernels,
            "fused_kernels": int(np.count_nonzero(np.diff(timeline.kernel_ptr) > 1)),
            "transfers": timeline.num_transfers,
            "fallback_kernels": self.fallback_kernels,
        }
