"""Tests of hlo_go.rl.distributed: a real 2-process jax.distributed run on localhost (gloo
CPU collectives) matches one process emulating its 2 workers, one worker is exactly
``pretrain`` (on one cluster or several), a resumed run continues as the uninterrupted one,
and bad worker counts are refused.

The graphs are two tiny MLP training steps of one structure (so every process compiles the
policy for one bucket only) with different sizes (so the workers' rewards differ)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.gonet import PolicyConfig
from hlo_go.rl import PPOConfig, TrainConfig, data_parallel_pretrain, pretrain
from hlo_go.rl.checkpoint import ResumeMismatchError
from hlo_go.rl.distributed import gloo_available, params_checksum, resolve_workers
from hlo_go.sim import get_cluster
from hlo_go.sources import load_graph

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "distributed.py"
CHILD_TIMEOUT_S = 420
STEPS = 3

# A small policy without attention (it halves the compile time, which dominates here):
# the tests are about the data-parallel machinery, not the network.
CONFIG = TrainConfig(
    policy=PolicyConfig(
        hidden_size=16,
        gnn_layers=1,
        attention=False,
        num_heads=2,
        segment_length=16,
        segments_per_step=2,
    ),
    samples=4,
    max_devices=4,
    progress=False,
    eval_every=100,  # greedy decisions at the last step only (one compile fewer per step)
    checkpoint_every=0,
    prior_bias=3.0,
    # two minibatches of 2 per epoch: exercises the per-worker shuffles
    ppo=PPOConfig(epochs=2, minibatch_size=2, learning_rate=3e-3, entropy_coef=0.0),
)
CLUSTER = "v100x4"


def _mlp_step(params, x):
    def loss(p):
        return jnp.mean(jnp.tanh(x @ p["a"]) @ p["b"])

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


@pytest.fixture(scope="module")
def hlo_files(tmp_path_factory) -> list[Path]:
    """Two HLO files: the same MLP step at two sizes (27 nodes each, one policy bucket)."""
    folder = tmp_path_factory.mktemp("graphs")
    paths = []
    for name, (batch, inp, hidden, out) in {
        "mlp_small": (2, 8, 16, 4),
        "mlp_wide": (64, 256, 512, 128),
    }.items():
        params = {"a": jnp.ones((inp, hidden)), "b": jnp.ones((hidden, out))}
        text = jax.jit(_mlp_step).lower(params, jnp.ones((batch, inp))).as_text(dialect="hlo")
        path = folder / f"{name}.hlo"
        path.write_text(text)
        paths.append(path)
    return paths


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no output)"


@pytest.mark.skipif(not gloo_available(), reason="this jaxlib has no gloo CPU collectives")
def test_two_processes_match_the_single_process_emulation(hlo_files, tmp_path):
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(CONFIG.to_dict()))
    port = _free_port()
    common = [
        sys.executable, str(SCRIPT), "--graphs", *map(str, hlo_files), "--cluster", CLUSTER,
        "--steps", str(STEPS), "--config", str(config_path), "--quiet",
        "--out", str(tmp_path / "run"), "--result", str(tmp_path / "result.json"),
        "--process-results", str(tmp_path / "processes"),
        "--coordinator", f"localhost:{port}", "--num-processes", "2",
    ]  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}  # XLA_FLAGS etc. passed through unchanged
    logs = [tmp_path / f"child{i}.log" for i in range(2)]
    children = []
    try:
        for i in range(2):
            with logs[i].open("w") as log:
                children.append(
                    subprocess.Popen(
                        [*common, "--process-id", str(i)],
                        cwd=REPO,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        # the reference, while the children run: one process emulating both workers
        graphs = [load_graph(str(p)) for p in hlo_files]
        emulated = data_parallel_pretrain(
            graphs,
            get_cluster(CLUSTER),
            steps=STEPS,
            out_dir=tmp_path / "emulated",
            config=CONFIG,
            workers=2,
        )
        for i, child in enumerate(children):
            try:
                rc = child.wait(timeout=CHILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"process {i} still running after {CHILD_TIMEOUT_S} s")
            assert rc == 0, f"process {i} exited with {rc}:\n{_tail(logs[i])}"
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    results = [
        json.loads((tmp_path / "processes" / f"process{i}.json").read_text()) for i in (0, 1)
    ]
    loss = [row["loss"] for row in emulated.history]
    assert len(loss) == STEPS and all(np.isfinite(loss))
    for i, result in enumerate(results):
        assert (result["process"], result["processes"], result["workers"]) == (i, 2, 2)
        np.testing.assert_allclose(result["loss"], loss, rtol=1e-4, err_msg=f"process {i}")
        np.testing.assert_allclose(
            result["reward_mean"], [r["reward_mean"] for r in emulated.history], rtol=1e-4
        )
        # both workers' graphs are reported on every process
        assert sorted(result["best"]) == ["mlp_small", "mlp_wide"]
    # the parameters are identical on both processes
    assert results[0]["params_checksum"] == results[1]["params_checksum"]
    # and (same machine, same reduction order) identical to the emulation's
    assert results[0]["params_checksum"] == params_checksum(emulated.params)
    # the workers did differ: different graphs, different rewards
    assert emulated.history[0]["graph"] == "mlp_small+mlp_wide"
    per_worker = emulated.history[0]["reward_mean_per_worker"]
    assert len(per_worker) == 2 and per_worker[0] != per_worker[1]
    assert sorted(emulated.graphs) == ["mlp_small", "mlp_wide"]
    # only process 0 wrote the result and the run directory
    assert json.loads((tmp_path / "result.json").read_text())["process"] == 0
    assert (tmp_path / "run" / "checkpoint.msgpack").exists()
    assert (tmp_path / "run" / "metrics.csv").exists()


@pytest.mark.parametrize("clusters", [[CLUSTER], [CLUSTER, "p100x2"]], ids=["one", "two"])
def test_one_worker_is_pretrain(hlo_files, tmp_path, clusters):
    # With several clusters, both train on every (graph, cluster) pair, in the same order.
    graph = load_graph(str(hlo_files[1]))
    cluster = [get_cluster(c) for c in clusters]
    reference = pretrain([graph], cluster, steps=STEPS, out_dir=tmp_path / "p", config=CONFIG)
    ours = data_parallel_pretrain(
        [graph], cluster, steps=STEPS, out_dir=tmp_path / "d", config=CONFIG, workers=1
    )
    for column in ("loss", "policy_loss", "value_loss", "grad_norm", "approx_kl"):
        np.testing.assert_allclose(
            [r[column] for r in ours.history],
            [r[column] for r in reference.history],
            rtol=1e-4,
            atol=1e-6,
            err_msg=column,
        )
    for column in ("reward_mean", "best_step_time", "greedy_step_time"):
        np.testing.assert_allclose(
            [r[column] for r in ours.history], [r[column] for r in reference.history], rtol=1e-6
        )
    # Split (grads, then apply) and fused (one jit) updates compile differently, so the
    # gradients can differ in the last bits; Adam divides by sqrt(v), which turns such a
    # difference on a near-zero gradient into up to a learning rate per step.
    for x, y in zip(jax.tree.leaves(ours.params), jax.tree.leaves(reference.params), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=STEPS * 3e-3)
    assert list(ours.graphs) == list(reference.graphs)
    if len(clusters) > 1:
        assert list(ours.graphs) == [f"{graph[0]}@{c}" for c in clusters]
        assert [r["graph"] for r in ours.history] == [r["graph"] for r in reference.history]
    for name in ours.graphs:
        assert ours.graphs[name].best_time == reference.graphs[name].best_time


def test_a_resumed_run_continues_as_the_uninterrupted_one(hlo_files, tmp_path):
    graphs = [load_graph(str(p)) for p in hlo_files]
    clusters = [get_cluster(CLUSTER), get_cluster("p100x2")]
    config = CONFIG.replace(checkpoint_every=2)
    kwargs = {"config": config, "workers": 2}
    full = data_parallel_pretrain(graphs, clusters, steps=4, out_dir=tmp_path / "a", **kwargs)
    data_parallel_pretrain(graphs, clusters, steps=2, out_dir=tmp_path / "b", **kwargs)
    resumed = data_parallel_pretrain(graphs, clusters, steps=4, out_dir=tmp_path / "b", **kwargs)
    assert [r["step"] for r in resumed.history] == [2, 3]
    for column in ("loss", "reward_mean", "best_step_time"):
        assert [r[column] for r in resumed.history] == [r[column] for r in full.history[2:]]
    assert params_checksum(resumed.params) == params_checksum(full.params)
    assert {n: g.best_time for n, g in resumed.graphs.items()} == {
        n: g.best_time for n, g in full.graphs.items()
    }
    # metrics.csv holds every step once
    steps = [line.split(",")[0] for line in (tmp_path / "b" / "metrics.csv").read_text().split()]
    assert steps[1:] == ["0", "1", "2", "3"]
    # another W, another cluster set or a finished run's step count is refused by name
    with pytest.raises(ResumeMismatchError, match="trained by 2 workers, not 1"):
        data_parallel_pretrain(
            graphs, clusters, steps=6, out_dir=tmp_path / "b", config=config, workers=1
        )
    with pytest.raises(ResumeMismatchError, match="cluster"):
        data_parallel_pretrain(graphs, clusters[:1], steps=6, out_dir=tmp_path / "b", **kwargs)
    with pytest.raises(ValueError, match="already done 4 steps"):
        data_parallel_pretrain(graphs, clusters, steps=3, out_dir=tmp_path / "b", **kwargs)


def test_bad_worker_counts(hlo_files, tmp_path):
    graphs = [load_graph(str(p)) for p in hlo_files]
    with pytest.raises(ValueError, match=r"3 workers but only 2 graphs"):
        data_parallel_pretrain(
            graphs, get_cluster(CLUSTER), steps=1, out_dir=tmp_path, config=CONFIG, workers=3
        )
    with pytest.raises(ValueError, match="workers must be >= 1"):
        resolve_workers(0)
    assert resolve_workers(None) == 1 and resolve_workers(2) == 2
