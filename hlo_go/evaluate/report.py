"""Reporting :func:`hlo_go.evaluate.evaluate`'s rows: rich tables, CSV, JSON and figures.

* :func:`eval_tables`: methods down, inputs across (pages of inputs that fit the
  terminal's width), simulated step time with the speedup over the reference; the best
  method per input marked ``*``. :func:`eval_table` is the wide layout: inputs down,
  methods across.
* :func:`measured_tables` / :func:`measured_table`: the same for measured speedups over
  XLA's default compile.
* :func:`markdown`: either as a Markdown table.
* :func:`problems`: a line per failed input or method, with its reason.
* :func:`rows_csv` (one line per input and method) and :func:`rows_json`.
* :func:`plot_speedups`: a bar chart (:func:`hlo_go.baselines.report.plot_bars`);
  :func:`plot_timelines`: the best decisions' timeline of each input
  (:func:`hlo_go.sim.plot_timeline`).
* :func:`write_outputs`: all of the files into one directory.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from hlo_go.evaluate.run import REFERENCE, EvalRow, MethodResult

ROW_FIELDS = ("source", "name", "status", "reason", "nodes", "cluster", "best", "seconds")
"""Per-input columns of :func:`rows_csv` (``measured_nodes`` follows them)."""

METHOD_FIELDS = tuple(f"method_{f}" if f in ROW_FIELDS else f for f in MethodResult._fields)
"""Per-method columns of :func:`rows_csv`: :class:`MethodResult`'s fields, those named like
a per-input column prefixed ``method_``."""


SHORT = {
    "single-device": "1 device",
    "critical-path": "cp",
    "xla-cpu-like": "xla-like",
    "round-robin": "rr",
    "fuse-all-legal": "fuse-all",
    "priority-fusion": "prio-fusion",
}
"""Abbreviations of method name parts in table headers (the caption spells them out)."""


def _methods(rows: Sequence[EvalRow]) -> list[str]:
    return list(dict.fromkeys(m.method for r in rows for m in r.methods))


def short_name(method: str, *, sep: str = "+\n") -> str:
    """A method's short name: its ``+`` parts abbreviated by :data:`SHORT`.

    Unique per method: :data:`SHORT` maps distinct parts to distinct abbreviations.

    Args:
      method: the method name, e.g. ``"metis+critical-path+xla-cpu-like"``.
      sep: what joins the parts (default: ``+`` and a line break, for a column header).

    Returns:
      e.g. ``"metis+cp+xla-like"`` with ``sep="+"``.
    """
    return sep.join(SHORT.get(part, part) for part in method.split("+"))


def _legend(methods: Sequence[str]) -> str:
    used = {part for m in methods for part in m.split("+") if part in SHORT}
    return ", ".join(f"{SHORT[p]} = {p}" for p in SHORT if p in used)


def _table(
    rows: Sequence[EvalRow],
    *,
    title: str,
    caption: str,
    cell: Callable[[MethodResult], str],
    nodes: Callable[[EvalRow], int | None] = lambda row: row.nodes,
) -> Table:
    """Inputs down, methods across; ``cell`` renders a method, ``nodes`` a row's size."""
    methods = _methods(rows)
    legend = _legend(methods)
    table = Table(
        title=title or None,
        caption="\n".join(filter(None, (caption, legend))) or None,
        title_justify="left",
    )
    table.add_column("input", overflow="fold", min_width=12)
    table.add_column("nodes", justify="right")
    for method in methods:
        table.add_column(_escape(short_name(method)), justify="right")
    for row in rows:
        if row.status != "ok":
            cells = ["[red]error[/red]"] + [""] * (len(methods) - 1) if methods else []
        else:
            cells = [cell(m) if (m := row.method(name)) else "" for name in methods]
        size = nodes(row)
        table.add_row(_escape(row.name), "-" if size is None else f"{size:,}", *cells)
    return table


