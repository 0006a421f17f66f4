"""Interleaved timing: every configuration timed each round, in a rotated order."""

from __future__ import annotations

import pytest

from hlo_go.xla.timing import ratio, time_interleaved


def test_rounds_rotate_the_order_after_a_fixed_warmup() -> None:
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "ABC"}
    timings = time_interleaved(fns, repeats=4, warmup=1)
    assert "".join(calls) == "ABC" + "ABC" + "BCA" + "CAB" + "ABC"
    assert list(timings) == ["A", "B", "C"]  # the order of fns, whatever the rounds ran
    assert all(len(t.samples) == 4 for t in timings.values())
    assert ratio(timings["A"], timings["A"]) == 1.0


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="repeats"):
        time_interleaved({"A": lambda: None}, repeats=0)
