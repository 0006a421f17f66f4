"""Imitation pre-training of the sharding policy (hlo_go.sharding.learned.imitation).

Same tiny attention + MLP training step and shrunk network as test_sharding_policy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_sharding_policy import SMALL, _step_text

from hlo_go.hlo import parse_hlo
from hlo_go.sharding import Mesh, build_sharding, get, total_cost
from hlo_go.sharding.learned import policy_for, shard_with_policy
from hlo_go.sharding.learned.imitation import (
    ImitationExample,
    _Imitator,
    imitation_targets,
    teacher_gap,
    train_imitation,
)
from hlo_go.sim import get_cluster


@pytest.fixture(scope="module")
def sg():
    return build_sharding(parse_hlo(_step_text()), Mesh.parse("2x4"), get_cluster("h100x8"))


def _teacher(sg) -> np.ndarray:
    """A teacher that disagrees with the greedy prior: the costliest valid core choice."""
    inputs = policy_for(SMALL).prepare(sg)
    valid = np.asarray(inputs.graphs.nodes["valid"])
    last = valid.shape[1] - 1 - np.argmax(valid[:, ::-1], axis=1)  # last valid strategy
    return inputs.choices(last[None])[0]


def test_targets_and_weights(sg):
    inputs = policy_for(SMALL).prepare(sg)
    teacher = get("greedy")(sg)
    targets, weights = imitation_targets(inputs, teacher)
    n = inputs.num_nodes
    assert targets.shape == weights.shape == (inputs.bucket[0],)
    assert not weights[n:].any()  # padding never counts
    assert weights.sum() > 0
    # Positions the policy decides carry the teacher's strategy, as a choosable action.
    valid = np.asarray(inputs.graphs.nodes["valid"])
    counted = weights > 0
    assert valid[np.flatnonzero(counted), targets[counted]].all()
    order = inputs.order
    np.testing.assert_array_equal(targets[:n][counted[:n]], teacher[order][counted[:n]])
    # Decoding the targets back gives a choice no costlier than the teacher's (the
    # nodes the reductions eliminated follow the core optimally).
    assert total_cost(sg.problem, inputs.choices(targets[None])[0]) <= total_cost(
        sg.problem, teacher
    ) * (1 + 1e-9)
    with pytest.raises(ValueError, match="shape"):
        imitation_targets(inputs, teacher[:-1])


def test_loss_jit_matches_eager(sg):
    policy = policy_for(SMALL)
    inputs = policy.prepare(sg)
    params = policy.init(jax.random.key(0), inputs)
    targets, weights = imitation_targets(inputs, _teacher(sg))
    imitator = _Imitator(policy, optax.adam(1e-3))
    args = (params, inputs.graphs, jnp.asarray(8), jnp.asarray(targets), jnp.asarray(weights))
    eager_loss, eager_acc = imitator._loss(*args)
    jit_loss, jit_acc = jax.jit(imitator._loss)(*args)
    np.testing.assert_allclose(float(jit_loss), float(eager_loss), rtol=1e-5)
    assert float(jit_acc) == pytest.approx(float(eager_acc))
    # By hand: mean of −log softmax at the targets over the weighted positions.
    logits, _ = policy.network.apply(params, inputs.graphs, jnp.asarray(8))
    logits = np.asarray(logits, np.float64)
    log_p = logits - logits.max(1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
    picked = log_p[np.arange(len(targets)), targets]
    hand = -(picked * weights).sum() / weights.sum()
    assert float(eager_loss) == pytest.approx(hand, rel=1e-4)


def test_imitation_learns_a_teacher_against_the_prior(sg):
    teacher = _teacher(sg)
    example = ImitationExample("step", sg, teacher)
    before = shard_with_policy(sg, policy_for(SMALL).init(jax.random.key(0), sg), config=SMALL)
    inputs = policy_for(SMALL).prepare(sg)
    targets, weights = imitation_targets(inputs, teacher)
    counted = weights > 0
    start_hits = (inputs.to_positions(inputs.action.restrict(before)) == targets)[counted].mean()
    assert start_hits < 1.0  # the prior leads elsewhere
    result = train_imitation([example], steps=40, learning_rate=3e-2, config=SMALL, progress=False)
    losses = [r["loss"] for r in result.history]
    assert losses[-1] < 0.5 * losses[0]
    assert result.history[-1]["accuracy"] == pytest.approx(1.0)
    after = shard_with_policy(sg, result.params, config=SMALL)
    hits = inputs.to_positions(inputs.action.restrict(after)) == targets
    assert hits[counted].all()
    assert teacher_gap(example, after) <= 1e-9


def test_rejects_bad_arguments(sg):
    with pytest.raises(ValueError, match="at least one"):
        train_imitation([], steps=1, config=SMALL, progress=False)
    with pytest.raises(ValueError, match="steps"):
        train_imitation([ImitationExample("s", sg, get("greedy")(sg))], steps=0, config=SMALL)


def test_pretrain_cli_continues_from_a_policy(tmp_path, caplog):
    """``--init`` starts the imitation from a saved policy, in its configuration; the
    report gives each graph's teacher, prior, decode and guided costs."""
    import json
    import logging

    from hlo_go.sharding.learned import load_policy, save_policy
    from hlo_go.sharding.pretrain import main

    hlo = tmp_path / "step.hlo"
    hlo.write_text(_step_text())
    sg_ = build_sharding(parse_hlo(_step_text()), Mesh.parse("2x4"), get_cluster("h100x8"))
    start = save_policy(
        tmp_path / "start.msgpack", policy_for(SMALL).init(jax.random.key(0), sg_), SMALL
    )
    out, report = tmp_path / "out.msgpack", tmp_path / "report.json"
    caplog.set_level(logging.INFO, logger="hlo_go.sharding.pretrain")
    argv = [str(hlo), "--clusters", "h100x8:2x4", "--teacher-time-limit", "5"]
    argv += ["--imitation-steps", "2", "--init", str(start), "--out", str(out)]
    assert main([*argv, "--report", str(report)]) == 0
    _, config = load_policy(out)
    assert config == SMALL
    (row,) = json.loads(report.read_text())["graphs"].values()
    assert row["teacher_cost"] <= row["prior_cost"] * (1 + 1e-9)  # the teacher is never worse
    assert np.isfinite([row["policy_cost"], row["guided_cost"]]).all()
    assert "guided" in caplog.text
    caplog.clear()
    (tmp_path / "bad.msgpack").write_bytes(b"\x80")
    argv[argv.index(str(start))] = str(tmp_path / "bad.msgpack")
    assert main(argv) == 2 and "--init" in caplog.text
