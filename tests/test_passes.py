"""Pass-ordering environment over XLA's real HLO passes (hlo_go.passes, hlo_go.xla.passes)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.passes import (
    CACHE,
    Episode,
    PassEnvConfig,
    PassOrderingEnv,
    ReplayError,
    UnknownPassError,
    action_names,
    beam_search,
    catalog_names,
    check_outputs,
    default_order,
    default_sequence,
    get_action,
    greedy_search,
    observation_size,
    ppo_search,
    random_search,
    reference_outputs,
    replay,
    reset,
    run_actions,
    step,
    unavailable_actions,
)
from hlo_go.passes.ppo import PassPPOConfig
from hlo_go.xla.passes import (
    PassNotRunError,
    discover_pipeline,
    instruction_count,
    is_hook_pass,
    passes_run,
    run_hlo_passes,
)


def _redundant(x: jax.Array, y: jax.Array) -> jax.Array:
    """Common subexpressions, a nested jit (an HLO call), reshapes and transposes."""

    @jax.jit
    def inner(a: jax.Array) -> jax.Array:
        return jnp.tanh(a) * 2.0

    a = (x * 2.0 + y) @ y.T
    b = (x * 2.0 + y) @ y.T
    c = jnp.reshape(jnp.transpose(jnp.reshape(a, (4, 2, 8))), (8, 8)).T
    return inner(a + b) + inner(c) + jnp.sum(x * 1.0) + 0.0 * y[0, 0]


def _while(x: jax.Array) -> jax.Array:
    def body(i: jax.Array, carry: jax.Array) -> jax.Array:
        k = x * 3.0  # loop invariant
        return carry + k * i

    return jax.lax.fori_loop(0, 5, body, x)


@pytest.fixture(scope="module")
def small() -> str:
    x = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    return jax.jit(_redundant).lower(x, x).as_text(dialect="hlo")


@pytest.fixture(scope="module")
def looped() -> str:
    x = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    return jax.jit(_while).lower(x).as_text(dialect="hlo")


@pytest.fixture(scope="module")
def start(small: str):
    return reset(small)


def test_pipeline_is_read_from_xla() -> None:
    pipeline = discover_pipeline()
    names = {p.name for p in pipeline}
    assert {
        "algsimp",
        "cse",
        "dce",
        "reshape-mover",
        "call-inliner",
    } <= names
    assert any(is_hook_pass(n) for n in names)  # numbered since jaxlib 0.12
    nested = [p for p in pipeline if p.name == "algsimp"]
    assert any(p.nested_in == ("simplification",) for p in nested)


def test_exactly_the_chosen_passes_run(start) -> None:
    # One child process with XLA's pass log on: a pass nested in a pipeline runs
    # alone inside it (not the whole pipeline), and nothing else runs.
    ran = passes_run(start.text, get_action("algsimp").enabled)
    assert [p.name for p in ran][:2] == ["simplification", "algsimp"]
    assert ran[2:] and all(is_hook_pass(p.name) for p in ran[2:])
    assert ran[1].pipelines[-1] == "simplification"


def test_actions_follow_the_pipeline_this_process_runs() -> None:
    """An action none of whose passes the pipeline has is left out with its reason; a
    whole-pipeline action keeps the members the pipeline has."""
    from hlo_go.passes.catalog import PassSpec, _resolve
    from hlo_go.xla.passes import PipelinePass

    pipeline = (
        PipelinePass("cse", ("cse-pipeline",), 0),
        PipelinePass("algsimp", ("optimization", "simplification"), 1),
    )
    single = _resolve(PassSpec("gs", ("gather_simplifier",), "simplification", ""), pipeline)
    assert isinstance(single, str) and "'gather_simplifier'" in single
    whole = _resolve(
        PassSpec("simp", ("algsimp", "gather_simplifier"), "simplification", ""), pipeline
    )
    assert not isinstance(whole, str)
    assert [e.name for e in whole.entries] == ["algsimp"]
    assert whole.enabled == ("simplification", "algsimp")
    offered = set(action_names())
    assert offered | set(unavailable_actions()) == set(catalog_names())
    assert not offered & set(unavailable_actions())
    for name, reason in unavailable_actions().items():
        with pytest.raises(UnknownPassError, match="XLA's CPU pipeline in this process"):
            get_action(name)
        assert name in reason


def test_unknown_pass_names_are_rejected(start) -> None:
    with pytest.raises(UnknownPassError, match="no-such-pass"):
        get_action("no-such-pass")
    with pytest.raises(UnknownPassError):
        PassEnvConfig(actions=("cse", "no-such-pass"))
    with pytest.raises(UnknownPassError):
        step(start, "no-such-pass")
    # XLA itself accepts any name silently; the dump check catches a pass that never ran.
    with pytest.raises(PassNotRunError, match="no-such-pass"):
        run_hlo_passes(start.text, ["no-such-pass"], verify=("no-such-pass",))
    # A real pass outside its (disabled) nested pipeline is never scheduled either.
    with pytest.raises(PassNotRunError, match="reshape-mover"):
        run_hlo_passes(start.text, ["reshape-mover"], verify=("reshape-mover",))


def test_pass_that_changes_nothing_gives_zero_reward(start) -> None:
    # No while loops in this module: the while-loop simplifier has nothing to do.
    after, reward, done, info = step(start, "simplify-while-loops")
    assert reward == 0.0
    assert after.op_count == start.op_count
    assert not info["changed"] and info["error"] is None and not done
    # CSE twice: the second finds nothing left.
    once, first, _, _ = step(start, "cse")
    twice, second, _, _ = step(once, "cse")
    assert first > 0.0 and second == 0.0
    assert twice.op_count == once.op_count


def test_simulated_time_reward(start) -> None:
    config = PassEnvConfig(reward="sim_time")
    _, unchanged, _, _ = step(start, "simplify-while-loops", config)
    assert unchanged == 0.0
    _, reward, _, _ = step(start, "cse", config)
    assert np.isfinite(reward) and reward > 0.0
    with pytest.raises(ValueError, match="reward"):
        PassEnvConfig(reward="speed")


def test_reward_is_the_op_count_reduction(start) -> None:
    after, reward, _, info = step(start, "cse")
    assert after.op_count == instruction_count(after.text) == info["op_count"]
    assert reward == pytest.approx((start.op_count - after.op_count) / start.initial_op_count)
    assert after.history == ("cse",)
    assert after.fingerprint == start.fingerprint


def test_episode_replays_to_the_same_module(small: str, start) -> None:
    rng = np.random.default_rng(3)
    names = action_names()
    actions = [names[i] for i in rng.integers(len(names), size=6)]
    final, episode = run_actions(start, actions)
    assert episode.actions == tuple(actions) and len(episode.op_counts) == 6
    loaded = Episode.from_dict(json.loads(json.dumps(episode.to_dict())))
    assert loaded == episode
    CACHE.clear()  # replay recomputes every pass with XLA
    again = replay(small, loaded)
    assert again.module_fingerprint == final.module_fingerprint == episode.final_fingerprint
    assert again.op_count == final.op_count
    tampered = Episode(
        episode.fingerprint, episode.actions, episode.op_counts, episode.initial_op_count, "0" * 64
    )
    with pytest.raises(ReplayError, match="final module"):
        replay(small, tampered)


def test_replay_on_another_module_is_refused(looped: str, start) -> None:
    _, episode = run_actions(start, ["cse"])
    with pytest.raises(ReplayError, match="recorded on module"):
        replay(looped, episode)


@pytest.mark.parametrize("seed", [0, 1])
def test_outputs_unchanged_by_any_order(small: str, looped: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = action_names()
    for text in (small, looped):
        reference = reference_outputs(text)
        begin = reset(text)
        orders = [list(default_sequence()), [names[i] for i in rng.permutation(len(names))]]
        for order in orders:
            final, _ = run_actions(begin, order)
            check = check_outputs(text, final.text, reference=reference)
            assert check.ok, (order, check.message)


def test_passes_really_optimize(small: str, looped: str, start) -> None:
    default = default_order(start)
    assert default.op_count < start.op_count
    # Order matters where jax wraps the loop body in a call (jax 0.10; jax 0.12 lowers
    # it inline): the while-loop passes do not look into it until call-inliner has run.
    loop_start = reset(looped)
    _, reward, _, _ = step(loop_start, "simplify-while-loops")
    assert (reward == 0.0) == (" call(" in looped)
    inlined, _, _, _ = step(loop_start, "call-inliner")
    simplified, reward, _, _ = step(inlined, "simplify-while-loops")
    assert reward > 0.0 and simplified.op_count < inlined.op_count
    hoisted, _, _, info = step(inlined, "while-licm")
    assert info["changed"] and hoisted.module_fingerprint != inlined.module_fingerprint


def test_agents_find_orders_that_replay(small: str, start) -> None:
    config = PassEnvConfig(max_steps=3, actions=("cse", "dce", "call-inliner", "algsimp"))
    for result in (
        random_search(start, 6, config, seed=0),
        greedy_search(start, 12, config),
        ppo_search(start, 6, config, PassPPOConfig(hidden=8, episodes_per_update=2)),
    ):
        assert result.op_count < start.op_count  # cse alone reduces this module
        assert result.steps <= 12
        if result.episode.actions:
            assert replay(small, result.episode).op_count == result.op_count


def test_beam_search_passes_through_a_step_that_pays_off_later(small: str, start) -> None:
    # flatten-call-graph clones the twice-called `inner` (more ops), after which
    # call-inliner inlines both copies and algsimp folds them: greedy never takes
    # the first step, a beam of width 2 keeps it.
    names = ("cse", "transpose-folding", "flatten-call-graph", "call-inliner", "algsimp")
    config = PassEnvConfig(max_steps=5, actions=names)
    greedy = greedy_search(start, 100, config)
    beam = beam_search(start, 100, config, width=2)
    assert "flatten-call-graph" not in greedy.episode.actions
    assert "flatten-call-graph" in beam.episode.actions
    assert beam.op_count < greedy.op_count
    assert beam.steps <= 100
    assert replay(small, beam.episode).op_count == beam.op_count
    with pytest.raises(ValueError, match="width"):
        beam_search(start, 10, config, width=0)


def test_gym_wrapper(small: str) -> None:
    env = PassOrderingEnv(small, PassEnvConfig(max_steps=2))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (env.observation_size,) == (observation_size(env.num_actions),)
    assert np.all(np.isfinite(obs))
    obs2, reward, terminated, truncated, _ = env.step(action_names().index("cse"))
    assert reward > 0 and not terminated and not truncated
    assert not np.array_equal(obs, obs2)
    _, _, _, truncated, _ = env.step("dce")
    assert truncated
    assert env.episode().actions == ("cse", "dce")
    with pytest.raises(ValueError, match="done"):
        env.step("cse")


def test_cli_smoke(tmp_path, small: str, capsys) -> None:
    from hlo_go.cli import main

    path = tmp_path / "small.hlo"
    path.write_text(small)
    out = tmp_path / "episode.json"
    code = main(
        ["passes", str(path), "--agent", "random", "--budget", "4", "--max-steps", "2",
         "--json", "--quiet", "--episode-out", str(out)]
    )  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["default_op_count"] <= result["prepared_op_count"]
    assert result["outputs_match"] == {"default": True, "random": True}
    assert Episode.load(out).initial_op_count == result["prepared_op_count"]
    assert main(["passes", str(path), "--actions", "cse,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
