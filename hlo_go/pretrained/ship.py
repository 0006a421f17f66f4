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

    # host-cpu: PPO pre-training around a heuristic prior
    G="rnnlm_l2_scan gnmt_l2_scan transformer_xl_l2 gpt2_l2 bert_l2 resnet_26 wavenet_s2 rnnlm_l4_scan"
    echo '{"prior_bias": 3.0, "prior_fusion": "none", "eval_every": 20, "checkpoint_every": 20}' > ship_cpu.json
    hlo-go train $G --cluster host-cpu-1 --tasks fusion,scheduling --steps 60 \\
        --switch-every 40 --graphs-per-batch 4 --config ship_cpu.json --out runs/host_cpu
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
