"""The HLO opcodes XLA knows, with their fixed arities and cost categories.

The list follows XLA's ``HLO_OPCODE_LIST`` (``xla/hlo/ir/hlo_opcode.h``): the
text name of each opcode and the number of operands it takes (``None`` for
variadic opcodes).
"""

from __future__ import annotations

# opcode text name -> fixed operand count, or None when variadic.
OPCODE_ARITY: dict[str, int | None] = {
    "abs": 1, "acos": 1, "acosh": 1, "add": 2, "add-dependency": 2, "after-all": None,
    "all-gather": None, "all-gather-done": 1, "all-gather-start": None, "all-reduce": None,
    "all-reduce-done": 1, "all-reduce-start": None, "all-to-all": None, "and": 2, "asin": 1,
    "asinh": 1, "async-done": 1, "async-start": None, "async-update": None, "atan": 1,
    "atan2": 2, "atanh": 1, "batch-norm-grad": 5, "batch-norm-inference": 5,
    "batch-norm-training": 3, "bitcast": 1, "bitcast-convert": 1, "broadcast": 1, "call": None,
    "cbrt": 1, "ceil": 1, "cholesky": 1, "clamp": 3, "count-leading-zeros": 1,
    "collective-broadcast": None, "collective-permute": None, "collective-permute-done": 1,
    "collective-permute-start": None, "collective-reduce": None, "compare": 2, "complex": 2,
    "concatenate": None, "conditional": None, "constant": 0, "convert": 1, "convolution": None,
    "copy": 1, "copy-done": 1, "copy-start": 1, "cosine": 1, "cosh": 1, "custom-call": None,
    "divide": 2, "domain": 1, "dot": 2, "dynamic-reshape": None, "dynamic-slice": None,
    "dynamic-update-slice": None, "erf": 1, "exponential": 1, "exponential-minus-one": 1,
    "fft": 1, "floor": 1, "fusion": None, "gather": 2, "get-dimension-size": 1,
    "get-tuple-element": 1, "imag": 1, "infeed": 1, "iota": 0, "is-finite": 1, "log": 1,
    "log-plus-one": 1, "logistic": 1, "map": None, "maximum": 2, "minimum": 2, "mulhi": 2,
    "multiply": 2, "negate": 1, "not": 1, "opt-barrier": 1, "or": 2, "outfeed": 2, "pad": 2,
    "parameter": 0, "partition-id": 0, "popcnt": 1, "power": 2, "ragged-all-to-all": 6,
    "ragged-dot": 3, "real": 1, "recv": 1, "recv-done": 1, "reduce": None,
    "reduce-precision": 1, "reduce-scatter": None, "reduce-window": None, "remainder": 2,
    "replica-id": 0, "reshape": 1, "reverse": 1, "rng": None, "rng-bit-generator": 1,
    "rng-get-and-update-state": 0, "round-nearest-afz": 1, "round-nearest-even": 1,
    "rsqrt": 1, "scaled-dot": 4, "scan": None, "scatter": None, "select": 3,
    "select-and-scatter": 3, "send": 2, "send-done": 1, "set-dimension-size": 2,
    "shift-left": 2, "shift-right-arithmetic": 2, "shift-right-logical": 2, "shuffle": 1,
    "sign": 1, "sine": 1, "sinh": 1, "slice": 1, "sort": None, "sqrt": 1,
    "stochastic-convert": 2, "subtract": 2, "tan": 1, "tanh": 1, "topk": 1, "transpose": 1,
    "triangular-solve": 2, "tuple": None, "while": 1, "xor": 2,
}  # fmt: skip

OPCODES: frozenset[str] = frozenset(OPCODE_ARITY)

# Elementwise opcodes whose per-element cost XLA's HloCostAnalysis counts as a
# transcendental rather than a flop.
TRANSCENDENTAL_OPCODES: frozenset[str] = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosine", "cosh",
    "erf", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "power", "rsqrt", "sine", "sinh", "sqrt", "tan", "tanh",
})  # fmt: skip

# Opcodes that apply one scalar function per output element.
ELEMENTWISE_OPCODES: frozenset[str] = frozenset({
    "abs", "acos", "acosh", "add", "and", "asin", "asinh", "atan", "atan2", "atanh", "cbrt",
    "ceil", "clamp", "compare", "complex", "convert", "cosine", "cosh", "count-leading-zeros",
    "divide", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite",
    "log", "log-plus-one", "logistic", "maximum", "minimum", "mulhi", "multiply", "negate",
    "not", "or", "popcnt", "power", "real", "reduce-precision", "remainder",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sinh", "sqrt",
    "stochastic-convert", "subtract", "tan", "tanh", "xor",
})  # fmt: skip

# Opcodes a fusion may recompute from their operands rather than read another fusion's
# copy: generated values and elementwise ops that are neither transcendental nor
# divisions, as XLA's instruction fusion duplicates into every consumer fusion.
REGENERATED_OPCODES: frozenset[str] = frozenset(
    {"broadcast", "iota", "constant", "bitcast", "reshape"}
    | (ELEMENTWISE_OPCODES - TRANSCENDENTAL_OPCODES - {"divide", "remainder", "power"})
)

# Opcodes that name existing buffers rather than compute: no kernel runs for them.
VIEW_OPCODES: frozenset[str] = frozenset({
    "tuple", "get-tuple-element", "bitcast", "after-all", "add-dependency", "domain", "opt-barrier",
})  # fmt: skip

# Opcodes whose buffers exist before a run starts (arguments and literals).
HOLDER_OPCODES: frozenset[str] = frozenset({"parameter", "constant"})

# Opcodes that may not go inside a fusion: control flow, calls, side effects,
# communication, and values without data (tuples, tokens).
NOT_FUSIBLE: frozenset[str] = frozenset({
    "parameter", "tuple", "get-tuple-element", "while", "conditional", "call", "fusion",
    "custom-call", "after-all", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "all-to-all", "reduce-scatter", "collective-permute",
    "collective-permute-start", "collective-permute-done", "collective-broadcast",
    "async-start", "async-update", "async-done", "copy-start", "copy-done", "rng",
    "rng-get-and-update-state", "rng-bit-generator", "sort", "opt-barrier", "domain",
    "add-dependency", "partition-id", "replica-id", "cholesky", "triangular-solve", "fft",
    "batch-norm-training", "batch-norm-inference", "batch-norm-grad", "topk",
})  # fmt: skip


# Opcodes XLA's CPU emitters cannot take inside our (kLoop) fusions although
# NOT_FUSIBLE lets them in: a scatter fused with its operands' producers or its users
# aborts XLA's loop emitter (jaxlib 0.10.2: "SymbolicMap::Compose ... Check failed" on
# rnnlm_l2_scan's embedding gradient). They stay kernels of their own (:func:`hlo_go.xla.wrap_alone`).
CPU_EMITTER_NOT_FUSIBLE: frozenset[str] = frozenset({"scatter"})

# Attribute keys whose value names called computations, e.g. ``to_apply=%add``
# or ``branch_computations={%b0, %b1}``.
COMPUTATION_ATTRIBUTES: tuple[str, ...] = (
    "calls",
    "to_apply",
    "condition",
    "body",
    "select",
    "scatter",
    "true_computation",
    "false_computation",
    "branch_computations",
    "called_computations",
    "async_wrapped_computation",
)
