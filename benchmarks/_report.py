"""Reporting for the benchmark harness: run metadata, results files and tables."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hlo_go.api.cache import cpu_model


def host_info() -> dict[str, Any]:
    """What machine and software a result was measured on."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        affinity = os.cpu_count()
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory_gib": memory_gib(),
        "python": sys.version.split()[0],
    }
    return info


def versions() -> dict[str, str]:
    """Versions of the libraries a result depends on."""
    import jax
    import jaxlib
    import numpy

    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": numpy.__version__,
    }


def memory_gib() -> float | None:
    """This host's memory in GiB (Linux ``/proc/meminfo``), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def write_result(path: Path, name: str, result: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    """Writes one benchmark's result with its metadata as JSON; returns what was written."""
    record = {
        "benchmark": name,
        "quick": quick,
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "host": host_info(),
        **result,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, default=_json_default) + "\n")
    return record


def _json_default(value: Any) -> Any:
    # NumPy scalars and arrays, Paths.
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}" if abs(value) < 1 else f"{value:,.3f}".rstrip("0").rstrip(".")
        return f"{value:.3e}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_result(console: Console, name: str, result: dict[str, Any]) -> None:
    """Prints a benchmark's rows as a table, then its headline numbers."""
    rows: list[dict[str, Any]] = result.get("rows", [])
    title = result.get("title", name)
    if rows:
        columns: list[str] = []
        for row in rows:
            columns.extend(k for k in row if k not in columns and not isinstance(row[k], list))
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(
                column, justify="left" if isinstance(rows[0].get(column), str) else "right"
            )
        for row in rows:
            table.add_row(*(_fmt(row.get(column, "")) for column in columns))
        console.print(table)
    else:
        console.print(f"[bold]{title}[/bold]: no rows")
    headline = {
        k: v
        for k, v in result.items()
        if k not in ("rows", "title") and isinstance(v, str | int | float | bool)
    }
    if headline:
        summary = Table(show_header=False, box=None, padding=(0, 2))
        summary.add_column(style="bold")
        summary.add_column(justify="right")
        for key, value in headline.items():
            summary.add_row(key, _fmt(value))
        console.print(summary)
