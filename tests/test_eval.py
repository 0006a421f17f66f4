"""Tests of ``hlo-go eval`` (hlo_go.evaluate): good and broken inputs in one run, every input
a row and every error a reason; output files; a policy checkpoint; fine-tuning; measuring
in XLA:CPU; bad command lines."""

from __future__ import annotations

import csv
import json
import re

import jax
import jax.numpy as jnp
import pytest

from hlo_go import pretrained
from hlo_go.cli import main
from hlo_go.evaluate import REFERENCE, evaluate, policy_label
from hlo_go.examples import example_path
from hlo_go.gonet import PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.rl import PPOConfig, TrainConfig, train_one
from hlo_go.sim import get_cluster

# One xdist group: the module's fixtures are expensive, so one worker sets them up once
# (the suite runs with --dist loadgroup; every other test is spread on its own).
pytestmark = pytest.mark.xdist_group("eval")

# A small policy: these tests are about the command, not the network.
TINY = PolicyConfig(
    hidden_size=16, gnn_layers=1, num_heads=2, segment_length=16, segments_per_step=2
)


def _step(x, w):
    return jnp.tanh(x @ w).sum(axis=0) * 2.0 + jnp.exp(x).mean()


def _hlo_text(fn, *shapes) -> str:
    return jax.jit(fn).lower(*(jnp.ones(s, jnp.float32) for s in shapes)).as_text(dialect="hlo")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Good and broken inputs: ``{label: path or name}``."""
    root = tmp_path_factory.mktemp("inputs")
    small = root / "small.hlo"
    small.write_text(_hlo_text(_step, (8, 16), (16, 16)))
    syntax = root / "syntax.hlo"
    syntax.write_text(
        "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(q)\n}\n"
    )
    empty = root / "empty.hlo"
    empty.write_text("")
    binary = root / "binary.hlo"
    binary.write_bytes(bytes(range(256)) * 8)
    folder = root / "folder"
    folder.mkdir()
    (folder / "b_softmax.txt").write_text(_hlo_text(jax.nn.softmax, (4, 8)))
    (folder / "a_broken.hlo.gz").write_bytes(b"not gzip at all")
    (folder / "ignored.md").write_text("not an HLO file")
    return {
        "small": str(small),
        "syntax": str(syntax),
        "empty": str(empty),
        "binary": str(binary),
        "missing": str(root / "missing.hlo"),
        "folder": str(folder),
        "example": str(example_path()),
        "corpus": "rnnlm_l2_scan",
    }


@pytest.fixture(scope="module")
def checkpoint(inputs, tmp_path_factory):
    """A GO policy checkpoint trained for 2 steps on the small graph."""
    out = tmp_path_factory.mktemp("policy")
    config = TrainConfig(
        policy=TINY, samples=4, max_devices=4, progress=False, checkpoint_every=0,
        ppo=PPOConfig(epochs=1, learning_rate=1e-3, entropy_coef=0.0),
    )  # fmt: skip
    graph = build_graph(load_hlo(inputs["small"]))
    train_one(("small", graph), get_cluster("v100x4"), steps=2, out_dir=out, config=config)
    return out / "checkpoint.msgpack"


def _run(capsys, *argv: str) -> tuple[int, str]:
    """``hlo-go eval --quiet ARGV``: the exit code and standard output and error."""
    code = main(["eval", "--quiet", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.slow  # a sweep over every kind of input; test_measure covers eval on 3.12
def test_every_input_gets_a_row_and_errors_have_reasons(inputs, checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    sources = [inputs[k] for k in ("small", "syntax", "empty", "binary", "missing", "folder")]
    sources += [inputs["example"], inputs["corpus"]]
    code, text = _run(capsys, *sources, "--policy", str(checkpoint), "--out", str(out))
    assert code == 1, text  # some inputs failed; the others are still reported
    data = json.loads((out / "eval.json").read_text())
    rows = {row["name"]: row for row in data["rows"]}
    expected = {
        "small.hlo", "syntax.hlo", "empty.hlo", "binary.hlo", "missing.hlo",
        "a_broken.hlo.gz", "b_softmax.txt", "cnn_train_step.hlo", "rnnlm_l2_scan",
    }  # fmt: skip
    assert set(rows) == expected  # the directory gives its HLO files, sorted; not ignored.md
    assert [r["name"] for r in data["rows"]][5:7] == ["a_broken.hlo.gz", "b_softmax.txt"]
    good = {"small.hlo", "b_softmax.txt", "cnn_train_step.hlo", "rnnlm_l2_scan"}
    for name, row in rows.items():
        assert row["status"] == ("ok" if name in good else "error"), row
        assert "\n" not in row["reason"]
        if row["status"] == "error":
            assert row["reason"] and not row["methods"], row
            assert name in text  # the table and the reasons below it
            continue
        methods = {m["method"]: m for m in row["methods"]}
        assert row["methods"][0]["method"] == REFERENCE
        assert methods[REFERENCE]["speedup"] == pytest.approx(1.0)
        go = methods[policy_label(cuts=True)]
        assert go["status"] == "ok" and go["kind"] == "policy", go
        assert go["speedup"] > 0 and go["vs_best_baseline"] > 0
        assert sum(m["best"] for m in row["methods"]) == 1
        assert row["best"] == next(m["method"] for m in row["methods"] if m["best"])
        assert (out / f"timeline_{name}.png").stat().st_size > 0
    assert re.match(r".*syntax\.hlo:5:\d+: operand 'q'", rows["syntax.hlo"]["reason"])
    assert re.match(r".*empty\.hlo:1:1:", rows["empty.hlo"]["reason"])
    assert "UTF-8" in rows["binary.hlo"]["reason"]
    assert "neither a file nor a corpus graph" in rows["missing.hlo"]["reason"]
    assert "gzip" in rows["a_broken.hlo.gz"]["reason"].lower()
    assert (out / "eval.png").stat().st_size > 0
    with open(out / "eval.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    assert {line["name"] for line in lines} == expected
    assert all(line["reason"] for line in lines if line["status"] == "error")
    assert "syntax.hlo:5:" in text and "zero-shot" in text


def test_bad_command_lines_exit_2(inputs, tmp_path, capsys):
    small = inputs["small"]
    for argv in (
        [small, "--cluster", "no-such-cluster"],
        [small, "--baselines", "metis,no-such-method"],
        [small, "--policy", str(tmp_path / "missing.msgpack")],
        [small, "--policy", "none", "--finetune", "60"],
        [small, "--policy", "none", "--finetune", "3"],
    ):
        code, text = _run(capsys, *argv)
        assert code == 2, (argv, text)
        assert "error" in text


def test_missing_default_policy_is_a_note(inputs, monkeypatch, capsys):
    monkeypatch.setitem(pretrained.SHIPPED, pretrained.DEFAULT, "no_such_policy.msgpack")
    code, text = _run(capsys, inputs["corpus"], "--baselines", "xla-cpu-like")
    assert code == 0
    assert "GO policy: not run" in text and "rnnlm_l2_scan" in text


def test_policy_that_cannot_decide_is_a_cell_error(inputs, checkpoint):
    # The checkpoint's placement head has 4 devices; v100x8 has 8.
    rows = evaluate(
        [inputs["small"]], cluster="v100x8", baselines=["xla-cpu-like"],
        policy=checkpoint, progress=False,
    )  # fmt: skip
    (row,) = rows
    assert row.status == "ok"
    go = row.method(policy_label(cuts=True))
    assert go.status == "error" and "max_devices" in go.reason
    assert policy_label(cuts=True) in row.reason
    assert row.method("xla-cpu-like").status == "ok"


def test_finetune(inputs, checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [inputs["small"], "--policy", str(checkpoint), "--finetune", "1"]
    code, text = _run(capsys, *argv, "--baselines", "xla-cpu-like", "--out", str(out))
    assert code == 0, text
    (row,) = json.loads((out / "eval.json").read_text())["rows"]
    go = row["methods"][-1]
    assert go["method"] == policy_label(finetune_steps=1) and go["status"] == "ok", go
    assert (out / "finetune").is_dir()


def test_measure(inputs, checkpoint, tmp_path, capsys):
    # Fine-tuning for host-cpu-1 would compile the training step again: zero-shot here.
    # The bundled example is XLA's optimized output: its fusions are inlined back
    # (hlo_go.xla.optimized) and it is measured like any other module.
    out = tmp_path / "out"
    argv = [inputs["small"], inputs["example"], "--policy", str(checkpoint), "--measure"]
    argv += ["--baselines", "xla-cpu-like,critical-path+xla-cpu-like", "--repeats", "2"]
    code, text = _run(capsys, *argv, "--out", str(out), "--no-timelines")
    assert code == 0, text
    rows = json.loads((out / "eval.json").read_text())["rows"]
    for row in rows:
        assert row["status"] == "ok" and row["measured_nodes"] > 0
        assert [m["method"] for m in row["methods"]] == [
            REFERENCE, "xla-cpu-like", "critical-path+xla-cpu-like", policy_label(cuts=True),
        ]  # fmt: skip
        for m in row["methods"]:
            assert m["status"] == "ok", m
            assert m["measured_correct"] is True, m
            assert m["measured_speedup"] > 0
    assert "measured on this host" in text
    assert not list(out.glob("timeline_*.png"))
