"""hlo-go's per-instruction cost model against XLA's own HloCostAnalysis.

Three kinds of checks:

* A table of small hand-written modules, one or a few instructions each, with
  the expected flops / transcendentals / bytes accessed worked out by hand from
  the rules in ``hlo_go.hlo.cost``. hlo-go must give the expected numbers, and
  so must XLA (``hlo_go.xla.xla_cost_analysis``), so that a change on either
  side fails a test.
* custom-call, where hlo-go deliberately differs from XLA (0 flops and the
  default bytes, where XLA says -1 and -1).
* Real JAX modules (``tests/hlo_samples.py`` plus an MLP built here), before and
  after XLA's optimizations, and the bundled example modules: module totals
  within 5% of XLA (equal to float32 rounding on the jaxlib the rules were
  verified on), custom-calls accounted for.
"""

from __future__ import annotations

import functools
import gc
import math
import textwrap
import weakref
from typing import NamedTuple

import hlo_samples
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import pytest

from hlo_go import examples
from hlo_go.hlo import Cost, HloModule, instruction_cost, module_cost, parse_hlo
from hlo_go.hlo.cost import computation_cost
from hlo_go.xla.bridge import xla_cost_analysis

E = 8 * 16  # elements of f32[8,16]
B = 4 * E  # bytes of f32[8,16]
RTOL = 1e-6  # XLA sums in float32
VERIFIED_JAXLIB = "0.10.2"  # the jaxlib whose conventions cost.py reproduces exactly


def hlo(entry: str, *computations: str) -> str:
    """A module text: the called computations, then an ENTRY computation with ``entry``'s lines."""
    parts = ["HloModule m", ""]
    parts += [textwrap.dedent(c).strip() + "\n" for c in computations]
    body = textwrap.indent(textwrap.dedent(entry).strip(), "  ")
    parts += ["ENTRY e {", body, "}", ""]
    return "\n".join(parts)


def xla_cost(text: str) -> tuple[float, float, float]:
    props = xla_cost_analysis(text)
    return (
        props.get("flops", 0.0),
        props.get("transcendentals", 0.0),
        props.get("bytes accessed", 0.0),
    )


def hlo_go_cost(text: str) -> tuple[float, float, float]:
    cost = module_cost(parse_hlo(text))
    return (cost.flops, cost.transcendentals, cost.bytes_accessed)


class Case(NamedTuple):
    """A hand-written module and its hand-computed totals."""

    name: str
    text: str
    flops: float = 0
    transcendentals: float = 0
    bytes: float = 0


# -- called computations --------------------------------------------------------

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}"""
GE = """
ge {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=GE
}"""
LESS = """
less {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=LT
}"""
LESS_PAIR = """
less_pair {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(x, y), direction=LT
}"""
# Variadic reducer: 2 flops (add, max) + 1 transcendental per call.
ADD_EXP_MAX = """
add_exp_max {
  x = f32[] parameter(0)
  i = s32[] parameter(1)
  y = f32[] parameter(2)
  j = s32[] parameter(3)
  s = f32[] add(x, y)
  e = f32[] exponential(s)
  k = s32[] maximum(i, j)
  ROOT t = (f32[], s32[]) tuple(e, k)
}"""
ADD_PAIR = """
add_pair {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  x2 = f32[] parameter(2)
  y2 = f32[] parameter(3)
  t1 = f32[] add(x, x2)
  t2 = f32[] add(y, y2)
  ROOT t = (f32[], f32[]) tuple(t1, t2)
}"""
# while loop over (i, x): condition 1 flop + 9 bytes, body 1 flop + 128 exp.
LOOP = """
cond {
  p = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[8,16]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,16] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  e = f32[8,16] exponential(x)
  ROOT t = (s32[], f32[8,16]) tuple(i2, e)
}"""
LOOP_COND_BYTES = 4 + 4 + 1  # compare(s32, s32) -> pred
LOOP_BODY_BYTES = (4 + 4 + 4) + 2 * B + 16  # add, exponential, 2-tuple
# Branches: b0 = one exp (2*B bytes); b1 = add + multiply (6*B bytes).
BRANCHES = """
b0 {
  p = f32[8,16] parameter(0)
  ROOT e = f32[8,16] exponential(p)
}

