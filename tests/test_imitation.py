"""Tests of the GO policy's teachers (hlo_go.rl.teachers) and imitation pre-training
(hlo_go.rl.imitation): the teacher store and its resume, teachers never slower than the
best heuristic, actions that invert GraphEnv.decisions, the loss under jit, learning, and
a checkpoint that PPO fine-tuning and pre-training start from."""

from __future__ import annotations

import dataclasses
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.baselines.search import run_search, search_tasks_for
from hlo_go.decisions import Decisions
from hlo_go.gonet import TASKS, PolicyConfig
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.rl import (
    GraphEnv,
    Imitator,
    TeacherJob,
    TeacherStoreError,
    TrainConfig,
    agent_for,
    canonical_devices,
    finetune,
    imitation_loss,
    load_checkpoint,
    load_teacher,
    make_examples,
    make_teachers,
    pretrain,
    run_teacher,
    teacher_actions,
    train_imitation,
)
from hlo_go.rl import teachers as teachers_module
from hlo_go.rl.agent import decision_weights
from hlo_go.rl.checkpoint import ResumeMismatchError
from hlo_go.rl.compare import best, run_baselines
from hlo_go.rl.imitation import _agreement, device_table, matched_placement
from hlo_go.rl.teachers import (
    CHANGED_BITS,
    REVERT_BUDGET,
    REVERT_TOLERANCE,
    revert_needless_changes,
)
from hlo_go.sim import get_cluster, simulate
from hlo_go.sim.symmetry import device_permutations

# The experiments' quick policy: the tests are about the machinery, not the network's size.
TINY = PolicyConfig(hidden_size=16, gnn_layers=1, num_heads=2, segments_per_step=2)
CONFIG = TrainConfig(policy=TINY, samples=2, progress=False, eval_every=1)
EVALUATIONS = 100


def _mlp(params, x, y):
    """One SGD step of a 4-layer ReLU classifier (its graph pads to the CNN's bucket, so
    the two graphs share one compiled program)."""

    def loss(p):
        h = x
        for w in p[:-1]:
            h = jax.nn.relu(h @ w)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p[-1]) * y, -1))

    grads = jax.grad(loss)(params)
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)]


@pytest.fixture(scope="module")
def graphs():
    from hlo_go.examples import example_path
    from hlo_go.xla.hooks import capture_prefusion_lowered

    f32 = jnp.float32
    params = [jnp.ones((32, 32), f32) / 8 for _ in range(3)] + [jnp.ones((32, 8), f32) / 8]
    args = (params, jnp.ones((16, 32), f32), jnp.zeros((16, 8), f32))
    mlp = build_graph(capture_prefusion_lowered(jax.jit(_mlp).lower(*args)))
    return {"cnn": build_graph(load_hlo(example_path())), "mlp": mlp}


JOBS = (
    TeacherJob("cnn", "v100x4", evaluations=EVALUATIONS),
    TeacherJob("mlp", "v100x4", evaluations=EVALUATIONS),
    TeacherJob("cnn", "host-cpu-1", method="evolutionary", evaluations=EVALUATIONS),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("teachers")


@pytest.fixture(scope="module")
def teachers(graphs, store):
    return make_teachers(JOBS, store=store, graphs=graphs)


# -- teachers ------------------------------------------------------------------------------


def test_store_round_trip_and_resume(teachers, graphs, store, monkeypatch):
    files = sorted(store.glob("*.npz"))
    assert [f.name for f in files] == sorted(job.filename for job in JOBS)
    mtimes = {f: f.stat().st_mtime_ns for f in files}

    def no_run(*args, **kwargs):
        raise AssertionError("a stored job ran again")

    monkeypatch.setattr(teachers_module, "run_teacher", no_run)
    again = make_teachers([*JOBS, JOBS[0]], store=store, graphs=graphs)
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    assert [t.job for t in again] == [*JOBS, JOBS[0]]
    for old, new in zip(teachers, again, strict=False):
        assert new.job == old.job
        assert new.step_time == old.step_time
        assert new.best_heuristic == old.best_heuristic
        assert new.evaluations == old.evaluations
        assert (new.changes, new.reverted) == (old.changes, old.reverted)
        np.testing.assert_array_equal(new.changed, old.changed)
        assert new.graph_fingerprint == graphs[old.job.graph].fingerprint
        for field in ("placement", "schedule_priority", "fusion_priority"):
            np.testing.assert_array_equal(
                getattr(new.decisions, field), getattr(old.decisions, field)
            )


def test_corrupt_foreign_or_stale_store_files_are_named(teachers, graphs, store, tmp_path):
    job = JOBS[0]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / job.filename).write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TeacherStoreError, match="not a readable teacher file"):
        make_teachers([job], store=bad, graphs=graphs)
    np.savez(bad / job.filename, weights=np.zeros(3))
    with pytest.raises(TeacherStoreError, match="not a readable teacher file"):
        make_teachers([job], store=bad, graphs=graphs)
    # Another job's file under this job's name.
    shutil.copy(store / JOBS[1].filename, bad / job.filename)
    with pytest.raises(TeacherStoreError, match="it holds job"):
        load_teacher(bad / job.filename, job)
    # The right job, but a graph that changed since.
    shutil.copy(store / job.filename, bad / job.filename)
    with pytest.raises(TeacherStoreError, match="was made for graph"):
        make_teachers([job], store=bad, graphs={"cnn": graphs["mlp"]})


