"""benchmarks._pinned.measure_pinned: every graph measured in a pinned process, a failure
is its graph's row, the partial file holds what is done, a spent deadline starts nothing."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from benchmarks._pinned import DIED, measure_pinned


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


def _crashing(name: str, *, marks: str) -> dict[str, Any]:
    """Dies by a signal: ``always`` every time, ``once`` the first time only."""
    mark = Path(marks) / name
    if name == "always" or not mark.exists():
        mark.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"graph": name, "pid": os.getpid()}


def test_a_graph_whose_process_died_is_measured_once_more(tmp_path: Path) -> None:
    per_graph: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    measure_pinned(
        ["once", "always"], _crashing, per_graph=per_graph, cache=tmp_path / "x.json",
        version=3, log=lines.append, marks=str(tmp_path),
    )  # fmt: skip
    assert per_graph["once"]["graph"] == "once" and "error" not in per_graph["once"]
    assert per_graph["always"] == {"graph": "always", "error": DIED, "rows": [], "version": 3}
    assert sum("always: start" in line for line in lines) == 2  # retried once, not more
    assert any("measuring again" in line for line in lines)
    without: dict[str, dict[str, Any]] = {}
    (tmp_path / "once").unlink()
    measure_pinned(
        ["once"], _crashing, per_graph=without, cache=tmp_path / "y.json", version=3,
        log=lines.append, retry_died=False, marks=str(tmp_path),
    )  # fmt: skip
    assert without["once"]["error"] == DIED
