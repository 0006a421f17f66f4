"""The workload corpus: the committed files match index.json, load parses both stages,
a rebuild is byte-identical, source locations are machine-independent, and the CLI
commands run."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hlo_samples import EMITTERS_OFF_FLAG

from hlo_corpus.registry import all_workloads
from hlo_go import corpus, corpus_build
from hlo_go.cli import main
from hlo_go.corpus.sanitize import relocate
from hlo_go.hlo import FrozenDict, HloModule, StackFrameTable, parse_hlo

FAMILIES = {
    "inception_v3",
    "amoebanet",
    "rnnlm",
    "gnmt",
    "transformer_xl",
    "wavenet",
    "gpt2",
    "bert",
    "resnet",
}
SMALL = "gpt2_l2"  # the graph rebuilt by the reproducibility test
MAX_BYTES = 40 * 1024 * 1024


@pytest.fixture(scope="module")
def index() -> dict:
    return corpus.index()


def _raw(name: str, stage: str) -> bytes:
    return corpus.path(name, stage).read_bytes()


def test_index_covers_the_paper_workloads(index):
    graphs = index["graphs"]
    assert len(graphs) >= 24
    assert {e["family"] for e in graphs.values()} == FAMILIES
    assert set(graphs) == {w.name for w in all_workloads()}, (
        "index.json and the generators disagree: run `hlo-go corpus build`"
    )
    for family in ("rnnlm", "gnmt"):
        forms = {e["form"] for e in graphs.values() if e["family"] == family}
        assert forms == {"unrolled", "scan"}
    for family in ("rnnlm", "gnmt", "transformer_xl", "gpt2", "bert"):
        variants = {e["variant"] for e in graphs.values() if e["family"] == family}
        assert variants == {"l2", "l4", "l8"}
    for family in FAMILIES:
        assert len({e["variant"] for e in graphs.values() if e["family"] == family}) >= 2
    largest = max(
        max(e["stages"]["prefusion"]["nodes"] or 0, e["stages"]["prefusion"]["instructions"])
        for e in graphs.values()
    )
    assert largest >= 50_000
    scans = [e for e in graphs.values() if e["form"] == "scan"]
    assert scans and all(e["stages"]["prefusion"]["while_loops"] > 0 for e in scans)


def test_stored_files_match_index(index):
    total = os.path.getsize(corpus.corpus_root() / "index.json")
    for name, entry in index["graphs"].items():
        assert entry["jax_version"] and entry["flops"] > 0 and entry["bytes"] > 0
        for stage in corpus.STAGES:
            stored = entry["stages"][stage]
            raw = _raw(name, stage)
            total += len(raw)
            assert stored["file"] == f"data/{name}.{stage}.hlo.gz"
            # Reproducible gzip: no file name (FLG 0) and mtime 0.
            assert raw[3] == 0 and raw[4:8] == b"\0\0\0\0", f"{name} {stage}: gzip header"
            digest = hashlib.sha256(gzip.decompress(raw)).hexdigest()
            assert digest == stored["sha256"], f"{name} {stage} does not match index.json"
    assert total <= MAX_BYTES
    stray = {p.name for p in (corpus.corpus_root() / "data").iterdir()} - {
        f"{n}.{s}.hlo.gz" for n in index["graphs"] for s in corpus.STAGES
    }
    assert not stray, f"files not in index.json: {sorted(stray)}"


@pytest.mark.parametrize("stage", corpus.STAGES)
def test_load_parses_with_indexed_counts(index, stage):
    for name in ("gpt2_l2", "rnnlm_l2_scan", "resnet_26", "wavenet_s2"):
        module = corpus.load(name, stage)
        stored = index["graphs"][name]["stages"][stage]
        assert isinstance(module, HloModule)
        assert module.name == index["graphs"][name]["module"] == f"jit_{name}"
        assert module.instruction_count == stored["instructions"]
        assert len(module.entry) == stored["entry_instructions"]
        assert len(module.computations) == stored["computations"]
        assert module == parse_hlo(corpus.text(name, stage))
        opcodes = {i.opcode for _, i in module.instructions()}
        assert "fusion" not in opcodes
        assert "is_scheduled" not in module.attributes


def test_largest_graph_has_50k_instructions(index):
    name = max(
        index["graphs"], key=lambda n: index["graphs"][n]["stages"]["prefusion"]["instructions"]
    )
    module = corpus.load(name, "prefusion")
    assert module.instruction_count == index["graphs"][name]["stages"]["prefusion"]["instructions"]
    assert module.instruction_count >= 50_000


def test_node_counts_match_graph_builder(index):
    graph = pytest.importorskip("hlo_go.graph")
    for name in ("gpt2_l2", "rnnlm_l2_scan"):
        for stage in corpus.STAGES:
            stored = index["graphs"][name]["stages"][stage]["nodes"]
            got = graph.build_graph(corpus.load(name, stage)).num_nodes
            assert stored == got, "stale node counts: run `hlo-go corpus build --index-only`"


def test_prefusion_source_locations_are_relative():
    module = corpus.load(SMALL, "prefusion")
    files = module.stack_frames.file_names
    assert files and all(f.startswith("hlo_corpus/") for f in files)
    text = corpus.text(SMALL, "prefusion")
    assert str(corpus.corpus_root().parent) not in text
    frames = module.stack_frames.stack_frames
    assert all(1 <= f["parent_frame_id"] <= i + 1 for i, f in enumerate(frames))


def test_unknown_name_and_stage():
    with pytest.raises(corpus.UnknownGraphError, match=r"unknown corpus graph 'nope'.*gpt2_l2"):
        corpus.load("nope")
    with pytest.raises(KeyError):
        corpus.info("nope")
    with pytest.raises(ValueError, match="unknown stage 'optimized'"):
        corpus.load(SMALL, "optimized")
    with pytest.raises(corpus.UnknownGraphError, match="unknown corpus workload"):
        corpus_build.build(["nope"], progress=False)


# XLA:CPU's parallel task assigner annotates ops with how many partitions this host's
# threads split them into: the one part of a captured module that depends on the host.
_PARTITIONS = re.compile(r', backend_config=\{"outer_dimension_partitions":\[[^\]]*\]\}')


def _build_with_xla_default_emitters(out_dir: Path) -> dict:
    """Builds :data:`SMALL` into ``out_dir`` in a child process with XLA:CPU's default kernel
    emitters, as the corpus was built; returns the new index. The suite may turn those
    emitters off (``tests/conftest.py``), which changes XLA's passes before fusion."""
    flags = os.environ.get("XLA_FLAGS", "").replace(EMITTERS_OFF_FLAG, "")
    code = (
        "import json, pathlib, sys; from hlo_go import corpus_build; "
        "r = corpus_build.build([sys.argv[1]], progress=False, out_dir=pathlib.Path(sys.argv[2]));"
        " print(json.dumps(r['index']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, SMALL, str(out_dir)],
        env={**os.environ, "XLA_FLAGS": flags},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_rebuilding_one_graph_is_byte_identical(tmp_path, index):
    import jax
    import jaxlib

    built_with = (index["jax_version"], index["jaxlib_version"])
    if (jax.__version__, jaxlib.__version__) != built_with:
        pytest.skip(f"the corpus was built with jax/jaxlib {built_with}: another jax prints "
                    "another module")  # fmt: skip
    rebuilt = _build_with_xla_default_emitters(tmp_path)["graphs"]
    assert list(rebuilt) == [SMALL]
    fresh, committed = dict(rebuilt[SMALL]), dict(index["graphs"][SMALL])
    texts = {
        stage: (
            gzip.decompress((tmp_path / corpus.store.file_name(SMALL, stage)).read_bytes()),
            gzip.decompress(_raw(SMALL, stage)),
        )
        for stage in corpus.STAGES
    }
    same_host = all(new == old for new, old in texts.values())
    for entry in (fresh, committed):  # node counts follow hlo_go.graph; checked above
        entry["stages"] = {  # a host with another core count: hashes differ (see below)
            s: {k: v for k, v in d.items() if k != "nodes" and (same_host or k != "sha256")}
            for s, d in entry["stages"].items()
        }
    assert fresh == committed
    for stage, (new, old) in texts.items():
        assert _PARTITIONS.sub("", new.decode()) == _PARTITIONS.sub("", old.decode())
        if same_host and index.get("zlib_version") == zlib.ZLIB_RUNTIME_VERSION:
            assert (tmp_path / corpus.store.file_name(SMALL, stage)).read_bytes() == _raw(
                SMALL, stage
            )


def _module_with_frames() -> tuple[HloModule, str]:
    root = "/somewhere/repo"
    text = f"""HloModule m, entry_computation_layout={{(f32[2]{{0}})->f32[2]{{0}}}}

FileNames
1 "/usr/lib/python3/site-packages/_pytest/python.py"
2 "{root}/hlo_corpus/models/x.py"
3 "{root}/hlo_go/corpus_build.py"

FunctionNames
1 "pytest_pyfunc_call"
2 "f"
3 "g"
4 "build"

FileLocations
1 {{file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=5}}
2 {{file_name_id=3 function_name_id=4 line=20 end_line=20 column=1 end_column=5}}
3 {{file_name_id=2 function_name_id=2 line=30 end_line=30 column=1 end_column=5}}
4 {{file_name_id=2 function_name_id=3 line=40 end_line=40 column=1 end_column=5}}

StackFrames
1 {{file_location_id=1 parent_frame_id=1}}
2 {{file_location_id=2 parent_frame_id=2}}
3 {{file_location_id=3 parent_frame_id=3}}
4 {{file_location_id=4 parent_frame_id=4}}
5 {{file_location_id=2 parent_frame_id=2}}


ENTRY %main (x: f32[2]) -> f32[2] {{
  %x = f32[2]{{0}} parameter(0)
  %a = f32[2]{{0}} sine(%x), metadata={{op_name="a" stack_frame_id=4}}
  %b = f32[2]{{0}} cosine(%a), metadata={{op_name="b" stack_frame_id=5}}
  ROOT %c = f32[2]{{0}} add(%a, %b), metadata={{op_name="c" stack_frame_id=3 source_file="{root}/hlo_corpus/models/x.py" source_line=30}}
}}

"""
    return parse_hlo(text), root


def test_relocate_keeps_model_frames_and_reparents():
    module, root = _module_with_frames()
    out = relocate(module, root, keep_prefixes=("hlo_corpus/",))
    table = out.stack_frames
    assert table.file_names == ("hlo_corpus/models/x.py",)
    assert table.function_names == ("f", "g")
    # Frame 4 (g) had parents 3 (f) → 2 (build, dropped) → 1 (pytest, dropped):
    # f becomes a root (printed parent 1 = none) and g its child (printed 1 + 1).
    assert [dict(f) for f in table.stack_frames] == [
        {"file_location_id": 1, "parent_frame_id": 1},
        {"file_location_id": 2, "parent_frame_id": 2},
    ]
    meta = {i.name: i.metadata for i in out.entry}
    assert meta["a"]["stack_frame_id"] == 2
    assert "stack_frame_id" not in meta["b"]  # only dropped frames above it
    assert meta["c"]["stack_frame_id"] == 1
    assert meta["c"]["source_file"] == "hlo_corpus/models/x.py"
    assert root not in out.to_text()
    assert parse_hlo(out.to_text()) == out
    # Keeping everything only rewrites paths.
    everything = relocate(module, root)
    assert everything.stack_frames.file_names[0] in ("python.py", "_pytest/python.py")
    assert len(everything.stack_frames.stack_frames) == 4  # frames 2 and 5 are one frame
    assert isinstance(everything.stack_frames, StackFrameTable)
    assert isinstance(everything.stack_frames.stack_frames[0], FrozenDict)


def test_cli_corpus_list_and_show(capsys):
    assert main(["corpus", "list"]) == 0
    out = capsys.readouterr().out
    assert "gnmt_l8_unrolled" in out and "inception_v3_small" in out
    assert main(["corpus", "list", "--family", "bert", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"bert_l2"' in out and "gpt2_l2" not in out
    assert main(["corpus", "show", SMALL]) == 0
    out = capsys.readouterr().out
    assert "prefusion" in out and "unoptimized" in out and "multiply×" in out
    assert corpus.info(SMALL)["stages"]["prefusion"]["sha256"][:12] in out
    assert main(["corpus", "show", "nope"]) == 1  # an input that failed
    assert "unknown corpus graph" in capsys.readouterr().out
