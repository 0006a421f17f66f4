"""The measured search (hlo_go.baselines.measured) and its method name "measured-search":
candidates lowered, checked and timed; illegal proposals skipped and counted; the budget in
measured candidates; the result lowers and matches jax.jit. No timing is asserted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go import methods
from hlo_go.baselines import MeasuredSearchResult, measured_search
from hlo_go.baselines.measured import (
    MOVES,
    SCHEDULE_MOVES,
    Candidate,
    SearchContext,
    accepts,
)
from hlo_go.decisions import DEFAULT_LIMITS
from hlo_go.xla import program


def _f(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    h = jnp.tanh(x @ w) * 2.0 + 1.0
    g = jax.nn.softmax(h) * jnp.exp(-h)
    return jnp.sum(h * h, axis=-1), g - x, jnp.mean(g * h, axis=0)


X = jnp.linspace(-1.0, 1.0, 32 * 16).reshape(32, 16)
W = jnp.linspace(-0.5, 0.5, 16 * 16).reshape(16, 16)
# Few rounds: these tests check behaviour, not speed.
FAST = {"screen_rounds": 1, "confirm_rounds": 1, "start_rounds": 1, "min_sample_s": 0.002}


@pytest.fixture(scope="module")
def prog():  # type: ignore[no-untyped-def]
    return program(_f, (X, W))


def _close(got: object, want: object) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_accepts_needs_a_quorum_and_a_median_gain() -> None:
    assert accepts([0.97, 0.98, 0.99], min_gain=0.01, quorum=1.0)
    assert not accepts([0.97, 0.98, 1.01], min_gain=0.01, quorum=1.0)  # one round lost
    assert accepts([0.97, 0.98, 1.01], min_gain=0.01, quorum=0.6)
    assert not accepts([0.995, 0.996, 0.997], min_gain=0.01, quorum=1.0)  # gain too small
    assert not accepts([], min_gain=0.0, quorum=0.5)


def test_moves_change_groups_or_order(prog) -> None:  # type: ignore[no-untyped-def]
    from hlo_go.baselines import get
    from hlo_go.sim import get_cluster

    graph = prog.graph
    ctx = SearchContext(graph, prog.output_dims, DEFAULT_LIMITS)
    start = Candidate(get("fuse-all-legal")(graph, get_cluster("host-cpu-1")).for_graph(graph))
    groups = ctx.groups(start.decisions)
    key = ctx.key(start, groups)
    rng = np.random.default_rng(0)
    changed = set()
    for name, (move, _) in MOVES.items():
        for _ in range(20):
            candidate = move(ctx, start, groups, rng)
            if candidate is None:
                continue
            assert candidate.decisions.graph_fingerprint == graph.fingerprint
            assert candidate.ordered == (name in SCHEDULE_MOVES)
            if ctx.key(candidate, ctx.groups(candidate.decisions)) != key:
                changed.add(name)
    assert {"split", "hoist", "sink"} <= changed  # each of these always changes something


def test_result_lowers_and_matches_jit_through_methods(prog) -> None:  # type: ignore[no-untyped-def]
    assert methods.MEASURED in methods.names("fusion")
    assert methods.MEASURED in methods.names("schedule")
    assert methods.MEASURED not in methods.names("placement")
    assert methods.check_name("fusion", methods.MEASURED) == methods.MEASURED
    variant = methods.variants(
        prog.graph, {"m": (methods.MEASURED, methods.MEASURED)}, program=prog, budget=2
    )["m"]
    assert variant.fusion.graph_fingerprint == prog.graph.fingerprint
    executable = prog.lower(fusion=variant.fusion, schedule=variant.schedule)
    _close(executable(*prog.args), jax.jit(_f)(X, W))


def test_measured_search_needs_the_program() -> None:
    other = program(lambda x: jnp.cos(x) * 2.0, (X,))
    graph = program(_f, (X, W)).graph
    with pytest.raises(methods.ProgramRequiredError, match="pass the program"):
        methods.decide(graph, methods.MEASURED)
    with pytest.raises(methods.ProgramRequiredError, match=r"decide on program\.graph"):
        methods.decide(graph, methods.MEASURED, program=other)


def _broken(ctx, incumbent, groups, rng):  # type: ignore[no-untyped-def]
    """A move whose decisions no lowering takes (a non-finite priority)."""
    priority = incumbent.decisions.fusion_priority.copy()
    priority[int(rng.integers(priority.size))] = np.nan
    return incumbent._replace(decisions=incumbent.decisions._replace(fusion_priority=priority))


def test_illegal_proposals_are_skipped_and_counted_and_the_budget_holds(prog) -> None:  # type: ignore[no-untyped-def]
    moves = {"broken": (_broken, 1.0), "split": MOVES["split"], "sink": MOVES["sink"]}
    result = measured_search(prog, budget=3, seed=1, moves=moves, **FAST)
    assert isinstance(result, MeasuredSearchResult)
    timed = [h for h in result.history if "ratio" in h]
    illegal = [h for h in result.history if "illegal" in h]
    assert result.measured == len(timed) == 3  # the budget counts measured candidates only
    assert result.illegal == len(illegal) > 0
    assert all(h["move"] == "broken" for h in illegal)
    assert all(h["move"] != "broken" for h in timed)
    assert result.proposals == result.measured + result.illegal + result.unchanged
    assert result.final_correct
    assert set(result.heuristics) == {"xla-cpu-like", "priority-fusion", "fuse-all-legal"}
    assert result.start in result.heuristics
    _close(result.best.lower(prog)(*prog.args), jax.jit(_f)(X, W))


def test_proposals_are_deterministic_given_a_seed(prog) -> None:  # type: ignore[no-untyped-def]
    # min_gain 0.99: nothing is accepted, so the incumbent (and every proposal) depends
    # on the seed only
    runs = [
        measured_search(
            prog, budget=2, seed=7, starts=("xla-cpu-like",), min_gain=0.99, **FAST
        ).history
        for _ in range(2)
    ]
    assert [h["move"] for h in runs[0]] == [h["move"] for h in runs[1]]
    assert all(not h.get("accepted") for h in runs[0])
