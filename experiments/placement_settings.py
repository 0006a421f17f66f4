"""Which paper-scale placement graphs make placement matter: one device against the
placement heuristics, in the simulator.

For every graph of the corpus's ``"placement"`` split (:mod:`hlo_corpus.variants`, built
with ``python -m hlo_go.corpus_build --placement``) and each cluster, the one-device
time is compared with the best placement heuristic (round-robin, expert, METIS, HEFT,
m-ETF, m-SCT), in two settings: placement alone (FIFO, no fusion, as in
``experiments/placement.py``) and with critical-path scheduling and all legal fusion.
A graph qualifies on a cluster when one device is out of memory, or at least
:data:`MIN_SPEEDUP` × slower than the best placement that fits.

Run: ``python experiments/placement_settings.py [NAME ...] [--clusters v100x4,h100x8]``;
writes ``results/placement_settings.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hlo_go import corpus
from hlo_go.baselines import run_method
from hlo_go.graph import build_graph
from hlo_go.sim import get_cluster, simulate

CLUSTERS = ("v100x4", "h100x8")
PLACERS = ("round-robin", "expert", "metis", "heft", "m-etf", "m-sct")
# setting -> suffix appended to each placement method's name
SETTINGS = {"placement only": "", "critical-path + fuse-all-legal": "+critical-path+fuse-all-legal"}
MIN_SPEEDUP = 1.3
RESULTS = Path(__file__).resolve().parent / "results"


def check(name: str, cluster_name: str) -> dict[str, Any]:
    """One graph on one cluster: one device and every placer, in both settings."""
    graph = build_graph(corpus.load(name, "prefusion"))
    cluster = get_cluster(cluster_name)
    out: dict[str, Any] = {"graph": name, "cluster": cluster_name, "nodes": graph.num_nodes}
    for setting, suffix in SETTINGS.items():
        decided: list[Any] = []
        one = run_method(graph, cluster, "single-device" + suffix, decisions_out=decided)
        peak = float(simulate(graph, cluster, decided[0]).peak_memory.max())
        rows = {m: run_method(graph, cluster, m + suffix) for m in PLACERS}
        fitting = {m: r for m, r in rows.items() if not r.oom}
        best = min(fitting, key=lambda m: fitting[m].step_time) if fitting else None
        speedup = one.step_time / fitting[best].step_time if best else None
        out[setting] = {
            "one_device_s": one.step_time,
            "one_device_oom": one.oom,
            "one_device_peak_gib": peak / 2**30,
            "device_memory_gib": float(cluster.devices[0].memory_capacity) / 2**30,
            "placements_s": {m: r.step_time for m, r in rows.items()},
            "placements_oom": {m: r.oom for m, r in rows.items()},
            "best_placement": best,
            "best_placement_s": fitting[best].step_time if best else None,
            "speedup": speedup,
            "qualifies": bool(best) and (one.oom or speedup >= MIN_SPEEDUP),
        }
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table."""
    lines = [
        "| graph | nodes | cluster | setting | one device (ms) | best placement (ms) "
        "| speedup | qualifies |",
        "|---|---:|---|---|---:|---|---:|---|",
    ]
    for row in rows:
        for setting in SETTINGS:
            r = row[setting]
            one = f"{r['one_device_s'] * 1e3:.1f}" + (" OOM" if r["one_device_oom"] else "")
            best = (
                f"{r['best_placement_s'] * 1e3:.1f} ({r['best_placement']})"
                if r["best_placement"]
                else "all OOM"
            )
            speedup = f"{r['speedup']:.2f}×" if r["speedup"] else "-"
            lines.append(
                f"| {row['graph']} | {row['nodes']} | {row['cluster']} | {setting} | {one} "
                f"| {best} | {speedup} | {'yes' if r['qualifies'] else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Runs the check and writes the results; 0 when it ran."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="placement graphs (default: the whole split)")
    p.add_argument("--clusters", default=",".join(CLUSTERS))
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    names = args.names or corpus.names(split="placement")
    rows = []
    for name in names:
        for cluster_name in args.clusters.split(","):
            start = time.perf_counter()
            rows.append(check(name, cluster_name))
            rows[-1]["seconds"] = round(time.perf_counter() - start, 1)
            for line in markdown(rows[-1:]).splitlines()[2:]:
                print(line, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    setup = {"clusters": args.clusters.split(","), "placers": PLACERS, "min_speedup": MIN_SPEEDUP}
    command = "python experiments/placement_settings.py " + " ".join(argv or sys.argv[1:])
    payload = {"command": command.strip(), "setup": setup, "rows": rows}
    (args.out / "placement_settings.json").write_text(json.dumps(payload, indent=1) + "\n")
    (args.out / "placement_settings.md").write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