def test_unknown_graph_or_cluster_fails_before_any_search(graphs, tmp_path):
    with pytest.raises(KeyError, match="unknown cluster"):
        make_teachers([TeacherJob("cnn", "no-such-box")], store=tmp_path, graphs=graphs)
    with pytest.raises(KeyError):
        make_teachers([TeacherJob("no_such_graph", "v100x4")], store=tmp_path, graphs=graphs)
    with pytest.raises(ValueError, match="teacher method"):
        TeacherJob("cnn", "v100x4", method="random-search")
    assert not list(tmp_path.glob("*.npz"))


def test_teacher_never_slower_than_best_heuristic(teachers, graphs):
    for teacher in teachers:
        graph, cluster = graphs[teacher.job.graph], get_cluster(teacher.job.cluster)
        rows = run_baselines(graph, cluster)
        top = best(rows)
        assert teacher.best_heuristic == top.method
        assert teacher.best_heuristic_time == pytest.approx(top.step_time, rel=1e-12)
        result = simulate(graph, cluster, teacher.decisions)
        assert float(result.step_time) == teacher.step_time
        assert teacher.step_time <= teacher.best_heuristic_time
        assert not teacher.oom
        # the search's evaluations, then those of taking back needless changes
        assert EVALUATIONS <= teacher.evaluations <= EVALUATIONS * (1 + REVERT_BUDGET)
        assert np.all(
            (teacher.decisions.schedule_priority >= 0) & (teacher.decisions.schedule_priority <= 1)
        )
        assert np.all(
            (teacher.decisions.fusion_priority >= 0) & (teacher.decisions.fusion_priority <= 1)
        )
        # the changed mask marks what differs from the heuristic: nothing when it won
        assert teacher.changed.shape == (graph.num_nodes,)
        assert bool(teacher.changed.any()) == (teacher.changes > 0)
    # A budget of one evaluation is the start alone: the heuristic's decisions exactly.
    only = run_teacher(TeacherJob("cnn", "v100x4", evaluations=1), graphs["cnn"])
    assert only.step_time == only.best_heuristic_time
    assert not only.changed.any() and only.changes == 0


def test_needless_changes_are_taken_back_and_needed_ones_kept(teachers, graphs):
    from hlo_go.baselines.search import score
    from hlo_go.rl.prior import BEST, prior_decisions

    graph = graphs["cnn"]
    # On one device the order does not change the step: every schedule change is needless.
    one = get_cluster("host-cpu-1")
    _, start = prior_decisions(graph, one, BEST)
    start = start.validate(graph, 1)
    rng = np.random.default_rng(0)
    shuffled = start._replace(
        schedule_priority=rng.random(graph.num_nodes).astype(np.float32)
    ).for_graph(graph)
    back, reverts = revert_needless_changes(graph, one, shuffled, start)
    assert reverts.kept == 0 and reverts.reverted > 0
    np.testing.assert_array_equal(back.schedule_priority, start.schedule_priority)
    # Nothing changed: nothing to try.
    same, none = revert_needless_changes(graph, one, start, start)
    assert none == (0, 0, 0)
    np.testing.assert_array_equal(same.fusion_priority, start.fusion_priority)
    # A search's result on four devices: never slower than it beyond the tolerance, and
    # what made it faster than the heuristic is kept.
    four = get_cluster("v100x4")
    _, start = prior_decisions(graph, four, BEST)
    start = start.validate(graph, 4)
    found = run_search(graph, four, "simulated-annealing", budget=200, seed=1, start=[start],
                       tasks=search_tasks_for(four), fixed=start).best.validate(graph, 4)  # fmt: skip
    mine, reverts = revert_needless_changes(graph, four, found, start)
    t_found, t_mine = (score(simulate(graph, four, d)) for d in (found, mine))
    assert t_mine <= t_found * (1 + REVERT_TOLERANCE)
    if t_found * (1 + REVERT_TOLERANCE) < score(simulate(graph, four, start)):
        assert reverts.kept > 0
    assert reverts.evaluations <= 2000


