"""The HLO verifier: type-invalid modules get a located HloVerifyError, valid ones pass."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from hlo_go.errors import HloGoError
from hlo_go.graph import build_graph
from hlo_go.hlo import (
    HloFileError,
    HloVerifyError,
    load_hlo,
    module_cost,
    parse_hlo,
    verify_module,
)

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad"


def module_text(*lines: str) -> str:
    return "HloModule m\n\nENTRY main {\n" + "\n".join(f"  {line}" for line in lines) + "\n}\n"


# name -> (entry lines, the text the error points at, words in the message)
INVALID: dict[str, tuple[tuple[str, ...], str, list[str]]] = {
    "add of different shapes": (
        (
            "a = f32[2]{0} parameter(0)",
            "b = f32[3]{0} parameter(1)",
            "ROOT c = f32[2]{0} add(a, b)",
        ),
        "c = f32[2]{0} add",
        ["add", "f32[2]", "f32[3]"],
    ),
    "add of different element types": (
        (
            "a = f32[2]{0} parameter(0)",
            "b = s32[2]{0} parameter(1)",
            "ROOT c = f32[2]{0} add(a, b)",
        ),
        "c = f32[2]{0} add",
        ["element types"],
    ),
    "elementwise result of the wrong shape": (
        ("a = f32[2]{0} parameter(0)", "ROOT c = f32[5]{0} negate(a)"),
        "c = f32[5]",
        ["result"],
    ),
    "compare giving f32": (
        ("a = f32[2]{0} parameter(0)", "ROOT c = f32[2]{0} compare(a, a), direction=LT"),
        "c = f32[2]",
        ["pred"],
    ),
    "select on a non-pred": (
        ("a = f32[2]{0} parameter(0)", "ROOT c = f32[2]{0} select(a, a, a)"),
        "c = f32[2]",
        ["pred"],
    ),
    "tuple index out of range": (
        (
            "a = f32[2]{0} parameter(0)",
            "t = (f32[2]{0}, f32[2]{0}) tuple(a, a)",
            "ROOT g = f32[2]{0} get-tuple-element(t), index=5",
        ),
        "index=5",
        ["tuple index 5", "2-element"],
    ),
    "get-tuple-element of an array": (
        ("a = f32[2]{0} parameter(0)", "ROOT g = f32[2]{0} get-tuple-element(a), index=0"),
        "g = f32[2]",
        ["non-tuple"],
    ),
    "tuple shape disagrees": (
        ("a = f32[2]{0} parameter(0)", "ROOT t = (f32[2]{0}, s32[2]{0}) tuple(a, a)"),
        "t = (",
        ["tuple element 1"],
    ),
    "dot contracting dimension out of range": (
        (
            "a = f32[2,3]{1,0} parameter(0)",
            "b = f32[3,4]{1,0} parameter(1)",
            "ROOT d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={7}, rhs_contracting_dims={0}",
        ),
        "lhs_contracting_dims={7}",
        ["7 is not a dimension"],
    ),
    "dot contracting sizes differ": (
        (
            "a = f32[2,3]{1,0} parameter(0)",
            "b = f32[5,4]{1,0} parameter(1)",
            "ROOT d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        ),
        "d = f32[2,4]",
        ["contracting", "3", "5"],
    ),
    "convolution labels of the wrong rank": (
        (
            "a = f32[1,8,8,3]{3,2,1,0} parameter(0)",
            "k = f32[3,3,3,4]{3,2,1,0} parameter(1)",
            "ROOT c = f32[1,8,8,4]{3,2,1,0} convolution(a, k), window={size=3x3 pad=1_1x1_1}, "
            "dim_labels=b01f_01io->b0f",
        ),
        "dim_labels=",
        ["dim_labels", "result"],
    ),
    "reduce dimension out of range": (
        (
            "a = f32[2,3]{1,0} parameter(0)",
            "z = f32[] constant(0)",
            "ROOT r = f32[2]{0} reduce(a, z), dimensions={4}, to_apply=add",
        ),
        "dimensions={4}",
        ["4 is not a dimension"],
    ),
    "broadcast dimension out of range": (
        ("a = f32[3]{0} parameter(0)", "ROOT b = f32[2,3]{1,0} broadcast(a), dimensions={2}"),
        "dimensions={2}",
        ["2 is not a dimension"],
    ),
    "broadcast size mismatch": (
        ("a = f32[3]{0} parameter(0)", "ROOT b = f32[2,3]{1,0} broadcast(a), dimensions={0}"),
        "dimensions={0}",
        ["size 3", "size 2"],
    ),
    "transpose not a permutation": (
        ("a = f32[2,3]{1,0} parameter(0)", "ROOT t = f32[3,2]{1,0} transpose(a), dimensions={0,0}"),
        "dimensions={0,0}",
        ["permutation"],
    ),
    "reshape changes the element count": (
        ("a = f32[2,3]{1,0} parameter(0)", "ROOT r = f32[7]{0} reshape(a)"),
        "r = f32[7]",
        ["element count"],
    ),
    "element count overflows int64": (
        (
            "a = f32[99999999999,99999999999]{1,0} parameter(0)",
            "ROOT n = f32[99999999999,99999999999]{1,0} negate(a)",
        ),
        "a = f32[99999999999",
        ["int64"],
    ),
    "byte size overflows int64": (
        ("ROOT a = f64[4611686018427387904]{0} parameter(0)",),
        "a = f64",
        ["byte size", "int64"],
    ),
    "reduce with an odd operand count": (
        (
            "a = f32[2,3]{1,0} parameter(0)",
            "z = f32[] constant(0)",
            "ROOT r = f32[2]{0} reduce(a, z, z), dimensions={1}, to_apply=add",
        ),
        "r = f32[2]",
        ["even number", "got 3"],
    ),
}

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_module_is_a_located_error(case: str) -> None:
    lines, anchor, words = INVALID[case]
    text = module_text(*lines).replace("ENTRY main", ADD + "ENTRY main")
    module = parse_hlo(text, filename="case.hlo")  # parses: only the verifier can tell
    with pytest.raises(HloVerifyError) as info:
        verify_module(module)
    error = info.value
    assert isinstance(error, ValueError) and isinstance(error, HloGoError)
    at = text.index(anchor)
    assert error.line == text.count("\n", 0, at) + 1, str(error)
    assert error.column == at - (text.rfind("\n", 0, at) + 1) + 1, str(error)
    message = str(error)
    assert message.startswith(f"case.hlo:{error.line}:{error.column}: ")
    assert text.splitlines()[error.line - 1].strip() in message  # the line is quoted
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize(
    "case", ["add of different shapes", "dot contracting dimension out of range"]
)
def test_graphing_and_costing_refuse_invalid_modules(case: str) -> None:
    """Before the verifier: an IndexError in cost analysis, or a silently simulated add."""
    text = module_text(*INVALID[case][0])
    with pytest.raises(HloVerifyError):
        module_cost(parse_hlo(text))
    with pytest.raises(HloVerifyError):
        build_graph(parse_hlo(text))


def test_huge_dimensions_are_named_not_overflow_error() -> None:
    """Before: OverflowError from numpy in graph/build.py."""
    with pytest.raises(HloVerifyError, match="int64"):
        build_graph(load_hlo(BAD / "huge_dims.hlo", verify=False))


def test_load_hlo_verifies_and_locates(tmp_path: Path) -> None:
    with pytest.raises(HloVerifyError) as info:
        load_hlo(BAD / "gte_range.hlo")
    assert info.value.filename == str(BAD / "gte_range.hlo")
    assert (info.value.line, info.value.column) == (6, 44)
    assert load_hlo(BAD / "gte_range.hlo", verify=False).entry.root.name == "g"


def test_error_without_source_names_the_instruction() -> None:
    module = parse_hlo(module_text(*INVALID["add of different shapes"][0]))
    rebuilt = module.__class__(module.name, module.computations, module.entry_name)
    with pytest.raises(HloVerifyError) as info:
        verify_module(rebuilt)
    assert info.value.line is None
    assert "'main'" in str(info.value) and "'c'" in str(info.value)


@pytest.mark.parametrize("name", ["not_gzip.hlo.gz", "truncated.hlo.gz"])
def test_bad_gzip_is_a_named_error(name: str) -> None:
    """Before: gzip.BadGzipFile / EOFError tracebacks."""
    with pytest.raises(HloFileError) as info:
        load_hlo(BAD / name)
    assert str(BAD / name) in str(info.value)
    assert "gzip" in str(info.value)


def test_corrupt_gzip_data_is_a_named_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(b"HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"))
    data[12:20] = b"\xff" * 8
    path = tmp_path / "corrupt.hlo.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(HloFileError, match=r"corrupt\.hlo\.gz"):
        load_hlo(path)


def all_hlo_files() -> list[Path]:
    files = [*ROOT.glob("hlo_corpus/**/*.hlo*"), *ROOT.glob("tests/data/**/*.hlo*")]
    files += ROOT.glob("hlo_go/examples/*.hlo")
    return sorted(f for f in files if BAD not in f.parents)


@pytest.mark.slow
def test_everything_xla_printed_verifies() -> None:
    """The corpus (unoptimized and pre-fusion stages) and the XLA-style test files are
    what XLA prints: every one must pass."""
    files = all_hlo_files()
    assert len(files) > 50
    for path in files:
        verify_module(load_hlo(path, verify=False))


def test_verification_is_done_once_per_module() -> None:
    module = load_hlo(ROOT / "hlo_go" / "examples" / "cnn_train_step.hlo")
    assert verify_module(module) is module


def test_xla_verifies_runs_xla_s_verifier_not_only_its_parser() -> None:
    """Before: roundtrip said "XLA accepts" after XLA's parser alone, which takes
    ``add(f32[2], f32[3])``."""
    from hlo_go.xla import xla_accepts, xla_verifies

    bad = (BAD / "add_mismatch.hlo").read_text()
    assert xla_accepts(bad)[0]  # the parser alone takes it
    accepted, message = xla_verifies(bad)
    assert accepted is False and "verifier" in message and "shape" in message
    accepted, message = xla_verifies((BAD / "gte_range.hlo").read_text())  # XLA crashes
    assert accepted is False and message
    good = module_text("a = f32[2]{0} parameter(0)", "ROOT c = f32[2]{0} add(a, a)")
    assert xla_verifies(good) == (True, "")
