"""Bad HLO text: located HloParseErrors, never another exception, never a hang."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from datetime import timedelta

import hlo_samples
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo_go.hlo import HloModule, HloParseError, parse_hlo

GOOD = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[3]{0} reduce(p, zero), dimensions={0}, to_apply=add, metadata={op_name="r"}
}
"""


def mutate(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# name -> (text, anchor, words): the error must point at the first occurrence of
# ``anchor`` in the text (None: anywhere) and its message contain every word.
BAD_CASES: dict[str, tuple[str, str | None, list[str]]] = {
    "undefined operand": (mutate("add(x, y)", "add(x, q)"), "q)", ["'q'", "not defined"]),
    "unknown opcode": (mutate("add(x, y)", "addd(x, y)"), "addd", ["unknown opcode", "'addd'"]),
    "unknown element type": (
        mutate("f32[2,3]{1,0}", "f33[2,3]{1,0}"),
        "f33",
        ["element type", "'f33'"],
    ),
    "layout rank": (mutate("f32[2,3]{1,0}", "f32[2,3]{0}"), "0}", ["layout"]),
    "bad dimension": (mutate("f32[2,3]{1,0}", "f32[2,x]{1,0}"), "x]", ["dimension"]),
    "wrong arity": (mutate("add(x, y)", "add(x)"), "add(x)", ["expects 2 operands"]),
    "duplicate instruction": (
        mutate("  y = f32[] parameter(1)", "  x = f32[] parameter(1)"),
        "x = f32[] parameter(1)",
        ["'x'", "twice"],
    ),
    "two roots": (mutate("  y = f32[]", "  ROOT y = f32[]"), "ROOT s", ["two ROOT"]),
    "unknown callee": (mutate("to_apply=add", "to_apply=mul"), "mul", ["'mul'", "not defined"]),
    "parameter out of range": (
        mutate("parameter(1)", "parameter(2)"),
        "y = ",
        ["parameter number 2"],
    ),
    "unterminated string": (mutate('op_name="r"}', 'op_name="r}'), '"r}', ["unterminated"]),
    "unbalanced brace": (mutate("dimensions={0}", "dimensions={0"), None, []),
    "missing closing brace": (GOOD.rstrip().rstrip("}"), None, ["closing"]),
    "garbage after computation": (GOOD + "\n)junk\n", ")junk", []),
    "empty computation": (
        mutate("ENTRY main {\n", "empty {\n}\nENTRY main {\n"),
        None,
        ["no instructions"],
    ),
    "two entries": (mutate("\nadd {", "\nENTRY add {"), "ENTRY main", ["only one ENTRY"]),
    "malformed constant": (mutate("constant(0)", "constant(zero)"), "zero)", ["constant"]),
    "malformed metadata": (mutate('op_name="r"', 'op_name="r" %%'), None, ["metadata"]),
    "missing module name": ("HloModule\n", None, ["module name"]),
    "empty text": ("", None, ["expected a computation"]),
    "unterminated comment": (mutate("ENTRY main", "/* ENTRY main"), None, []),
    "deeply nested tuple": (
        "ENTRY e {\n p = " + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0)\n}\n",
        None,
        ["nested"],
    ),
    "dimension overflow": (
        mutate("f32[2,3]{1,0}", "f32[2,99999999999999999999]{1,0}"),
        None,
        ["dimension"],
    ),
    "nul byte": (mutate("add(x, y)", "add(x,\x00 y)"), "\x00", ["NUL"]),
}


def location(text: str, anchor: str) -> tuple[int, int]:
    offset = text.index(anchor)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_raises_located_error(case: str) -> None:
    text, anchor, words = BAD_CASES[case]
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, filename="bad.hlo")
    error = info.value
    assert isinstance(error, ValueError)
    if anchor is not None:
        assert (error.line, error.column) == location(text, anchor), str(error)
    message = str(error)
    assert message.startswith(f"bad.hlo:{error.line}:{error.column}: ")
    for word in words:
        assert word in message
    # The message quotes the offending source line with a caret under the column.
    lines = message.split("\n")
    assert len(lines) == 3 and lines[2].strip() == "^"


def test_error_excerpt_of_a_long_line_is_windowed() -> None:
    long_name = "a" * 400
    text = f"ENTRY e {{\n  {long_name} = f32[] constant(1)\n  ROOT b = f32[] negate(zz)\n}}\n"
    with pytest.raises(HloParseError) as info:
        parse_hlo(text)
    assert info.value.line == 3


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_hlo(b"HloModule m")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Fuzzing: mutated real modules.

