"""Regenerating the corpus: lower each workload, capture its pre-fusion module,
make both texts machine-independent, store them gzip-compressed, and index them.

The build needs JAX, the Flax models of :mod:`hlo_corpus` and :mod:`hlo_go.xla`;
reading what it stored is :mod:`hlo_go.corpus` (a low layer that imports neither).

:func:`build` writes the committed base corpus; :func:`build_cached` builds the
variant and placement graphs (:mod:`hlo_corpus.variants`) into their per-jax-version
cache (:func:`hlo_go.corpus.variants_root`): only those missing, in a process pool,
each graph written as it finishes, so an interrupted build resumes. From a shell::

    python -m hlo_go.corpus_build --variants --jobs 4    # the 208 training variants
    python -m hlo_go.corpus_build --placement            # the paper-scale settings
    python -m hlo_go.corpus_build NAME ...               # some graphs of any split

Everything written is a function of the sources and the jax/jaxlib version only:
source locations are made relative (:mod:`hlo_go.corpus.sanitize`), gzip headers
carry no time or file name, and ``index.json`` holds no timings. Two builds on one
jax version give byte-identical files.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import logging
import multiprocessing
import os
import sys
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jaxlib

try:
    import fcntl
except ImportError:  # not on Windows: concurrent builds there may lose index entries
    fcntl = None

from hlo_corpus.registry import all_workloads, spec_workload
from hlo_corpus.variants import FAMILIES, get_spec, specs
from hlo_corpus.workload import SEED
from hlo_go.corpus.cache import CACHED_SPLITS, variants_root
from hlo_go.corpus.sanitize import relocate
from hlo_go.corpus.store import (
    STAGES,
    UnknownGraphError,
    corpus_root,
    entry_matches_spec,
    file_name,
)
from hlo_go.graph import build_graph
from hlo_go.hlo import HloModule, module_cost, parse_hlo
from hlo_go.xla.hooks import capture_prefusion_lowered

INDEX_FORMAT = 1
VERSION_KEYS = ("jax_version", "jaxlib_version")
# Stack frames kept in stored modules: the model sources only, never the caller's.
KEPT_SOURCES = ("hlo_corpus/",)

logger = logging.getLogger(__name__)


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
    """``hlo_go.graph.build_graph(module).num_nodes``, or None where the graph builder fails."""
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


def _merged_index(
    out: Path,
    entries: dict[str, dict],
    *,
    index_only: bool,
    order: Sequence[str] | None = None,
    keep_unknown: bool = False,
) -> dict[str, Any]:
    """The index with ``entries`` merged in, in ``order`` (default: the base corpus's);
    entries of graphs outside ``order`` are dropped, or kept after the others (sorted by
    name) with ``keep_unknown`` (a cache that another checkout's specs also write to)."""
    old = _old_index(out)
    graphs = dict(old.get("graphs", {}))
    if index_only:  # the files were built by the jax that the old entries name
        for name, entry in entries.items():
            for key in VERSION_KEYS:
                entry[key] = graphs.get(name, {}).get(key, entry[key])
    graphs.update(entries)
    order = order if order is not None else [w.name for w in all_workloads()]
    ordered = {n: graphs[n] for n in order if n in graphs}
    if keep_unknown:
        ordered.update({n: graphs[n] for n in sorted(set(graphs) - set(ordered))})
    versions = {"jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__}
    if index_only:
        versions = {k: old.get(k, v) for k, v in versions.items()}
    return {
        "format": INDEX_FORMAT,
        **versions,
        "zlib_version": old.get("zlib_version") if index_only else zlib.ZLIB_RUNTIME_VERSION,
        "seed": SEED,
        "flops_convention": (
            "hlo_go.hlo.module_cost of the prefusion module (XLA's HloCostAnalysis rules: "
            "a while body counts once)"
        ),
        "graphs": ordered,
    }


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


def _cached_order() -> list[str]:
    return [s.name for s in specs()]


def _select_cached(names: Iterable[str] | None, splits: Sequence[str]) -> list[str]:
    for split in splits:
        if split not in CACHED_SPLITS:
            raise ValueError(f"unknown split {split!r}; cached splits are {CACHED_SPLITS}")
    if names is None:
        return [s.name for split in splits for s in specs(split)]
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if get_spec(n) is None]
    if unknown:
        raise UnknownGraphError(
            f"unknown variant or placement graph(s) {', '.join(map(repr, unknown))}; "
            "see hlo_go.corpus.names(split='variants') and names(split='placement')"
        )
    return wanted


def interleaved(names: Sequence[str]) -> list[str]:
    """``names`` in build order: round-robin over the families (the first of each
    family, then the second, ...), so that any prefix of a build covers every family."""
    rank: dict[str, int] = {}
    keyed = []
    for position, name in enumerate(names):
        family = get_spec(name).family
        keyed.append((rank.get(family, 0), FAMILIES.index(family), position, name))
        rank[family] = rank.get(family, 0) + 1
    return [name for *_, name in sorted(keyed)]


def is_cached(name: str, out: Path) -> bool:
    """Whether ``out`` holds graph ``name`` built from its current spec (both stages)."""
    entry = _old_index(out).get("graphs", {}).get(name)
    spec = get_spec(name)
    return (
        entry is not None
        and spec is not None
        and entry_matches_spec(spec, entry)
        and all((out / file_name(name, stage)).exists() for stage in STAGES)
    )


def build_named(name: str) -> tuple[dict[str, bytes], dict[str, Any], float]:
    """Builds the variant or placement graph ``name``.

    A module-level function, so that a process pool can run it.

    Returns:
      ``({stage: gzip bytes}, index entry, wall seconds)``.
    """
    start = time.perf_counter()
    spec = get_spec(name)
    if spec is None:
        raise UnknownGraphError(f"unknown variant or placement graph {name!r}")
    built = build_one(spec_workload(spec))
    data = {s: gzip_bytes(built.texts[s]) for s in STAGES}
    return data, built.entry, time.perf_counter() - start


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``out/index.lock`` (where ``fcntl`` exists), so that
    builds running side by side do not lose each other's index entries."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "index.lock", "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write_graph(out: Path, name: str, data: dict[str, bytes], entry: dict[str, Any]) -> int:
    """Writes one graph's files, then its index entry (so a kill leaves no entry without
    its files); returns the bytes written."""
    for stage in STAGES:
        _write_atomic(out / file_name(name, stage), data[stage])
    with _locked(out):
        index = _merged_index(
            out, {name: entry}, index_only=False, order=_cached_order(), keep_unknown=True
        )
        _write_atomic(out / "index.json", index_text(index).encode("utf-8"))
    return sum(len(d) for d in data.values())


def _run_pool(names: list[str], jobs: int, bar: Any, done: Callable[[str, Any], None]) -> None:
    """Builds ``names`` in ``jobs`` spawned processes, calling ``done(name,
    future.result)`` as each finishes."""
    context = multiprocessing.get_context("spawn")  # a forked JAX is not safe
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending: dict[Future, str] = {pool.submit(build_named, n): n for n in names}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    name = pending.pop(future)
                    done(name, future.result)
                    bar.update(1)
                    bar.set_postfix_str(name)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def build_cached(
    names: Iterable[str] | None = None,
    *,
    splits: Sequence[str] = ("variants",),
    jobs: int = 1,
    out_dir: Path | str | None = None,
    force: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Builds the variant and placement graphs that are missing from their cache.

    Each graph's files and index entry are written as soon as it is built, so an
    interrupted build resumes where it stopped. A graph whose build fails is logged and
    listed under ``"failed"``; the others still build.

    Args:
      names: graphs to build (any of the cached splits); default every graph of ``splits``.
      splits: ``"variants"`` and/or ``"placement"`` (used when ``names`` is None).
      jobs: worker processes (1: build in this process).
      out_dir: the cache directory (default :func:`hlo_go.corpus.variants_root`).
      force: rebuild graphs that are already cached.
      progress: show a progress bar.

    Returns:
      ``{"index": the index as written, "seconds": {name: s}, "bytes": {name: gz bytes},
      "skipped": [names already cached], "failed": {name: error message}}``.

    Raises:
      UnknownGraphError: a name is no variant or placement graph.
      ValueError: unknown split, or ``jobs`` < 1.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    out = Path(out_dir) if out_dir is not None else variants_root()
    selected = _select_cached(names, splits)
    skipped = [] if force else [n for n in selected if is_cached(n, out)]
    todo = interleaved([n for n in selected if n not in set(skipped)])
    seconds: dict[str, float] = {}
    sizes: dict[str, int] = {}
    failed: dict[str, str] = {}

    def done(name: str, result: Callable[[], tuple[dict[str, bytes], dict, float]]) -> None:
        try:
            data, entry, elapsed = result()
        except Exception as e:  # one graph's failure must not stop the others
            logger.error("building %s failed: %r", name, e)
            failed[name] = repr(e)
            return
        sizes[name] = _write_graph(out, name, data, entry)
        seconds[name] = elapsed
        nodes = entry["stages"]["prefusion"]["nodes"]
        logger.info("built %s: %s nodes, %.1f s, %d bytes", name, nodes, elapsed, sizes[name])

    logger.info("%d graphs cached in %s, %d to build", len(skipped), out, len(todo))
    bar = _progress(todo, progress, f"building ({jobs} job{'s' * (jobs > 1)})")
    if jobs == 1 or len(todo) <= 1:
        for name in bar:
            bar.set_postfix_str(name)
            done(name, partial(build_named, name))
    else:
        _run_pool(todo, jobs, bar, done)
        bar.close()
    return {
        "index": _old_index(out),
        "seconds": seconds,
        "bytes": sizes,
        "skipped": skipped,
        "failed": failed,
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hlo_go.corpus_build",
        description="Build corpus graphs: the base corpus into hlo_corpus/ (no flags), or "
        "the variant and placement graphs into their cache (only those missing).",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="graphs to build (any split)")
    p.add_argument("--variants", action="store_true", help="the size and shape variants")
    p.add_argument("--placement", action="store_true", help="the paper-scale placement graphs")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--out", help="directory to write (default: hlo_corpus/ or the cache)")
    p.add_argument("--force", action="store_true", help="rebuild cached graphs too")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true", help="log each graph as it is built")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hlo_go.corpus_build``: 0 when everything built, 1 when some graph
    failed or a name is unknown, 2 on bad usage."""
    args = _parser().parse_args(argv)
    if args.jobs < 1:
        print("error: --jobs must be at least 1", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    if args.verbose:
        logger.setLevel(logging.INFO)
    splits = [s for s in CACHED_SPLITS if getattr(args, s)]
    cached = [n for n in args.names if get_spec(n) is not None]
    base = [n for n in args.names if get_spec(n) is None]
    start = time.perf_counter()
    try:
        if base or not (splits or cached):
            result = build(base or None, progress=not args.no_progress, out_dir=args.out)
            print(f"base: {len(result['seconds'])} graphs built into {args.out or corpus_root()}")
        if splits or cached:
            result = build_cached(
                cached or None, splits=splits or CACHED_SPLITS, jobs=args.jobs,
                out_dir=args.out, force=args.force, progress=not args.no_progress,
            )  # fmt: skip
            out = args.out or variants_root()
            total = sum(f.stat().st_size for f in Path(out).glob("data/*.hlo.gz"))
            print(
                f"{len(result['seconds'])} built, {len(result['skipped'])} already cached, "
                f"{len(result['failed'])} failed, in {time.perf_counter() - start:.0f} s; "
                f"{out} holds {len(result['index'].get('graphs', {}))} graphs, "
                f"{total / 2**20:.1f} MiB"
            )
            for name, error in result["failed"].items():
                print(f"failed: {name}: {error}", file=sys.stderr)
            if result["failed"]:
                return 1
    except UnknownGraphError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "BuiltGraph",
    "build",
    "build_cached",
    "build_named",
    "build_one",
    "graph_entry",
    "gzip_bytes",
    "index_text",
    "repository_root",
]


if __name__ == "__main__":
    sys.exit(main())