def problems(rows: Sequence[EvalRow], *, measured: bool = False) -> list[str]:
    """One line per input that failed and per method that failed on an input.

    Args:
      rows: the rows.
      measured: list measurement failures (``measure_reason`` of cells not measured
        correctly) instead of simulation failures.

    Returns:
      Lines ``"input: reason"`` and ``"input, method: reason"`` (one line per input when
      all of its methods failed for one reason).
    """
    lines = []
    for row in rows:
        if row.status != "ok":
            if not measured:
                lines.append(f"{row.name}: {row.reason}")
            continue
        if measured:
            failed = {
                m.method: m.measure_reason
                for m in row.methods
                if m.measured_correct is not True and m.measure_reason
            }
        else:
            failed = {m.method: m.reason for m in row.methods if m.status != "ok"}
        reasons = set(failed.values())
        if len(failed) == len(row.methods) > 1 and len(reasons) == 1:
            lines.append(f"{row.name}: {reasons.pop()}")
            continue
        lines.extend(f"{row.name}, {method}: {reason}" for method, reason in failed.items())
    return lines


_SIMULATED_CAPTION = (
    f"ms of simulated step time; Nx = speedup over {REFERENCE} (one device, FIFO, "
    "no fusion); 'best' = over the best baseline; * = best per input"
)
_MEASURED_CAPTION = (
    "measured on this host (XLA:CPU, decisions for host-cpu-1): XLA default time / method "
    "time; outputs checked against XLA's default first"
)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _simulated_cell(m: MethodResult) -> str:
    if m.status != "ok" or m.step_time is None:
        return "[red]error[/red]"
    text = f"{m.step_time * 1e3:.4g}" + (" OOM" if m.oom else "")
    if m.speedup is not None:
        text += f"\n{m.speedup:.2f}x"
    if m.kind == "policy" and m.vs_best_baseline is not None:
        text += f"\n{m.vs_best_baseline:.2f}x best"
    return f"[bold green]*{text}[/bold green]" if m.best else text


def eval_table(rows: Sequence[EvalRow], *, title: str = "", note: str = "") -> Table:
    """Simulated step times: a row per input, a column per method.

    Args:
      rows: :func:`hlo_go.evaluate.evaluate`'s rows.
      title: the table title.
      note: a line added to the footer (e.g. why the policy did not run).

    Returns:
      A ``rich.table.Table``: each cell the step time in ms and the speedup over
      :data:`~hlo_go.evaluate.REFERENCE` (the policy's also over the best baseline), the
      best per input marked ``*``; reasons of failures are :func:`problems`' lines.
    """
    return _table(
        rows,
        title=title,
        caption="\n".join(filter(None, (_SIMULATED_CAPTION, _escape(note)))),
        cell=_simulated_cell,
    )


def _measured_cell(m: MethodResult) -> str:
    if m.measured_correct is None:
        return "-"
    if not m.measured_correct:
        return "[red]wrong[/red]"
    return "?" if m.measured_speedup is None else f"{m.measured_speedup:.2f}x"


def measured_table(rows: Sequence[EvalRow], *, title: str = "") -> Table:
    """Measured speedups over XLA's default compile on this host (``measure=True`` rows).

    Args:
      rows: :func:`hlo_go.evaluate.evaluate`'s rows.
      title: the table title.

    Returns:
      A ``rich.table.Table`` (nodes: of the graph XLA fuses): each cell XLA default's
      time / the method's (``wrong``: its
      outputs differ; ``-``: not measured; reasons in :func:`problems` with ``measured``).
    """
    return _table(
        rows,
        title=title,
        caption=_MEASURED_CAPTION,
        cell=_measured_cell,
        nodes=lambda row: row.measured_nodes,
    )


METHOD_WIDTH = 24
"""Width of the method column of the transposed tables (short names wrap beyond it)."""

INPUT_WIDTH = 11
"""Least width of an input column of the transposed tables."""


def _pages(names: Sequence[str], width: int) -> list[list[int]]:
    """Indices of the inputs on each page of a table ``width`` columns wide."""
    pages: list[list[int]] = [[]]
    used = METHOD_WIDTH + 4
    for index, name in enumerate(names):
        column = max(INPUT_WIDTH, min(len(name), 20)) + 3
        if pages[-1] and used + column > width:
            pages.append([])
            used = METHOD_WIDTH + 4
        pages[-1].append(index)
        used += column
    return pages


