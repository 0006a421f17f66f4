"""The experiment scripts' ``--quick`` runs: outputs written, headline keys present, and
the comparisons' invariants hold (searches and HDP never end worse than their starts,
every lowered variant matches ``jax.jit``)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from experiments import convergence, generalization, imitation, measured, multitask, placement


def _outputs(out: Path, name: str) -> dict:
    data = json.loads((out / f"{name}.quick.json").read_text())
    md = (out / f"{name}.quick.md").read_text()
    assert md.startswith("# ") and "|---|" in md
    assert data["quick"] is True and data["command"].startswith(f"python experiments/{name}.py")
    for plot in data.get("plots", []):
        assert (out / plot).is_file()
    return data


def test_placement_quick(tmp_path: Path):
    placement.main(["--quick", "--out", str(tmp_path), "--clusters", "v100x4"])
    data = _outputs(tmp_path, "placement")
    for key in ("go_one_vs_expert_mean_speedup", "go_one_vs_hdp_mean_speedup"):
        assert math.isfinite(data[key]) and data[key] > 0
    for run in data["runs"]:
        t = run["times"]
        one = t["single-device"]
        # Searches start from (or include) one device; HDP scores it first.
        for method in ("simulated-annealing", "evolutionary", "hdp"):
            assert t[method] <= one * (1 + 1e-9), method
        expected = t["expert"] / t["GO-one"]
        row = next(r for r in data["rows"] if r["graph"] == run["graph"])
        assert row["GO-one vs expert"] == pytest.approx(expected)


def test_multitask_quick(tmp_path: Path):
    multitask.main(["--quick", "--out", str(tmp_path)])
    data = _outputs(tmp_path, "multitask")
    run = data["runs"][0]
    assert set(run["times"]) == {"placement", "scheduling", "fusion", "sequential", "joint"}
    assert run["times"]["sequential"] == run["sequential_stage_times"]["fusion"]
    assert data["joint_vs_default_mean_speedup"] == pytest.approx(
        run["default_time"] / run["times"]["joint"]
    )


def test_generalization_quick(tmp_path: Path):
    store = tmp_path / "teachers"
    generalization.main(["--quick", "--out", str(tmp_path), "--store", str(store)])
    data = _outputs(tmp_path, "generalization")
    assert data["cluster"] == "v100x4" and list(data["clusters"]) == ["v100x4", "h100x8"]
    trained, reused = (data["clusters"][c]["folds"][0] for c in ("v100x4", "h100x8"))
    assert trained["family"] == "gnmt" and trained["imitation_steps"] > 0
    assert trained["refine_moves_steps"] == generalization.QUICK["refine_moves"]
    assert not any(g.startswith("gnmt") for g in trained["training_graphs"])
    assert reused["checkpoint"].endswith("gnmt.msgpack")  # one network for both clusters
    for name, summary in data["clusters"].items():
        rows = summary["rows"]
        column = "greedy+cuts+2 moves vs best heuristic"
        assert summary["zero_shot_vs_best_heuristic_geomean"] == pytest.approx(
            math.prod(r[column] for r in rows) ** (1 / len(rows))
        )
        beaten = [f for f, g in summary["zero_shot_by_family"].items() if g > 1 + 1e-9]
        assert summary["zero_shot_families_beaten"] == beaten
        for row in rows:
            # the credible expert's two candidates are among the best heuristic's
            assert row["credible expert vs best heuristic"] <= 1 + 1e-9
            assert row["HDP vs best heuristic"] > 0
        table = [r for r in data["rows"] if r["cluster"] == name]
        assert [r["family"] for r in table] == summary["families_evaluated"] == ["gnmt"]
        assert table[0]["GO zero-shot"] == pytest.approx(summary["zero_shot_by_family"]["gnmt"])
    assert (
        data["zero_shot_vs_best_heuristic_geomean"]
        == (data["clusters"]["v100x4"]["zero_shot_vs_best_heuristic_geomean"])
    )
    tuned = data["finetuned"]
    assert tuned["cluster"] == "v100x4" and all(r["finetune_s"] > 0 for r in tuned["rows"])
    for key, target in data["targets"].items():
        value, bound = target["value"], float(target["target"].split()[1])
        if value is not None:
            at_least = target["target"].startswith(">=")
            assert target["met"] == (value >= bound if at_least else value <= bound), key


def test_generalization_families_without_graphs():
    families = ["gnmt", "gpt2", "inception_v3"]
    kept, skipped = generalization.evaluable(families, 1000, smallest=False)
    assert kept == ["gnmt"]  # gnmt_l2_scan has 984 nodes; gpt2's smallest 1,292
    assert set(skipped) == {"gpt2", "inception_v3"}
    # as the zero-shot runs judge them: a family's smallest base graph where none is small
    assert generalization.evaluable(families, 1000) == (families, {})
    assert generalization.targets({"zero_shot_decide_s_max": 2.5})["zero_shot_decide_s_max"] == {
        "value": 2.5,
        "target": "<= 2",
        "met": False,
    }


def test_convergence_quick(tmp_path: Path):
    convergence.main(["--quick", "--out", str(tmp_path)])
    data = _outputs(tmp_path, "convergence")
    run = data["runs"][0]
    for curve in run["curves"].values():
        best = curve["best_step_time"]
        assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(best))
    # HDP and SA ran, with GO-one's wall-clock as their limit (that a search stops at
    # its limit is tested without timing in test_baselines.py and test_hdp.py).
    assert run["wall_clock_s"] > 0
    for label in ("HDP", "SA"):
        assert run["curves"][label]["evaluations"][-1] >= 1


def test_measured_quick(tmp_path: Path):
    measured.main(["--quick", "--out", str(tmp_path)])
    data = _outputs(tmp_path, "measured")
    assert data["all_correct"], [r for r in data["rows"] if not r["correct"]]
    parts = {r["part"] for r in data["rows"]}
    assert parts == {"fusion+schedule (cpu)", "placement (virtual CPU devices)"}
    assert any(r["variant"] == "GO-one" and r.get("devices") == 2 for r in data["rows"])


def test_imitation_quick(tmp_path: Path):
    store = tmp_path / "teachers"
    keep = tmp_path / "keep"
    flags = ["--quick", "--store", str(store), "--move-head", "--moves", "1"]
    imitation.main(
        [*flags, "--out", str(tmp_path), "--keep", str(keep), "--train-clusters", "v100x4",
         "p100x2"]
    )  # fmt: skip
    data = _outputs(tmp_path, "imitation")
    fold = data["folds"][0]
    assert fold["family"] == "gnmt" and fold["imitation_steps"] == imitation.QUICK["steps"]
    assert fold["training_graphs"] and not any(
        g.startswith("gnmt") for g in fold["training_graphs"]
    )
    assert data["held_out_graphs"] == len(data["rows"]) >= 1
    for row in data["rows"]:
        assert row["family"] == "gnmt"
        assert row["SA vs best heuristic"] >= 1.0  # a teacher never loses to its start
        greedy, best_of = row["greedy vs best heuristic"], row["best of greedy+2 vs best heuristic"]
        assert 0 < greedy <= best_of  # the best of greedy and samples includes greedy
        assert row["fine-tuned best vs best heuristic"] > 0 and row["finetune_s"] > 0
        # fine-tuning's outcome includes the zero-shot decode and the fine-tuned one
        # (its zero-shot decode climbs 16 moves, which never ends below 1 move's climb)
        assert row["fine-tuned vs best heuristic"] >= (1 - 1e-9) * max(
            row["greedy+cuts+1 moves vs best heuristic"],
            row["fine-tuned decode vs best heuristic"],
            row["fine-tuned best vs best heuristic"],
        )
        assert row["finetune_evaluations"] > 0
        # the network's own cuts and moves only add candidates to its greedy decode
        assert greedy <= row["greedy+cuts vs best heuristic"]
        assert row["greedy+cuts vs best heuristic"] <= row["greedy+cuts+1 moves vs best heuristic"]
        assert row["greedy+cuts+1 moves simulations"] >= 2
    assert math.isfinite(data["finetuned_vs_best_heuristic_geomean"])
    assert data["zero_shot_cuts_1_moves_families_beaten"] in ([], ["gnmt"])
    # the kept network, evaluated again without training, decides the same
    again = imitation.main(
        [*flags, "--finetune-steps", "0", "--out", str(tmp_path / "again"),
         "--checkpoints", str(keep)]
    )  # fmt: skip
    assert again["folds"][0]["checkpoint"] == str(keep / "gnmt.msgpack")
    for a, b in zip(again["rows"], data["rows"], strict=True):
        assert (
            a["greedy+cuts+1 moves vs best heuristic"] == b["greedy+cuts+1 moves vs best heuristic"]
        )
    # --stand-in: a network under another name stands in for a fold without its own
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "other.msgpack").write_bytes((keep / "gnmt.msgpack").read_bytes())
    flags_zero = [*flags, "--finetune-steps", "0", "--checkpoints", str(stand_in)]
    third = imitation.main([*flags_zero, "--out", str(tmp_path / "3"), "--stand-in", "other"])
    assert third["folds"][0]["checkpoint"] == str(stand_in / "other.msgpack")
    # a reused network's fold names the graphs it was taught on
    assert set(third["folds"][0]["training_graphs"]) == set(fold["training_graphs"])
    assert (
        third["rows"][0]["greedy+cuts+1 moves vs best heuristic"]
        == (data["rows"][0]["greedy+cuts+1 moves vs best heuristic"])
    )
    with pytest.raises(SystemExit, match="trained on rnnlm graphs"):
        imitation.main([*flags_zero, "--held-out", "rnnlm", "--stand-in", "other"])
    with pytest.raises(SystemExit, match="not found"):
        imitation.main([*flags_zero, "--stand-in", "missing"])
    (keep / "rnnlm.msgpack").write_bytes((keep / "gnmt.msgpack").read_bytes())
    with pytest.raises(SystemExit, match="trained on rnnlm graphs"):
        imitation.main([*flags, "--held-out", "rnnlm", "--checkpoints", str(keep)])
    # one stored teacher per (graph, cluster): the training graphs on both training
    # clusters and the held-out ones; one network for both clusters
    assert len(list(store.glob("teacher-*.npz"))) == 2 * len(fold["training_graphs"]) + len(
        data["rows"]
    )
    from hlo_go.rl import load_checkpoint

    assert sorted(load_checkpoint(keep / "gnmt.msgpack").meta["clusters"]) == ["p100x2", "v100x4"]
    # then PPO on the simulator across both training clusters, from the kept network
    tuned = tmp_path / "ppo-keep"
    ppo = imitation.main(
        [*flags_zero, "--out", str(tmp_path / "ppo"), "--checkpoints", str(keep), "--keep",
         str(tuned), "--ppo-steps", "2", "--train-clusters", "v100x4", "p100x2"]
    )  # fmt: skip
    fold = ppo["folds"][0]
    assert fold["ppo_steps"] == 2 and fold["ppo_clusters"] == ["v100x4", "p100x2"]
    assert fold["ppo_pairs"] == 2 * len(fold["training_graphs"])
    meta = load_checkpoint(tuned / "gnmt.msgpack").meta
    assert meta["kind"] == "pretrain" and meta["clusters"] == ["v100x4", "p100x2"]