# -- imitation -----------------------------------------------------------------------------


def test_changed_decisions_carry_their_share_of_the_loss(teachers, graphs):
    teacher = teachers[0]
    n = graphs["cnn"].num_nodes
    changed = np.zeros(n, np.uint8)
    changed[[1, 4, 9]] = CHANGED_BITS["fusion"]
    changed[[2, 4]] |= CHANGED_BITS["scheduling"]
    teacher = teacher._replace(changed=changed)
    (example,) = make_examples([teacher], CONFIG, graphs=graphs, changed_share=0.25)
    w, lw = example.weights, example.loss_weights
    size = example.env.inputs.bucket[0]
    task_of = np.repeat(np.arange(len(CONFIG.tasks)), size)
    on = np.zeros_like(w, bool)
    for i, task in enumerate(CONFIG.tasks):
        if task in ("fusion", "scheduling"):
            bit = CHANGED_BITS[task]
            on[task_of == i] = example.env.inputs.to_positions((changed & bit) > 0)
    assert on.sum() == 5 and np.all(w[on] > 0)
    assert (lw[on] * 1.0).sum() / lw.sum() == pytest.approx(0.25, rel=1e-5)
    np.testing.assert_array_equal(lw[~on], w[~on])  # the rest, padding included, as before
    assert np.unique(lw[on]).size == 1  # changed decisions scaled alike
    (plain,) = make_examples([teacher], CONFIG, graphs=graphs, changed_share=0.0)
    np.testing.assert_array_equal(plain.loss_weights, plain.weights)
    unknown = make_examples([teacher._replace(changed=None)], CONFIG, graphs=graphs)
    np.testing.assert_array_equal(unknown[0].loss_weights, unknown[0].weights)
    with pytest.raises(ValueError, match="share"):
        make_examples([teacher], CONFIG, graphs=graphs, changed_share=1.0)


def test_teacher_actions_invert_env_decisions(teachers, graphs):
    bins = TINY.priority_bins
    for teacher in teachers:
        graph, cluster = graphs[teacher.job.graph], get_cluster(teacher.job.cluster)
        env = GraphEnv(graph, cluster, TINY, TASKS)
        actions = teacher_actions(env, teacher.decisions)
        assert all(a.shape == (env.inputs.bucket[0],) for a in actions.values())
        back = env.decisions({t: a[None] for t, a in actions.items()})[0]
        np.testing.assert_array_equal(back.placement, teacher.decisions.placement)
        for field in ("schedule_priority", "fusion_priority"):
            got = np.rint(getattr(back, field) * (bins - 1))
            want = np.clip(np.rint(getattr(teacher.decisions, field) * (bins - 1)), 0, bins - 1)
            np.testing.assert_array_equal(got, want)
    # A task not learned takes the environment's fixed actions.
    env = GraphEnv(graphs["cnn"], get_cluster("v100x4"), TINY, ("fusion",))
    actions = teacher_actions(env, teachers[0].decisions)
    np.testing.assert_array_equal(actions["placement"], env.fixed_actions["placement"])


