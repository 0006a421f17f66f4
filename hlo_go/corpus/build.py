"""Regenerating the corpus: lower each workload, capture its pre-fusion module,
make both texts machine-independent, store them gzip-compressed, and index them.

Everything written is a function of the sources and the jax/jaxlib version only:
source locations are made relative (:mod:`hlo_go.corpus.sanitize`), gzip headers
carry no time or file name, and ``index.json`` holds no timings. Two builds on one
jax version give byte-identical files.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import time
import warnings
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jaxlib

from hlo_go.corpus.sanitize import relocate
from hlo_go.corpus.store import STAGES, UnknownGraphError, corpus_root, file_name
from hlo_go.hlo import HloModule, module_cost, parse_hlo
from hlo_go.xla.hooks import capture_prefusion_lowered

INDEX_FORMAT = 1
VERSION_KEYS = ("jax_version", "jaxlib_version")
# Stack frames kept in stored modules: the model sources only, never the caller's.
KEPT_SOURCES = ("hlo_corpus/",)


@dataclass(frozen=True)
class BuiltGraph:
    """One built graph, before it is written.

    Attributes:
      name: graph name.
      texts: stored text per stage.
      entry: its ``index.json`` entry.
      seconds: wall time per phase (``lower``, ``prefusion``, ``analyze``).
    """

    name: str
    texts: dict[str, str]
    entry: dict[str, Any]
    seconds: dict[str, float]


def repository_root() -> Path:
    """The directory holding the ``hlo_corpus`` package (the repository root in a checkout)."""
    return corpus_root().parent


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _node_count(module: HloModule, name: str) -> int | None:
    """``hlo_go.graph.build_graph(module).num_nodes``, or None where that is unavailable."""
    try:
        from hlo_go.graph import build_graph
    except ImportError:
        return None
    try:
        return int(build_graph(module).num_nodes)
    except Exception as e:  # the graph builder is not the corpus's to fail on
        warnings.warn(f"{name}: hlo_go.graph.build_graph failed: {e!r}", stacklevel=2)
        return None


def stage_summary(name: str, stage: str, text: str, module: HloModule) -> dict[str, Any]:
    """The per-stage part of an index entry."""
    return {
        "file": file_name(name, stage),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "instructions": module.instruction_count,
        "entry_instructions": len(module.entry),
        "computations": len(module.computations),
        "while_loops": sum(1 for _, i in module.instructions() if i.opcode == "while"),
        "nodes": _node_count(module, name),
    }


def graph_entry(workload: Any, texts: dict[str, str], modules: dict[str, HloModule]) -> dict:
    """The ``index.json`` entry of a workload from its stored texts and parsed modules."""
    cost = module_cost(modules["prefusion"])
    entry_params = modules["unoptimized"].entry.parameters
    return {
        "family": workload.family,
        "variant": workload.variant,
        "form": workload.form,
        "config": dict(workload.config),
        "module": modules["unoptimized"].name,
        "arguments": len(entry_params),
        "argument_bytes": sum(p.shape.byte_size() for p in entry_params),
        "flops": _number(cost.flops),
        "transcendentals": _number(cost.transcendentals),
        "bytes_read": _number(cost.bytes_read),
        "bytes_written": _number(cost.bytes_written),
        "bytes": _number(cost.bytes_accessed),
        "stages": {s: stage_summary(workload.name, s, texts[s], modules[s]) for s in STAGES},
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
    }


def build_one(workload: Any, *, root: Path | None = None) -> BuiltGraph:
    """Lowers ``workload``, captures its pre-fusion module, and prepares both texts.

    Args:
      workload: a :class:`hlo_corpus.workload.Workload`.
      root: repository root that source paths are made relative to.
    """
    root = root or repository_root()
    seconds = {}
    start = time.perf_counter()
    lowered = workload.lower()
    raw = {"unoptimized": lowered.as_text(dialect="hlo")}
    if "{...}" in raw["unoptimized"]:
        raise RuntimeError(f"{workload.name}: JAX elided a large constant in the HLO text")
    seconds["lower"] = time.perf_counter() - start
    start = time.perf_counter()
    parsed = {"prefusion": capture_prefusion_lowered(lowered)}
    seconds["prefusion"] = time.perf_counter() - start
    start = time.perf_counter()
    parsed["unoptimized"] = parse_hlo(raw["unoptimized"], filename=f"<{workload.name}>")
    modules, texts = {}, {}
    for stage in STAGES:
        modules[stage] = relocate(parsed[stage], root, keep_prefixes=KEPT_SOURCES)
        texts[stage] = modules[stage].to_text()
        if str(root) in texts[stage]:
            raise RuntimeError(f"{workload.name} {stage}: an absolute path survived relocation")
    entry = graph_entry(workload, texts, modules)
    seconds["analyze"] = time.perf_counter() - start
    return BuiltGraph(workload.name, texts, entry, seconds)


def gzip_bytes(text: str) -> bytes:
    """``text`` gzip-compressed reproducibly: level 9, no file name, mtime 0."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as f:
        f.write(text.encode("utf-8"))
    return buffer.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def index_text(index: dict[str, Any]) -> str:
    """``index.json`` as written: 1-space indent, keys in insertion order, final newline."""
    return json.dumps(index, indent=1, ensure_ascii=False) + "\n"


