"""Data-parallel PPO pre-training of the GO policy over many processes (``jax.distributed``).

Pre-trains one policy with :func:`hlo_go.rl.data_parallel_pretrain` on corpus graphs
(or HLO files) on a simulated cluster: worker ``w`` of ``W`` trains on
``graphs[w::W]`` and the workers average their PPO gradients every minibatch step, so
the parameters stay identical on every process. Ways to run it (recipes for GPU hosts,
SLURM and TPU pods: ``experiments/DISTRIBUTED.md``)::

    # one process emulating W workers (the reference a multi-process run matches)
    python experiments/distributed.py --workers 2 --quick
    # N CPU processes on this host, spawned with a free port (waits for them)
    python experiments/distributed.py --spawn 2 --quick
    # one process of an explicit job (run once per process, I = 0..N-1)
    python experiments/distributed.py --coordinator HOST:PORT --num-processes N --process-id I
    # one process of a job JAX detects itself (TPU pod slices, SLURM, Open MPI)
    python experiments/distributed.py --auto

Process 0 writes ``experiments/results/distributed.json`` (``distributed.quick.json``
with ``--quick``; ``--result`` to choose): the loss and mean reward per step, the
parameters' checksum, the wall-clock times and ``W``; ``--process-results DIR`` makes
every process write ``DIR/process{I}.json`` (its loss curve and parameter checksum, to
check that all processes agree). The run directory (``--out``, default a new temporary
folder, named in the result) gets process 0's checkpoint, ``metrics.csv`` and
TensorBoard files; an ``--out`` holding this run's checkpoint is resumed from it
(``"checkpoint_every": N`` in ``--config`` saves every N steps; ``--no-resume`` starts over). Several
``--cluster`` presets train one policy on every (graph, cluster) pair.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python experiments/distributed.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments._common import PRIOR_BIAS, RESULTS_DIR

DEFAULT_GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan")
DEFAULT_CLUSTER = "v100x4"
DEFAULT_STEPS = 40
QUICK_STEPS = 3


def _tasks(text: str) -> list[str]:
    from hlo_go.cli.train import _tasks as parse_tasks

    return parse_tasks(text)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(
        description="Data-parallel PPO pre-training of the GO policy (jax.distributed)."
    )
    p.add_argument(
        "--graphs",
        nargs="+",
        default=list(DEFAULT_GRAPHS),
        metavar="NAME_OR_PATH",
        help=f"corpus graph names or HLO files (default: {' '.join(DEFAULT_GRAPHS)})",
    )
    p.add_argument(
        "--cluster",
        nargs="+",
        default=[DEFAULT_CLUSTER],
        help="cluster preset(s) or file(s); with several, one policy trains on every "
        "(graph, cluster) pair",
    )
    p.add_argument("--steps", type=int, help=f"training steps (default {DEFAULT_STEPS})")
    p.add_argument(
        "--out",
        type=Path,
        help="run directory: checkpoint, metrics.csv, tb/ (default: a new temporary folder)",
    )
    p.add_argument(
        "--no-resume",
        action="store_true",
        help="start over even if --out holds this run's checkpoint (default: resume from it)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"CI-sized: {QUICK_STEPS} steps, K=4, 1 epoch, a small policy",
    )
    p.add_argument("--config", help="JSON file of TrainConfig fields (merged over the defaults)")
    p.add_argument("--samples", type=int, help="K, samples per worker per step")
    p.add_argument("--seed", type=int, help="seed of the parameters and samples (default 0)")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument(
        "--tasks", type=_tasks, help="comma-separated subset of placement,scheduling,fusion"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--result", type=Path, help="the result JSON (written by process 0)")
    p.add_argument(
        "--process-results",
        type=Path,
        metavar="DIR",
        help="every process writes DIR/process{I}.json",
    )
    launch = p.add_argument_group("launch (at most one way)")
    launch.add_argument("--workers", type=int, help="W workers emulated in this one process")
    launch.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    launch.add_argument("--num-processes", type=int, help="processes in the job")
    launch.add_argument("--process-id", type=int, help="this process's index")
    launch.add_argument(
        "--auto",
        action="store_true",
        help="jax.distributed.initialize() with no arguments (TPU pods, SLURM, Open MPI)",
    )
    launch.add_argument(
        "--spawn", type=int, metavar="N", help="spawn N CPU processes on localhost and wait"
    )
    launch.add_argument(
        "--timeout", type=float, default=3600.0, help="--spawn: kill the children after this"
    )
    args = p.parse_args(argv)
    explicit = [args.coordinator, args.num_processes, args.process_id]
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        p.error("--coordinator, --num-processes and --process-id go together")
    ways = [args.workers is not None, args.coordinator is not None, args.auto, bool(args.spawn)]
    if sum(ways) > 1:
        p.error("choose one of --workers, --coordinator/..., --auto, --spawn")
    if args.spawn is not None and args.spawn < 1:
        p.error("--spawn needs N >= 1")
    return args


def free_port() -> int:
    """A TCP port free on localhost right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def _without_spawn(argv: Sequence[str]) -> list[str]:
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token == "--spawn":
            skip = True
        elif not token.startswith("--spawn="):
            out.append(token)
    return out


