"""Bad input files and values: named errors (never a traceback), nothing silently wrong.

The files are in ``tests/data/bad/``; the last tests run the ``hlo-go`` command on each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hlo_go.decisions import Decisions, DecisionsError, decisions_from_values, load_decisions
from hlo_go.errors import HloGoError
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.sim import MAX_DEVICES, ClusterFileError, cluster_from_dict, load_cluster

# One xdist group: the module's fixtures are expensive, so one worker sets them up once
# (the suite runs with --dist loadgroup; every other test is spread on its own).
pytestmark = pytest.mark.xdist_group("bad_input")

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad"
EXAMPLE = ROOT / "hlo_go" / "examples" / "cnn_train_step.hlo"


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return build_graph(load_hlo(EXAMPLE))


# -- decisions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [("placement_wraps.npz", ["4294967299", "int32"]), ("placement_fraction.npz", ["integer"])],
)
def test_decision_files_are_checked_before_any_cast(graph, name: str, words: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Before: 2**32+3 was cast to int32 (device 3) and 1.7 to device 1, both ran."""
    with pytest.raises(DecisionsError) as info:
        load_decisions(BAD / name, graph)
    message = str(info.value)
    assert str(BAD / name) in message and "placement" in message
    for word in words:
        assert word in message, message


def test_decisions_not_a_zip_is_named(graph) -> None:  # type: ignore[no-untyped-def]
    """Before: zipfile.BadZipFile."""
    with pytest.raises(DecisionsError, match=r"not_a_zip\.npz"):
        load_decisions(BAD / "not_a_zip.npz", graph)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"placement": [1.7]}, ["integer"]),
        ({"placement": 2**40}, ["int32"]),
        ({"placement": -1}, ["negative"]),
        ({"placement": np.array([True])}, ["integer"]),
        ({"placement": "0"}, ["integer"]),
        ({"schedule_priority": np.nan}, ["finite"]),
        ({"fusion_priority": [1.0, 2.0]}, ["shape"]),
        ({"fusion_priority": "x"}, ["number"]),
        ({"colour": 1}, ["unknown", "colour"]),
    ],
)
def test_decision_values_are_checked(graph, values: dict, words: list[str]) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DecisionsError) as info:
        decisions_from_values(values, graph, source="here")
    for word in words:
        assert word in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, HloGoError)


def test_decision_values_that_are_fine(graph, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    n = graph.num_nodes
    d = decisions_from_values({"placement": np.zeros(n, np.int64), "fusion_priority": 1}, graph)
    assert d.placement.dtype == np.int32 and d.fusion_priority.dtype == np.float32
    assert (d.fusion_priority == 1).all() and (d.schedule_priority == 0).all()
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"placement": 0, "schedule_priority": list(range(n))}))
    loaded = load_decisions(path, graph)
    assert loaded.schedule_priority[-1] == n - 1
    path = tmp_path / "d.npz"
    np.savez(path, placement=np.zeros(n, np.uint8))
    assert load_decisions(path, graph).placement.dtype == np.int32


def test_validate_raises_decisions_error(graph) -> None:  # type: ignore[no-untyped-def]
    bad = Decisions.default(graph)._replace(placement=np.full(graph.num_nodes, 3, np.int32))
    with pytest.raises(DecisionsError, match="2-device"):
        bad.validate(graph, 2)