def _transposed(
    rows: Sequence[EvalRow],
    *,
    title: str,
    caption: str,
    cell: Callable[[MethodResult], str],
    nodes: Callable[[EvalRow], int | None],
    width: int,
) -> list[Group]:
    """Methods down, the successful inputs across, paged to ``width`` columns: each page
    its title, the table and the caption (lines not wrapped to the table's width)."""
    done = [row for row in rows if row.status == "ok"]
    methods = _methods(done)
    legend = _legend(methods)
    pages = _pages([row.name for row in done], width) if done else []
    tables = []
    for number, page in enumerate(pages, 1):
        heading = title + (f" ({number}/{len(pages)})" if len(pages) > 1 else "")
        table = Table()
        table.add_column("method", overflow="fold", max_width=METHOD_WIDTH)
        for index in page:
            row = done[index]
            size = nodes(row)
            header = _escape(row.name) + ("" if size is None else f"\n{size:,} nodes")
            table.add_column(header, justify="right", overflow="fold", min_width=INPUT_WIDTH)
        for method in methods:
            cells = [cell(m) if (m := done[index].method(method)) else "" for index in page]
            table.add_row(_escape(short_name(method, sep="+")), *cells)
        footer = "\n".join(filter(None, (caption, legend)))
        parts = [Text.from_markup(f"[italic]{_escape(heading)}[/italic]")] if heading else []
        parts.append(table)
        if footer and number == len(pages):
            parts.append(Text.from_markup(footer, style="dim"))
        tables.append(Group(*parts))
    return tables


def eval_tables(
    rows: Sequence[EvalRow], *, title: str = "", note: str = "", width: int = 100
) -> list[Table]:
    """Simulated step times: a row per method, a column per input, in pages that fit.

    Args:
      rows: :func:`hlo_go.evaluate.evaluate`'s rows (failed inputs are left out: their
        reasons are :func:`problems`' lines).
      title: the table title (a page number is added when there are several pages).
      note: a line added to the footer (e.g. why the policy did not run).
      width: the terminal's width; inputs that do not fit go to the next page.

    Returns:
      Pages (``rich.console.Group``: title, table, caption on the last): each cell the step time in ms and the speedup over
      :data:`~hlo_go.evaluate.REFERENCE` (the policy's also over the best baseline), the
      best per input marked ``*``; the GO policy is a row, so it is always shown.
    """
    return _transposed(
        rows,
        title=title,
        caption="\n".join(filter(None, (_SIMULATED_CAPTION, _escape(note)))),
        cell=_simulated_cell,
        nodes=lambda row: row.nodes,
        width=width,
    )


def measured_tables(rows: Sequence[EvalRow], *, title: str = "", width: int = 100) -> list[Group]:
    """Measured speedups over XLA's default compile (``measure=True`` rows): a row per
    method, a column per input, in pages that fit ``width`` (as :func:`eval_tables`)."""
    return _transposed(
        rows,
        title=title,
        caption=_MEASURED_CAPTION,
        cell=_measured_cell,
        nodes=lambda row: row.measured_nodes,
        width=width,
    )


def _plain(cell: str) -> str:
    from rich.text import Text

    return Text.from_markup(cell).plain.replace("\n", " ").replace("|", "\\|")


def markdown(rows: Sequence[EvalRow], *, measured: bool = False) -> str:
    """The transposed table (a row per method, a column per successful input) as a
    Markdown table.

    Args:
      rows: the rows.
      measured: measured speedups over XLA's default instead of simulated times.

    Returns:
      Markdown text: a header row, a separator and a row per method, with the caption
      as a paragraph below.
    """
    done = [row for row in rows if row.status == "ok"]
    methods = _methods(done)
    cell = _measured_cell if measured else _simulated_cell
    lines = [
        "| method | " + " | ".join(_plain(_escape(row.name)) for row in done) + " |",
        "|---|" + "---:|" * len(done),
    ]
    for method in methods:
        cells = [_plain(cell(m)) if (m := row.method(method)) else "" for row in done]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    caption = _MEASURED_CAPTION if measured else _SIMULATED_CAPTION
    return "\n".join(lines) + f"\n\n{caption}\n"