def _select(names: Iterable[str] | None) -> list[Any]:
    from hlo_corpus.registry import all_workloads

    everything = all_workloads()
    if names is None:
        return everything
    by_name = {w.name: w for w in everything}
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise UnknownGraphError(
            f"unknown corpus workload(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(by_name)}"
        )
    return [w for w in everything if w.name in wanted]


def _old_index(out: Path) -> dict[str, Any]:
    path = out / "index.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _merged_index(out: Path, entries: dict[str, dict], *, index_only: bool) -> dict[str, Any]:
    from hlo_corpus.registry import all_workloads

    old = _old_index(out)
    graphs = dict(old.get("graphs", {}))
    if index_only:  # the files were built by the jax that the old entries name
        for name, entry in entries.items():
            for key in VERSION_KEYS:
                entry[key] = graphs.get(name, {}).get(key, entry[key])
    graphs.update(entries)
    order = [w.name for w in all_workloads()]
    ordered = {n: graphs[n] for n in order if n in graphs}
    versions = {"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__}
    if index_only:
        versions = {k: old.get(k, v) for k, v in versions.items()}
    return {
        "format": INDEX_FORMAT,
        **versions,
        "zlib_version": old.get("zlib_version") if index_only else zlib.ZLIB_RUNTIME_VERSION,
        "seed": _seed(),
        "flops_convention": (
            "hlo_go.hlo.module_cost of the prefusion module (XLA's HloCostAnalysis rules: "
            "a while body counts once)"
        ),
        "graphs": ordered,
    }


def _seed() -> int:
    from hlo_corpus.workload import SEED

    return SEED


def _progress(items: list[Any], enabled: bool, description: str):
    from tqdm.auto import tqdm

    return tqdm(items, desc=description, unit="graph", disable=not enabled, dynamic_ncols=True)


def build(
    names: Iterable[str] | None = None,
    *,
    progress: bool = True,
    out_dir: Path | str | None = None,
    index_only: bool = False,
) -> dict[str, Any]:
    """Regenerates stored graphs and their ``index.json`` entries.

    Args:
      names: workloads to build (default: all). Other entries of an existing
        index are kept.
      progress: show a progress bar.
      out_dir: corpus directory to write (``data/`` and ``index.json``); default
        the ``hlo_corpus`` package directory.
      index_only: do not lower anything: recompute the index entries from the
        stored files (e.g. after a change to ``module_cost`` or ``hlo_go.graph``).

    Returns:
      ``{"index": the written index, "seconds": {name: seconds}, "bytes": {name: gz bytes}}``.
    """
    out = Path(out_dir) if out_dir is not None else corpus_root()
    selected = _select(names)
    entries: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    sizes: dict[str, int] = {}
    bar = _progress(selected, progress, "reindexing" if index_only else "building")
    for workload in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(workload.name)
        start = time.perf_counter()
        if index_only:
            texts = {}
            for stage in STAGES:
                with gzip.open(out / file_name(workload.name, stage), "rb") as f:
                    texts[stage] = f.read().decode("utf-8")
            modules = {s: parse_hlo(t) for s, t in texts.items()}
            entries[workload.name] = graph_entry(workload, texts, modules)
            sizes[workload.name] = sum(
                (out / file_name(workload.name, s)).stat().st_size for s in STAGES
            )
        else:
            built = build_one(workload)
            sizes[workload.name] = 0
            for stage in STAGES:
                data = gzip_bytes(built.texts[stage])
                _write_atomic(out / file_name(workload.name, stage), data)
                sizes[workload.name] += len(data)
            entries[workload.name] = built.entry
        seconds[workload.name] = time.perf_counter() - start
    index = _merged_index(out, entries, index_only=index_only)
    _write_atomic(out / "index.json", index_text(index).encode("utf-8"))
    return {"index": index, "seconds": seconds, "bytes": sizes}


def total_size(out_dir: Path | str | None = None) -> int:
    """Bytes of the stored corpus (data files and index)."""
    out = Path(out_dir) if out_dir is not None else corpus_root()
    files = [out / "index.json", *sorted((out / "data").glob("*.hlo.gz"))]
    return sum(f.stat().st_size for f in files if f.exists())


__all__ = [
    "BuiltGraph",
    "build",
    "build_one",
    "graph_entry",
    "gzip_bytes",
    "index_text",
    "repository_root",
    "total_size",
]
