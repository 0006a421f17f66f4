"""``hlo-go calibrate``: a real measurement of one small variant on this host, a model
trained on it, and a cluster file the other commands take; a second run resumes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hlo_go import corpus
from hlo_go.cli import main
from hlo_go.decisions import Decisions
from hlo_go.graph import build_graph
from hlo_go.sim import get_cluster, simulate
from hlo_go.sim.learned import read_kernel_model
from hlo_go.sources import load_cluster

# One worker sets the measured fixture up once.
pytestmark = pytest.mark.xdist_group("calibrate")

ARGV = ["calibrate", "rnnlm_l2_scan:1", "--repeats", "1", "--steps", "5", "--heldout", "-q"]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("calibration")
    assert main([*ARGV, "--out", str(out)]) == 0
    return out


def test_model_and_cluster_file(calibrated: Path) -> None:
    model = read_kernel_model(calibrated / "host-cpu.msgpack")
    assert model.meta["train_graphs"] == {"rnnlm_l2_scan": 1}
    assert model.meta["heldout"] is None and model.meta["steps"] == 5
    cluster = load_cluster(calibrated / "host-cpu-1.json")
    assert {d.kernel_model for d in cluster.devices} == {
        str((calibrated / "host-cpu.msgpack").resolve())
    }
    graph = build_graph(corpus.load("rnnlm_l2_scan", "prefusion"))
    learned = simulate(graph, cluster, Decisions.default(graph)).step_time
    analytic = simulate(graph, get_cluster("host-cpu-1"), Decisions.default(graph)).step_time
    assert np.isfinite(learned) and learned > 0 and learned != analytic
    report = json.loads((calibrated / "report.json").read_text())
    assert [len(r["measured"]) for r in report["measured"]] == [1]


def test_second_run_measures_only_what_is_missing(calibrated: Path) -> None:
    model = calibrated / "host-cpu.msgpack"
    before = (model.stat().st_mtime_ns, model.read_bytes())
    assert main([*ARGV, "--out", str(calibrated)]) == 0
    report = json.loads((calibrated / "report.json").read_text())
    (graph,) = report["measured"]
    assert graph["measured"] == [] and len(graph["skipped"]) == 1
    # Nothing new measured, same settings: the model is kept, not trained again.
    assert (model.stat().st_mtime_ns, model.read_bytes()) == before
    assert report["meta"]["steps"] == 5


def test_refuses_what_it_cannot_measure(tmp_path: Path, capsys) -> None:
    assert main(["calibrate", "model.hlo", "--out", str(tmp_path)]) == 2
    assert "corpus training steps" in capsys.readouterr().err
    assert main(["calibrate", "rnnlm_l2_scan:0", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "kernels").exists()


def test_default_steps_are_the_shipped_models() -> None:
    from hlo_go.calibration.train_kernel_model import DEFAULT_STEPS
    from hlo_go.cli import build_parser

    args = build_parser().parse_args(["calibrate", "rnnlm_l2_scan:1"])
    assert args.steps == DEFAULT_STEPS


def test_retime_renews_the_stored_variants_steps(calibrated: Path, tmp_path: Path) -> None:
    """A real re-timing: the stored variant is lowered again from its grouping and timed
    interleaved with XLA's default; its kernel times are kept."""
    import shutil

    from hlo_go.calibration import kernel_dataset as kd

    root = tmp_path / "kernels"
    shutil.copytree(calibrated / "kernels", root)
    (before,) = [kd.load_sample(f) for f in (root / "rnnlm_l2_scan").glob("*.npz")]
    summary = kd.retime_graph("rnnlm_l2_scan", str(root), rounds=2)
    assert summary["retimed"] == [before.variant] and summary["failed"] == {}
    (after,) = [kd.load_sample(f) for f in (root / "rnnlm_l2_scan").glob("*.npz")]
    inter = after.meta["interleaved"]
    assert inter["rounds"] == 2 and len(inter["step_samples_s"]) == 2
    assert all(t > 0 for t in inter["step_samples_s"] + inter["reference_samples_s"])
    assert len(inter["load_avg"]) == 2
    np.testing.assert_array_equal(after.kernel_s, before.kernel_s)
    np.testing.assert_array_equal(after.group, before.group)
    with pytest.raises(ValueError, match="at least 2"):
        kd.retime_graph("rnnlm_l2_scan", str(root), rounds=1)
    with pytest.raises(kd.DatasetError, match="no measured variants"):
        kd.retime_graph("gpt2_l2", str(root), rounds=2)


def test_retime_command_refuses_bad_usage(tmp_path: Path) -> None:
    from hlo_go.calibration import kernel_dataset as kd

    with pytest.raises(SystemExit) as exit_:
        kd.main(["--retime", "1", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        kd.main(["--retime", "3", "--out", str(tmp_path)])  # nothing stored
    assert exit_.value.code == 2
