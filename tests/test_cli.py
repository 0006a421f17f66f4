"""Tests of the ``hlo-go`` command as one tool (issue 40, defects 6 and 9-15): exit codes,
flags every subcommand shares, method names checked when parsing, ``--out`` checked
before work, measuring limits and output, readable tables, ``shard`` output, plots."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from hlo_go.cli import build_parser, main
from hlo_go.cli._common import DEFAULT_CLUSTER, make_console
from hlo_go.evaluate import REFERENCE, EvalRow, MethodResult
from hlo_go.evaluate.report import eval_tables, markdown, measured_tables, short_name

BAD = Path(__file__).parent / "data" / "bad"
BROKEN = "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(q)\n}\n"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (nested) subcommand parser by its path, e.g. ``"corpus show"``."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub
                out.update({f"{name} {k}": v for k, v in _subcommands(sub).items()})
    return out


def _action(parser: argparse.ArgumentParser, dest: str) -> argparse.Action | None:
    return next((a for a in parser._actions if a.dest == dest), None)


# -- defect 13: one CLI ------------------------------------------------------------------


def test_every_subcommand_shares_cluster_positional_help_and_logging():
    commands = _subcommands(build_parser())
    assert {"eval", "measure", "simulate", "shard", "train", "baseline"} <= set(commands)
    for name, parser in commands.items():
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"hlo-go {name}: {action.dest} has no help"
        if _action(parser, "verbose") is None and not name.startswith("corpus"):
            pytest.fail(f"hlo-go {name} has no -v")
        cluster = _action(parser, "cluster")
        if cluster is not None:
            assert not cluster.required, name
            default = cluster.default
            # shard's default is the host too: host-cpu-N for an N-device mesh
            assert default == DEFAULT_CLUSTER or (name == "shard" and default is None), name
        for action in parser._actions:
            if action.option_strings or isinstance(action, argparse._SubParsersAction):
                continue
            if name in ("corpus build", "corpus show", "calibrate") or action.dest == "checkpoint":
                continue
            assert (action.dest, action.metavar) == ("inputs", "HLO"), (name, action.dest)
    assert DEFAULT_CLUSTER == "host-cpu-1"


def test_version_and_logging_flags(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("hlo-go ")
    logger = logging.getLogger("hlo_go")
    assert main(["corpus", "list", "-v"]) == 0
    assert logger.level == logging.INFO
    assert main(["-q", "corpus", "list"]) == 0
    assert logger.level == logging.ERROR
    assert main(["corpus", "list"]) == 0
    assert logger.level == logging.WARNING
    handlers = [h for h in logger.handlers if getattr(h, "_hlo_go_cli_handler", False)]
    assert len(handlers) == 1  # repeated runs replace the handler


# -- defect 9: exit codes ----------------------------------------------------------------


def test_eval_exits_1_when_inputs_fail(tmp_path, capsys):
    bad = tmp_path / "bad.hlo"
    bad.write_text(BROKEN)
    code = main(["eval", "-q", str(tmp_path / "nope.hlo"), str(bad), "--policy", "none"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "nope.hlo" in out and "bad.hlo:5:" in out


def test_bad_input_exits_1_bad_flag_exits_2(tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "missing.hlo")]) == 1
    assert "neither a file nor a corpus graph" in capsys.readouterr().out
    assert main(["simulate", "x.hlo", "--cluster", "no-such-cluster"]) == 2
    err = capsys.readouterr().err
    assert "unknown cluster 'no-such-cluster'" in err and "v100x4" in err
    assert main(["train", "x.hlo", "--steps", "2", "--out", str(tmp_path), "--lr", "nan"]) == 2
    assert "--lr" in capsys.readouterr().err


# -- defect 10: unknown methods are argparse errors listing that flag's names -------------


def test_unknown_method_is_a_parse_error_listing_that_flags_names(capsys):
    assert main(["measure", "x.hlo", "--fusion", "fastest"]) == 2
    err = capsys.readouterr().err
    assert "unknown fusion method 'fastest'" in err
    assert "xla-cpu-like" in err and "searched" in err
    assert "metis" not in err and "round-robin" not in err  # placement methods
    assert main(["measure", "x.hlo", "--fusion", "metis"]) == 2
    assert main(["measure", "x.hlo", "--schedule", "xla-cpu-like"]) == 2
    assert "unknown schedule method" in capsys.readouterr().err
    assert main(["eval", "x.hlo", "--baselines", "metis,nope"]) == 2
    assert "unknown baseline 'nope'" in capsys.readouterr().err
    assert main(["shard", "x.hlo", "--method", "ilpp"]) == 2
    parser = _subcommands(build_parser())["measure"]
    assert "priority-fusion" in parser.format_help()  # measure --help lists its methods


# -- --out is checked before any work -----------------------------------------------------


def test_out_is_checked_before_work(tmp_path, capsys):
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    # no such input: had the work started, the exit code would be 1, not 2
    assert main(["eval", "nope.hlo", "--out", str(existing)]) == 2
    assert "is an existing file" in capsys.readouterr().err
    argv = ["train", "nope.hlo", "--steps", "1", "--out", str(existing / "run")]
    assert main(argv) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["shard", "nope.hlo", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- defects 6 and 11: measuring ----------------------------------------------------------


def test_measure_defaults_to_the_pinned_cpu_clock():
    args = build_parser().parse_args(["measure", "x.hlo"])
    assert args.clock == "cpu" and args.timeout is None


def test_measure_says_outputs_were_checked_and_warns_on_overlap():
    from hlo_go.cli.measure import _print

    out = {
        "nodes": 15, "label": "fusion=xla-cpu-like", "kernels": 3, "clock": "cpu", "cpu": 1,
        "repeats": 5, "correct": True, "message": "", "baseline_time_s": 2e-3,
        "baseline_spread": (1e-3, 9e-3), "time_s": 1e-3, "spread": (1e-3, 8e-3),
        "baseline_temp_bytes": 0, "temp_bytes": 0, "spreads_overlap": True,
    }  # fmt: skip
    args = argparse.Namespace(fusion="xla-cpu-like", schedule="xla")
    console = Console(record=True, width=200)
    _print(console, "m.hlo", out, args)
    text = console.export_text()
    assert "outputs checked against XLA's default compile (jax.jit): match" in text
    assert "CPU time of a process pinned to core 1" in text
    assert "warning" in text and "overlap" in text


def test_measure_overlap_is_computed():
    from hlo_go.cli.measure import _overlap

    assert _overlap((2.3, 9.4), (2.3, 8.3))
    assert not _overlap((1.0, 2.0), (2.5, 3.0))


@pytest.mark.slow
def test_endless_loop_times_out_instead_of_hanging():
    endless = BAD / "endless_while.hlo"
    proc = subprocess.run(
        [sys.executable, "-m", "hlo_go.cli", "measure", str(endless), "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "timed out after 5 s" in " ".join(proc.stdout.split())
    assert "Traceback" not in proc.stdout + proc.stderr


def _spin_past_a_deadline() -> None:
    from hlo_go.xla.timing import arm_deadline

    arm_deadline(1)
    while True:
        pass


def test_default_limit_is_cpu_time_and_ends_the_child():
    """The default limit (no --timeout): the child arms a CPU-time deadline, which ends it
    even in a loop that never returns (as XLA's native code would not)."""
    from hlo_go.xla.timing import MeasureTimeoutError, default_cpu, in_pinned_process

    with pytest.raises(MeasureTimeoutError, match="CPU-time limit"):
        in_pinned_process(_spin_past_a_deadline, cpu=default_cpu())


def _short_cpu_times_under_a_deadline() -> list[float]:
    import time

    from hlo_go.xla.timing import arm_deadline

    arm_deadline(100)
    times = []
    for _ in range(200):
        start = time.process_time()
        sum(range(2000))  # tens of microseconds
        times.append(time.process_time() - start)
    arm_deadline(None)
    return times


def test_a_deadline_leaves_the_cpu_clock_fine_grained():
    """The deadline must not coarsen the "cpu" clock: under the kernel's RLIMIT_CPU,
    Linux reads process CPU time at scheduler ticks (4 ms), and calls of tens of
    microseconds timed as 0 (then a speedup divided by zero)."""
    from hlo_go.xla.timing import default_cpu, in_pinned_process

    times = in_pinned_process(_short_cpu_times_under_a_deadline, cpu=default_cpu())
    assert sum(t == 0 for t in times) < len(times) // 10, times
    assert sorted(times)[len(times) // 2] < 1e-3, times


# -- defect 12: the eval table -----------------------------------------------------------


def _rows(inputs: int) -> list[EvalRow]:
    from hlo_go.evaluate.run import policy_label
    from hlo_go.rl.compare import heuristic_names

    methods = [*heuristic_names(), policy_label()]
    rows = []
    for k in range(inputs):
        results = tuple(
            MethodResult(
                m, "reference" if m == REFERENCE else ("policy" if m.startswith("GO") else "baseline"),
                "ok", step_time=1e-3 * (1 + j % 4 + k), speedup=1.0 + j / 10,
                vs_best_baseline=0.99, best=j == 3, measured_correct=True,
                measured_speedup=1.1,
            )
            for j, m in enumerate(methods)
        )  # fmt: skip
        rows.append(
            EvalRow(f"in{k}", f"input_{k}_name", "ok", "", 100 * k + 1, "v100x4", results,
                    methods[3], measured_nodes=10)
        )  # fmt: skip
    rows.append(EvalRow("bad", "bad.hlo", "error", "HloParseError", None, "v100x4"))
    return rows


def test_eval_table_fits_100_columns_with_unique_names_and_the_go_row():
    rows = _rows(9)
    console = Console(record=True, width=100)
    for page in eval_tables(rows, title="t", width=100):
        console.print(page)
    for page in measured_tables(rows, title="m", width=100):
        console.print(page)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "…" not in text  # no cell cut
    methods = [m.method for m in rows[0].methods]
    shorts = [short_name(m, sep="+") for m in methods]
    assert len(set(shorts)) == len(shorts)
    assert "metis+cp+xla-like" in shorts and "heft+cp+xla-like" in shorts
    for short in shorts:
        assert short in text, short
    assert text.count("GO zero-shot") >= 2  # on every page
    assert all(f"input_{k}_name" in text for k in range(9))
    assert "(1/" in text and "(2/" in text  # paged


def test_eval_formats(capsys):
    rows = _rows(2)
    md = markdown(rows).splitlines()
    assert md[0] == "| method | input_0_name | input_1_name |"
    assert md[1] == "|---|---:|---:|"
    assert any(line.startswith("| metis+critical-path+xla-cpu-like |") for line in md)
    args = build_parser().parse_args(["eval", "x", "--format", "json", "--wide"])
    assert args.format == "json" and args.wide


def test_piped_output_is_not_cropped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert make_console().width >= 1000  # stdout is captured: not a terminal


# -- defect 14: shard output -------------------------------------------------------------


def test_shard_distinct_messages_once():
    from hlo_go.cli.shard import distinct_messages

    line = (
        "W1127 01:24:{s}.874849    7781 sharding_propagation.cc:3132] GSPMD sharding "
        "propagation is going to be deprecated"
    )
    text = "\n".join(line.format(s=s) for s in (43, 46, 50))
    assert distinct_messages(text + "\nother\n") == [
        "GSPMD sharding propagation is going to be deprecated",
        "other",
    ]


def test_shard_measures_one_unsharded_time_for_every_method():
    import test_sharding as ts

    from hlo_go.hlo import parse_hlo
    from hlo_go.sharding import Mesh, build_sharding, get
    from hlo_go.sharding.lower import measure_shardings
    from hlo_go.sim import get_cluster

    sg = build_sharding(parse_hlo(ts._mlp_text()), Mesh.parse("2x4"), get_cluster("host-cpu-8"))
    choices = {name: get(name)(sg, time_limit_s=5) for name in ("dp", "replicated")}
    measured = measure_shardings(sg, choices, repeats=2)
    assert all(m.correct for m in measured.values())
    assert len({m.unsharded_s for m in measured.values()}) == 1
    assert all(m.sharded_s and m.sharded_s > 0 for m in measured.values())


# -- defect 15: plots --------------------------------------------------------------------


def _bar_rows(graphs: int) -> list:
    from hlo_go.baselines.report import BaselineRow

    methods = ["single-device", "xla-cpu-like", "metis+critical-path+xla-cpu-like"]
    return [
        BaselineRow(f"g{g}", "v100x4", m, 1e-3 * (3 - j) * (1 + g), False, 0.1, 1, 0, 1)
        for g in range(graphs)
        for j, m in enumerate(methods)
    ]


@pytest.mark.parametrize("graphs", [1, 3])
def test_bar_chart_has_one_title_values_and_a_best_legend(tmp_path, monkeypatch, graphs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hlo_go.baselines.report import plot_bars

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_bars(_bar_rows(graphs), tmp_path / "bars.png", title="hlo-go eval")
    (fig,) = figures
    (ax,) = fig.axes
    assert fig._suptitle is None and ax.get_title().startswith("hlo-go eval: ")
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == 3 and all(labels)  # a value on every bar
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("best") for t in legend)
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and not any("10^" in t or "times" in t or "×" in t for t in ticks), ticks
    monkeypatch.undo()
    plt.close(fig)


def test_timeline_explains_colours_and_skips_idle_devices(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hlo_go.decisions import Decisions
    from hlo_go.examples import example_path
    from hlo_go.graph import build_graph
    from hlo_go.hlo import load_hlo
    from hlo_go.sim import get_cluster, plot_timeline, simulate

    graph = build_graph(load_hlo(example_path()))
    d = Decisions.default(graph)
    placement = np.where(graph.colocation_group % 2 == 0, 0, 2).astype(np.int32)
    decisions = Decisions(
        placement=placement,
        schedule_priority=d.schedule_priority,
        fusion_priority=d.fusion_priority,
    )
    result = simulate(graph, get_cluster("v100x4"), decisions)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot_timeline(result, tmp_path / "t.png", title="example")
    (fig,) = figures
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert "device 0" in rows and "device 2" in rows
    assert "device 1" not in rows and "device 3" not in rows
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"fused kernel", "single-op kernel"} <= set(legend)
    assert "2 idle devices not shown" in ax.get_title()
    assert not fig._suptitle
    monkeypatch.undo()
    plt.close(fig)
