"""Resuming a run refuses a checkpoint made for another cluster, graph, task set or config;
NaN in training stops with a named error."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hlo_go.errors import HloGoError
from hlo_go.gonet import PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo, parse_hlo
from hlo_go.rl import TrainConfig, load_checkpoint, train_one
from hlo_go.rl.checkpoint import ResumeMismatchError, cluster_fingerprint, graph_fingerprint
from hlo_go.rl.ppo import PPOConfig
from hlo_go.rl.trainer import NonFiniteTrainingError
from hlo_go.sim import get_cluster

# One xdist group: the module's fixtures are expensive, so one worker sets them up once
# (the suite runs with --dist loadgroup; every other test is spread on its own).
pytestmark = pytest.mark.xdist_group("resume")

ROOT = Path(__file__).resolve().parents[1]
TINY = PolicyConfig(
    hidden_size=16, gnn_layers=1, num_heads=2, segment_length=16, segments_per_step=2
)
CONFIG = TrainConfig(
    policy=TINY, samples=8, max_devices=4, progress=False, eval_every=5, checkpoint_every=0,
    ppo=PPOConfig(learning_rate=3e-3, epochs=2, entropy_coef=0.0),
)  # fmt: skip


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return build_graph(load_hlo(ROOT / "hlo_go" / "examples" / "cnn_train_step.hlo"))


@pytest.fixture(scope="module")
def run(graph, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("run")
    train_one(("g", graph), get_cluster("v100x4"), steps=1, out_dir=out, config=CONFIG)
    return out


OTHER = """HloModule other
ENTRY e {
  a = f32[64]{0} parameter(0)
  b = f32[64]{0} negate(a)
  ROOT c = f32[64]{0} add(a, b)
}
"""


def test_resume_refuses_another_cluster(graph, run: Path) -> None:
    """Before: resumed on p100x2 and saved decisions for devices 2 and 3 of 2 devices."""
    with pytest.raises(ResumeMismatchError, match="cluster") as info:
        train_one(("g", graph), get_cluster("p100x2"), steps=2, out_dir=run, config=CONFIG)
    assert "v100x4" in str(info.value) and "p100x2" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, HloGoError)


def test_resume_refuses_another_graph_under_the_same_name(run: Path) -> None:
    """Before: a different HLO file with the same name resumed."""
    other = build_graph(parse_hlo(OTHER))
    with pytest.raises(ResumeMismatchError, match="graph 'g'"):
        train_one(("g", other), get_cluster("v100x4"), steps=2, out_dir=run, config=CONFIG)


def test_resume_refuses_another_task_set(graph, run: Path) -> None:
    with pytest.raises(ResumeMismatchError, match="tasks"):
        train_one(
            ("g", graph), get_cluster("v100x4"), ["placement"], steps=2, out_dir=run, config=CONFIG
        )


def test_resume_refuses_another_config(graph, run: Path) -> None:
    with pytest.raises(ResumeMismatchError, match="samples"):
        train_one(
            ("g", graph), get_cluster("v100x4"), steps=2, out_dir=run,
            config=CONFIG.replace(samples=4),
        )  # fmt: skip


def test_resume_accepts_what_does_not_change_the_run(graph, run: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    config = CONFIG.replace(progress=True, eval_every=1, checkpoint_every=3)
    result = train_one(("g", graph), get_cluster("v100x4"), steps=2, out_dir=copy, config=config)
    assert result.step == 2 and load_checkpoint(copy).step == 2


def test_fingerprints(graph) -> None:
    again = build_graph(load_hlo(ROOT / "hlo_go" / "examples" / "cnn_train_step.hlo"))
    assert graph_fingerprint(graph) == graph_fingerprint(again)
    assert graph_fingerprint(graph) != graph_fingerprint(build_graph(parse_hlo(OTHER)))
    assert cluster_fingerprint(get_cluster("v100x4")) != cluster_fingerprint(get_cluster("p100x4"))


@pytest.mark.parametrize("lr", [math.nan, math.inf, -math.inf])
def test_config_refuses_a_non_finite_learning_rate(lr: float) -> None:
    """Before: --lr nan trained and died with IndexError: index 16."""
    with pytest.raises(ValueError, match="learning_rate"):
        PPOConfig(learning_rate=lr)


def test_nan_weights_stop_training_with_a_named_error(graph, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """NaN parameters make NaN logits; sampling them gave IndexError: index 16."""
    import jax

    from hlo_go.rl.env import GraphEnv
    from hlo_go.rl.trainer import _train, agent_for

    env = GraphEnv(graph, get_cluster("v100x4"), TINY, CONFIG.tasks, name="g")
    params = agent_for(CONFIG).policy.init(jax.random.key(0), env.inputs, CONFIG.max_devices)
    params = jax.tree.map(lambda x: np.full(np.shape(x), np.nan, np.asarray(x).dtype), params)
    with pytest.raises(NonFiniteTrainingError, match=r"step 0 on graph 'g'.*NaN"):
        _train([env], CONFIG, steps=1, out_dir=tmp_path / "nan", kind="train_one", params=params)


def test_cli_resume_on_another_cluster_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "R"
    # The module's graph and config: the run's compiles come from the persistent cache
    # the `run` fixture filled (tests/conftest.py shares it with child processes).
    example = str(ROOT / "hlo_go" / "examples" / "cnn_train_step.hlo")
    base = [sys.executable, "-m", "hlo_go.cli", "train", example, "--steps", "1"]
    first = subprocess.run(
        [*base, "--cluster", "v100x4", "--out", str(out), "--config", str(_config_file(tmp_path))],
        capture_output=True, text=True, cwd=ROOT, timeout=900, check=False,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    second = subprocess.run(
        [*base, "--cluster", "p100x2", "--out", str(out), "--config", str(_config_file(tmp_path))],
        capture_output=True, text=True, cwd=ROOT, timeout=900, check=False,
    )  # fmt: skip
    assert second.returncode == 1, second.stdout[-2000:] + second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    text = " ".join(second.stdout.split())
    assert "v100x4" in text and "p100x2" in text


def _config_file(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "config.json"
    data = CONFIG.to_dict()
    path.write_text(json.dumps(data))
    return path


def _rewritten(run: Path, target: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of ``run``'s checkpoint at ``target`` with ``edit(state, meta)`` applied."""
    import json

    from flax import serialization

    state = serialization.msgpack_restore((run / "checkpoint.msgpack").read_bytes())
    meta = json.loads(state["meta"])
    edit(state, meta)
    state["meta"] = json.dumps(meta)
    target.write_bytes(serialization.msgpack_serialize(state))
    return target


