"""The decoders of attribute text in ``hlo_go.hlo.attributes``."""

from __future__ import annotations

import json

import pytest

from hlo_go.hlo import attributes as attrs
from hlo_go.hlo import parse_hlo
from hlo_go.hlo.attributes import ConvDims, WindowDim


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{0,1}", (0, 1)),
        ("{1, 0, 2}", (1, 0, 2)),
        ("{3}", (3,)),
        ("{}", ()),
        (" { } ", ()),
        ("{-1,2}", (-1, 2)),
        (None, ()),
    ],
)
def test_int_list(text: str | None, expected: tuple[int, ...]) -> None:
    assert attrs.int_list(text) == expected


def test_int_attr() -> None:
    assert attrs.int_attr("2", 1) == 2
    assert attrs.int_attr(None, 1) == 1


def test_window_sizes_and_strides() -> None:
    assert attrs.window("{size=3x3 stride=2x1}") == (
        WindowDim(size=3, stride=2),
        WindowDim(size=3, stride=1),
    )


def test_window_pads_including_negative() -> None:
    dims = attrs.window("{size=1x19 pad=0_0x9_9}")
    assert [(d.pad_low, d.pad_high) for d in dims] == [(0, 0), (9, 9)]
    dims = attrs.window("{size=2 pad=-1_2}")
    assert (dims[0].pad_low, dims[0].pad_high) == (-1, 2)


def test_window_dilations_and_reversal() -> None:
    dims = attrs.window("{size=3x2 pad=2_2x1_0 lhs_dilate=2x1 rhs_dilate=1x3 rhs_reversal=1x0}")
    assert dims == (
        WindowDim(3, 1, 2, 2, lhs_dilate=2, rhs_dilate=1, reversal=True),
        WindowDim(2, 1, 1, 0, lhs_dilate=1, rhs_dilate=3, reversal=False),
    )


def test_window_defaults_and_absent() -> None:
    assert attrs.window("{size=5}") == (WindowDim(size=5),)
    assert WindowDim() == WindowDim(1, 1, 0, 0, 1, 1, False)
    assert attrs.window(None) == ()
    assert attrs.window("{}") == ()


def test_window_from_parsed_instruction() -> None:
    module = parse_hlo(
        "HloModule m\n\n"
        "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
        "ENTRY e {\n  a = f32[1,10,10,1] parameter(0)\n  z = f32[] constant(0)\n"
        "  ROOT r = f32[1,5,5,1] reduce-window(a, z), "
        "window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=add\n}\n"
    )
    dims = attrs.window(module.entry.root.attributes["window"])
    assert [d.size for d in dims] == [1, 3, 3, 1]
    assert [d.stride for d in dims] == [1, 2, 2, 1]
    assert [(d.pad_low, d.pad_high) for d in dims] == [(0, 0), (1, 1), (1, 1), (0, 0)]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ("b01f_01io->b01f", ConvDims(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))),
        ("bf01_oi01->bf01", ConvDims(0, 1, (2, 3), 1, 0, (2, 3), 0, 1, (2, 3))),
        # Spatial dimensions are listed by their digit, not by position.
        ("f10b_io10->b10f", ConvDims(3, 0, (2, 1), 0, 1, (3, 2), 0, 3, (2, 1))),
        ("b012f_012io->b012f", ConvDims(0, 4, (1, 2, 3), 3, 4, (0, 1, 2), 0, 4, (1, 2, 3))),
        ("bf0_oi0->bf0", ConvDims(0, 1, (2,), 1, 0, (2,), 0, 1, (2,))),
        ("bf_io->bf", ConvDims(0, 1, (), 0, 1, (), 0, 1, ())),
    ],
)
def test_dim_labels(labels: str, expected: ConvDims) -> None:
    assert attrs.dim_labels(labels) == expected


def test_dim_labels_rejects_bad_text() -> None:
    with pytest.raises(ValueError, match="dim_labels"):
        attrs.dim_labels("b01f->b01f")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{[0:2], [1:9:2]}", ((0, 2, 1), (1, 9, 2))),
        ("{[0:4]}", ((0, 4, 1),)),
        ("{[3:8:1], [0:16:4], [0:1]}", ((3, 8, 1), (0, 16, 4), (0, 1, 1))),
        ("{}", ()),
    ],
)
def test_slice_ranges(text: str, expected: tuple[tuple[int, int, int], ...]) -> None:
    assert attrs.slice_ranges(text) == expected


OBJECT_CONFIG = '{"known_trip_count":{"n":"10"},"known_induction_variable":{"tuple_index":"0"}}'


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (OBJECT_CONFIG, 10),
        (json.dumps(OBJECT_CONFIG), 10),  # the quoted-string form
        ('{"known_trip_count":{"n":7}}', 7),
        ('{"dynamic_variables":[]}', None),
        ('{"known_trip_count":{}}', None),
        ('{"known_trip_count": not json', None),
        ('"{\\"known_trip_count\\": broken"', None),
        ("", None),
        (None, None),
    ],
)
def test_known_trip_count(config: str | None, expected: int | None) -> None:
    assert attrs.known_trip_count(config) == expected


def test_known_trip_count_from_parsed_while_loops() -> None:
    quoted = json.dumps('{"known_trip_count":{"n":"7"}}')
    text = f"""HloModule m

cond {{
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}}

body {{
  p = (s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[]) tuple(i2)
}}

ENTRY e {{
  i = s32[] parameter(0)
  t = (s32[]) tuple(i)
  w1 = (s32[]) while(t), condition=cond, body=body, backend_config={OBJECT_CONFIG}
  w2 = (s32[]) while(w1), condition=cond, body=body, backend_config={quoted}
  ROOT w3 = (s32[]) while(w2), condition=cond, body=body
}}
"""
    entry = parse_hlo(text).entry
    counts = [
        attrs.known_trip_count(entry.instruction(n).backend_config) for n in ("w1", "w2", "w3")
    ]
    assert counts == [10, 7, None]


GEMM_CONFIG = (
    '{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],'
    '"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":["0"],'
    '"rhs_batch_dimensions":["0"]}}}'
)


@pytest.mark.parametrize(
    ("target", "config", "expected"),
    [
        ("__cublas$gemm", GEMM_CONFIG, ((2,), (1,), (0,), (0,))),
        ("__cublas$lt$matmul", json.dumps(GEMM_CONFIG), ((2,), (1,), (0,), (0,))),  # quoted
        ("__cudnn$convForward", GEMM_CONFIG, None),  # not a GEMM library call
        ("__cublas$gemm", '{"gemm_backend_config":{}}', None),
        ("__cublas$gemm", '{"gemm_backend_config": broken', None),
        ("__cublas$gemm", None, None),
    ],
)
def test_dot_dims_of_gemm_calls(target: str, config: str | None, expected: tuple | None) -> None:
    from hlo_go.hlo import HloInstruction, parse_shape

    instr = HloInstruction(
        "g",
        "custom-call",
        parse_shape("f32[4,8,16]"),
        ("a", "b"),
        attributes={"custom_call_target": f'"{target}"'},
        backend_config=config,
    )
    got = attrs.dot_dims(instr)
    assert (tuple(got) if got is not None else None) == expected


def test_dot_dims_of_a_dot() -> None:
    module = parse_hlo(
        """HloModule m
ENTRY e {
  a = f32[4,8,32] parameter(0)
  b = f32[4,32,16] parameter(1)
  ROOT d = f32[4,8,16] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    )
    dot = module.entry.root
    assert tuple(attrs.dot_dims(dot)) == ((2,), (1,), (0,), (0,))
    assert attrs.dot_dims(module.entry.instruction("a")) is None
