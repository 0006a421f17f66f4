"""Turns a training run into a shipped policy: parameters and settings, no optimizer state.

::

    python -m hlo_go.pretrained.ship RUN_DIR NAME      # writes hlo_go/pretrained/<file of NAME>

The shipped policies were trained on this host (2 cores) with::

    # v100x4 and h100x8 (one file): imitation with a move head of teachers on both
    # clusters, gpt2 held out (the gpt2 fold of experiments/imitation.py; needs the corpus
    # variants: python -m hlo_go.corpus_build --variants)
    python experiments/imitation.py --held-out gpt2 --cluster h100x8 \\
        --train-clusters v100x4 h100x8 --steps 4000 --finetune-steps 0 --workers 2 \\
        --per-family 30 --max-nodes 6000 --move-head --keep runs/folds
    python -m hlo_go.pretrained.ship runs/folds/gpt2.msgpack v100x4

    # host-cpu: imitation of teachers on the learned-cost-model simulator, bert and gnmt
    # held out (needs the corpus variants, as above; teachers 31 min, imitation 12 min)
    G=$(python -c "from hlo_go import corpus; from hlo_go.graph import build_graph; \\
        n = {g: build_graph(corpus.load(g, 'prefusion')).num_nodes \\
             for s in ('base', 'variants') for g in corpus.names(split=s) \\
             if corpus.family(g) not in ('bert', 'gnmt')}; \\
        print(' '.join(sorted((g for g in n if n[g] <= 20000), key=n.get)))")
    echo '{"tasks": ["scheduling", "fusion"]}' > cpu.json
    hlo-go teachers $G --clusters host-cpu-1-learned --store runs/teachers_cpu --workers 2
    hlo-go imitate $G --clusters host-cpu-1-learned --store runs/teachers_cpu \\
        --steps 4000 --config cpu.json --out runs/host_cpu
    python -m hlo_go.pretrained.ship runs/host_cpu host-cpu
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hlo_go.pretrained import SHIPPED
from hlo_go.rl.checkpoint import load_checkpoint, save_checkpoint


def ship(run: str | Path, name: str, *, out_dir: str | Path | None = None) -> Path:
    """Writes a run's final parameters as the shipped policy ``name``.

    Args:
      run: a checkpoint file or run directory.
      name: a key of :data:`hlo_go.pretrained.SHIPPED`.
      out_dir: where to write (default: the package's ``policies`` directory).

    Returns:
      The written file.

    Raises:
      KeyError: an unknown shipped name.
    """
    if name not in SHIPPED:
        raise KeyError(f"unknown shipped policy {name!r}; known: {', '.join(SHIPPED)}")
    ckpt = load_checkpoint(run)
    target = Path(out_dir or Path(__file__).parent) / SHIPPED[name]
    names = [n for n, file in SHIPPED.items() if file == SHIPPED[name]]  # one file, its names
    meta = {**ckpt.meta, "shipped_as": names, "trained_steps": ckpt.step}
    return save_checkpoint(
        target,
        params=ckpt.params,
        opt_state={},
        step=ckpt.step,
        elapsed=ckpt.elapsed,
        best={},
        config=ckpt.config,
        meta=meta,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hlo_go.pretrained.ship")
    parser.add_argument("run", help="checkpoint file or run directory")
    parser.add_argument("name", choices=sorted(SHIPPED))
    args = parser.parse_args(argv)
    path = ship(args.run, args.name)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
