"""Evaluating optimizers on any HLO inputs: the ``hlo-go eval`` command and its library.

Public names::

    evaluate(sources, *, cluster, baselines=None, policy=None, samples=0,
             finetune_steps=0, measure=False, ...) -> list[EvalRow]
    EvalRow, MethodResult, REFERENCE, HLO_SUFFIXES
    expand_sources, load_input, method_names, policy_label, policy_decisions, measure_input,
    one_line
    eval_tables, measured_tables, markdown, eval_table, measured_table, problems, rows_csv,
    rows_json, plot_speedups, plot_timelines,
    write_outputs, as_baseline_rows, file_stems, short_name, SHORT, ROW_FIELDS, METHOD_FIELDS

Module by concept: :mod:`~hlo_go.evaluate.run` (running the methods on each input,
failures kept as rows), :mod:`~hlo_go.evaluate.report` (tables, CSV/JSON, figures),
:mod:`~hlo_go.cli.evaluate` (``hlo-go eval``).
"""

from hlo_go.evaluate.report import (
    METHOD_FIELDS,
    ROW_FIELDS,
    SHORT,
    as_baseline_rows,
    eval_table,
    eval_tables,
    file_stems,
    markdown,
    measured_table,
    measured_tables,
    plot_speedups,
    plot_timelines,
    problems,
    rows_csv,
    rows_json,
    short_name,
    write_outputs,
)
from hlo_go.evaluate.run import (
    HLO_SUFFIXES,
    REFERENCE,
    EvalRow,
    MethodResult,
    evaluate,
    expand_sources,
    load_input,
    measure_input,
    method_names,
    one_line,
    policy_decisions,
    policy_label,
)

__all__ = [
    "HLO_SUFFIXES",
    "METHOD_FIELDS",
    "REFERENCE",
    "ROW_FIELDS",
    "SHORT",
    "EvalRow",
    "MethodResult",
    "as_baseline_rows",
    "eval_table",
    "eval_tables",
    "evaluate",
    "expand_sources",
    "file_stems",
    "load_input",
    "markdown",
    "measure_input",
    "measured_table",
    "measured_tables",
    "method_names",
    "one_line",
    "plot_speedups",
    "plot_timelines",
    "policy_decisions",
    "policy_label",
    "problems",
    "rows_csv",
    "rows_json",
    "short_name",
    "write_outputs",
]