def spawn(count: int, argv: Sequence[str], timeout: float) -> int:
    """Runs this script as ``count`` CPU processes of one job on localhost; waits.

    Every child gets ``--coordinator localhost:PORT --num-processes count --process-id i``
    and ``JAX_PLATFORMS=cpu``. When one fails, or ``timeout`` seconds pass, the others are
    killed (they would wait forever in a collective).

    Returns:
      0, the first failing child's exit status, or 124 on timeout.
    """
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    base = [sys.executable, str(Path(__file__).resolve()), *_without_spawn(argv)]
    children = [
        subprocess.Popen(
            [
                *base,
                *("--coordinator", f"localhost:{port}"),
                *("--num-processes", str(count)),
                *("--process-id", str(i)),
            ],
            env=env,
        )
        for i in range(count)
    ]
    deadline = time.monotonic() + timeout
    status = 0
    try:
        while True:
            codes = [c.poll() for c in children]
            failed = [rc for rc in codes if rc not in (None, 0)]
            if failed:
                status = failed[0]
                break
            if all(rc == 0 for rc in codes):
                break
            if time.monotonic() > deadline:
                print(f"distributed: children still running after {timeout} s; killing them")
                status = 124
                break
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return status


def train_config(args: argparse.Namespace) -> Any:
    """The :class:`~hlo_go.rl.TrainConfig` of the arguments: the experiments' defaults
    (``prior_bias`` 3, evaluation every 5 steps, checkpoint at the end), ``--quick``'s
    small settings, then ``--config`` and the flags."""
    from hlo_go.cli.train import build_config
    from hlo_go.gonet import PolicyConfig
    from hlo_go.rl import PPOConfig, TrainConfig

    base = TrainConfig(eval_every=5, checkpoint_every=0, prior_bias=PRIOR_BIAS)
    if args.quick:
        base = base.replace(
            samples=4,
            ppo=PPOConfig(epochs=1, minibatch_size=0, learning_rate=1e-3, entropy_coef=0.0),
            policy=PolicyConfig(
                hidden_size=16, gnn_layers=1, num_heads=2, segment_length=16, segments_per_step=2
            ),
        )
    return build_config(args, base)


def _cluster(spec: str) -> Any:
    from hlo_go.sim import get_cluster, load_cluster

    return load_cluster(spec) if Path(spec).suffix in (".toml", ".json") else get_cluster(spec)


def _role() -> tuple[int, int]:
    import jax

    return jax.process_index(), jax.process_count()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Trains (this process's part); returns the result dict (the same on every process)."""
    from hlo_go.rl import data_parallel_pretrain
    from hlo_go.rl.distributed import params_checksum
    from hlo_go.sources import load_graph

    began = time.perf_counter()
    config = train_config(args)
    clusters = [_cluster(spec) for spec in args.cluster]
    graphs = [load_graph(source) for source in args.graphs]
    steps = args.steps or (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="hlo_go_distributed_"))
    result = data_parallel_pretrain(
        graphs,
        clusters,
        steps=steps,
        out_dir=out_dir,
        config=config,
        workers=args.workers,
        resume=not args.no_resume,
    )
    index, processes = _role()
    history = result.history
    return {
        "title": "Data-parallel PPO pre-training (jax.distributed)",
        "workers": int(history[0]["workers"]),
        "processes": processes,
        "process": index,
        "cluster": ",".join(c.name for c in clusters),
        "graphs": [name for name, _ in graphs],
        "steps": steps,
        "config": config.to_dict(),
        "loss": [float(r["loss"]) for r in history],
        "reward_mean": [float(r["reward_mean"]) for r in history],
        "reward_mean_per_worker": [r["reward_mean_per_worker"] for r in history],
        "step_graphs": [r["graph"] for r in history],
        "step_wall_s": [float(r["wall_s"]) for r in history],
        "params_checksum": params_checksum(result.params),
        "train_wall_s": result.elapsed,
        "total_wall_s": time.perf_counter() - began,
        "best": {
            name: {
                "best_time": g.best_time,
                "reference_time": g.reference_time,
                "best_speedup": g.reference_time / g.best_time,
                "greedy_time": g.greedy_time,
            }
            for name, g in result.graphs.items()
        },
        "out_dir": str(out_dir),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the experiment; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.spawn:
        return spawn(args.spawn, argv, args.timeout)
    if args.coordinator is not None or args.auto:
        from hlo_go.rl.distributed import initialize

        initialize(args.coordinator, args.num_processes, args.process_id)
    result = run(args)
    result["command"] = "python experiments/distributed.py " + " ".join(argv)
    if args.process_results is not None:
        args.process_results.mkdir(parents=True, exist_ok=True)
        path = args.process_results / f"process{result['process']}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
    if result["process"] == 0:
        path = args.result or RESULTS_DIR / (
            "distributed.quick.json" if args.quick else "distributed.json"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(
            f"distributed: W={result['workers']} on {result['processes']} process(es), "
            f"{result['steps']} steps in {result['train_wall_s']:.1f} s "
            f"({result['total_wall_s']:.1f} s with loading and compiling); "
            f"final loss {result['loss'][-1]:.5g}, params {result['params_checksum'][:12]}; "
            f"wrote {path}"
        )
    from hlo_go.rl.distributed import shutdown

    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