def test_canonical_devices_number_parts_in_graph_order(graphs):
    graph, cluster = graphs["cnn"], get_cluster("v100x4")
    order = np.asarray(graph.topo_order)
    # four parts along the topological order, numbered backwards; a decision of each kind
    part = np.empty(graph.num_nodes, np.int32)
    part[order] = np.arange(graph.num_nodes) * 4 // graph.num_nodes
    base = Decisions.default(graph)
    backwards = base._replace(placement=(3 - part).astype(np.int32))
    renumbered = canonical_devices(graph, cluster, backwards)
    np.testing.assert_array_equal(renumbered.placement, part)
    got, want = simulate(graph, cluster, renumbered), simulate(graph, cluster, backwards)
    assert got.step_time == pytest.approx(want.step_time, rel=1e-9)
    # devices 1 and 3 unused: the used ones come first, in graph order
    two = base._replace(placement=np.where(part < 2, 3, 1).astype(np.int32))
    np.testing.assert_array_equal(canonical_devices(graph, cluster, two).placement, part >= 2)
    assert canonical_devices(graph, cluster, renumbered) is renumbered  # already canonical
    # devices that differ: renumbering would change the step time, so nothing changes
    slow = dataclasses.replace(cluster.devices[0], peak_flops={"f32": 1e9}, matrix_flops={})
    uneven = dataclasses.replace(cluster, devices=(slow, *cluster.devices[1:]))
    assert canonical_devices(graph, uneven, backwards) is backwards


def test_imitation_examples_can_renumber_the_teachers_devices(teachers, graphs):
    config = CONFIG.replace(tasks=("placement",))
    renumbered = make_examples(teachers[:1], config, graphs=graphs, renumber_devices=True)[0]
    env = renumbered.env
    want = canonical_devices(env.graph, env.cluster, teachers[0].decisions.validate(env.graph, 4))
    back = env.decisions({t: a[None] for t, a in renumbered.actions.items()})[0]
    np.testing.assert_array_equal(back.placement, want.placement)
    assert len(np.unique(want.placement)) > 1  # the teacher spreads the graph


def test_matched_placement_takes_the_numbering_the_network_prefers():
    perms, valid = device_table(get_cluster("v100x4"), 8)
    assert perms.shape == (40320, 8) and valid.sum() == 24
    np.testing.assert_array_equal(perms[valid][:, 4:], np.tile(np.arange(4, 8), (24, 1)))
    teacher = np.array([0, 0, 1, 1, 2, 3, 0], np.int32)
    want = np.array([3, 3, 2, 2, 1, 0, 3], np.int32)  # the teacher's parts, renumbered
    log_probs = np.full((7, 8), np.log(0.01), np.float32)
    log_probs[np.arange(7), want] = np.log(0.9)
    log_probs[:, 4:] = -1e9  # no such devices
    log_probs[6] = 0.0  # a padding row: no opinion, and it does not count
    weights = np.array([1, 1, 1, 1, 1, 1, 0], np.float32)
    args = [jnp.asarray(a) for a in (log_probs, teacher, weights, perms)]
    for match in (matched_placement, jax.jit(matched_placement)):
        np.testing.assert_array_equal(match(*args, jnp.asarray(valid)), want)
        identity_only = np.arange(len(valid)) == 0
        np.testing.assert_array_equal(match(*args, jnp.asarray(identity_only)), teacher)