def rows_csv(rows: Sequence[EvalRow]) -> str:
    """Rows as CSV, one line per input and method (one line for an error row).

    Args:
      rows: the rows.

    Returns:
      CSV text with a header: :data:`ROW_FIELDS`, ``measured_nodes``, :data:`METHOD_FIELDS`.
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*ROW_FIELDS, "measured_nodes", *METHOD_FIELDS])
    writer.writeheader()
    for row in rows:
        base = {f: getattr(row, f) for f in (*ROW_FIELDS, "measured_nodes")}
        if not row.methods:
            writer.writerow(base)
        for m in row.methods:
            writer.writerow({**base, **dict(zip(METHOD_FIELDS, m, strict=True))})
    return out.getvalue()


def rows_json(rows: Sequence[EvalRow], *, meta: dict[str, Any] | None = None) -> str:
    """Rows as a JSON document.

    Args:
      rows: the rows.
      meta: run settings to store beside them (cluster, policy, ...).

    Returns:
      ``{"meta": ..., "rows": [row.to_dict(), ...]}`` as indented JSON.
    """
    return json.dumps({"meta": meta or {}, "rows": [r.to_dict() for r in rows]}, indent=1)


def as_baseline_rows(rows: Sequence[EvalRow]) -> list[Any]:
    """The successful cells as :class:`hlo_go.baselines.BaselineRow` (for its plots)."""
    from hlo_go.baselines.report import BaselineRow

    return [
        BaselineRow(
            graph=row.name,
            cluster=row.cluster,
            method=m.method,
            step_time=float(m.step_time),
            oom=m.oom,
            seconds=m.seconds,
            kernels=m.kernels or 0,
            bytes_moved=m.bytes_moved or 0,
            devices_used=m.devices_used or 0,
        )
        for row in rows
        if row.status == "ok"
        for m in row.methods
        if m.status == "ok" and m.step_time is not None
    ]


def plot_speedups(rows: Sequence[EvalRow], path: str | Path, *, title: str = "") -> Path | None:
    """A bar chart of the rows (:func:`hlo_go.baselines.report.plot_bars`).

    One input: step time per method; several: geometric-mean speedup over
    :data:`~hlo_go.evaluate.REFERENCE` per method.

    Args:
      rows: the rows.
      path: the image file.
      title: the figure title.

    Returns:
      The path written, or None when no row succeeded.
    """
    from hlo_go.baselines.report import plot_bars

    bars = as_baseline_rows(rows)
    if not bars:
        return None
    return plot_bars(bars, path, reference=REFERENCE, title=title)


def file_stems(rows: Sequence[EvalRow]) -> list[str]:
    """A file-system-safe, unique stem per row, from its name."""
    stems: list[str] = []
    for row in rows:
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", row.name).strip("._") or "input"
        candidate, k = stem, 2
        while candidate in stems:
            candidate, k = f"{stem}_{k}", k + 1
        stems.append(candidate)
    return stems


def plot_timelines(rows: Sequence[EvalRow], out_dir: str | Path) -> list[Path]:
    """The best decisions' timeline of each successful input
    (:func:`hlo_go.sim.plot_timeline`), as ``timeline_<name>.png``.

    Args:
      rows: the rows.
      out_dir: the directory to write into.

    Returns:
      The files written.
    """
    from hlo_go.sim import plot_timeline

    out_dir = Path(out_dir)
    written = []
    for row, stem in zip(rows, file_stems(rows), strict=True):
        if row.timeline is None:
            continue
        title = f"{row.name}: {row.best} on {row.cluster}, {row.timeline.step_time * 1e3:.4g} ms"
        written.append(plot_timeline(row.timeline, out_dir / f"timeline_{stem}.png", title=title))
    return written


def write_outputs(
    rows: Sequence[EvalRow],
    out_dir: str | Path,
    *,
    meta: dict[str, Any] | None = None,
    timelines: bool = True,
) -> dict[str, Any]:
    """Writes ``eval.csv``, ``eval.json``, ``eval.png`` and the timelines into a directory.

    Args:
      rows: the rows.
      out_dir: the directory (created).
      meta: run settings stored in the JSON.
      timelines: also draw each input's best timeline.

    Returns:
      ``{"csv": path, "json": path, "chart": path or None, "timelines": [paths]}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "eval.csv"
    csv_path.write_text(rows_csv(rows))
    json_path = out_dir / "eval.json"
    json_path.write_text(rows_json(rows, meta=meta) + "\n")
    chart = plot_speedups(rows, out_dir / "eval.png", title="hlo-go eval")
    return {
        "csv": csv_path,
        "json": json_path,
        "chart": chart,
        "timelines": plot_timelines(rows, out_dir) if timelines else [],
    }


__all__ = [
    "METHOD_FIELDS",
    "ROW_FIELDS",
    "SHORT",
    "as_baseline_rows",
    "eval_table",
    "eval_tables",
    "file_stems",
    "markdown",
    "measured_table",
    "measured_tables",
    "plot_speedups",
    "plot_timelines",
    "problems",
    "rows_csv",
    "rows_json",
    "short_name",
    "write_outputs",
]
