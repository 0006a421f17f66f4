"""The variant and placement splits of the corpus: the registry lists them, each has a
family and a split, a small one builds end to end (lower → stored text → parse →
OpGraph) and rebuilds byte-identically, the cache resumes, and a graph that is not
built raises the named error that says how to build it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hlo_corpus.registry import all_workloads, extra_workloads
from hlo_corpus.variants import AMOEBANET_STAGES, FAMILIES, INCEPTION_BLOCKS, get_spec, specs
from hlo_go import corpus, corpus_build
from hlo_go.cli import main
from hlo_go.graph import OpGraph, build_graph

# The smallest variants (a few hundred nodes each): one scanned LSTM layer, and GPT-2.
SMALL = "rnnlm_l1_h256_s20_b16_scan"
OTHER = "gpt2_l2_w256_s128_b4"


def test_registry_lists_200_variants_over_all_families():
    variants = corpus.names(split="variants")
    assert len(variants) >= 200
    assert len(set(variants)) == len(variants)
    per_family = Counter(corpus.family(n) for n in variants)
    assert set(per_family) == set(FAMILIES)
    assert all(20 <= per_family[f] <= 30 for f in FAMILIES), per_family
    assert not set(variants) & set(corpus.names()), "a variant reuses a base name"
    for name in variants:
        assert corpus.split_of(name) == "variants"
        assert name.startswith(corpus.family(name) + "_")
        assert corpus.names(split="variants", family=corpus.family(name)).count(name) == 1


def test_base_split_is_unchanged():
    assert corpus.names() == corpus.names(split="base") == [w.name for w in all_workloads()]
    assert len(corpus.names()) == 30
    assert corpus.family("gnmt_l8_unrolled") == "gnmt" and corpus.split_of("bert_l2") == "base"
    everything = corpus.names(split="all")
    assert everything == corpus.names(split=("base", "variants", "placement"))
    assert len(everything) == 30 + len(specs())


def test_placement_split_has_paper_settings():
    placement = corpus.names(split="placement")
    assert placement and all("_paper_" in n for n in placement)
    assert {"gnmt", "rnnlm", "transformer_xl", "inception_v3", "wavenet"} <= {
        corpus.family(n) for n in placement
    }


def test_every_spec_makes_a_workload_with_known_keys():
    workloads = extra_workloads()
    assert [w.name for w in workloads] == [s.name for s in specs()]
    for w in workloads:
        spec = get_spec(w.name)
        assert (w.family, w.form) == (spec.family, spec.form)
        assert all(w.config[k] == v for k, v in spec.config.items())


def test_bad_split_family_and_name():
    with pytest.raises(ValueError, match="unknown split"):
        corpus.names(split="train")
    with pytest.raises(ValueError, match="unknown family"):
        corpus.names(split="variants", family="lstm")
    with pytest.raises(corpus.UnknownGraphError, match="unknown corpus graph 'nope'"):
        corpus.family("nope")
    with pytest.raises(corpus.UnknownGraphError, match="unknown variant or placement"):
        corpus_build.build_cached(["gpt2_l2"], out_dir="/nonexistent", progress=False)


def test_unbuilt_variant_raises_named_error(tmp_path):
    assert not corpus.is_built(SMALL, tmp_path)
    with pytest.raises(corpus.VariantNotBuiltError) as caught:
        corpus.load(SMALL, "prefusion", tmp_path)
    message = str(caught.value)
    assert SMALL in message and "python -m hlo_go.corpus_build" in message
    assert "--variants --jobs N" in message
    assert isinstance(caught.value, FileNotFoundError)
    with pytest.raises(corpus.VariantNotBuiltError):
        corpus.info(SMALL, tmp_path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("variants")
    result = corpus_build.build_cached([SMALL], out_dir=out, progress=False)
    return out, result


def test_small_variant_builds_end_to_end(built):
    out, result = built
    assert list(result["seconds"]) == [SMALL] and not result["failed"]
    assert corpus.is_built(SMALL, out)
    entry = corpus.info(SMALL, out)
    assert entry["family"] == "rnnlm" and entry["form"] == "scan"
    assert entry["config"]["hidden"] == 256 and entry["config"]["layers"] == 1
    for stage in corpus.STAGES:
        module = corpus.load(SMALL, stage, out)
        assert module.name == f"jit_{SMALL}"
        assert module.instruction_count == entry["stages"][stage]["instructions"]
        graph = build_graph(module)
        assert isinstance(graph, OpGraph)
        assert graph.num_nodes == entry["stages"][stage]["nodes"] > 0
    assert entry["stages"]["prefusion"]["while_loops"] > 0
    assert str(out) not in corpus.text(SMALL, "prefusion", out)


def test_cache_resumes_and_rebuild_is_byte_identical(built, tmp_path):
    out, _ = built
    again = corpus_build.build_cached([SMALL], out_dir=out, progress=False)
    assert again["skipped"] == [SMALL] and not again["seconds"]
    fresh = corpus_build.build_cached([SMALL], out_dir=tmp_path, progress=False)
    assert list(fresh["seconds"]) == [SMALL]
    for stage in corpus.STAGES:
        name = f"data/{SMALL}.{stage}.hlo.gz"
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()
    assert (tmp_path / "index.json").read_bytes() == (out / "index.json").read_bytes()


def test_cached_graph_from_another_config_is_refused(built, tmp_path):
    out, _ = built
    for path in (out / "data").iterdir():
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data" / path.name).write_bytes(path.read_bytes())
    index = json.loads((out / "index.json").read_text())
    index["graphs"][SMALL]["config"]["hidden"] = 512
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(corpus.VariantNotBuiltError, match="another config"):
        corpus.load(SMALL, "prefusion", tmp_path)
    assert not corpus_build.is_cached(SMALL, tmp_path)


def test_command_line_builds_into_a_directory(tmp_path, capsys):
    code = corpus_build.main([OTHER, "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    assert "1 built, 0 already cached, 0 failed" in capsys.readouterr().out
    assert corpus.family(OTHER) == "gpt2"
    assert corpus.load(OTHER, "prefusion", tmp_path).name == f"jit_{OTHER}"
    assert corpus_build.main(["--variants", "--jobs", "0"]) == 2
    assert corpus_build.main(["not_a_graph_v9", "--out", str(tmp_path)]) == 1


def test_hlo_go_corpus_commands(built, capsys, monkeypatch):
    out, _ = built
    monkeypatch.setenv("HLO_GO_CORPUS_VARIANTS", str(out))
    assert corpus.variants_root() == out
    assert main(["corpus", "list", "--split", "variants", "--family", "rnnlm"]) == 0
    printed = capsys.readouterr().out
    assert SMALL in printed and "more registered but not built" in printed
    assert main(["corpus", "show", SMALL]) == 0
    assert "while" in capsys.readouterr().out
    assert main(["corpus", "list", "--split", "variants", "--family", "lstm"]) == 2
    assert main(["corpus", "build", "--variants", "gpt2_l2"]) == 2  # a base name
    assert main(["corpus", "build", SMALL]) == 0  # already cached: nothing to build
    assert "0 graphs in" in capsys.readouterr().out


def test_cache_index_keeps_entries_of_other_specs(built, tmp_path):
    out, _ = built
    index = json.loads((out / "index.json").read_text())
    index["graphs"] = {"zz_from_another_checkout": {"family": "gpt2"}, **index["graphs"]}
    (tmp_path / "index.json").write_text(json.dumps(index))
    merged = corpus_build._merged_index(
        tmp_path, {}, index_only=False, order=[SMALL], keep_unknown=True
    )
    assert list(merged["graphs"]) == [SMALL, "zz_from_another_checkout"]


def _param_names(model, image: int) -> set[str]:
    import jax
    import jax.numpy as jnp

    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, image, image, 3)))
    return set(shapes["params"])


def test_inception_blocks_and_amoebanet_stages_shape_the_network():
    from hlo_corpus.models import amoebanet, inception

    names = _param_names(inception.InceptionV3(0.25, 10, (1, 2, 1)), 149)
    mixed = sorted(n for n in names if n.startswith("mixed_"))
    assert mixed == ["mixed_5b", "mixed_6a", "mixed_6b", "mixed_6c", "mixed_7a", "mixed_7b"]
    full = _param_names(inception.InceptionV3(0.25, 10), 149)
    assert len([n for n in full if n.startswith("mixed_")]) == 3 + 1 + 4 + 1 + 2
    # stages 2, one normal cell each: normal, reduction, normal
    cells = sorted(n for n in _param_names(amoebanet.AmoebaNet(1, 8, 10, 2), 32) if "cell" in n)
    assert cells == ["cell_0", "cell_1", "cell_2"]
    assert (inception.BLOCKS, amoebanet.STAGES) == (INCEPTION_BLOCKS, AMOEBANET_STAGES)
    with pytest.raises(ValueError, match="blocks"):
        inception.make("x", "small", {"blocks": [4, 1, 1]})
    with pytest.raises(ValueError, match="stages"):
        amoebanet.make("x", "n2_f16", {"stages": 0})


def test_every_family_has_variants_of_training_size():
    """Inception-v3 and AmoebaNet have variants with fewer blocks, cells or stages, so a
    fold holding out any family still trains on the other eight."""
    small = {
        "inception_v3": [s for s in specs("variants") if s.config.get("blocks") == [1, 1, 1]],
        "amoebanet": [s for s in specs("variants") if s.config.get("stages") == 1],
    }
    assert all(len(v) >= 4 for v in small.values()), small