def test_matched_loss_is_the_same_for_every_numbering_of_the_teacher(teachers, graphs):
    import optax

    example = make_examples(teachers[:1], CONFIG, graphs=graphs, match_devices=True)[0]
    assert example.label == "cnn@v100x4" and example.device_perms is not None
    matched = Imitator(CONFIG, optax.adam(1e-3), match_devices=True)
    plain = Imitator(CONFIG, optax.adam(1e-3))
    params = agent_for(CONFIG).policy.init(jax.random.key(0), example.env.inputs, 8)
    base, unmatched = matched.loss(params, example), plain.loss(params, example)
    assert base <= unmatched + 1e-6
    taught = example.actions["placement"]
    plain_losses = []
    for perm in device_permutations(get_cluster("v100x4"))[[5, 17, 23]]:
        renamed = example._replace(actions={**example.actions, "placement": perm[taught]})
        assert matched.loss(params, renamed) == pytest.approx(base, rel=1e-5)
        plain_losses.append(plain.loss(params, renamed))
    assert max(abs(x - unmatched) for x in plain_losses) > 1e-4  # unmatched, numbers matter
    # agreement counts placement up to the symmetry that matches best
    greedy = {t: a[None] for t, a in example.actions.items()}
    greedy["placement"] = device_permutations(get_cluster("v100x4"))[7][taught][None]
    agreement = _agreement(greedy, example, CONFIG.tasks)
    assert agreement["placement"] == pytest.approx(1.0) and agreement["all"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no device table"):
        matched.loss(params, example._replace(device_perms=None, perm_valid=None))


def test_imitation_with_matched_devices_trains_and_records_it(teachers, graphs, tmp_path):
    result = train_imitation(
        teachers[:2], CONFIG, steps=6, graphs=graphs, seed=0, out_dir=tmp_path / "m",
        learning_rate=3e-3, match_devices=True,
    )  # fmt: skip
    assert result.step == 6 and all(np.isfinite(row["loss"]) for row in result.history)
    assert load_checkpoint(tmp_path / "m").meta["imitation"]["match_devices"] is True
    with pytest.raises(ResumeMismatchError, match="imitation"):  # another recipe: refused
        train_imitation(
            teachers[:2], CONFIG, steps=7, graphs=graphs, out_dir=tmp_path / "m",
            learning_rate=3e-3,
        )  # fmt: skip


def test_loss_jit_equals_eager_and_compiles_once_per_bucket(teachers, graphs):
    import optax

    examples = make_examples(teachers, CONFIG, graphs=graphs)
    imitator = Imitator(CONFIG, optax.adam(1e-3))
    params = agent_for(CONFIG).policy.init(jax.random.key(0), examples[0].env.inputs, 8)
    example = examples[0]
    env = example.env
    args = (params, env.inputs.graphs, imitator.devices(env), example.actions, example.weights)
    eager = imitation_loss(imitator.network, *args, CONFIG.tasks)
    assert float(eager) > 0
    for example in examples:
        loss = imitator.loss(params, example)
        assert np.isfinite(loss) and loss > 0
        weights = decision_weights(example.env.inputs, CONFIG.tasks)
        np.testing.assert_array_equal(example.weights, weights)
    assert imitator.loss(params, examples[0]) == pytest.approx(float(eager), rel=1e-5)
    buckets = {e.env.inputs.bucket for e in examples}
    assert imitator.trace_counts["loss"] == len(buckets)


def test_imitation_learns_and_its_checkpoint_starts_ppo(teachers, graphs, tmp_path):
    chosen = list(teachers)  # two graphs on v100x4 and one on host-cpu-1, in one run
    out = tmp_path / "imitation"
    result = train_imitation(
        chosen, CONFIG, steps=30, graphs=graphs, seed=0, out_dir=out, learning_rate=3e-3
    )
    assert result.step == 30 and len(result.history) == 30
    for label in ("cnn@v100x4", "mlp@v100x4"):
        losses = [row["loss"] for row in result.history if row["graph"] == label]
        assert np.mean(losses[-3:]) < np.mean(losses[:3])
    assert sum(result.agreement.values()) > sum(result.agreement_before.values())
    assert set(result.agreement_by_task["cnn@v100x4"]) == {*TASKS, "all"}

    ckpt = load_checkpoint(out)
    assert ckpt.step == 30 and ckpt.meta["kind"] == "imitation"
    assert ckpt.meta["graphs"] == ["cnn@v100x4", "mlp@v100x4", "cnn@host-cpu-1"]
    assert ckpt.meta["clusters"] == ["host-cpu-1", "v100x4"]
    assert ckpt.config.prior_method == "" and ckpt.config.policy == TINY

    # PPO fine-tuning and pre-training accept the checkpoint as their start.
    tuned = finetune(out, ("cnn", graphs["cnn"]), get_cluster("v100x4"), steps=2,
                     out_dir=tmp_path / "ft")  # fmt: skip
    assert tuned.step == 2 and np.isfinite(tuned.graphs["cnn"].greedy_time)
    pre = pretrain([("mlp", graphs["mlp"])], get_cluster("v100x4"), steps=1,
                   out_dir=tmp_path / "pre", config=CONFIG, init=out)  # fmt: skip
    assert pre.step == 1

    # Resuming continues from the checkpoint's step.
    more = train_imitation(
        chosen, CONFIG, steps=32, graphs=graphs, seed=0, out_dir=out, learning_rate=3e-3
    )
    assert [row["step"] for row in more.history] == [30, 31]
    assert load_checkpoint(out).step == 32
    with pytest.raises(ResumeMismatchError, match="imitation"):
        train_imitation(chosen, CONFIG, steps=33, graphs=graphs, out_dir=out, learning_rate=1e-3)
    with pytest.raises(ResumeMismatchError, match="'finetune' run"):
        train_imitation(chosen, CONFIG, steps=1, graphs=graphs, out_dir=tmp_path / "ft")


def test_imitation_refuses_a_prior(teachers, graphs):
    with pytest.raises(ValueError, match="prior"):
        train_imitation(teachers, CONFIG.replace(prior_method="best"), steps=1, graphs=graphs)