def test_bad_json_decisions_named(graph, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "d.json"
    path.write_text("{not json")
    with pytest.raises(DecisionsError, match=r"d\.json"):
        load_decisions(path, graph)
    path.write_text("[1, 2]")
    with pytest.raises(DecisionsError, match="object"):
        load_decisions(path, graph)


# -- clusters --------------------------------------------------------------------------


def test_cluster_size_is_bounded() -> None:
    """Before: count = 100000000 allocated gigabytes and did not stop."""
    with pytest.raises(ClusterFileError) as info:
        load_cluster(BAD / "cluster_huge.toml")
    assert str(MAX_DEVICES) in str(info.value) and "cluster_huge.toml" in str(info.value)


def test_cluster_size_bound_counts_every_entry() -> None:
    device = {
        "name": "d", "peak_flops": {"f32": 1e12}, "memory_bandwidth": 1e9,
        "memory_capacity": 1e9, "launch_overhead": 0.0,
    }  # fmt: skip
    link = {"bandwidth": 1e9, "latency": 0.0}
    half = {**device, "count": MAX_DEVICES // 2 + 1}
    with pytest.raises(ValueError, match=str(MAX_DEVICES)):
        cluster_from_dict({"devices": [half, half], "default_link": link})
    ok = cluster_from_dict({"devices": [{**device, "count": 3}], "default_link": link})
    assert ok.num_devices == 3


# -- the command line --------------------------------------------------------------------

# (arguments, words the output must contain, exit code); {bad} is tests/data/bad.
CLI_CASES: list[tuple[list[str], list[str], int]] = []
for _name in ("add_mismatch.hlo", "gte_range.hlo", "dot_dims.hlo", "huge_dims.hlo"):
    CLI_CASES += [
        (["summarize", f"{{bad}}/{_name}"], [f"{_name}:"], 1),
        (["simulate", f"{{bad}}/{_name}", "--cluster", "v100x4"], [_name], 1),
        (["eval", f"{{bad}}/{_name}", "--cluster", "v100x4", "--quiet"], [_name], 1),
    ]
for _name in ("not_gzip.hlo.gz", "truncated.hlo.gz"):
    CLI_CASES += [
        (["summarize", f"{{bad}}/{_name}"], [_name, "gzip"], 1),
        (["simulate", f"{{bad}}/{_name}", "--cluster", "v100x4"], [_name, "gzip"], 1),
        (["eval", f"{{bad}}/{_name}", "--cluster", "v100x4", "--quiet"], [_name, "gzip"], 1),
    ]
for _name, _words in (
    ("placement_wraps.npz", ["int32"]),
    ("placement_fraction.npz", ["integer"]),
    ("not_a_zip.npz", ["zip"]),
):
    CLI_CASES.append(
        (
            ["simulate", str(EXAMPLE), "--cluster", "v100x4", "--decisions", f"{{bad}}/{_name}"],
            [_name, *_words],
            1,
        )
    )
CLI_CASES += [
    (["roundtrip", "{bad}/add_mismatch.hlo"], ["error:", "add_mismatch.hlo:6:8"], 1),
    (
        ["simulate", str(EXAMPLE), "--cluster", "{bad}/cluster_huge.toml"],
        [str(MAX_DEVICES)],
        2,
    ),  # --cluster is a flag: checked when parsed
    (["eval", str(EXAMPLE), "--cluster", "{bad}/cluster_huge.toml", "--quiet"], ["devices"], 2),
]

# Runs every case in one interpreter (each ``hlo-go`` start imports jax: seconds), through
# the same ``main`` that ``python -m hlo_go.cli`` runs; an exception escaping ``main`` is
# reported as a traceback.
_DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, sys, traceback
    from hlo_go.cli import main
    out = []
    for argv in json.loads(sys.argv[1]):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code
            except BaseException:
                traceback.print_exc()
                code = "traceback"
        out.append({"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def cli_results() -> list[dict]:
    argvs = [[a.replace("{bad}", str(BAD)) for a in args] for args, _, _ in CLI_CASES]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(argvs)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "COLUMNS": "200"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("index", range(len(CLI_CASES)))
def test_cli_bad_input_is_a_named_error(cli_results: list[dict], index: int) -> None:
    args, words, code = CLI_CASES[index]
    result = cli_results[index]
    output = " ".join((result["stdout"] + result["stderr"]).split())
    assert "Traceback" not in result["stderr"] + result["stdout"], output[-2000:]
    for word in words:
        assert word in output, (args, word, output[-2000:])
    assert "rror" in output, output[-2000:]
    assert result["code"] == code, (args, result["code"], output[-2000:])


def test_the_real_command_prints_no_traceback() -> None:
    """One case through ``python -m hlo_go.cli`` itself (the entry point users run)."""
    proc = subprocess.run(
        [sys.executable, "-m", "hlo_go.cli", "summarize", str(BAD / "add_mismatch.hlo")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "add_mismatch.hlo:6:8:" in proc.stdout + proc.stderr
