"""Policy speed: forward + sample of ``hlo_go.gonet.GOPolicy`` on 10,000- and 80,000-node graphs.

The graphs are generated stand-ins of the workloads the policy is for: the
pre-fusion HLO of one training step of a 2-layer LSTM language model unrolled over
68 and 547 time steps (:func:`benchmarks.bench_graph.build_lstm_prefusion_text`,
cached under ``benchmarks/.cache/``): about 10,100 and 80,000 nodes. ``--quick``
uses the 32-step module (about 4,800 nodes) alone.

Timed interleaved (median of 5 rounds, 3 under ``--quick``, after a warm-up round
that also compiles), with the default :class:`~hlo_go.gonet.PolicyConfig`:

* ``sample``: ``policy.sample(params, graph, key)`` end to end, from the
  ``OpGraph`` to ``Decisions`` on the host: the target (≤ 0.5 s at 10k nodes, ≤ 3 s
  at 80k).
* components alone: ``prepare`` (host: padding and topological relabeling),
  ``gnn`` (input embedding, GraphSAGE layers, graph context) and ``attention``
  (one task's segment-recurrent stack; a sample runs it once per task).
* the split of ``sample``: ``prepare``, then the rest of the sample's time
  divided between ``gnn``, ``attention`` (all tasks) and ``heads+sampling``
  (heads, FiLM, action embeddings, sampling, transfers) in the proportions an
  XLA per-instruction profile of the sampling pass gives (``split_*``).
* ``greedy``, ``log_prob`` (``evaluate``) and ``value``, for reference.

Peak memory is measured in a fresh process that loads the 80k graph (pickled by
this one), initializes the policy, compiles and runs one sample: its
``ru_maxrss``, against the 6 GB target, and its resident size before the policy
was touched. The trace counters of the policy show one compile per bucket.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmarks._timing import time_interleaved

TARGET_S = {10_000: 0.5, 80_000: 3.0}
TARGET_PEAK_RSS_GB = 6.0
FULL_STEPS = {10_000: 68, 80_000: 547}
QUICK_STEPS = {5_000: 32}

_console = Console(stderr=True)


def _log(message: str) -> None:
    _console.log(message)


def _graph(steps: int) -> Any:
    from benchmarks.bench_graph import _generated_module
    from hlo_go.graph import build_graph

    module, _ = _generated_module(steps)
    return build_graph(module)


_RSS_CHILD = r"""
import json, pickle, resource, sys, time
import jax
from hlo_go.gonet import GOPolicy

def rss_now_gb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1e6
    return float("nan")

with open(sys.argv[1], "rb") as f:
    graph = pickle.load(f)
before = rss_now_gb()
policy = GOPolicy()
params = policy.init(jax.random.PRNGKey(0), graph, num_devices=8)
start = time.perf_counter()
decisions, log_prob = policy.sample(params, graph, jax.random.PRNGKey(1))
first = time.perf_counter() - start
start = time.perf_counter()
decisions, log_prob = policy.sample(params, graph, jax.random.PRNGKey(2))
second = time.perf_counter() - start
decisions.validate(graph, 8)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB
print(json.dumps({"rss_before_policy_gb": before, "peak_rss_gb": peak,
                  "first_sample_s": first, "second_sample_s": second}))
