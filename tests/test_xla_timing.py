"""Interleaved timing: every configuration timed each round, in a rotated order."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from hlo_go.xla.timing import ratio, round_order, time_interleaved


def test_rounds_rotate_the_order_after_a_fixed_warmup() -> None:
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "ABC"}
    timings = time_interleaved(fns, repeats=4, warmup=1)
    assert "".join(calls) == "ABC" + "ABC" + "BCA" + "CAB" + "ABC"
    assert list(timings) == ["A", "B", "C"]  # the order of fns, whatever the rounds ran
    assert all(len(t.samples) == 4 for t in timings.values())
    assert ratio(timings["A"], timings["A"]) == 1.0


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 7])
def test_balanced_rounds_put_each_one_everywhere_and_after_every_other(count: int) -> None:
    rounds = count if count % 2 == 0 else 2 * count
    orders = [round_order(count, r, "balanced") for r in range(rounds)]
    assert all(sorted(o) == list(range(count)) for o in orders)
    positions = Counter((x, i) for o in orders for i, x in enumerate(o))
    follows = Counter(pair for o in orders for pair in itertools.pairwise(o))
    assert len(positions) == count * count and len(set(positions.values())) == 1
    assert len(follows) == count * (count - 1) and len(set(follows.values())) == 1
    assert round_order(count, rounds, "balanced") == orders[0]  # then it starts again
    # the rotated order times each configuration right after the same one
    rotated = {pair for r in range(count) for pair in itertools.pairwise(round_order(count, r))}
    assert rotated <= {(i, (i + 1) % count) for i in range(count)}


def test_time_interleaved_runs_the_balanced_rounds_and_refuses_an_unknown_order() -> None:
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "ABCD"}
    time_interleaved(fns, repeats=4, warmup=0, order="balanced")
    assert "".join(calls) == "ABDC" + "BCAD" + "CDBA" + "DACB"
    with pytest.raises(ValueError, match="unknown order"):
        time_interleaved(fns, repeats=1, order="random")


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="repeats"):
        time_interleaved({"A": lambda: None}, repeats=0)


def test_calls_see_only_their_own_garbage_collected_and_the_freeze_is_undone() -> None:
    import gc
    import weakref

    class Node:
        pass

    def cycle() -> weakref.ref:
        a, b = Node(), Node()
        a.other, b.other = b, a  # unreachable once returned: only a collection frees it
        return weakref.ref(a)

    frozen: list[int] = []
    made: list[weakref.ref] = []

    def call() -> None:
        frozen.append(gc.get_freeze_count())
        if made:
            assert made[-1]() is None, "the last call's cyclic garbage was not collected"
        made.append(cycle())

    time_interleaved({"A": call}, repeats=3, warmup=1)
    assert len(frozen) == 4 and all(n > 0 for n in frozen)  # the heap was frozen...
    assert gc.get_freeze_count() == 0  # ...and is not any more


def test_a_freeze_of_the_process_s_own_is_left_alone() -> None:
    import gc

    gc.freeze()
    try:
        before = gc.get_freeze_count()
        time_interleaved({"A": lambda: None}, repeats=2, warmup=0)
        # Still frozen (an unfreeze leaves 0). Not exactly as many: the freeze also took
        # objects other threads were using (pytest-xdist's I/O thread), and their release
        # frees a few frozen objects (2 fewer of 1.4 million, once in CI).
        assert gc.get_freeze_count() > before - 1000
    finally:
        gc.unfreeze()
