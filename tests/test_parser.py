"""Round trips of real JAX modules and XLA-style test files through parse_hlo / to_text."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import hlo_samples
import numpy as np
import pytest

from hlo_go.examples import example_path
from hlo_go.hlo import OPCODES, HloModule, load_hlo, parse_hlo
from hlo_go.xla.bridge import compile_hlo_text, run_executable, xla_parse
from hlo_go.xla.inputs import random_inputs

XLA_STYLE = sorted((Path(__file__).parent / "data" / "xla_style").glob("*.hlo"))
CASES = [(name, stage) for name in hlo_samples.SAMPLES for stage in hlo_samples.STAGES]


def xla_instruction_count(text: str) -> int:
    module = xla_parse(text)
    return sum(len(list(c.instructions())) for c in module.computations())


def assert_round_trip(module: HloModule, original_text: str) -> str:
    printed = module.to_text()
    assert parse_hlo(printed) == module, "printed text re-parses to a different module"
    xla_count = xla_instruction_count(original_text)
    assert xla_instruction_count(printed) == xla_count
    # XLA expands async sugar (e.g. custom-call-start) into wrapped computations of its own.
    if all(i.opcode in OPCODES for _, i in module.instructions()):
        assert module.instruction_count == xla_count
    return printed


@pytest.mark.parametrize(("name", "stage"), CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_round_trip_jax_modules(name: str, stage: str) -> None:
    text = hlo_samples.hlo_text(name, stage)
    module = parse_hlo(text)
    assert_round_trip(module, text)
    assert module.entry.root.name == module.entry.root_name
    # Every operand and called computation resolves.
    for comp, instr in module.instructions():
        for operand in instr.operands:
            assert operand in comp
        for callee in instr.called_computations:
            assert callee in module.computations


SINGLE_DEVICE = [n for n in hlo_samples.SAMPLES if n not in hlo_samples.MULTI_DEVICE]


@pytest.mark.parametrize("name", SINGLE_DEVICE)
def test_printed_unoptimized_module_computes_the_same(name: str) -> None:
    text = hlo_samples.hlo_text(name, "unoptimized")
    module = parse_hlo(text)
    try:
        args = random_inputs(module, seed=1)
    except ValueError as e:  # e.g. token parameters cannot come from the host
        pytest.skip(str(e))
    executable = compile_hlo_text(text)
    expected = run_executable(executable, args)
    again = run_executable(executable, args)  # finds outputs of stateful `rng` ops
    printed = module.to_text()
    # Identical text compiles to the same program: only a printed text that differs is
    # compiled again.
    got = run_executable(executable if printed == text else compile_hlo_text(printed), args)
    assert len(got) == len(expected)
    for a, b, c in zip(got, expected, again, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        if np.array_equal(b, c, equal_nan=True):  # deterministic output: must match exactly
            np.testing.assert_array_equal(a, b)


_COMPARE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from hlo_go.hlo import parse_hlo
    from hlo_go.xla.bridge import compile_hlo_text, run_executable
    from hlo_go.xla.inputs import random_inputs
    original, printed = json.load(sys.stdin)
    args = random_inputs(parse_hlo(original), seed=2)
    expected = run_executable(compile_hlo_text(original), args)
    print("ORIGINAL-COMPILES", flush=True)
    got = run_executable(compile_hlo_text(printed), args)
    same = len(got) == len(expected) and all(
        np.array_equal(a, b, equal_nan=True) for a, b in zip(got, expected))
    print("SAME" if same else "DIFFERENT")
    """
)