"""


def _peak_rss(graph: Any) -> dict[str, Any]:
    """Peak RSS of a fresh process doing init + compile + two samples of ``graph``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.pkl"
        # node_index is a read-only mapping that does not unpickle; a plain dict does.
        path.write_bytes(pickle.dumps(graph._replace(node_index=dict(graph.node_index))))
        root = Path(__file__).resolve().parent.parent
        done = subprocess.run(
            [sys.executable, "-c", _RSS_CHILD, str(path)],
            capture_output=True,
            text=True,
            cwd=root,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"peak-RSS child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


_CONTROL_OPCODES = ("while", "call", "conditional")


def _profile_split(policy: Any, params: Any, graph: Any) -> dict[str, float]:
    """Shares of the sample executable's time by component, from XLA's per-op trace events.

    The network's sampling pass is compiled with per-instruction tracing
    (:func:`hlo_go.xla.profile_lowered`) and each executed instruction is charged
    to the component its ``op_name`` metadata names: ``gnn`` (``encoder``,
    ``context``), ``attention`` (``stack``), else ``heads+sampling``. Loop and call
    instructions are skipped (their bodies' instructions are counted instead).
    """
    import re

    import jax
    import jax.numpy as jnp

    from hlo_go.xla.profile import profile_lowered

    inputs = policy.prepare(graph)
    network = policy.network(policy.max_devices(params))
    fn = jax.jit(lambda p, g, d, k: network.apply(p, g, d, key=k))
    args = (params, inputs.graphs, jnp.int32(8), jax.random.PRNGKey(0))
    profile = profile_lowered(fn.lower(*args), args, repeats=3)
    op_name: dict[str, str] = {}
    skip: set[str] = set()
    for line in profile.hlo_text.splitlines():
        found = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = \S+ ([\w\-]+)\(", line)
        if not found:
            continue
        name, opcode = found.groups()
        if opcode in _CONTROL_OPCODES:
            skip.add(name)
        meta = re.search(r'op_name="([^"]*)"', line)
        op_name[name] = meta.group(1) if meta else ""
    totals = {"gnn": 0.0, "attention": 0.0, "heads+sampling": 0.0}
    for name, seconds in profile.instruction_s.items():
        if name in skip:
            continue
        path = op_name.get(name, "")
        if "/encoder/" in path or "/context/" in path:
            totals["gnn"] += seconds
        elif "/stack/" in path:
            totals["attention"] += seconds
        else:
            totals["heads+sampling"] += seconds
    busy = sum(totals.values())
    return {part: seconds / busy for part, seconds in totals.items()}


def _components(policy: Any, params: Any, graph: Any) -> dict[str, Any]:
    """Zero-argument callables for the end-to-end calls and each component alone."""
    import jax
    import jax.numpy as jnp

    from hlo_go.gonet import GONetwork, SegmentRecurrentStack

    config = policy.config
    inputs = policy.prepare(graph)
    devices = jnp.int32(8)
    graphs = jax.device_put(inputs.graphs)
    network = policy.network(policy.max_devices(params))
    encode = jax.jit(lambda p, g: network.apply(p, g, devices, method=GONetwork.encode))
    h, _ = encode(params, graphs)
    mask = jnp.asarray(inputs.graphs.nodes["mask"])
    layers = max(config.attention_layers, 1)
    modulation = jnp.zeros((layers, 4, config.hidden_size))
    stack = SegmentRecurrentStack(config)
    stack_params = {"params": params["params"]["stack"]}
    attend = jax.jit(lambda p, x: stack.apply(p, x, mask, modulation))
    decisions, _ = policy.sample(params, graph, jax.random.PRNGKey(0))
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 10_000))

    def blocking(fn: Any) -> Any:
        return lambda: jax.block_until_ready(fn())

    return {
        "sample": blocking(lambda: policy.sample(params, graph, next(keys))),
        "prepare": blocking(lambda: policy.prepare(graph)),
        "gnn": blocking(lambda: encode(params, graphs)),
        "attention (one task)": blocking(lambda: attend(stack_params, h)),
        "greedy": blocking(lambda: policy.greedy(params, graph)),
        "log_prob": blocking(lambda: policy.evaluate(params, graph, decisions)),
        "value": blocking(lambda: policy.value(params, graph)),
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """Times forward + sample (and its components) on each graph size.

    Args:
      quick: the 4,800-node graph only, 3 rounds, no peak-RSS child.

    Returns:
      Rows (one per graph size and timed call: median/min/max seconds) and
      headline numbers: parameter count, per-size sample medians against their
      targets, the component split, peak RSS, compile counts.
    """
    import jax

    from hlo_go.gonet import GOPolicy, param_count

    sizes = QUICK_STEPS if quick else FULL_STEPS
    graphs = {label: _graph(steps) for label, steps in sizes.items()}
    policy = GOPolicy()
    smallest = min(graphs.values(), key=lambda g: g.num_nodes)
    params = policy.init(jax.random.PRNGKey(0), smallest, num_devices=8)
    count = param_count(params)
    _log(f"policy: {count:,} parameters; config {policy.config}")

    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"parameters": count, "config": repr(policy.config)}
    tasks = len(policy.config.task_order)
    meets = True
    for label, graph in graphs.items():
        bucket = policy.prepare(graph).bucket
        _log(f"{graph.num_nodes:,} nodes, {graph.num_edges:,} edges, bucket {bucket}: compiling")
        start = time.perf_counter()
        fns = _components(policy, params, graph)
        compile_s = time.perf_counter() - start
        timings = time_interleaved(fns, repeats=3 if quick else 5, warmup=1, progress=_log)
        for name, t in timings.items():
            rows.append(
                {
                    "nodes": graph.num_nodes,
                    "call": name,
                    "median_s": t.median,
                    "min_s": t.min,
                    "max_s": t.max,
                    "samples_s": list(t.samples),
                }
            )
        sample = timings["sample"].median
        prepare = timings["prepare"].median
        _log("per-component split from an XLA profile of the sampling pass")
        shares = _profile_split(policy, params, graph)
        split = {"prepare": prepare}
        split.update({part: share * (sample - prepare) for part, share in shares.items()})
        key = f"{round(graph.num_nodes, -3) // 1000}k"
        result[f"nodes_{key}"] = graph.num_nodes
        result[f"edges_{key}"] = graph.num_edges
        result[f"bucket_nodes_{key}"] = bucket[0]
        result[f"sample_median_s_{key}"] = sample
        result[f"compile_and_warmup_s_{key}"] = round(compile_s, 2)
        result[f"attention_alone_x{tasks}_s_{key}"] = tasks * timings["attention (one task)"].median
        for part, seconds in split.items():
            result[f"split_{part}_{key}"] = seconds
            result[f"split_{part}_share_{key}"] = round(seconds / sample, 3)
        target = TARGET_S.get(label)
        if target is not None:
            result[f"target_s_{key}"] = target
            meets &= sample <= target

    if not quick:
        largest = max(graphs.values(), key=lambda g: g.num_nodes)
        _log(f"peak RSS: fresh process, {largest.num_nodes:,} nodes")
        rss = _peak_rss(largest)
        result.update({f"child_{k}": v for k, v in rss.items()})
        result["target_peak_rss_gb"] = TARGET_PEAK_RSS_GB
        meets &= rss["peak_rss_gb"] <= TARGET_PEAK_RSS_GB
        result["meets_target"] = meets
    result["trace_counts"] = json.dumps(policy.trace_counts, sort_keys=True)
    largest_nodes = max(g.num_nodes for g in graphs.values())
    return {
        "title": f"GOPolicy forward + sample, {count:,} parameters, up to {largest_nodes:,} nodes",
        "rows": rows,
        **result,
    }
