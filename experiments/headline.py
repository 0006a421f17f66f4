"""The headline table: our results beside the GO paper's published ones.

Reads ``experiments/results/{placement,generalization,multitask,convergence,measured}.json``
(``--quick``: the ``.quick.json`` files) and prints a markdown table (and writes it to
``experiments/results/headline.md``). Experiments not run yet show as "not run".

Run: ``python experiments/headline.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import _common as C


def _pct(speedup: float | None) -> str:
    """A speedup ratio as "x.xx× (+y %)" (time saved = 1 - 1/speedup)."""
    if speedup is None:
        return "n/a"
    saved = (1 - 1 / speedup) * 100
    return f"{speedup:.3f}× ({abs(saved):.1f} % {'less' if saved >= 0 else 'more'} time)"


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.3g}{unit}"


# (claim, paper's figure, experiment, how to read ours from its JSON)
CLAIMS: tuple[tuple[str, str, str, Callable[[dict[str, Any]], str]], ...] = (
    (
        "GO-one vs human-expert placement",
        "21 % faster",
        "placement",
        lambda r: _pct(r.get("go_one_vs_expert_mean_speedup")),
    ),
    (
        "GO-one vs HDP (hierarchical placer)",
        "18 % faster",
        "placement",
        lambda r: _pct(r.get("go_one_vs_hdp_mean_speedup")),
    ),
    (
        "GO-one vs METIS placement",
        "(not in the paper's headline)",
        "placement",
        lambda r: _pct(r.get("go_one_vs_metis_mean_speedup")),
    ),
    (
        "GO-one vs simulated annealing (placement, same evaluations)",
        "-",
        "placement",
        lambda r: _pct(r.get("go_one_vs_simulated_annealing_mean_speedup")),
    ),
    (
        "Convergence: GO vs HDP, time to HDP's final quality",
        "15× faster",
        "convergence",
        lambda r: (
            f"median {_fmt(r.get('go_vs_hdp_convergence_speedup_median'), '×')}; "
            f"HDP never improved on 1 device: {r.get('hdp_never_improved')}, "
            f"GO never reached HDP: {r.get('go_vs_hdp_unreached')}"
        ),
    ),
    (
        "Joint placement+scheduling+fusion vs framework default",
        "33-60 % speedup",
        "multitask",
        lambda r: (
            f"vs one device, FIFO, no fusion: {_pct(r.get('joint_vs_default_mean_speedup'))}; "
            f"vs XLA's own fusion: {_pct(r.get('joint_vs_xla_default_mean_speedup'))}"
        ),
    ),
    (
        "Joint vs one task at a time in sequence",
        "joint better",
        "multitask",
        lambda r: _pct(r.get("joint_vs_sequential_mean_speedup")),
    ),
    (
        "Zero-shot on unseen families vs the best heuristic",
        "nearly as good as GO-one",
        "generalization",
        lambda r: (
            f"{r.get('cluster')}: {_pct(r.get('zero_shot_vs_best_heuristic_geomean'))}, "
            f"{r.get('zero_shot_families_beaten_count')}/{len(r.get('families_evaluated', []))}"
            f" families beaten, {_fmt(r.get('zero_shot_fraction_of_sa_gain'))} of SA's gain"
        ),
    ),
    (
        "Fine-tuned (≤ 50 steps) on unseen families vs the best heuristic",
        "as good as GO-one",
        "generalization",
        lambda r: (
            f"{_pct(r.get('finetuned_vs_best_heuristic_geomean'))}, "
            f"{_fmt(r.get('finetuned_fraction_of_sa_gain'))} of SA's gain "
            f"({r.get('finetuned', {}).get('held_out_graphs')} graphs of at most "
            f"{r.get('settings', {}).get('max_finetune_nodes')} nodes)"
        ),
    ),
    (
        "Lowered through XLA, numerically checked",
        "(simulator only)",
        "measured",
        lambda r: (
            f"{r.get('correct')} rows match jax.jit; GO fusion measured/XLA geomean "
            f"{_fmt(r.get('go_fusion_relative_geomean'))}; GPU: {r.get('gpu')}"
        ),
    ),
)


def headline(results: Path, *, quick: bool = False) -> str:
    """The markdown table from the result files under ``results``."""
    suffix = ".quick" if quick else ""
    loaded: dict[str, dict[str, Any] | None] = {}
    for name in {c[2] for c in CLAIMS}:
        path = results / f"{name}{suffix}.json"
        loaded[name] = json.loads(path.read_text()) if path.exists() else None
    rows = []
    for claim, paper, name, read in CLAIMS:
        result = loaded[name]
        rows.append(
            {
                "claim": claim,
                "paper": paper,
                "ours": "not run" if result is None else read(result),
                "from": f"{name}{suffix}.json",
            }
        )
    return C.markdown_table(rows)


def main(argv: Sequence[str] | None = None) -> str:
    """Prints and writes the headline table; returns it."""
    p = C.parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    table = headline(args.out, quick=args.quick)
    print(table)
    (args.out / f"headline{'.quick' if args.quick else ''}.md").write_text(table)
    return table


if __name__ == "__main__":
    main()
