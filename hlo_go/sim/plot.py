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

    One row per device that ran a kernel (fused kernels in a darker colour than
    single-node ones, a legend says which), one row per channel that carried a transfer,
    and (with ``memory``) a panel with each such device's memory in use over time.
    Devices that ran nothing are left out (the title says how many).

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
    from matplotlib.patches import Patch

    timeline = result.timeline
    launched = ~timeline.kernel_free
    used_devices = np.unique(timeline.kernel_device[launched]).tolist()
    if not used_devices:
        used_devices = [0]
    idle = result.busy_time.shape[0] - len(used_devices)
    devices = len(used_devices)
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
    sizes = np.diff(timeline.kernel_ptr)
    for row, d in enumerate(used_devices):
        for fused, colour in _KERNEL_COLOURS:
            mask = launched & (timeline.kernel_device == d) & ((sizes > 1) == fused)
            starts = timeline.kernel_start[mask] * scale
            widths = (timeline.kernel_end[mask] - timeline.kernel_start[mask]) * scale
            ax.broken_barh(np.stack([starts, widths], axis=1), (row - 0.4, 0.8), facecolors=colour)
    labels = [f"device {d}" for d in used_devices]
    for row, channel in enumerate(channels.tolist(), start=devices):
        mask = timeline.transfer_channel == channel
        starts = timeline.transfer_start[mask] * scale
        widths = (timeline.transfer_end[mask] - timeline.transfer_start[mask]) * scale
        ax.broken_barh(
            np.stack([starts, widths], axis=1), (row - 0.4, 0.8), facecolors=_TRANSFER_COLOUR
        )
        labels.append(f"link {timeline.channel_names[channel]}")
    ax.set_yticks(range(rows), labels)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlim(0, max(result.step_time * scale, 1e-12))
    ax.grid(axis="x", alpha=0.3)
    legend = [
        Patch(facecolor=colour, label="fused kernel" if fused else "single-op kernel")
        for fused, colour in _KERNEL_COLOURS
    ]
    if channels.size:
        legend.append(Patch(facecolor=_TRANSFER_COLOUR, label="transfer"))
    ax.legend(
        handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False
    )
    summary = (
        f"step {result.step_time * scale:.3g} {unit}, {result.num_kernels} kernels, "
        f"{timeline.num_transfers} transfers, peak memory "
        f"{result.peak_memory.max(initial=0) / 2**20:.1f} MiB"
        + (" (OOM)" if result.oom else "")
        + (f"; {idle} idle device{'s' if idle > 1 else ''} not shown" if idle else "")
    )
    ax.set_title(f"{title}\n{summary}" if title else summary, fontsize="medium")
    if memory:
        mem_ax = axes[1, 0]
        for d in used_devices:
            times, used = timeline.memory_curve(d)
            if times.size:
                mem_ax.step(times * scale, used / 2**20, where="post", label=f"device {d}")
        mem_ax.set_ylabel("MiB in use")
        if devices <= 8:
            mem_ax.legend(
                loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False
            )
        mem_ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


_KERNEL_COLOURS = ((False, "tab:blue"), (True, "tab:purple"))
_TRANSFER_COLOUR = "tab:orange"


def _time_unit(seconds: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "us")):
        if seconds * scale >= 1:
            return scale, unit
    return 1e9, "ns"
