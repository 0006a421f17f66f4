"""benchmarks._pinned.measure_pinned: every graph measured in a pinned process, a failure
is its graph's row, the partial file holds what is done, a spent deadline starts nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from benchmarks._pinned import measure_pinned


def _measure(name: str, *, scale: int) -> dict[str, Any]:
    if name == "boom":
        raise ValueError("no such graph")
    return {"graph": name, "value": len(name) * scale, "pid": os.getpid()}


def test_each_graph_is_measured_in_a_process_and_kept(tmp_path: Path) -> None:
    per_graph: dict[str, dict[str, Any]] = {"kept": {"graph": "kept"}}
    cache = tmp_path / "partial" / "x.json"
    lines: list[str] = []
    measure_pinned(
        ["ab", "boom", "abc"], _measure, per_graph=per_graph, cache=cache, version=7,
        log=lines.append, scale=10,
    )  # fmt: skip
    assert per_graph["ab"]["value"] == 20 and per_graph["abc"]["value"] == 30
    assert per_graph["ab"]["pid"] != os.getpid()
    assert per_graph["boom"] == {
        "graph": "boom", "error": "ValueError: no such graph", "rows": [], "version": 7,
    }  # fmt: skip
    assert per_graph["kept"] == {"graph": "kept"}
    assert json.loads(cache.read_text()) == per_graph
    assert any("boom: failed" in line for line in lines)


def test_a_spent_deadline_starts_no_graph(tmp_path: Path) -> None:
    per_graph: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    measure_pinned(
        ["ab"], _measure, per_graph=per_graph, cache=tmp_path / "x.json", version=1,
        log=lines.append, deadline_s=-1.0, scale=1,
    )  # fmt: skip
    assert per_graph == {} and not (tmp_path / "x.json").exists()
    assert "skipped" in lines[0]
