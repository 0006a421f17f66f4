"""Random inputs: shapes, ranges and the fan-in scale of training_inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_go.hlo import parse_hlo
from hlo_go.xla.inputs import fan_in_scale, random_inputs, training_inputs

_MODULE = """HloModule step

ENTRY main {
  w = f32[256,64]{1,0} parameter(0)
  k = f32[3,3,16,8]{3,2,1,0} parameter(1)
  b = f32[64]{0} parameter(2)
  n = s32[] parameter(3)
  ids = s32[512]{0} parameter(4)
  ROOT t = (f32[256,64]{1,0}, f32[3,3,16,8]{3,2,1,0}, f32[64]{0}, s32[], s32[512]{0}) tuple(w, k, b, n, ids)
}
"""


@pytest.mark.parametrize(
    ("dims", "expected"),
    [((), 1.0), ((7,), 1.0), ((64, 32), 1 / 8), ((3, 3, 16, 8), 1 / 12), ((0, 5), 1.0)],
)
def test_fan_in_scale_is_one_over_root_of_all_but_the_last_dimension(
    dims: tuple[int, ...], expected: float
) -> None:
    assert fan_in_scale(dims) == pytest.approx(expected)


def test_training_inputs_are_positive_and_fan_in_scaled() -> None:
    module = parse_hlo(_MODULE)
    w, k, b, n, ids = training_inputs(module, seed=3)
    assert [a.dtype for a in (w, k, b, n, ids)] == [np.float32] * 3 + [np.int32] * 2
    assert all(np.all(a >= 0) for a in (w, k, b))
    # |N(0, s^2)| has root mean square s.
    assert np.sqrt(np.mean(np.square(w, dtype=np.float64))) == pytest.approx(1 / 16, rel=0.05)
    assert np.sqrt(np.mean(np.square(k, dtype=np.float64))) == pytest.approx(1 / 12, rel=0.1)
    assert np.sqrt(np.mean(np.square(b, dtype=np.float64))) == pytest.approx(1.0, rel=0.25)
    assert 1 <= int(n) < 4 and ids.min() >= 1 and ids.max() < 4
    # Same seed, same draw; the plain draw is unit-scale and signed.
    np.testing.assert_array_equal(training_inputs(module, seed=3)[0], w)
    plain = random_inputs(module, seed=3)[0]
    assert plain.min() < 0 and np.sqrt(np.mean(np.square(plain, dtype=np.float64))) > 0.9


def test_fan_in_scale_keeps_a_deep_product_well_conditioned() -> None:
    """Sixteen chained [64, 64] products: fan-in scaled weights keep the values O(1);
    unit-scale ones grow them by about 8x a layer."""
    layers = "\n".join(
        f"  w{i} = f32[64,64]{{1,0}} parameter({i + 1})\n"
        f"  x{i + 1} = f32[8,64]{{1,0}} dot(x{i}, w{i}), lhs_contracting_dims={{1}}, "
        "rhs_contracting_dims={0}"
        for i in range(16)
    )
    module = parse_hlo(
        f"HloModule deep\n\nENTRY main {{\n  x0 = f32[8,64]{{1,0}} parameter(0)\n{layers}\n"
        "  ROOT out = f32[8,64]{1,0} copy(x16)\n}\n"
    )

    def run(args: list[np.ndarray]) -> np.ndarray:
        x = args[0].astype(np.float64)
        for w in args[1:]:
            x = x @ w.astype(np.float64)
        return x

    conditioned = np.abs(run(random_inputs(module, seed=0, fan_in=True)))
    unit = np.abs(run(random_inputs(module, seed=0)))
    assert 1e-2 < conditioned.max() < 1e2
    assert unit.max() > 1e12


# A TensorFlow-style module whose large constant was printed elided, as XLA's default
# print options do.
_ELIDED = """HloModule cluster_0, alias_passthrough_params=true

ENTRY %cluster_0 (arg0.1: s32[3]) -> f32[3,4] {
  %table = f32[100,4]{1,0} constant({...}), metadata={op_type="GatherV2" op_name="lookup"}
  %arg0.1 = s32[3]{0} parameter(0), parameter_replication={false}
  ROOT %g = f32[3,4]{1,0} gather(%table, %arg0.1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
}
"""


def test_elided_constants_are_found_and_warned_about() -> None:
    from hlo_go import methods
    from hlo_go.xla import measure, program
    from hlo_go.xla.inputs import ElidedConstantsWarning, elided_constants

    module = parse_hlo(_ELIDED)
    assert elided_constants(module) == [("cluster_0", "table")]
    assert elided_constants(parse_hlo(_MODULE)) == []
    with pytest.warns(
        ElidedConstantsWarning, match=r"1 constant\(s\) printed as \{\.\.\.\}.*%table"
    ):
        program(_ELIDED)
    # Still runs, and compares consistently: both compiles read the same placeholders.
    with pytest.warns(ElidedConstantsWarning):
        prog = program(_ELIDED)
        no_fusion = methods.decide(prog.graph, "no-fusion")
        result = measure(prog, fusion=no_fusion, repeats=2)
    assert result.correct