SEED_TEXTS = [
    GOOD,
    hlo_samples.hlo_text("cond_switch", "optimized"),
    hlo_samples.hlo_text("lstm_scan_train_step", "unoptimized"),
]
SPECIALS = [
    *list("(){}[],=%\"'/*:<>-. \n"),
    "ROOT",
    "ENTRY",
    "f32[",
    "{...}",
    "/*",
    "*/",
    "//",
    "\\",
]


def random_mutation(rng: random.Random) -> str:
    """A seed module with one to three random edits (deletions, insertions of syntax
    characters, duplicated spans, truncation)."""
    text = rng.choice(SEED_TEXTS)
    for _ in range(rng.randint(1, 3)):
        n = len(text)
        i = rng.randint(0, n)
        kind = rng.choice(["delete", "insert", "replace", "duplicate", "truncate"])
        if kind == "delete":
            text = text[:i] + text[min(n, i + rng.randint(1, 12)) :]
        elif kind == "insert":
            text = text[:i] + rng.choice(SPECIALS) + text[i:]
        elif kind == "replace":
            text = text[:i] + rng.choice(SPECIALS) + text[i + 1 :]
        elif kind == "duplicate":
            j = min(n, i + rng.randint(1, 60))
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i]
    return text


def gentle_mutation(rng: random.Random) -> str:
    """Edits that often keep a module valid: whitespace, comments, '%' and line breaks at
    commas, a dropped metadata attribute, a stray character."""
    text = rng.choice(SEED_TEXTS)
    for _ in range(rng.randint(1, 4)):
        commas = [i for i, c in enumerate(text) if c == ","]
        kind = rng.choice(["space", "comment", "newline", "percent", "metadata", "stray"])
        if kind in ("space", "comment", "newline") and commas:
            i = rng.choice(commas) + 1
            insert = {"space": "  ", "comment": "/* c */", "newline": "\n    "}[kind]
            text = text[:i] + insert + text[i:]
        elif kind == "percent" and "%" in text:
            i = rng.choice([i for i, c in enumerate(text) if c == "%"])
            text = text[:i] + text[i + 1 :]
        elif kind == "metadata" and ", metadata={" in text:
            i = text.index(", metadata={")
            text = text[:i] + text[text.index("}", i) + 1 :]
        else:
            i = rng.randint(0, len(text))
            text = text[:i] + rng.choice(SPECIALS) + text[i:]
    return text


@settings(
    max_examples=500,
    deadline=timedelta(seconds=10),  # a regex blow-up, not slowness, is what this catches
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.randoms(use_true_random=False).map(random_mutation))
def test_fuzz_only_hlo_parse_errors(text: str) -> None:
    try:
        module = parse_hlo(text)
    except HloParseError as e:
        assert e.line >= 1 and e.column >= 1
        return
    assert isinstance(module, HloModule)
    assert parse_hlo(module.to_text()) == module


_XLA_BATCH = textwrap.dedent(
    """
    import json, sys
    from jaxlib import _hlo
    for text in json.load(sys.stdin):
        try:
            _hlo.hlo_module_from_text(text)
            print("ACCEPT", flush=True)
        except Exception:
            print("REJECT", flush=True)
    """
)


def _xla_verdicts(texts: list[str]) -> list[str | None]:
    """XLA's parser's verdict per text, in child processes (it can abort); None if it crashed."""
    verdicts: list[str | None] = []
    while len(verdicts) < len(texts):
        rest = texts[len(verdicts) :]
        proc = subprocess.run(
            [sys.executable, "-c", _XLA_BATCH],
            input=json.dumps(rest),
            capture_output=True,
            text=True,
            check=False,
        )
        got = proc.stdout.split()
        verdicts.extend(got)
        if len(got) < len(rest):
            verdicts.append(None)  # this text crashed XLA's parser; go on with the next
    return verdicts


def test_fuzz_agrees_with_xla_when_xla_accepts() -> None:
    """Whatever XLA's own parser accepts, we accept too, and our printed text XLA accepts."""
    rng = random.Random(0)
    texts = [gentle_mutation(rng) for _ in range(60)] + [random_mutation(rng) for _ in range(20)]
    verdicts = _xla_verdicts(texts)
    accepted = [t for t, v in zip(texts, verdicts, strict=True) if v == "ACCEPT"]
    assert accepted, "no mutated text was accepted by XLA; the check would be vacuous"
    printed = [parse_hlo(t).to_text() for t in accepted]
    assert _xla_verdicts(printed) == ["ACCEPT"] * len(printed)