b1 {
  p = f32[8,16] parameter(0)
  a = f32[8,16] add(p, p)
  ROOT m = f32[8,16] multiply(a, a)
}"""


def fused(body: str) -> str:
    return "fc {\n" + textwrap.indent(textwrap.dedent(body).strip(), "  ") + "\n}"


def fusion_case(
    name: str,
    params: list[str],
    out: str,
    body: str,
    kind: str = "kLoop",
    *extra: str,
    **exp: float,
) -> Case:
    """A module whose entry is one fusion of ``params`` calling the fused ``body``."""
    lines = [f"a{i} = {shape} parameter({i})" for i, shape in enumerate(params)]
    args = ", ".join(f"a{i}" for i in range(len(params)))
    lines.append(f"ROOT f = {out} fusion({args}), kind={kind}, calls=fc")
    return Case(name, hlo("\n".join(lines), *extra, fused(body)), **exp)


def conv_valid(
    size: int, kernel: int, out: int, stride: int = 1, pad: int = 0, lhs: int = 1, rhs: int = 1
) -> int:
    """(kernel tap, output position) pairs of one spatial dimension that hit a real input."""
    count = 0
    for k in range(kernel):
        for o in range(out):
            u = o * stride - pad + k * rhs
            if u % lhs == 0 and 0 <= u // lhs < size:
                count += 1
    return count


def _cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append

    # ---- elementwise
    transcendental = [
        "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt",
        "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan", "erf",
    ]  # fmt: skip
    for op in transcendental:
        text = hlo(f"a = f32[8,16] parameter(0)\nROOT c = f32[8,16] {op}(a)")
        add(Case(f"unary-{op}", text, transcendentals=E, bytes=2 * B))
    for op in [
        "abs", "negate", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "sign",
        "real", "imag", "reduce-precision",
    ]:  # fmt: skip
        attr = ", exponent_bits=5, mantissa_bits=10" if op == "reduce-precision" else ""
        text = hlo(f"a = f32[8,16] parameter(0)\nROOT c = f32[8,16] {op}(a){attr}")
        add(Case(f"unary-{op}", text, flops=E, bytes=2 * B))
    for op in ["not", "popcnt", "count-leading-zeros"]:
        text = hlo(f"a = s32[8,16] parameter(0)\nROOT c = s32[8,16] {op}(a)")
        add(Case(f"unary-{op}", text, flops=E, bytes=2 * B))
    text = hlo("a = f32[8,16] parameter(0)\nROOT c = pred[8,16] is-finite(a)")
    add(Case("is-finite", text, flops=E, bytes=B + E))
    for op in ["power", "atan2"]:
        text = hlo(
            f"a = f32[8,16] parameter(0)\nb = f32[8,16] parameter(1)\nROOT c = f32[8,16] {op}(a, b)"
        )
        add(Case(f"binary-{op}", text, transcendentals=E, bytes=3 * B))
    for op in ["add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder"]:
        text = hlo(
            f"a = f32[8,16] parameter(0)\nb = f32[8,16] parameter(1)\nROOT c = f32[8,16] {op}(a, b)"
        )
        add(Case(f"binary-{op}", text, flops=E, bytes=3 * B))
    for op in ["and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic"]:
        text = hlo(
            f"a = s32[8,16] parameter(0)\nb = s32[8,16] parameter(1)\nROOT c = s32[8,16] {op}(a, b)"
        )
        add(Case(f"binary-{op}", text, flops=E, bytes=3 * B))
    add(Case("compare", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT c = pred[8,16] compare(a, b), direction=LT
    """), flops=E, bytes=2 * B + E))  # fmt: skip
    add(Case("select", hlo("""
        p = pred[8,16] parameter(0)
        a = f32[8,16] parameter(1)
        b = f32[8,16] parameter(2)
        ROOT c = f32[8,16] select(p, a, b)
    """), flops=E, bytes=E + 3 * B))  # fmt: skip
    add(Case("clamp-scalar-bounds", hlo("""
        lo = f32[] parameter(0)
        a = f32[8,16] parameter(1)
        hi = f32[] parameter(2)
        ROOT c = f32[8,16] clamp(lo, a, hi)
    """), flops=E, bytes=4 + B + 4 + B))  # fmt: skip
    add(Case("convert-f32-bf16", hlo("a = f32[8,16] parameter(0)\nROOT c = bf16[8,16] convert(a)"),
             flops=E, bytes=B + 2 * E))  # fmt: skip
    add(Case("bitcast-convert", hlo("a = f32[8,16] parameter(0)\nROOT c = s32[8,16] bitcast-convert(a)"),
             flops=E, bytes=2 * B))  # fmt: skip
    add(Case("bitcast-convert-widen", hlo("a = f32[8] parameter(0)\nROOT c = u8[8,4] bitcast-convert(a)"),
             flops=32, bytes=64))  # fmt: skip
    add(Case("bitcast-convert-narrow", hlo("a = u8[8,4] parameter(0)\nROOT c = f32[8] bitcast-convert(a)"),
             flops=8, bytes=64))  # fmt: skip
    add(Case("c64-multiply-one-flop-per-element", hlo("""
        a = c64[8,16] parameter(0)
        b = c64[8,16] parameter(1)
        ROOT c = c64[8,16] multiply(a, b)
    """), flops=E, bytes=3 * 8 * E))  # fmt: skip
    add(Case("complex", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT c = c64[8,16] complex(a, b)
    """), flops=E, bytes=2 * B + 8 * E))  # fmt: skip
    add(Case("stochastic-convert", hlo("""
        a = f32[8,16] parameter(0)
        r = u32[8,16] parameter(1)
        ROOT d = bf16[8,16] stochastic-convert(a, r)
    """), flops=E, bytes=2 * B + 2 * E))  # fmt: skip

    # ---- shape sizes
    dtype_bytes = {
        "pred": 1, "s4": 1, "u4": 1, "s8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2, "f16": 2,
        "s16": 2, "f32": 4, "u32": 4, "f64": 8, "s64": 8, "c64": 8, "c128": 16,
    }  # fmt: skip
    for dtype, size in dtype_bytes.items():
        op = "not" if dtype == "pred" else "negate"
        text = hlo(f"a = {dtype}[10] parameter(0)\nROOT c = {dtype}[10] {op}(a)")
        add(Case(f"dtype-{dtype}", text, flops=10, bytes=2 * 10 * size))
    add(Case("packed-s4-layout", hlo("""
        a = s4[8,16]{1,0:E(4)} parameter(0)
        ROOT c = s4[8,16]{1,0:E(4)} negate(a)
    """), flops=E, bytes=E))  # fmt: skip
    add(Case("tiling-ignored", hlo("""
        a = f32[3,5]{1,0:T(8,128)} parameter(0)
        ROOT c = f32[3,5]{1,0:T(8,128)} negate(a)
    """), flops=15, bytes=2 * 60))  # fmt: skip
    add(Case("bounded-dynamic-4-bytes-per-dim", hlo("""
        a = f32[<=8,16] parameter(0)
        ROOT c = f32[<=8,16] negate(a)
    """), flops=E, bytes=2 * (B + 8)))  # fmt: skip
    add(Case("zero-elements", hlo("""
        a = f32[0,16] parameter(0)
        b = f32[0,16] parameter(1)
        ROOT c = f32[0,16] add(a, b)
    """)))  # fmt: skip

    # ---- data movement and free instructions
    add(Case("parameter", hlo("ROOT a = f32[8,16] parameter(0)")))
    add(Case("constant", hlo("ROOT z = f32[8,16] constant({...})")))
    add(Case("iota-writes-only", hlo("ROOT z = f32[8,16] iota(), iota_dimension=1"), bytes=B))
    add(Case("broadcast", hlo("a = f32[16] parameter(0)\nROOT b = f32[8,16] broadcast(a), dimensions={1}"),
             bytes=64 + B))  # fmt: skip
    add(Case("reshape-not-free", hlo("a = f32[8,16] parameter(0)\nROOT b = f32[128] reshape(a)"),
             bytes=2 * B))  # fmt: skip
    add(Case("bitcast-free", hlo("a = f32[8,16] parameter(0)\nROOT b = f32[128] bitcast(a)")))
    add(Case("transpose", hlo("""
        a = f32[8,16] parameter(0)
        ROOT b = f32[16,8] transpose(a), dimensions={1,0}
    """), bytes=2 * B))  # fmt: skip
    add(Case("transpose-layout-bitcast", hlo("""
        a = f32[8,16]{1,0} parameter(0)
        ROOT b = f32[16,8]{0,1} transpose(a), dimensions={1,0}
    """)))  # fmt: skip
    add(Case("transpose-3d-layout-bitcast", hlo("""
        a = f32[2,3,4]{2,1,0} parameter(0)
        ROOT t = f32[4,2,3]{0,2,1} transpose(a), dimensions={2,0,1}
    """)))  # fmt: skip
    add(Case("transpose-unit-dim-not-special", hlo("""
        a = f32[1,16] parameter(0)
        ROOT b = f32[16,1] transpose(a), dimensions={1,0}
    """), bytes=128))  # fmt: skip
    add(Case("copy", hlo("a = f32[8,16] parameter(0)\nROOT b = f32[8,16] copy(a)"), bytes=2 * B))
    add(Case("reverse", hlo("a = f32[8,16] parameter(0)\nROOT c = f32[8,16] reverse(a), dimensions={1}"),
             bytes=2 * B))  # fmt: skip
    add(Case("slice", hlo("""
        a = f32[8,16] parameter(0)
        ROOT b = f32[4,8] slice(a), slice={[0:4], [0:16:2]}
    """), bytes=2 * 128))  # fmt: skip
    add(Case("dynamic-slice-first-index-only", hlo("""
        a = f32[8,16] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT b = f32[4,8] dynamic-slice(a, i, j), dynamic_slice_sizes={4,8}
    """), bytes=2 * 128 + 4))  # fmt: skip
    add(Case("dynamic-update-slice", hlo("""
        a = f32[8,16] parameter(0)
        u = f32[4,8] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        ROOT b = f32[8,16] dynamic-update-slice(a, u, i, j)
    """), bytes=2 * 128 + 4))  # fmt: skip
    add(Case("concatenate", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,4] parameter(1)
        ROOT c = f32[8,20] concatenate(a, b), dimensions={1}
    """), bytes=B + 128 + 640))  # fmt: skip
    add(Case("pad", hlo("""
        a = f32[8,16] parameter(0)
        z = f32[] parameter(1)
        ROOT c = f32[10,20] pad(a, z), padding=1_1x2_2
    """), bytes=B + 4 + 800))  # fmt: skip
    add(Case("gather", hlo("""
        a = f32[100,16] parameter(0)
        i = s32[8,1] parameter(1)
        ROOT g = f32[8,16] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
    """), bytes=2 * B + 32))  # fmt: skip
    add(Case("scatter", hlo("""
        a = f32[100,16] parameter(0)
        i = s32[8,1] parameter(1)
        u = f32[8,16] parameter(2)
        ROOT s = f32[100,16] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
    """, ADD), flops=E, bytes=3 * B + 32))  # fmt: skip
    add(Case("tuple-pointer-table", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[4] parameter(1)
        ROOT t = (f32[8,16], f32[4], f32[4]) tuple(a, b, b)
    """), bytes=24))  # fmt: skip
    add(Case("get-tuple-element", hlo("""
        a = (f32[8,16], f32[4]) parameter(0)
        ROOT c = f32[8,16] get-tuple-element(a), index=0
    """)))  # fmt: skip
    add(Case("after-all", hlo("a = token[] after-all()\nROOT b = token[] after-all(a)")))
    add(Case("add-dependency", hlo("""
        x = f32[8,16] parameter(0)
        t = token[] after-all()
        ROOT r = f32[8,16] add-dependency(x, t)
    """)))  # fmt: skip
    add(Case("opt-barrier-tuple-operand-vs-leaf-output", hlo("""
        p = ((f32[8,16], f32[4]), f32[2], s32[3]) parameter(0)
        ROOT o = ((f32[8,16], f32[4]), f32[2], s32[3]) opt-barrier(p)
    """), bytes=24 + (B + 16 + 8 + 12)))  # fmt: skip
    add(Case("copy-of-tuple", hlo("""
        p = (f32[8,16], f32[4]) parameter(0)
        ROOT o = (f32[8,16], f32[4]) copy(p)
    """), bytes=16 + B + 16))  # fmt: skip
    add(Case("dead-code-counted", hlo("""
        a = f32[8,16] parameter(0)
        dead = f32[8,16] exponential(a)
        ROOT c = f32[8,16] negate(a)
    """), flops=E, transcendentals=E, bytes=4 * B))  # fmt: skip
    add(Case("uncalled-computation-ignored", hlo("""
        a = f32[8,16] parameter(0)
        ROOT t = f32[8,16] negate(a)
    """, "unused {\n  p = f32[8,16] parameter(0)\n  ROOT e = f32[8,16] exponential(p)\n}"),
        flops=E, bytes=2 * B))  # fmt: skip

    # ---- dot and convolution
    add(Case("dot", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[16,4] parameter(1)
        ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    """), flops=2 * 8 * 4 * 16, bytes=B + 256 + 128))  # fmt: skip
    add(Case("dot-batch", hlo("""
        a = f32[3,8,16] parameter(0)
        b = f32[3,16,4] parameter(1)
        ROOT d = f32[3,8,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
    """), flops=2 * 3 * 8 * 4 * 16, bytes=4 * 3 * (128 + 64 + 32)))  # fmt: skip
    add(Case("dot-two-contracting-dims", hlo("""
        a = f32[8,16,5] parameter(0)
        b = f32[16,5,4] parameter(1)
        ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
    """), flops=2 * 32 * 80, bytes=4 * (640 + 320 + 32)))  # fmt: skip
    add(Case("dot-c64", hlo("""
        a = c64[8,16] parameter(0)
        b = c64[16,4] parameter(1)
        ROOT d = c64[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    """), flops=1024, bytes=8 * (128 + 64 + 32)))  # fmt: skip
    add(Case("dot-s8-s32", hlo("""
        a = s8[8,16] parameter(0)
        b = s8[16,4] parameter(1)
        ROOT d = s32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    """), flops=1024, bytes=128 + 64 + 128))  # fmt: skip
    add(Case("ragged-dot-drops-result-dim-0", hlo("""
        a = f32[64,16] parameter(0)
        b = f32[4,16,8] parameter(1)
        g = s32[4] parameter(2)
        ROOT d = f32[64,8] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
    """), flops=2 * 8 * 16, bytes=4096 + 2048 + 16 + 2048))  # fmt: skip
    add(Case("ragged-dot-batch", hlo("""
        a = f32[3,64,16] parameter(0)
        b = f32[3,4,16,8] parameter(1)
        g = s32[3,4] parameter(2)
        ROOT d = f32[3,64,8] ragged-dot(a, b, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={1}
    """), flops=2 * 64 * 8 * 16, bytes=4 * (3072 + 1536 + 12 + 1536)))  # fmt: skip

    def conv(name: str, lhs: str, rhs: str, out: str, attrs: str, flops: int, nbytes: int) -> None:
        text = hlo(f"""
            a = {lhs} parameter(0)
            k = {rhs} parameter(1)
            ROOT c = {out} convolution(a, k), {attrs}
        """)
        add(Case(name, text, flops=flops, bytes=nbytes))

    nhwc = "dim_labels=b01f_01io->b01f"
    conv("conv-valid", "f32[2,10,10,3]", "f32[3,3,3,8]", "f32[2,8,8,8]", f"window={{size=3x3}}, {nhwc}",
         2 * 3 * 8 * 2 * conv_valid(10, 3, 8) ** 2, 4 * (600 + 216 + 1024))  # fmt: skip
    conv("conv-same-pad", "f32[2,10,10,3]", "f32[3,3,3,8]", "f32[2,10,10,8]",
         f"window={{size=3x3 pad=1_1x1_1}}, {nhwc}",
         2 * 3 * 8 * 2 * conv_valid(10, 3, 10, pad=1) ** 2, 4 * (600 + 216 + 1600))  # fmt: skip
    conv("conv-stride-2-pad", "f32[2,10,10,3]", "f32[3,3,3,8]", "f32[2,5,5,8]",
         f"window={{size=3x3 stride=2x2 pad=1_1x1_1}}, {nhwc}",
         2 * 3 * 8 * 2 * conv_valid(10, 3, 5, stride=2, pad=1) ** 2, 4 * (600 + 216 + 400))  # fmt: skip
    conv("conv-rhs-dilate", "f32[2,10,10,3]", "f32[3,3,3,8]", "f32[2,6,6,8]",
         f"window={{size=3x3 rhs_dilate=2x2}}, {nhwc}",
         2 * 3 * 8 * 2 * conv_valid(10, 3, 6, rhs=2) ** 2, 4 * (600 + 216 + 576))  # fmt: skip
    conv("conv-lhs-dilate", "f32[2,5,5,3]", "f32[3,3,3,8]", "f32[2,11,11,8]",
         f"window={{size=3x3 pad=2_2x2_2 lhs_dilate=2x2}}, {nhwc}",
         2 * 3 * 8 * 2 * conv_valid(5, 3, 11, pad=2, lhs=2) ** 2, 4 * (150 + 216 + 1936))  # fmt: skip
    conv("conv-depthwise", "f32[2,10,10,8]", "f32[3,3,1,8]", "f32[2,8,8,8]",
         f"window={{size=3x3}}, {nhwc}, feature_group_count=8",
         2 * 1 * 8 * 2 * 64 * 9, 4 * (1600 + 72 + 1024))  # fmt: skip
    conv("conv-feature-groups-2", "f32[2,10,10,8]", "f32[3,3,4,6]", "f32[2,8,8,6]",
         f"window={{size=3x3}}, {nhwc}, feature_group_count=2",
         2 * 4 * 6 * 2 * 64 * 9, 4 * (1600 + 216 + 768))  # fmt: skip
    conv("conv-batch-groups-4", "f32[4,10,10,3]", "f32[3,3,3,8]", "f32[1,8,8,8]",
         f"window={{size=3x3}}, {nhwc}, batch_group_count=4",
         2 * 3 * 8 * 1 * 64 * 9, 4 * (1200 + 216 + 512))  # fmt: skip
    conv("conv-1d-ncw", "f32[2,3,10]", "f32[8,3,3]", "f32[2,8,8]",
         "window={size=3}, dim_labels=bf0_oi0->bf0", 2 * 3 * 8 * 2 * 24, 4 * (60 + 72 + 128))  # fmt: skip
    conv("conv-no-spatial", "f32[2,3]", "f32[3,8]", "f32[2,8]", "dim_labels=bf_io->bf",
         2 * 3 * 8 * 2, 4 * (6 + 24 + 16))  # fmt: skip

    conv("conv-negative-padding", "f32[2,10,3]", "f32[3,3,4]", "f32[2,6,4]",
         "window={size=3 pad=-1_-1}, dim_labels=b0f_0io->b0f",
         2 * 3 * 4 * 2 * (6 * 3), 4 * (60 + 36 + 48))  # fmt: skip
    conv("conv-rhs-reversal-same-count", "f32[2,10,3]", "f32[3,3,4]", "f32[2,8,4]",
         "window={size=3 rhs_reversal=1}, dim_labels=b0f_0io->b0f",
         2 * 3 * 4 * 2 * (8 * 3), 4 * (60 + 36 + 64))  # fmt: skip
    # Every tap lands on an lhs-dilation hole (odd positions): no flops at all.
    conv("conv-all-taps-in-holes", "f32[2,7,3]", "f32[3,3,4]", "f32[2,6,4]",
         "window={size=3 stride=2 pad=3_2 lhs_dilate=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f",
         0, 4 * (42 + 36 + 48))  # fmt: skip

    # ---- ops with a called scalar computation
    add(Case("reduce", hlo("""
        a = f32[8,16] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[8] reduce(a, z), dimensions={1}, to_apply=add
    """, ADD), flops=E - 8, bytes=B + 4 + 32))  # fmt: skip
    add(Case("reduce-variadic", hlo("""
        a = f32[8,16] parameter(0)
        b = s32[8,16] parameter(1)
        z = f32[] constant(0)
        zi = s32[] constant(0)
        ROOT r = (f32[8], s32[8]) reduce(a, b, z, zi), dimensions={1}, to_apply=add_exp_max
    """, ADD_EXP_MAX), flops=2 * (E - 8), transcendentals=E - 8, bytes=2 * B + 8 + 64))  # fmt: skip
    add(Case("map", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT c = f32[8,16] map(a, b), dimensions={0,1}, to_apply=f
    """, "f {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  s = f32[] add(x, y)\n"
         "  ROOT e = f32[] exponential(s)\n}"),
        flops=E, transcendentals=E, bytes=3 * B))  # fmt: skip
    add(Case("reduce-window-3x3", hlo("""
        a = f32[1,10,10,1] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[1,8,8,1] reduce-window(a, z), window={size=1x3x3x1}, to_apply=add
    """, ADD), flops=8 * 64, bytes=400 + 4 + 256))  # fmt: skip
    add(Case("reduce-window-2x2-stride-2", hlo("""
        a = f32[1,10,10,1] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[1,5,5,1] reduce-window(a, z), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=add
    """, ADD), flops=3 * 25, bytes=400 + 4 + 100))  # fmt: skip
    add(Case("reduce-window-padding-not-discounted", hlo("""
        a = f32[1,10,10,1] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[1,10,10,1] reduce-window(a, z), window={size=1x3x3x1 pad=0_0x1_1x1_1x0_0}, to_apply=add
    """, ADD), flops=8 * 100, bytes=400 + 4 + 400))  # fmt: skip
    add(Case("reduce-window-reduce-broadcast", hlo("""
        a = f32[4,10] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4,10] reduce-window(a, z), window={size=1x19 pad=0_0x9_9}, to_apply=add
    """, ADD), flops=40 // 10 + 9, bytes=160 + 4 + 160))  # fmt: skip
    add(Case("reduce-window-variadic-no-special-case", hlo("""
        a = f32[4,10] parameter(0)
        b = f32[4,10] parameter(1)
        z = f32[] constant(0)
        ROOT r = (f32[4,10], f32[4,10]) reduce-window(a, b, z, z), window={size=1x19 pad=0_0x9_9}, to_apply=add_pair
    """, ADD_PAIR), flops=2 * 18 * 40, bytes=2 * 160 + 8 + 2 * 160))  # fmt: skip
    add(Case("reduce-window-cumsum", hlo("""
        a = f32[4,10] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4,10] reduce-window(a, z), window={size=1x10 pad=0_0x9_0}, to_apply=add
    """, ADD), flops=9 * 40, bytes=160 + 4 + 160))  # fmt: skip
    add(Case("select-and-scatter", hlo("""
        a = f32[1,10,10,1] parameter(0)
        s = f32[1,5,5,1] parameter(1)
        z = f32[] constant(0)
        ROOT r = f32[1,10,10,1] select-and-scatter(a, s, z), window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add
    """, ADD, GE), flops=25 * 3 + 25, bytes=400 + 100 + 4 + 400))  # fmt: skip
    add(Case("sort-all-elements", hlo("""
        a = f32[8,16] parameter(0)
        b = s32[8,16] parameter(1)
        ROOT s = (f32[8,16], s32[8,16]) sort(a, b), dimensions={1}, to_apply=less_pair
    """, LESS_PAIR), flops=E * 7, bytes=4 * B))  # fmt: skip
    add(Case("sort-64", hlo("""
        a = f32[64] parameter(0)
        ROOT s = f32[64] sort(a), dimensions={0}, to_apply=less
    """, LESS), flops=64 * 6, bytes=512))  # fmt: skip
    add(Case("sort-1-no-flops", hlo("""
        a = f32[1] parameter(0)
        ROOT s = f32[1] sort(a), dimensions={0}, to_apply=less
    """, LESS), bytes=8))  # fmt: skip
    add(Case("sort-100", hlo("""
        a = f32[100] parameter(0)
        ROOT s = f32[100] sort(a), dimensions={0}, to_apply=less
    """, LESS), flops=100 * 7, bytes=800))  # fmt: skip

    # ---- other opcodes with their own rule
    add(Case("rng", hlo("""
        a = f32[] parameter(0)
        b = f32[] parameter(1)
        ROOT r = f32[8,16] rng(a, b), distribution=rng_uniform
    """), transcendentals=E, bytes=8 + B))  # fmt: skip
    add(Case("rng-bit-generator", hlo("""
        s = u64[2] parameter(0)
        ROOT r = (u64[2], u32[8,16]) rng-bit-generator(s), algorithm=rng_default
    """), transcendentals=2 + E, bytes=16 + 16 + B))  # fmt: skip
    add(Case("all-reduce", hlo("""
        x = f32[8,16] parameter(0)
        y = f32[4] parameter(1)
        ROOT r = (f32[8,16], f32[4]) all-reduce(x, y), replica_groups={}, to_apply=add
    """, ADD), flops=E + 4, bytes=2 * (B + 16)))  # fmt: skip
    add(Case("all-reduce-start-done", hlo("""
        x = f32[8,16] parameter(0)
        s = f32[8,16] all-reduce-start(x), replica_groups={}, to_apply=add
        ROOT d = f32[8,16] all-reduce-done(s)
    """, ADD), flops=E, bytes=4 * B))  # fmt: skip
    add(Case("collective-permute", hlo("""
        x = f32[8,16] parameter(0)
        ROOT d = f32[8,16] collective-permute(x), source_target_pairs={{0,1},{1,0}}
    """), bytes=2 * B))  # fmt: skip
    add(Case("reduce-scatter-no-flops", hlo("""
        x = f32[8,16] parameter(0)
        ROOT d = f32[4,16] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add
    """, ADD), bytes=B + B // 2))  # fmt: skip
    add(Case("copy-start-done", hlo("""
        x = f32[8,16] parameter(0)
        s = (f32[8,16], f32[8,16], u32[]) copy-start(x)
        ROOT d = f32[8,16] copy-done(s)
    """), bytes=(B + 2 * B + 4) + (24 + B)))  # fmt: skip
    add(Case("infeed-outfeed-leaf-bytes", hlo("""
        t = token[] after-all()
        i = ((f32[8,16], s32[2]), token[]) infeed(t)
        g = (f32[8,16], s32[2]) get-tuple-element(i), index=0
        ROOT o = token[] outfeed(g, t), outfeed_shape=(f32[8,16], s32[2])
    """), bytes=2 * (B + 8)))  # fmt: skip
    add(Case("all-gather", hlo("""
        x = f32[8,16] parameter(0)
        ROOT r = f32[16,16] all-gather(x), dimensions={0}, replica_groups={}
    """), bytes=3 * B))  # fmt: skip
    add(Case("cholesky", hlo("""
        a = f32[3,16,16] parameter(0)
        ROOT r = f32[3,16,16] cholesky(a), lower=true
    """), flops=16 * 768 // 3, bytes=3072))  # fmt: skip
    add(Case("triangular-solve", hlo("""
        a = f32[3,16,16] parameter(0)
        b = f32[3,16,8] parameter(1)
        ROOT r = f32[3,16,8] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
    """), flops=2 * 16 * 384, bytes=1536 + 3072 / 2 + 1536))  # fmt: skip
    add(Case("fft-2d", hlo("""
        a = c64[8,32,16] parameter(0)
        ROOT r = c64[8,32,16] fft(a), fft_type=FFT, fft_length={32,16}
    """), flops=8 * (5 * 4) * 4096, bytes=2 * 8 * 4096))  # fmt: skip
    add(Case("rfft", hlo("""
        a = f32[8,32] parameter(0)
        ROOT r = c64[8,17] fft(a), fft_type=RFFT, fft_length={32}
    """), flops=8 * 5 * 256, bytes=1024 + 8 * 136))  # fmt: skip
    add(Case("ifft-length-12", hlo("""
        a = c64[8,12] parameter(0)
        ROOT r = c64[8,12] fft(a), fft_type=IFFT, fft_length={12}
    """), flops=8 * 3 * 96, bytes=2 * 8 * 96))  # fmt: skip
    add(Case("topk-no-flops", hlo("""
        x = f32[8,16] parameter(0)
        ROOT r = (f32[8,4], s32[8,4]) topk(x), k=4, largest=true
    """), bytes=B + 256))  # fmt: skip

    # ---- control flow
    add(Case("while-body-and-condition-once", hlo("""
        i = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        t = (s32[], f32[8,16]) tuple(i, x)
        ROOT w = (s32[], f32[8,16]) while(t), condition=cond, body=body, backend_config={"known_trip_count":{"n":"10"}}
    """, LOOP), flops=2, transcendentals=E, bytes=16 + LOOP_BODY_BYTES + LOOP_COND_BYTES))  # fmt: skip
    add(Case("while-nested", hlo("""
        i = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        t = (s32[], f32[8,16]) tuple(i, x)
        ROOT w = (s32[], f32[8,16]) while(t), condition=cond, body=outer_body
    """, LOOP, """
        outer_body {
          p = (s32[], f32[8,16]) parameter(0)
          w = (s32[], f32[8,16]) while(p), condition=cond, body=body
          i = s32[] get-tuple-element(w), index=0
          x = f32[8,16] get-tuple-element(w), index=1
          n = f32[8,16] negate(x)
          ROOT t = (s32[], f32[8,16]) tuple(i, n)
        }"""),
        flops=3 + E, transcendentals=E,
        bytes=16 + (LOOP_BODY_BYTES + LOOP_COND_BYTES + 2 * B + 16) + LOOP_COND_BYTES))  # fmt: skip
    add(Case("conditional-max-over-branches", hlo("""
        c = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        ROOT r = f32[8,16] conditional(c, x, x), branch_computations={b0, b1}
    """, BRANCHES), flops=2 * E, transcendentals=E, bytes=6 * B))  # fmt: skip
    add(Case("conditional-bytes-from-one-branch", hlo("""
        c = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        ROOT r = f32[] conditional(c, x, x), branch_computations={reads, writes}
    """, ADD, """
        reads {
          p = f32[8,16] parameter(0)
          z = f32[] constant(0)
          ROOT r = f32[] reduce(p, z), dimensions={0,1}, to_apply=add
        }

        writes {
          p = f32[8,16] parameter(0)
          i = f32[64,16] iota(), iota_dimension=0
          ROOT r = f32[] constant(0)
        }"""), flops=E - 1, bytes=4096))  # fmt: skip
    add(Case("call-counted-per-call-site", hlo("""
        x = f32[8,16] parameter(0)
        r = f32[8,16] call(x), to_apply=b1
        ROOT r2 = f32[8,16] call(r), to_apply=b1
    """, BRANCHES), flops=4 * E, bytes=12 * B))  # fmt: skip
    add(Case("async-start-update-done", hlo("""
        a = f32[8,16] parameter(0)
        s = ((f32[8,16]), f32[8,16], s32[]) async-start(a), calls=ac
        u = ((f32[8,16]), f32[8,16], s32[]) async-update(s)
        ROOT d = f32[8,16] async-done(u)
    """, "ac {\n  p = f32[8,16] parameter(0)\n  ROOT e = f32[8,16] exponential(p)\n}"),
        transcendentals=E, bytes=2 * B + (24 + 2 * B + 4) + (24 + B)))  # fmt: skip

    # ---- fusion
    add(fusion_case("fusion-params-read-once", ["f32[8,16]", "f32[8,16]"], "f32[8,16]", """
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        a = f32[8,16] add(p0, p1)
        m = f32[8,16] multiply(a, p0)
        ROOT e = f32[8,16] exponential(m)
    """, flops=2 * E, transcendentals=E, bytes=3 * B))  # fmt: skip
    add(fusion_case("fusion-broadcast-user", ["f32[16]", "f32[8,16]"], "f32[8,16]", """
        p0 = f32[16] parameter(0)
        p1 = f32[8,16] parameter(1)
        b = f32[8,16] broadcast(p0), dimensions={1}
        ROOT a = f32[8,16] add(b, p1)
    """, flops=E, bytes=64 + 2 * B))  # fmt: skip
    add(fusion_case("fusion-slices-and-shared-read", ["f32[8,16]"], "f32[4,16]", """
        p0 = f32[8,16] parameter(0)
        sa = f32[4,16] slice(p0), slice={[0:4], [0:16]}
        sb = f32[2,16] slice(p0), slice={[4:6], [0:16]}
        n = f32[8,16] negate(p0)
        e = f32[8,16] exponential(p0)
        r = f32[4,16] slice(n), slice={[0:4], [0:16]}
        a = f32[4,16] add(sa, r)
        r2 = f32[4,16] slice(e), slice={[0:4], [0:16]}
        ROOT a2 = f32[4,16] add(a, r2)
    """, flops=E + 2 * 64, transcendentals=E, bytes=256 + 256 + 128 + B))  # fmt: skip
    add(fusion_case("fusion-each-reshape-reads", ["f32[8,16]"], "f32[128]", """
        p0 = f32[8,16] parameter(0)
        r1 = f32[128] reshape(p0)
        r2 = f32[16,8] reshape(p0)
        r3 = f32[128] reshape(r2)
        ROOT a = f32[128] add(r1, r3)
    """, flops=E, bytes=B + 2 * B))  # fmt: skip
    add(fusion_case("fusion-tuple-output", ["f32[8,16]", "f32[8,16]"], "(f32[8,16], f32[8,16])", """
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        a = f32[8,16] add(p0, p1)
        m = f32[8,16] multiply(p0, p1)
        ROOT t = (f32[8,16], f32[8,16]) tuple(a, m)
    """, flops=2 * E, bytes=4 * B))  # fmt: skip
    add(fusion_case("fusion-constant-counted", ["f32[2]"], "f32[2]", """
        p0 = f32[2] parameter(0)
        c = f32[2] constant({1, 2})
        ROOT a = f32[2] add(p0, c)
    """, flops=2, bytes=3 * 8))  # fmt: skip
    add(fusion_case("fusion-scalar-constant-free", ["f32[8,16]"], "f32[8,16]", """
        p0 = f32[8,16] parameter(0)
        c = f32[] constant(2)
        b = f32[8,16] broadcast(c), dimensions={}
        ROOT a = f32[8,16] add(p0, b)
    """, flops=E, bytes=2 * B))  # fmt: skip
    add(fusion_case("fusion-dynamic-update-slice-in-place", ["f32[8,16]", "f32[4,16]", "s32[]"], "f32[8,16]", """
        p0 = f32[8,16] parameter(0)
        p1 = f32[4,16] parameter(1)
        i = s32[] parameter(2)
        z = s32[] constant(0)
        ROOT d = f32[8,16] dynamic-update-slice(p0, p1, i, z)
    """, bytes=256 + 256 + 4))  # fmt: skip
    add(fusion_case("fusion-dynamic-slice", ["f32[8,16]", "s32[]"], "f32[2,16]", """
        p0 = f32[8,16] parameter(0)
        i = s32[] parameter(1)
        z = s32[] constant(0)
        ROOT d = f32[2,16] dynamic-slice(p0, i, z), dynamic_slice_sizes={2,16}
    """, bytes=128 + 128 + 4))  # fmt: skip
    add(fusion_case("fusion-index-parameter-shared-read", ["f32[8,16]", "s32[]"], "f32[2,16]", """
        p0 = f32[8,16] parameter(0)
        i = s32[] parameter(1)
        d = f32[2,16] dynamic-slice(p0, i, i), dynamic_slice_sizes={2,16}
        c = f32[] convert(i)
        b = f32[2,16] broadcast(c), dimensions={}
        ROOT a = f32[2,16] add(d, b)
    """, flops=33, bytes=128 + 4 + 128))  # fmt: skip
    add(fusion_case("fusion-repeated-operand-one-user", ["f32[16]"], "f32[8,16]", """
        p0 = f32[16] parameter(0)
        m = f32[16] multiply(p0, p0)
        b = f32[8,16] broadcast(m), dimensions={1}
        b2 = f32[8,16] broadcast(p0), dimensions={1}
        ROOT a = f32[8,16] add(b, b2)
    """, flops=16 + E, bytes=64 + 64 + B))  # fmt: skip
    add(fusion_case("fusion-reduce-kinput", ["f32[8,16]"], "f32[8]", """
        p0 = f32[8,16] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[8] reduce(p0, z), dimensions={1}, to_apply=add
    """, "kInput", ADD, flops=E - 8, bytes=32 + B))  # fmt: skip
    gather = (
        "ROOT g = f32[8,16] gather(p0, i), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}"
    )
    add(fusion_case("fusion-kcustom-gather", ["f32[100,16]", "s32[8,1]"], "f32[8,16]",
                    f"p0 = f32[100,16] parameter(0)\ni = s32[8,1] parameter(1)\n{gather}",
                    "kCustom", bytes=2 * B + 32))  # fmt: skip
    add(fusion_case("fusion-kloop-gather-full-read", ["f32[100,16]", "s32[8,1]"], "f32[8,16]",
                    f"p0 = f32[100,16] parameter(0)\ni = s32[8,1] parameter(1)\n{gather}",
                    bytes=6400 + 32 + B))  # fmt: skip
    add(Case("fusion-same-operand-twice", hlo("""
        a = f32[8,16] parameter(0)
        ROOT f = f32[8,16] fusion(a, a), kind=kLoop, calls=fc
    """, fused("""
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        a = f32[8,16] add(p0, p1)
        m = f32[8,16] multiply(a, p0)
        ROOT e = f32[8,16] exponential(m)
    """)), flops=2 * E, transcendentals=E, bytes=3 * B))  # fmt: skip
    add(fusion_case("fusion-tuple-parameter-per-leaf",
                    ["(f32[8,16], f32[4], (f32[2], f32[3]))"], "f32[8,16]", """
        p = (f32[8,16], f32[4], (f32[2], f32[3])) parameter(0)
        g0 = f32[8,16] get-tuple-element(p), index=0
        g0b = f32[8,16] get-tuple-element(p), index=0
        g2 = (f32[2], f32[3]) get-tuple-element(p), index=2
        g21 = f32[3] get-tuple-element(g2), index=1
        s = f32[2,16] slice(g0b), slice={[0:2], [0:16]}
        a = f32[8,16] add(g0, g0)
        ROOT n = f32[8,16] negate(a)
    """, flops=2 * E, bytes=B + 24 + 16 + 0 + B))  # fmt: skip
    add(fusion_case("fusion-dus-in-tuple-root", ["f32[8,16]", "f32[2,16]", "s32[]"],
                    "(f32[8,16], (f32[2,16], f32[2,16]))", """
        p0 = f32[8,16] parameter(0)
        p1 = f32[2,16] parameter(1)
        i = s32[] parameter(2)
        z = s32[] constant(0)
        d = f32[8,16] dynamic-update-slice(p0, p1, i, z)
        n = f32[2,16] negate(p1)
        t2 = (f32[2,16], f32[2,16]) tuple(n, p1)
        ROOT t = (f32[8,16], (f32[2,16], f32[2,16])) tuple(d, t2)
    """, flops=32, bytes=(128 + 128 + 128) + (0 + 128 + 4)))  # fmt: skip

    # Nested fusions: XLA reads a parameter through the nested fusion's users.
    inner_add = """
        inner {
          q0 = f32[8,16] parameter(0)
          q1 = f32[8,16] parameter(1)
          ROOT n = f32[8,16] add(q0, q1)
        }"""
    add(Case("nested-fusion-slice-user", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT f = f32[2,16] fusion(a, b), kind=kLoop, calls=fc
    """, inner_add, fused("""
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        nf = f32[8,16] fusion(p0, p1), kind=kLoop, calls=inner
        ROOT s = f32[2,16] slice(nf), slice={[0:2], [0:16]}
    """)), flops=E, bytes=128 + 128 + B))  # fmt: skip
    add(Case("nested-fusion-other-user", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT f = f32[2,16] fusion(a, b), kind=kLoop, calls=fc
    """, """
        inner {
          q0 = f32[8,16] parameter(0)
          q1 = f32[8,16] parameter(1)
          r = f32[16,8] reshape(q1)
          r2 = f32[8,16] reshape(r)
          ROOT n = f32[8,16] add(q0, r2)
        }""", fused("""
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        nf = f32[8,16] fusion(p0, p1), kind=kLoop, calls=inner
        e = f32[8,16] exponential(nf)
        ROOT s = f32[2,16] slice(e), slice={[0:2], [0:16]}
    """)), flops=E, transcendentals=E, bytes=B + B + 128))  # fmt: skip
    add(Case("nested-fusion-at-root-reads-nothing", hlo("""
        a = f32[8,16] parameter(0)
        b = f32[8,16] parameter(1)
        ROOT f = f32[8,16] fusion(a, b), kind=kLoop, calls=fc
    """, inner_add, fused("""
        p0 = f32[8,16] parameter(0)
        p1 = f32[8,16] parameter(1)
        ROOT nf = f32[8,16] fusion(p0, p1), kind=kLoop, calls=inner
    """)), flops=E, bytes=B))  # fmt: skip
    return cases


CASES = _cases()
CASE_PARAMS = [pytest.param(case, id=case.name) for case in CASES]


def test_case_names_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_cost_matches_hand_computed(case: Case) -> None:
    got = hlo_go_cost(case.text)
    assert got == pytest.approx((case.flops, case.transcendentals, case.bytes), rel=RTOL)


def comparable(cost: tuple[float, float, float]) -> tuple[float, ...]:
    """What of XLA's cost hlo-go matches on the installed jaxlib: everything on
    :data:`VERIFIED_JAXLIB`; flops and transcendentals on others, whose HloCostAnalysis
    counts bytes differently (jaxlib 0.12: tuple pointer tables, tiled layouts padded)."""
    return cost if jaxlib.__version__ == VERIFIED_JAXLIB else cost[:2]


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_cost_matches_xla(case: Case) -> None:
    ours, theirs = comparable(hlo_go_cost(case.text)), comparable(xla_cost(case.text))
    assert ours == pytest.approx(theirs, rel=RTOL)


# -- per-instruction breakdowns, worked by hand ------------------------------------


def _instr_cost(text: str, name: str) -> Cost:
    module = parse_hlo(text)
    return instruction_cost(module, module.entry.instruction(name))


def test_dot_by_hand() -> None:
    # [32,64] x [64,10]: 32*10 outputs, each 64 multiply-adds = 2 flops.
    text = hlo("""
        a = f32[32,64] parameter(0)
        b = f32[64,10] parameter(1)
        ROOT d = f32[32,10] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    """)
    assert _instr_cost(text, "d") == Cost(2 * 32 * 10 * 64, 0, 4 * (32 * 64 + 64 * 10), 4 * 320)


def test_convolution_padding_and_stride_by_hand() -> None:
    # 1-D: input 7, kernel 3, stride 2, pad 1 each side -> 4 outputs reading input
    # positions {-1,0,1}, {1,2,3}, {3,4,5}, {5,6,7}: 12 taps, two land in padding -> 10.
    # 2-D window 3x3 over 7x7 with the same setting: 10 * 10 pairs.
    # flops = 2 * Cin(2) * Cout(5) * batch(3) * 100.
    text = hlo("""
        a = f32[3,7,7,2] parameter(0)
        k = f32[3,3,2,5] parameter(1)
        ROOT c = f32[3,4,4,5] convolution(a, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
    """)
    cost = _instr_cost(text, "c")
    assert cost.flops == 2 * 2 * 5 * 3 * 100
    assert cost.bytes_read == 4 * (3 * 49 * 2 + 9 * 10)
    assert cost.bytes_written == 4 * 3 * 16 * 5


def test_reduce_by_hand() -> None:
    # f32[4,6,5] reduced over {1,2} to f32[4]: 120 - 4 = 116 applications of a
    # 2-flop reducer (add then multiply).
    text = hlo(
        """
        a = f32[4,6,5] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4] reduce(a, z), dimensions={1,2}, to_apply=r2
    """,
        "r2 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  s = f32[] add(x, y)\n"
        "  ROOT m = f32[] multiply(s, s)\n}",
    )
    assert _instr_cost(text, "r") == Cost(2 * 116, 0, 4 * 120 + 4, 4 * 4)


def test_fusion_slice_user_by_hand() -> None:
    # The fusion reads 3 rows of p0 through a slice (3*16*4 bytes), all of p1 once
    # although two instructions use it (8*16*4), writes f32[3,16] (192) and counts
    # one multiply + one add per output element.
    text = hlo(
        """
        a = f32[8,16] parameter(0)
        b = f32[3,16] parameter(1)
        ROOT f = f32[3,16] fusion(a, b), kind=kLoop, calls=fc
    """,
        fused("""
        p0 = f32[8,16] parameter(0)
        p1 = f32[3,16] parameter(1)
        s = f32[3,16] slice(p0), slice={[2:5], [0:16]}
        m = f32[3,16] multiply(s, p1)
        ROOT o = f32[3,16] add(m, p1)
    """),
    )
    assert _instr_cost(text, "f") == Cost(2 * 48, 0, 192 + 192, 192)


def test_while_counts_body_and_condition_once() -> None:
    text = hlo(
        """
        i = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        t = (s32[], f32[8,16]) tuple(i, x)
        ROOT w = (s32[], f32[8,16]) while(t), condition=cond, body=body, backend_config={"known_trip_count":{"n":"10"}}
    """,
        LOOP,
    )
    module = parse_hlo(text)
    body = computation_cost(module, "body")
    cond = computation_cost(module, "cond")
    assert body == Cost(1, E, 4 + 4 + B, 4 + B + 16)
    assert cond == Cost(1, 0, 8, 1)
    assert instruction_cost(module, module.entry.instruction("w")) == body + cond


def test_conditional_takes_most_expensive_branch() -> None:
    text = hlo(
        """
        c = s32[] parameter(0)
        x = f32[8,16] parameter(1)
        ROOT r = f32[8,16] conditional(c, x, x), branch_computations={b0, b1}
    """,
        BRANCHES,
    )
    # b0: 128 transcendentals, 2*B bytes; b1: 2*128 flops, 6*B bytes.
    cost = _instr_cost(text, "r")
    assert (cost.flops, cost.transcendentals, cost.bytes_accessed) == (2 * E, E, 6 * B)
    assert cost.bytes_read == 4 * B and cost.bytes_written == 2 * B


def test_cost_arithmetic() -> None:
    a = Cost(1, 2, 3, 4)
    assert a + a == Cost(2, 4, 6, 8)
    assert a.scaled(3) == Cost(3, 6, 9, 12)
    assert a.compute_only() == Cost(1, 2, 0, 0)
    assert a.bytes_accessed == 7


def test_instruction_cost_finds_computation() -> None:
    module = parse_hlo(CASES[0].text)
    instr = module.entry.root
    assert instruction_cost(module, instr) == instruction_cost(module, instr, module.entry)
    stranger = parse_hlo(hlo("ROOT q = f32[3] parameter(0)")).entry.root
    with pytest.raises(ValueError, match="not in module"):
        instruction_cost(module, stranger)


def test_memoized_costs_do_not_keep_modules_alive() -> None:
    module = parse_hlo(CASES[0].text)
    first = module_cost(module)
    assert module_cost(module) == first
    ref = weakref.ref(module)
    del module
    gc.collect()
    assert ref() is None


# -- custom-call: the deliberate difference ----------------------------------------


def test_custom_call_costs_default_bytes_where_xla_says_unknown() -> None:
    text = hlo("""
        a = f32[8,16] parameter(0)
        ROOT c = f32[8,16] custom-call(a), custom_call_target="foo"
    """)
    assert _instr_cost(text, "c") == Cost(0, 0, B, B)
    props = xla_cost_analysis(text)
    assert props.get("flops") == -1
    assert props.get("bytes accessed") == -1
    assert props.get("transcendentals", 0) == 0


def test_custom_call_inside_call() -> None:
    text = hlo(
        """
        x = f32[8,16] parameter(0)
        ROOT r = f32[8,16] call(x), to_apply=cc
    """,
        """
        cc {
          p = f32[8,16] parameter(0)
          c = f32[8,16] custom-call(p), custom_call_target="foo"
          ROOT n = f32[8,16] negate(c)
        }""",
    )
    ours = module_cost(parse_hlo(text))
    assert ours == Cost(E, 0, 2 * B, 2 * B)
    # XLA's -1s leak into the totals: one flop and (default bytes + 1) fewer.
    flops, transcendentals, nbytes = xla_cost(text)
    assert (flops, transcendentals, nbytes) == (E - 1, 0, 2 * B - 1)
    assert xla_equivalent(parse_hlo(text)) == (flops, transcendentals, nbytes)


# -- real JAX modules -------------------------------------------------------------------


def _custom_call_excess(module: HloModule, name: str) -> tuple[float, float] | None:
    """(count, default bytes) of the custom-calls counted once each in ``name``'s cost.

    None if some custom-call sits where XLA's -1s would not simply add up
    (under a conditional, fusion or a reducer).
    """
    count, nbytes = 0.0, 0.0
    comp = module.computations[name]
    for instr in comp.instructions:
        if instr.opcode == "custom-call":
            count += 1
            nbytes += instruction_cost(module, instr, comp).bytes_accessed
            continue
        called = list(instr.called_computations)
        if instr.opcode == "async-start":
            called = called[:1]
        additive = instr.opcode in ("call", "while", "async-start")
        for callee in called:
            sub = _custom_call_excess(module, callee)
            if sub is None or (not additive and sub[0]):
                return None
            count, nbytes = count + sub[0], nbytes + sub[1]
    return count, nbytes


def xla_equivalent(module: HloModule) -> tuple[float, float, float]:
    """hlo-go's module totals with custom-calls costed as XLA does (-1 flops, -1 bytes)."""
    excess = _custom_call_excess(module, module.entry_name)
    if excess is None:
        pytest.skip("custom-call under a conditional or fusion: XLA's -1s do not add up")
    count, nbytes = excess
    cost = module_cost(module)
    return (cost.flops - count, cost.transcendentals, cost.bytes_accessed - nbytes - count)


@functools.cache
def _mlp_train_step_text(stage: str) -> str:
    def loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        logits = h @ params["w2"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    def step(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> dict[str, jax.Array]:
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((16, 32)).astype(np.float32),
        "b1": np.zeros(32, np.float32),
        "w2": rng.standard_normal((32, 4)).astype(np.float32),
    }
    x = rng.standard_normal((8, 16)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[np.arange(8) % 4]
    lowered = jax.jit(step).lower(params, x, y)
    if stage == "unoptimized":
        return lowered.as_text(dialect="hlo")
    text = lowered.compile().as_text()
    assert text is not None
    return text


def _real_text(name: str, stage: str) -> str:
    if name == "mlp_train_step":
        return _mlp_train_step_text(stage)
    return hlo_samples.hlo_text(name, stage)


REAL = [
    pytest.param(name, stage, id=f"{name}-{stage}")
    for name in ["mlp_train_step", *hlo_samples.SAMPLES]
    for stage in hlo_samples.STAGES
]


@pytest.mark.parametrize("name", examples.names())
def test_bundled_examples_match_xla(name: str) -> None:
    text = examples.example_path(name).read_text()
    ours = xla_equivalent(parse_hlo(text))
    assert ours == pytest.approx(xla_cost(text), rel=0.05)
    if jaxlib.__version__ == VERIFIED_JAXLIB:
        assert ours == pytest.approx(xla_cost(text), rel=RTOL)


@pytest.mark.parametrize(("name", "stage"), REAL)
def test_real_module_totals_close_to_xla(name: str, stage: str) -> None:
    text = _real_text(name, stage)
    ours = xla_equivalent(parse_hlo(text))
    theirs = xla_cost(text)
    assert theirs[0] > 0 or theirs[1] > 0, "sample does no arithmetic"
    assert comparable(ours) == pytest.approx(comparable(theirs), rel=0.05)
    if jaxlib.__version__ == VERIFIED_JAXLIB:
        assert ours == pytest.approx(theirs, rel=RTOL)


def test_custom_call_samples_differ_as_documented() -> None:
    text = hlo_samples.hlo_text("custom_calls", "optimized")
    module = parse_hlo(text)
    calls = [i for _, i in module.instructions() if i.opcode == "custom-call"]
    assert calls
    ours = module_cost(module)
    flops, _, nbytes = xla_cost(text)
    assert ours.flops - flops == len(calls)
    if jaxlib.__version__ != VERIFIED_JAXLIB:
        return  # bytes: see comparable()
    excess = sum(instruction_cost(module, i, module.entry).bytes_accessed + 1 for i in calls)
    assert ours.bytes_accessed - nbytes == pytest.approx(excess)


def test_while_trip_count_not_applied() -> None:
    # The scan body runs 5 times, but module_cost (like XLA) counts it once.
    module = parse_hlo(hlo_samples.hlo_text("lstm_scan_train_step", "optimized"))
    loops = [i for _, i in module.instructions() if i.opcode == "while"]
    assert loops
    for loop in loops:
        body = computation_cost(module, loop.attributes["body"].lstrip("%"))
        cond = computation_cost(module, loop.attributes["condition"].lstrip("%"))
        assert math.isclose(instruction_cost(module, loop).flops, body.flops + cond.flops)


@pytest.mark.parametrize(
    ("operand", "output", "window", "reads"),
    [
        # 3x3 at stride 1, no padding: 8x8 outputs x 9 taps over 100 elements.
        ("f32[1,10,10,1]", "f32[1,8,8,1]", "size=1x3x3x1", 64 * 9 / 100),
        # 2x2 at stride 2 reads each element of the 10x10 once.
        ("f32[1,10,10,1]", "f32[1,5,5,1]", "size=1x2x2x1 stride=1x2x2x1", 1.0),
        # SAME padding: taps over the border read nothing (28 of 30 per row, per dim).
        ("f32[1,10,10,1]", "f32[1,10,10,1]", "size=1x3x3x1 pad=0_0x1_1x1_1x0_0", 28 * 28 / 100),
        # Base dilation: the holes between elements read nothing.
        ("f32[4]", "f32[6]", "size=2 lhs_dilate=2", 6 / 4),
    ],
)
def test_window_reads_counts_taps_that_hit_the_operand(
    operand: str, output: str, window: str, reads: float
) -> None:
    from hlo_go.hlo.cost import window_reads

    module = parse_hlo(
        hlo(
            f"""
        a = {operand} parameter(0)
        z = f32[] constant(0)
        ROOT r = {output} reduce-window(a, z), window={{{window}}}, to_apply=add
    """,
            ADD,
        )
    )
    comp = module.entry
    r, a = comp.instructions[-1], comp.instructions[0]
    assert window_reads(r, a.shape) == pytest.approx(reads)