def test_checkpoint_records_its_format_and_vocabulary(run: Path) -> None:
    from hlo_go.graph import vocabulary_signature
    from hlo_go.rl.checkpoint import CHECKPOINT_FORMAT

    meta = load_checkpoint(run).meta
    assert meta["format"] == CHECKPOINT_FORMAT
    assert meta["vocabulary"] == vocabulary_signature()


def test_a_newer_format_is_refused_by_name(run: Path, tmp_path: Path) -> None:
    from hlo_go.rl import CheckpointMismatchError

    path = _rewritten(run, tmp_path / "new.msgpack", lambda s, m: m.update(format=99))
    with pytest.raises(CheckpointMismatchError, match=r"format 99 .*newer hlo-go"):
        load_checkpoint(path)


def test_another_vocabulary_is_refused_naming_which(run: Path, tmp_path: Path) -> None:
    from hlo_go.rl import CheckpointMismatchError

    def other_opcodes(state, meta) -> None:  # type: ignore[no-untyped-def]
        meta["vocabulary"] = {**meta["vocabulary"], "opcodes": "0" * 16}

    path = _rewritten(run, tmp_path / "vocab.msgpack", other_opcodes)
    with pytest.raises(CheckpointMismatchError, match="opcodes") as raised:
        load_checkpoint(path)
    assert "features" not in str(raised.value)  # the features agree: not named


def test_parameters_of_another_shape_are_refused_by_path(graph, run: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A format-1 file (no vocabulary recorded) whose opcode table has a row fewer, as a
    checkpoint of an older vocabulary would: refused before any decision, naming it."""
    from hlo_go.rl import CheckpointMismatchError, infer

    def older(state, meta) -> None:  # type: ignore[no-untyped-def]
        del meta["format"], meta["vocabulary"]
        found = []

        def shrink(tree) -> None:  # type: ignore[no-untyped-def]
            for key, value in tree.items():
                if key == "opcode" and "embedding" in value:
                    value["embedding"] = value["embedding"][:-1]
                    found.append(key)
                elif isinstance(value, dict):
                    shrink(value)

        shrink(state["params"])
        assert found

    path = _rewritten(run, tmp_path / "old.msgpack", older)
    ckpt = load_checkpoint(path)  # format 1: read
    with pytest.raises(CheckpointMismatchError, match=r"opcode/embedding: shape \(\d+, 16\)"):
        infer(ckpt, graph, get_cluster("v100x4"))


def test_infer_refuses_a_cluster_with_more_devices(graph, run: Path) -> None:  # type: ignore[no-untyped-def]
    from hlo_go.rl import CheckpointMismatchError, infer

    with pytest.raises(CheckpointMismatchError, match=r"at most 4 devices; cluster 'h100x8' has 8"):
        infer(run, graph, get_cluster("h100x8"))


def test_infer_restores_into_traced_shapes(graph, run: Path) -> None:  # type: ignore[no-untyped-def]
    """The template is traced, not compiled: infer's greedy decisions equal those of the
    parameters restored into a compiled init's arrays."""
    import jax

    from hlo_go.rl import agent_for, infer
    from hlo_go.rl.checkpoint import restore_params
    from hlo_go.rl.env import GraphEnv

    ckpt = load_checkpoint(run)
    cluster = get_cluster("v100x4")
    found = infer(ckpt, graph, cluster)
    agent = agent_for(ckpt.config)
    env = GraphEnv(graph, cluster, ckpt.config.policy, ckpt.config.tasks, name="g")
    shapes = agent.policy.param_shapes(env.inputs, ckpt.config.max_devices)
    compiled = agent.policy.init(jax.random.key(3), env.inputs, ckpt.config.max_devices)
    assert jax.tree.map(lambda a: (a.shape, a.dtype), shapes) == jax.tree.map(
        lambda a: (a.shape, a.dtype), compiled
    )
    params = restore_params(compiled, ckpt.params)
    greedy = env.decisions(agent.greedy(params, env))
    assert found.greedy_time == pytest.approx(float(env.score(greedy).step_times[0]))
