"""``plot_timeline``: a per-device Gantt chart of a simulation (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hlo_go.sim.result import SimResult


def plot_timeline(
    result: SimResult,
    path: str | Path,
    *,
    title: str | None = None,
    memory: bool = True,
    dpi: int = 120,
) -> Path:
    """Draws kernels per device and transfers per channel over time, and saves the figure.

    One row per device (fused kernels in a darker colour than single-node ones), one
    row per channel that carried a transfer, and (with ``memory``) a panel with each
    device's memory in use over time.

    Args:
      result: a :class:`~hlo_go.sim.SimResult`.
      path: the image file to write (the suffix picks the format: .png, .svg, .pdf).
      title: the figure title (default: step time and peak memory).
      memory: add the memory panel.
      dpi: resolution of raster formats.

    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = result.timeline
    devices = result.busy_time.shape[0]
    channels = np.unique(timeline.transfer_channel)
    rows = devices + channels.size
    scale, unit = _time_unit(result.step_time)
    fig_height = 1.2 + 0.35 * rows + (2.0 if memory else 0.0)
    fig, axes = plt.subplots(
        2 if memory else 1,
        1,
        figsize=(12, fig_height),
        squeeze=False,
        gridspec_kw={"height_ratios": [max(rows, 1), 4] if memory else [1]},
        sharex=True,
    )
    ax = axes[0, 0]
    launched = ~timeline.kernel_free
    sizes = np.diff(timeline.kernel_ptr)
    for d in range(devices):
        for fused, colour in ((False, "tab:blue"), (True, "tab:purple")):
            mask = launched & (timeline.kernel_device == d) & ((sizes > 1) == fused)
            starts = timeline.kernel_start[mask] * scale
            widths = (timeline.kernel_end[mask] - timeline.kernel_start[mask]) * scale
            ax.broken_barh(np.stack([starts, widths], axis=1), (d - 0.4, 0.8), facecolors=colour)
    labels = [f"device {d}" for d in range(devices)]
    for row, channel in enumerate(channels.tolist(), start=devices):
        mask = timeline.transfer_channel == channel
        starts = timeline.transfer_start[mask] * scale
        widths = (timeline.transfer_end[mask] - timeline.transfer_start[mask]) * scale
        ax.broken_barh(
            np.stack([starts, widths], axis=1), (row - 0.4, 0.8), facecolors="tab:orange"
        )
        labels.append(f"link {timeline.channel_names[channel]}")
    ax.set_yticks(range(rows), labels)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlim(0, max(result.step_time * scale, 1e-12))
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(
        title
        or (
            f"step {result.step_time * scale:.3g} {unit}, {result.num_kernels} kernels, "
            f"{timeline.num_transfers} transfers, peak memory "
            f"{result.peak_memory.max(initial=0) / 2**20:.1f} MiB"
            + (" (OOM)" if result.oom else "")
        )
    )
    if memory:
        mem_ax = axes[1, 0]
        for d in range(devices):
            times, used = timeline.memory_curve(d)
            if times.size:
                mem_ax.step(times * scale, used / 2**20, where="post", label=f"device {d}")
        mem_ax.set_ylabel("MiB in use")
        if devices <= 8:
            mem_ax.legend(loc="upper right", fontsize="small")
        mem_ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _time_unit(seconds: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "us")):
        if seconds * scale >= 1:
            return scale, unit
    return 1e9, "ns"