@pytest.mark.parametrize("name", ["cnn_train_step", "lstm_scan_train_step"])
def test_printed_optimized_module_computes_the_same(name: str) -> None:
    """Recompiling XLA's optimized output can abort XLA itself, so this runs in a child process
    and only compares when XLA can compile the original text."""
    text = hlo_samples.hlo_text(name, "optimized")
    printed = parse_hlo(text).to_text()
    proc = subprocess.run(
        [sys.executable, "-c", _COMPARE_SCRIPT],
        input=json.dumps([text, printed]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if "ORIGINAL-COMPILES" not in proc.stdout:
        pytest.skip(f"XLA cannot recompile its own optimized {name}: {proc.stderr[-300:]}")
    assert "SAME" in proc.stdout, proc.stdout + proc.stderr[-2000:]


@pytest.mark.parametrize("path", XLA_STYLE, ids=[p.name for p in XLA_STYLE])
def test_round_trip_xla_style_files(path: Path) -> None:
    text = path.read_text()
    assert_round_trip(load_hlo(path), text)


def test_bundled_example_round_trips() -> None:
    path = example_path()
    assert_round_trip(load_hlo(path), path.read_text())


def test_optimized_text_prints_back_byte_identical() -> None:
    """For XLA's own printing style our printer reproduces the text exactly."""
    text = hlo_samples.hlo_text("transformer_train_step", "optimized")
    assert parse_hlo(text).to_text() == text


def test_structure_of_a_small_module() -> None:
    text = """
    HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3]{0}}

    add {
      x = f32[] parameter(0)
      y = f32[] parameter(1)
      ROOT s = f32[] add(x, y)
    }

    ENTRY main {
      p = f32[2,3]{1,0} parameter(0), metadata={op_name="jit(f)/x" source_line=3}
      zero = f32[] constant(0)
      ROOT r = f32[3]{0} reduce(p, zero), dimensions={0}, to_apply=add, sharding={replicated}
    }
    """
    module = parse_hlo(text)
    assert module.name == "m"
    assert list(module.computations) == ["add", "main"]
    assert module.entry_name == "main"
    assert module.attributes["entry_computation_layout"] == "{(f32[2,3]{1,0})->f32[3]{0}}"
    root = module.entry.root
    assert root.opcode == "reduce"
    assert root.operands == ("p", "zero")
    assert root.attributes == {"dimensions": "{0}", "to_apply": "add"}
    assert root.called_computations == ("add",)
    assert root.sharding == "{replicated}"
    assert root.shape.dims == (3,) and root.shape.layout is not None
    p = module.entry.instruction("p")
    assert p.parameter_number == 0
    assert p.metadata == {"op_name": "jit(f)/x", "source_line": 3}
    assert module.entry.instruction("zero").literal == "0"
    assert [i.name for i in module.entry.parameters] == ["p"]


def test_comments_multiline_instructions_and_operand_shapes() -> None:
    text = """HloModule m // trailing comment
    /* block
       comment */
    ENTRY e {
      p = (f32[2], /*index=1*/s32[]) parameter(0)
      a = f32[2] get-tuple-element((f32[2], s32[]) p),
          index=0 // the first element
      ROOT n = f32[2]
        negate(f32[2]{0} a), metadata={op_name="a//b /* not a comment */"}
    }"""
    module = parse_hlo(text)
    n = module.entry.root
    assert n.operands == ("a",)
    assert n.metadata["op_name"] == "a//b /* not a comment */"
    assert module.entry.instruction("a").attributes == {"index": "0"}
    assert module.entry.instruction("p").shape.to_text() == "(f32[2], s32[])"


def test_module_without_header_and_entry_marker() -> None:
    module = parse_hlo(
        "c {\n ROOT k = f32[] constant(1)\n}\nlast {\n ROOT k = f32[] constant(2)\n}\n"
    )
    assert module.entry_name == "last"
    assert parse_hlo(module.to_text()) == module


def test_stack_frame_tables_are_decoded() -> None:
    module = parse_hlo(hlo_samples.hlo_text("transformer_train_step", "optimized"))
    table = module.stack_frames
    assert table.file_names and table.stack_frames
    with_frames = [i for _, i in module.instructions() if "stack_frame_id" in i.metadata]
    assert with_frames
    frames = table.frames(int(with_frames[0].metadata["stack_frame_id"]))
    assert frames and all(line >= 0 for _, _, line in frames)
    assert any(f.endswith(".py") for f, _, _ in frames)


def test_instructions_are_immutable() -> None:
    module = parse_hlo('ENTRY e {\n ROOT k = f32[] constant(1), metadata={op_name="k"}\n}\n')
    instr = module.entry.root
    with pytest.raises(AttributeError):
        instr.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        instr.metadata["op_name"] = "x"  # type: ignore[index]
    assert instr.replace(name="k2").name == "k2"


def test_modules_and_graphs_pickle() -> None:
    """Parsed modules (FrozenDict attributes included) and their graphs survive pickling,
    so they can be sent to worker processes and cached."""
    import pickle

    from hlo_go.examples import example_path
    from hlo_go.graph import build_graph
    from hlo_go.hlo import FrozenDict, load_hlo

    module = load_hlo(example_path())
    again = pickle.loads(pickle.dumps(module))
    assert again == module
    assert again.to_text() == module.to_text()
    assert isinstance(next(iter(again.entry.instructions)).attributes, FrozenDict)
    graph = build_graph(module)
    assert pickle.loads(pickle.dumps(graph)).num_nodes == graph.num_nodes
    with pytest.raises(TypeError):
        again.entry.instructions[-1].attributes["x"] = 1  # still frozen after a round trip
