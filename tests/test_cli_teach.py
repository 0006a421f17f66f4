"""``hlo-go teachers`` and ``hlo-go imitate``: a resumable store, a checkpoint the other
commands take, exit codes for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hlo_go.cli import main
from hlo_go.rl import load_checkpoint

pytestmark = pytest.mark.xdist_group("cli_teach")

EXAMPLE = str(Path(__file__).resolve().parents[1] / "hlo_go" / "examples" / "cnn_train_step.hlo")
TINY = {
    "policy": {
        "hidden_size": 16,
        "gnn_layers": 1,
        "num_heads": 2,
        "segment_length": 16,
        "segments_per_step": 2,
    }
}


def _squeezed(text: str) -> str:
    """``text`` without whitespace: the console wraps long messages anywhere, paths too."""
    return "".join(text.split())


def _teachers(store: Path, *extra: str) -> list[str]:
    return ["teachers", EXAMPLE, "--store", str(store), "--evaluations", "20", "-q", *extra]


def test_teachers_are_stored_once_per_input_and_cluster(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    assert main(_teachers(store, "--clusters", "v100x4,p100x2")) == 0
    files = sorted(p.name for p in store.iterdir())
    assert len(files) == 2
    first = capsys.readouterr().out
    assert "cnn_train_step" in first and "v100x4" in first and "p100x2" in first
    stamps = {p.name: p.stat().st_mtime_ns for p in store.iterdir()}
    assert main(_teachers(store, "--clusters", "v100x4,p100x2")) == 0  # read, not searched
    assert {p.name: p.stat().st_mtime_ns for p in store.iterdir()} == stamps
    assert capsys.readouterr().out == first


def _imitate(tmp_path: Path, *extra: str) -> Path:
    """Runs ``hlo-go imitate`` of the example on p100x2 (2 steps, the tiny network) into
    ``tmp_path/run``, asserting exit 0; returns the run directory."""
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "run"
    args = _teachers(tmp_path / "store", "--clusters", "p100x2")
    args[0] = "imitate"
    assert main([*args, "--steps", "2", "--out", str(out), "--config", str(config), *extra]) == 0
    return out


def test_imitate_writes_a_checkpoint_infer_takes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = _imitate(tmp_path)
    text = _squeezed(capsys.readouterr().out)
    assert "cnn_train_step@p100x2" in text and "agreement" in text
    ckpt = load_checkpoint(out)
    assert ckpt.meta["kind"] == "imitation" and ckpt.step == 2
    assert ckpt.config.policy.hidden_size == 16
    infer = ["infer", str(out), EXAMPLE, "--cluster", "p100x2", "--samples", "2", "-q"]
    assert main([*infer, "--temperature", "0.5", "--no-baselines"]) == 0
    assert _squeezed("GO zero-shot (greedy + cuts + 2 samples)") in _squeezed(
        capsys.readouterr().out
    )
    # No move head: asking for moves fails that input (exit 1) and says why.
    assert main([*infer, "--moves", "2", "--no-baselines"]) == 1
    captured = capsys.readouterr()
    assert "movehead" in _squeezed(captured.err + captured.out)


def test_imitate_with_a_move_head_and_infer_with_moves(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = _imitate(tmp_path, "--move-head")
    assert load_checkpoint(out).config.policy.move_head
    infer = ["infer", str(out), EXAMPLE, "--cluster", "p100x2", "--moves", "3", "-q"]
    assert main([*infer, "--samples", "2", "--no-baselines"]) == 0
    assert _squeezed("GO zero-shot (greedy + cuts + 2 samples + 3 moves)") in _squeezed(
        capsys.readouterr().out
    )
    # eval's GO column: the move head's default moves, or --moves; a policy without a head
    # asked for moves is a bad command line.
    evaluate = ["eval", EXAMPLE, "--cluster", "p100x2", "--baselines", "fuse-all-legal", "-q"]
    assert main([*evaluate, "--policy", str(out), "--format", "json"]) == 0
    assert "GO zero-shot (greedy + cuts + 16 moves)" in capsys.readouterr().out
    assert main([*evaluate, "--policy", str(out), "--moves", "1", "--format", "json"]) == 0
    assert "GO zero-shot (greedy + cuts + 1 move)" in capsys.readouterr().out
    assert main([*evaluate, "--policy", "host-cpu", "--moves", "1"]) == 2  # no move head
    assert "movehead" in _squeezed(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("extra", "code", "says"),
    [
        (["--clusters", "nope"], 2, "unknown cluster preset 'nope'"),
        (["--evaluations", "0"], 2, "evaluations"),
    ],
)
def test_bad_teacher_flags_exit_2(tmp_path: Path, capsys, extra, code, says) -> None:  # type: ignore[no-untyped-def]
    assert main(_teachers(tmp_path / "store", *extra)) == code
    assert _squeezed(says) in _squeezed(capsys.readouterr().err)
    assert not (tmp_path / "store").exists()


def test_imitate_with_a_missing_config_exits_2_before_any_search(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = _teachers(tmp_path / "store")
    args[0] = "imitate"
    missing = str(tmp_path / "none.json")
    assert main([*args, "--steps", "1", "--out", str(tmp_path / "r"), "--config", missing]) == 2
    assert "none.json" in _squeezed(capsys.readouterr().err)
    assert not (tmp_path / "store").exists()


def test_an_unreadable_input_exits_1(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2]{0} nonsense()\n}\n")
    args = ["teachers", str(bad), "--store", str(tmp_path / "store"), "-q"]
    assert main(args) == 1
    said = capsys.readouterr()
    assert _squeezed("bad.hlo:3:22: unknown opcode 'nonsense'") in _squeezed(said.out + said.err)
