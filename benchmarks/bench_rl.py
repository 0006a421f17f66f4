"""PPO training of the GO policy on the simulator: GO-one, convergence against simulated
annealing, leave-one-family-out zero-shot / fine-tuning, joint vs sequential tasks, and
the time of one training iteration on a 10,000-node graph.

Everything is simulated on the ``v100x4`` preset (4 V100, NVLink). This host has two
slow cores shared with other work, so the full run is scaled down to fit in about 100
minutes; the exact subset and step counts are in the result (``setup``) and below.

* **GO-one** (:func:`hlo_go.rl.train_one`, all three tasks jointly, K = 16, 2 PPO
  epochs, Adam 1e-4) with a heuristic prior (``prior_method="best"``, ``prior_bias`` 6,
  :mod:`hlo_go.rl.prior`: the policy learns a residual over the graph's fastest
  heuristic, whose decisions are its greedy ones at the start) that follows the best
  decisions seen (``prior_follows_best``: an incumbent prior, so samples explore
  around the best so far): ``GO_ONE_STEPS`` = 300
  steps on each graph of ``GRAPHS``: the smallest graph of four of the corpus's nine
  families (rnnlm, gnmt, gpt2, transformer_xl; 432 to 1,365 nodes). Its result is the
  best decisions seen during training (sampled or greedy). **GO-one from scratch**, the
  paper's setting, is trained too for the same steps (``prior_bias`` 3 in fresh
  parameters toward "one device, fuse everything legal", no heuristic input):
  ``go_one_scratch_*``.
  ``go_one_vs_best_baseline_mean_speedup`` is the mean over graphs of (best non-search
  baseline's step time / GO-one's), the baselines being
  :func:`hlo_go.rl.compare.heuristic_names`; ``go_one_beats_best_baseline_fraction``
  the fraction of graphs where GO-one is strictly faster.
* **Seeds**: GO-one again with seeds ``GO_ONE_SEEDS`` = 1, 2 on the same graphs (a
  single run's best can be a lucky draw): ``go_one_vs_best_baseline_mean_speedup_over_seeds``
  is the mean over graphs of the mean over seeds 0, 1, 2 of the speed-up.
* **Convergence**: simulated annealing (:func:`hlo_go.baselines.run_search`, default
  2,000 evaluations, starting from the heuristics) on the same graphs. Per graph, the
  ratio (GO-one's training wall-clock until its best-so-far first reaches SA's final
  step time) / (SA's wall-clock until it first reached it). Where GO-one never
  reaches it, the ratio is a lower bound (GO-one's whole training time / SA's) and the
  graph is counted in ``convergence_unreached``. The headline is the median.
  GO-one's wall-clock includes its JIT compilation (one or more minutes per graph here).
* **Leave-one-family-out**: for each held-out graph of ``HELD_OUT`` (``gpt2_l2``), a
  policy is pre-trained (:func:`hlo_go.rl.pretrain`) for ``PRETRAIN_STEPS`` = 90 steps
  on the GO-one
  graphs of the *other* families (batches of 2 graphs switched every 20 steps, scaled
  down from the paper's N = 1000), then used zero-shot (greedy decisions,
  :func:`hlo_go.rl.infer`) and fine-tuned for ``FINETUNE_STEPS`` steps
  (:func:`hlo_go.rl.finetune`, 50 steps, the issue's limit). ``zero_shot_gap`` / ``finetune_gap`` are the mean of
  (step time / GO-one's step time - 1) over the held-out graphs.
* **Joint vs sequential**: on ``JOINT_GRAPHS`` (all four GO-one graphs), placement, then
  scheduling (given the best placement), then fusion (given both), each for a third of
  GO-one's steps, against GO-one (all three jointly, the same total steps).
  ``joint_vs_sequential_speedup`` is the mean over those graphs of sequential step time /
  joint step time.
* **Iteration time**: one training iteration (sample K = 16, simulate them, one PPO
  update on all 16) on ``inception_v3_small`` (11,047 nodes), median of 3 after a
  compiling warm-up, split into sample / simulate / update.

Plots: ``results/rl_go_one.png`` (best-so-far speedup over one device per training
step, with the best baseline and SA's final), ``results/rl_convergence.png``
(best-so-far step time against wall-clock, GO-one vs SA), ``results/rl_transfer.png``
(pre-training and fine-tuning curves). Progress is printed as it goes, and the partial
results are kept in ``results/rl.progress.json``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import RESULTS_DIR

CLUSTER = "v100x4"
GRAPHS = ("rnnlm_l2_scan", "gnmt_l2_scan", "gpt2_l2", "transformer_xl_l2")
GO_ONE_STEPS = 300
HELD_OUT = ("gpt2_l2",)
PRETRAIN_STEPS = 90
FINETUNE_STEPS = 50
JOINT_GRAPHS = GRAPHS
PRIOR_METHOD = "best"
PRIOR_BIAS = 6.0
PRIOR_FOLLOWS_BEST = True
GO_ONE_SEEDS = (1, 2)
SCRATCH_PRIOR_BIAS = 3.0
TIMING_GRAPH = "inception_v3_small"

QUICK = {
    "GRAPHS": ("rnnlm_l2_scan", "gnmt_l2_scan"),
    "GO_ONE_STEPS": 6,
    "HELD_OUT": ("rnnlm_l2_scan",),
    "PRETRAIN_STEPS": 4,
    "FINETUNE_STEPS": 2,
    "JOINT_GRAPHS": ("rnnlm_l2_scan",),
    "TIMING_GRAPH": "rnnlm_l2_scan",
    "GO_ONE_SEEDS": (1,),
}


def _log(message: str) -> None:
    print(f"[rl {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _family(name: str) -> str:
    from hlo_go import corpus

    return corpus.info(name)["family"]


def _go_curve(history: list[dict[str, Any]]) -> dict[str, list[float]]:
    return {
        "step": [int(r["step"]) for r in history],
        "wall_s": [float(r["wall_s"]) for r in history],
        "best_step_time": [float(r["best_step_time"]) for r in history],
        "reward_mean": [float(r["reward_mean"]) for r in history],
        "step_time_mean": [float(r["step_time_mean"]) for r in history],
    }


def _time_to_reach(curve_t: list[float], curve_v: list[float], target: float) -> float | None:
    for t, v in zip(curve_t, curve_v, strict=True):
        if v <= target * (1 + 1e-9):
            return t
    return None


def _iteration_timing(name: str, repeats: int) -> dict[str, Any]:
    from hlo_go.rl import GraphEnv, PPOBatch, TrainConfig, agent_for
    from hlo_go.sim import get_cluster
    from hlo_go.sources import load_graph

    _, graph = load_graph(name)
    config = TrainConfig(samples=16, progress=False)
    config = config.replace(ppo=config.ppo.__class__(**{**config.ppo.__dict__, "epochs": 1}))
    agent = agent_for(config)
    env = GraphEnv(graph, get_cluster(CLUSTER), config.policy, config.tasks, name=name)
    params = agent.policy.init(jax.random.key(0), env.inputs, config.max_devices)
    opt_state = agent.optimizer.init(params)
    times: dict[str, list[float]] = {"sample": [], "simulate": [], "update": [], "total": []}
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        actions, log_prob, value = agent.sample(params, env, jax.random.key(i), 16)
        t1 = time.perf_counter()
        scores = env.score(env.decisions(actions))
        t2 = time.perf_counter()
        returns = jnp.asarray(scores.rewards)
        batch = PPOBatch(actions, jnp.asarray(log_prob), returns - jnp.asarray(value), returns)
        params, opt_state, _ = agent.update(params, opt_state, env, batch, jax.random.key(99))
        jax.block_until_ready(params)
        t3 = time.perf_counter()
        if i == 0:
            _log(f"timing warm-up (compile) {t3 - t0:.1f} s")
            continue
        for key, value_s in (
            ("sample", t1 - t0), ("simulate", t2 - t1), ("update", t3 - t2), ("total", t3 - t0)
        ):  # fmt: skip
            times[key].append(value_s)
    return {
        "graph": name,
        "nodes": graph.num_nodes,
        "samples": 16,
        "updates": 1,
        **{f"{k}_median_s": float(np.median(v)) for k, v in times.items()},
        "total_samples_s": times["total"],
    }


def _progress_path(quick: bool) -> Path:
    default = RESULTS_DIR / ("rl.progress.quick.json" if quick else "rl.progress.json")
    return Path(os.environ.get("RL_PROGRESS", default))


def _save_progress(state: dict[str, Any], quick: bool) -> None:
    _progress_path(quick).write_text(json.dumps(state, indent=1, default=float))


def _plots(state: dict[str, Any], suffix: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    go = state["go_one"]
    names = list(go)
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        g = go[name]
        ref = g["reference_time"]
        steps = g["curve"]["step"]
        ax.plot(steps, [ref / t for t in g["curve"]["best_step_time"]], label="GO-one best so far")
        ax.plot(
            steps,
            [ref / t for t in g["curve"]["step_time_mean"]],
            alpha=0.5,
            label="GO-one sample mean",
        )
        if "scratch_curve" in g:
            ax.plot(
                g["scratch_curve"]["step"],
                [ref / t for t in g["scratch_curve"]["best_step_time"]],
                label="GO-one from scratch, best so far",
            )
        ax.axhline(ref / g["best_baseline_time"], color="k", ls="--", label="best heuristic")
        if "sa_final_time" in g:
            ax.axhline(ref / g["sa_final_time"], color="r", ls=":", label="SA final")
        ax.set_title(f"{name} ({g['nodes']} nodes)")
        ax.set_xlabel("training step")
        ax.set_ylabel("speedup over 1 device")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS_DIR / f"rl_go_one{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(str(path))

    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        g = go[name]
        ax.plot(
            g["curve"]["wall_s"], [t * 1e3 for t in g["curve"]["best_step_time"]], label="GO-one"
        )
        if "sa_curve" in g:
            ax.plot(
                g["sa_curve"]["seconds"],
                [t * 1e3 for t in g["sa_curve"]["best_step_time"]],
                label="simulated annealing",
            )
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("wall-clock s (log)")
        ax.set_ylabel("best step time (ms)")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS_DIR / f"rl_convergence{suffix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(str(path))

    transfer = state.get("transfer", {})
    if transfer:
        fig, axes = plt.subplots(
            1, len(transfer), figsize=(5.5 * len(transfer), 3.8), squeeze=False
        )
        for ax, (name, t) in zip(axes.flat, transfer.items(), strict=True):
            ref = t["reference_time"]
            ax.plot(
                [ref / x for x in t["finetune_curve"]["best_step_time"]],
                label="fine-tuned (best so far)",
            )
            go_curve = go[name]["curve"]["best_step_time"] if name in go else []
            ax.plot([ref / x for x in go_curve], label="GO-one from scratch (best so far)")
            ax.axhline(ref / t["zero_shot_time"], color="g", ls="--", label="zero-shot (greedy)")
            ax.axhline(ref / t["best_baseline_time"], color="k", ls=":", label="best heuristic")
            ax.set_title(f"held out: {name}")
            ax.set_xlabel("training step on the held-out graph")
            ax.set_ylabel("speedup over 1 device")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = RESULTS_DIR / f"rl_transfer{suffix}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(str(path))
    return paths


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs every part; returns the results dict (see the module docstring)."""
    from hlo_go.baselines import run_search
    from hlo_go.rl import TrainConfig, finetune, infer, pretrain, train_one
    from hlo_go.rl.compare import best, run_baselines
    from hlo_go.sim import get_cluster
    from hlo_go.sources import load_graph

    cfg = dict(
        GRAPHS=GRAPHS, GO_ONE_STEPS=GO_ONE_STEPS, HELD_OUT=HELD_OUT,
        PRETRAIN_STEPS=PRETRAIN_STEPS, FINETUNE_STEPS=FINETUNE_STEPS,
        JOINT_GRAPHS=JOINT_GRAPHS, TIMING_GRAPH=TIMING_GRAPH, GO_ONE_SEEDS=GO_ONE_SEEDS,
    )  # fmt: skip
    if quick:
        cfg.update(QUICK)
    steps = cfg["GO_ONE_STEPS"]
    cluster = get_cluster(CLUSTER)
    scratch_config = TrainConfig(
        progress=False, eval_every=5, checkpoint_every=0, prior_bias=SCRATCH_PRIOR_BIAS
    )
    config = scratch_config.replace(
        prior_method=PRIOR_METHOD, prior_bias=PRIOR_BIAS, prior_follows_best=PRIOR_FOLLOWS_BEST
    )
    work = Path(tempfile.mkdtemp(prefix="bench_rl_"))
    began = time.perf_counter()
    state: dict[str, Any] = {
        "setup": {
            "cluster": CLUSTER,
            **{k.lower(): list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
            "samples_per_step": config.samples,
            "prior_method": config.prior_method,
            "prior_bias": config.prior_bias,
            "prior_follows_best": config.prior_follows_best,
            "seed": config.seed,
            "scratch_prior_bias": scratch_config.prior_bias,
            "ppo": config.ppo.__dict__,
            "policy": "default PolicyConfig (195k parameters)",
            "pretrain_switch_every": 20,
            "pretrain_graphs_per_batch": 2,
            "sa_budget_evaluations": 2000,
        },
        "go_one": {},
        "seeds": {},
        "transfer": {},
        "joint": {},
    }
    graphs = {
        name: load_graph(name)[1]
        for name in {*cfg["GRAPHS"], *cfg["HELD_OUT"], *cfg["JOINT_GRAPHS"]}
    }

    phases = set(os.environ.get("RL_PHASES", "go_one,seeds,transfer,joint,timing").split(","))
    if os.environ.get("RL_GO_ONE_FROM"):
        state["go_one"] = json.loads(Path(os.environ["RL_GO_ONE_FROM"]).read_text())["go_one"]

    # -- GO-one and SA on every graph ---------------------------------------------------
    for name in cfg["GRAPHS"] if "go_one" in phases else ():
        graph = graphs[name]
        baselines = run_baselines(graph, cluster)
        top = best(baselines)
        _log(
            f"{name}: {graph.num_nodes} nodes; best heuristic {top.method} {top.step_time * 1e3:.4g} ms"
        )
        res = train_one(
            (name, graph), cluster, steps=steps, out_dir=work / f"one_{name}", config=config
        )
        r = res.graphs[name]
        scratch = train_one(
            (name, graph), cluster, steps=steps, out_dir=work / f"scratch_{name}",
            config=scratch_config,
        )  # fmt: skip
        s = scratch.graphs[name]
        sa = run_search(graph, cluster, "simulated-annealing", budget=2000, seed=0)
        sa_curve = sa.curve
        sa_final = float(sa.best_step_time)
        sa_reach = _time_to_reach(list(sa_curve.seconds), list(sa_curve.best_step_time), sa_final)
        go_curve = _go_curve(res.history)
        go_reach = _time_to_reach(go_curve["wall_s"], go_curve["best_step_time"], sa_final)
        ratio = (go_reach if go_reach is not None else go_curve["wall_s"][-1]) / max(
            sa_reach or sa.seconds, 1e-9
        )
        state["go_one"][name] = {
            "family": _family(name),
            "nodes": graph.num_nodes,
            "reference_time": r.reference_time,
            "baselines": {b.method: b.step_time for b in baselines},
            "best_baseline": top.method,
            "best_baseline_time": top.step_time,
            "go_one_time": r.best_time,
            "go_one_oom": r.best_oom,
            "go_one_greedy_time": r.greedy_time,
            "go_one_train_s": res.elapsed,
            "speedup_vs_best_baseline": top.step_time / r.best_time,
            "speedup_vs_one_device": r.reference_time / r.best_time,
            "sa_final_time": sa_final,
            "sa_seconds": sa.seconds,
            "sa_reach_s": sa_reach,
            "go_reach_sa_s": go_reach,
            "convergence_ratio": ratio,
            "convergence_reached": go_reach is not None,
            "curve": go_curve,
            "scratch_time": s.best_time,
            "scratch_train_s": scratch.elapsed,
            "scratch_speedup_vs_best_baseline": top.step_time / s.best_time,
            "scratch_curve": _go_curve(scratch.history),
            "sa_curve": {
                "seconds": sa_curve.seconds[:: max(1, len(sa_curve) // 400)].tolist(),
                "best_step_time": sa_curve.best_step_time[:: max(1, len(sa_curve) // 400)].tolist(),
            },
        }
        _log(
            f"{name}: GO-one {r.best_time * 1e3:.4g} ms (greedy {r.greedy_time * 1e3:.4g}) in "
            f"{res.elapsed:.0f} s = {top.step_time / r.best_time:.3f}x best heuristic (from "
            f"scratch {top.step_time / s.best_time:.3f}x); SA "
            f"{sa_final * 1e3:.4g} ms in {sa.seconds:.1f} s; convergence ratio {ratio:.3g}"
            f"{'' if go_reach is not None else ' (not reached: lower bound)'}"
        )
        _save_progress(state, quick)

    # -- GO-one again with other seeds: how much of its result is the draw ---------------
    for name in cfg["GRAPHS"] if "seeds" in phases else ():
        graph = graphs[name]
        top = best(run_baselines(graph, cluster))
        times = {}
        for seed in cfg["GO_ONE_SEEDS"]:
            res = train_one(
                (name, graph), cluster, steps=steps, out_dir=work / f"one_{name}_seed{seed}",
                config=config.replace(seed=seed),
            )  # fmt: skip
            times[str(seed)] = res.graphs[name].best_time
        state["seeds"][name] = {
            "best_baseline_time": top.step_time,
            "go_one_time_by_seed": times,
            "speedup_by_seed": {k: top.step_time / t for k, t in times.items()},
        }
        _log(
            f"{name}: GO-one by seed {', '.join(f'{k}: {v * 1e3:.4g} ms' for k, v in times.items())}"
        )
        _save_progress(state, quick)

    # -- leave-one-family-out: pre-train, zero-shot, fine-tune ------------------------------
    pre_config = config.replace(switch_every=20, graphs_per_batch=2)
    for name in cfg["HELD_OUT"] if "transfer" in phases else ():
        family = _family(name)
        train_set = [(g, graphs[g]) for g in cfg["GRAPHS"] if _family(g) != family]
        pre = pretrain(
            train_set,
            cluster,
            steps=cfg["PRETRAIN_STEPS"],
            out_dir=work / f"pre_{name}",
            config=pre_config,
        )
        zero = infer(work / f"pre_{name}", graphs[name], cluster)
        ft = finetune(
            work / f"pre_{name}",
            (name, graphs[name]),
            cluster,
            steps=cfg["FINETUNE_STEPS"],
            out_dir=work / f"ft_{name}",
        )
        go = state["go_one"][name]
        f = ft.graphs[name]
        state["transfer"][name] = {
            "family": family,
            "pretrain_graphs": [g for g, _ in train_set],
            "pretrain_s": pre.elapsed,
            "reference_time": go["reference_time"],
            "best_baseline_time": go["best_baseline_time"],
            "go_one_time": go["go_one_time"],
            "zero_shot_time": zero.step_time,
            "zero_shot_oom": zero.oom,
            "zero_shot_s": zero.seconds,
            "finetune_time": f.best_time,
            "finetune_s": ft.elapsed,
            "zero_shot_gap": zero.step_time / go["go_one_time"] - 1,
            "finetune_gap": f.best_time / go["go_one_time"] - 1,
            "pretrain_curve": {
                "graph": [r["graph"] for r in pre.history],
                "reward_mean": [r["reward_mean"] for r in pre.history],
            },
            "finetune_curve": _go_curve(ft.history),
        }
        _log(
            f"held out {name}: zero-shot {zero.step_time * 1e3:.4g} ms, fine-tuned "
            f"{f.best_time * 1e3:.4g} ms, GO-one {go['go_one_time'] * 1e3:.4g} ms"
        )
        _save_progress(state, quick)

    # -- joint vs sequential ---------------------------------------------------------------
    for name in cfg["JOINT_GRAPHS"] if "joint" in phases else ():
        graph = graphs[name]
        per_stage = max(1, steps // 3)
        fixed = None
        stage_times = {}
        seconds = 0.0
        for task in ("placement", "scheduling", "fusion"):
            res = train_one(
                (name, graph), cluster, [task], steps=per_stage, out_dir=work / f"seq_{name}_{task}",
                config=config, fixed=fixed,
            )  # fmt: skip
            fixed = res.graphs[name].best
            stage_times[task] = res.graphs[name].best_time
            seconds += res.elapsed
        joint = state["go_one"].get(name, {}).get("go_one_time", float("nan"))
        state["joint"][name] = {
            "sequential_time": stage_times["fusion"],
            "sequential_stage_times": stage_times,
            "sequential_steps_per_stage": per_stage,
            "sequential_s": seconds,
            "joint_time": joint,
            "joint_steps": steps,
            "speedup": stage_times["fusion"] / joint,
        }
        _log(f"joint vs sequential {name}: {stage_times} vs joint {joint * 1e3:.4g} ms")
        _save_progress(state, quick)

    # -- iteration time on a 10k-node graph ----------------------------------------------
    state["run_s"] = time.perf_counter() - began
    _save_progress(state, quick)  # with run_s, for merging phases run apart
    if "timing" in phases:
        timing = _iteration_timing(cfg["TIMING_GRAPH"], 1 if quick else 3)
        state["iteration"] = timing
        _log(f"iteration on {timing['graph']}: {timing['total_median_s']:.2f} s")
        state["run_s"] = time.perf_counter() - began
        _save_progress(state, quick)
    return _summarize(state, quick, time.perf_counter() - began)


def _summarize(state: dict[str, Any], quick: bool, run_s: float) -> dict[str, Any]:
    """Headline numbers, rows and plots from the per-phase results (missing phases: None)."""

    def mean(values: list[Any]) -> float | None:
        return float(np.mean(values)) if values else None

    go = state.get("go_one", {})
    seeds = state.get("seeds", {})
    transfer = state.get("transfer", {})
    joint = state.get("joint", {})
    timing = state.get("iteration", {})
    ratios = [g["convergence_ratio"] for g in go.values()]
    summary = {
        "go_one_vs_best_baseline_mean_speedup": mean(
            [g["speedup_vs_best_baseline"] for g in go.values()]
        ),
        "go_one_beats_best_baseline_fraction": mean(
            [g["go_one_time"] < g["best_baseline_time"] * (1 - 1e-6) for g in go.values()]
        ),
        "go_one_seeds": sorted(
            {
                int(state.get("setup", {}).get("seed", 0)),
                *(int(k) for v in seeds.values() for k in v["speedup_by_seed"]),
            }
        ),
        "go_one_vs_best_baseline_mean_speedup_over_seeds": mean(
            [
                float(
                    np.mean([g["speedup_vs_best_baseline"], *seeds[n]["speedup_by_seed"].values()])
                )
                for n, g in go.items()
                if n in seeds
            ]
        ),
        "go_one_scratch_vs_best_baseline_mean_speedup": mean(
            [g["scratch_speedup_vs_best_baseline"] for g in go.values() if "scratch_time" in g]
        ),
        "go_one_scratch_beats_best_baseline_fraction": mean(
            [
                g["scratch_time"] < g["best_baseline_time"] * (1 - 1e-6)
                for g in go.values()
                if "scratch_time" in g
            ]
        ),
        "go_one_vs_one_device_mean_speedup": mean(
            [g["speedup_vs_one_device"] for g in go.values()]
        ),
        "go_one_vs_sa_mean_speedup": mean(
            [g["sa_final_time"] / g["go_one_time"] for g in go.values()]
        ),
        "convergence_vs_sa_wallclock_ratio": float(np.median(ratios)) if ratios else None,
        "convergence_unreached": int(sum(not g["convergence_reached"] for g in go.values())),
        "zero_shot_gap": mean([t["zero_shot_gap"] for t in transfer.values()]),
        "finetune_gap": mean([t["finetune_gap"] for t in transfer.values()]),
        "joint_vs_sequential_speedup": mean([j["speedup"] for j in joint.values()]),
        "iteration_10k_s": timing.get("total_median_s"),
        "iteration_10k_nodes": timing.get("nodes"),
        "iteration_10k_sample_s": timing.get("sample_median_s"),
        "iteration_10k_simulate_s": timing.get("simulate_median_s"),
        "iteration_10k_update_s": timing.get("update_median_s"),
        "run_s": run_s,
    }
    plots = _plots(state, ".quick" if quick else "") if go else []
    rows = [
        {
            "graph": name,
            "nodes": g["nodes"],
            "best heuristic": g["best_baseline"],
            "heuristic ms": round(g["best_baseline_time"] * 1e3, 4),
            "SA ms": round(g["sa_final_time"] * 1e3, 4),
            "GO-one ms": round(g["go_one_time"] * 1e3, 4),
            "GO/heur speedup": round(g["speedup_vs_best_baseline"], 4),
            "scratch ms": round(g["scratch_time"] * 1e3, 4) if "scratch_time" in g else None,
            "conv. ratio": round(g["convergence_ratio"], 3),
        }
        for name, g in go.items()
    ]
    return {
        "title": f"GO PPO training on {CLUSTER} (simulated), scaled-down run",
        **summary,
        "rows": rows,
        "plots": plots,
        "details": state,
    }


def assemble(paths: list[Path]) -> dict[str, Any]:
    """Merges progress files of phases run in separate processes (``RL_PHASES``,
    ``RL_PROGRESS``) into one result, writes ``results/rl.json`` and returns it.

    ``run_s`` is then the sum of the parts' ``run_s`` (they may have overlapped).
    """
    from rich.console import Console

    from benchmarks._report import print_result, write_result

    state: dict[str, Any] = {"go_one": {}, "seeds": {}, "transfer": {}, "joint": {}}
    run_s = 0.0
    for path in paths:
        part = json.loads(Path(path).read_text())
        for key in ("go_one", "seeds", "transfer", "joint"):
            state[key].update(part.get(key, {}))
        if "iteration" in part:
            state["iteration"] = part["iteration"]
        state.setdefault("setup", part.get("setup"))
        run_s += float(part.get("run_s", 0.0))
    for name, j in state["joint"].items():
        if name in state["go_one"]:
            j["joint_time"] = state["go_one"][name]["go_one_time"]
            j["speedup"] = j["sequential_time"] / j["joint_time"]
    result = _summarize(state, False, run_s)
    result["assembled_from"] = [str(p) for p in paths]
    write_result(RESULTS_DIR / "rl.json", "rl", result, quick=False)
    print_result(Console(), "rl", result)
    return result


if __name__ == "__main__":
    import sys

    assemble([Path(p) for p in sys.argv[1:]])
