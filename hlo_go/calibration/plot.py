"""The calibration report drawn: predicted vs measured step times and fusion variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def plot_calibration(report: dict[str, Any], path: str | Path) -> Path:
    """Predicted vs measured step times (left) and each graph's fusion variants (right).

    Args:
      report: the JSON report :func:`hlo_go.calibration.validation.main` writes.
      path: the image file.

    Returns:
      The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (steps, variants) = plt.subplots(1, 2, figsize=(12, 5.5))
    measured = np.array([r["measured_s"] for r in report["steps"]])
    predicted = np.array([r["predicted_s"] for r in report["steps"]])
    if measured.size:
        lo, hi = (
            min(measured.min(), predicted.min()) / 1.5,
            max(measured.max(), predicted.max()) * 1.5,
        )
        line = np.array([lo, hi])
        steps.fill_between(line, line / 1.15, line * 1.15, color="0.9", label="±15%")
        steps.plot(line, line, color="0.5", lw=1)
        steps.scatter(measured, predicted, s=18, zorder=3)
        for row, x, y in zip(report["steps"], measured, predicted, strict=True):
            steps.annotate(
                row["name"], (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points"
            )
        steps.set(xscale="log", yscale="log", xlim=line, ylim=line)
    steps.set(
        xlabel="measured step (s, one core)",
        ylabel="predicted step (s, leave-one-out)",
        title=f"step times: median |error| {report['median_abs_error']:.1%}",
    )
    steps.legend(loc="upper left")
    for name, entry in report["variants"].items():
        rows = entry["rows"]
        x = [r["measured_s"] for r in rows]
        y = [r["predicted_s"] for r in rows]
        variants.scatter(x, y, s=18, label=f"{name} (tau {entry['kendall_tau']:.2f})")
    if report["variants"]:
        variants.set(xscale="log", yscale="log")
        variants.legend(fontsize=7)
    variants.set(
        xlabel="measured step (s)", ylabel="predicted step (s)", title="fusion variants per graph"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
