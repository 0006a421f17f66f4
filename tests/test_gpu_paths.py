"""The code paths a GPU takes that run here on the CPU: XLA's dump syntax, the compile
hooks' platform name, the GPU compile options, the profile of a GPU trace, the decorator's
platform and clock, and the prepared GPU check's planning and merging.

What needs a GPU itself (the lowering on XLA:GPU, its trace events, its timings) is run by
``benchmarks/device/gpu_check.sh`` and recorded in ``benchmarks/results/gpu.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_go.hlo import HloParseError, parse_hlo

# A while loop as XLA (jax >= 0.11) writes it in its dumps: a tuple's elements are read as
# ``%tuple#index``, with no get-tuple-element instruction.
DUMP_STYLE = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0})}

%body (arg: (s32[], f32[4], f32[4])) -> (s32[], f32[4], f32[4]) {
  %arg = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  %one = s32[] constant(1)
  %i = s32[] add(%arg#0, %one)
  %two = f32[] constant(2)
  %twos = f32[4]{0} broadcast(%two), dimensions={}
  %a = f32[4]{0} multiply(%arg#1, %twos)
  %b = f32[4]{0} add(%a, %arg#2)
  %c = f32[4]{0} add(%arg#2, %arg#1)
  ROOT %out = (s32[], f32[4]{0}, f32[4]{0}) tuple(%i, %b, %c)
}

%cond (arg.1: (s32[], f32[4], f32[4])) -> pred[] {
  %arg.1 = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  %five = s32[] constant(5)
  ROOT %lt = pred[] compare(%arg.1#0, %five), direction=LT
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}, f32[4]{0}) tuple(%zero, %x, %x)
  %loop = (s32[], f32[4]{0}, f32[4]{0}) while(%init), condition=%cond, body=%body
  ROOT %result = (f32[4]{0}, f32[4]{0}) tuple(%loop#1, %loop#2)
}
"""


def _reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = x.copy(), x.copy()
    for _ in range(5):
        a, b = 2 * a + b, b + a
    return a, b


def test_dump_style_tuple_elements_become_get_tuple_elements() -> None:
    module = parse_hlo(DUMP_STYLE)
    body = module.computations["body"]
    elements = [i for i in body.instructions if i.opcode == "get-tuple-element"]
    # one per (tuple, index), made before its first user, reused after
    assert [(i.operands, i.attributes["index"]) for i in elements] == [
        (("arg",), "0"),
        (("arg",), "1"),
        (("arg",), "2"),
    ]
    order = [i.name for i in body.instructions]
    for element in elements:
        users = [i.name for i in body.instructions if element.name in i.operands]
        assert users and all(order.index(element.name) < order.index(u) for u in users)
    assert [str(e.shape.to_text()) for e in elements] == ["s32[]", "f32[4]{0}", "f32[4]{0}"]
    root = module.entry.root
    assert all(module.entry.instruction(o).opcode == "get-tuple-element" for o in root.operands)


def test_dump_style_module_computes_what_it_says() -> None:
    """The printed module (explicit get-tuple-elements) compiles with XLA and computes the
    loop the dump describes."""
    from hlo_go.xla.bridge import compile_hlo_text, run_executable

    printed = parse_hlo(DUMP_STYLE).to_text()
    assert "#" not in printed.split("ENTRY")[1]
    x = np.arange(4, dtype=np.float32)
    got = run_executable(compile_hlo_text(printed), [x])
    for g, want in zip(got, _reference(x), strict=True):
        np.testing.assert_allclose(np.asarray(g), want)


@pytest.mark.parametrize(
    ("operand", "reason"),
    [
        ("%x#0", "has no tuple element 0"),
        ("%t#2", "has no tuple element 2"),
        ("%u#0", "not defined"),
    ],
)
def test_dump_style_bad_tuple_elements_are_named_errors(operand: str, reason: str) -> None:
    text = f"""HloModule m
ENTRY %e (x: f32[2]) -> f32[2] {{
  %x = f32[2]{{0}} parameter(0)
  %t = (f32[2]{{0}}, f32[2]{{0}}) tuple(%x, %x)
  ROOT %y = f32[2]{{0}} negate({operand})
}}
"""
    with pytest.raises(HloParseError, match=reason) as caught:
        parse_hlo(text)
    assert caught.value.line == 5


def test_hook_platform_names() -> None:
    from hlo_go.xla._jaxlib import hook_platform

    assert hook_platform("cpu") == "cpu"
    assert hook_platform("cuda") == "cuda"
    # no GPU plugin loaded here: "gpu" stays as it is (a GPU machine gives "cuda")
    assert hook_platform("gpu") in ("gpu", "cuda", "rocm")


def test_gpu_compile_options_turn_xla_gpu_fusion_off() -> None:
    from hlo_go.xla.hooks import WRAPPED_COMPILER_OPTIONS, wrapped_compiler_options
    from hlo_go.xla.profile import profile_options

    assert wrapped_compiler_options("cpu") == WRAPPED_COMPILER_OPTIONS
    gpu = wrapped_compiler_options("gpu")["xla_disable_hlo_passes"].split(",")
    assert {"priority-fusion", "multi_output_fusion"} <= set(gpu)
    assert "fusion-wrapper" not in gpu
    assert wrapped_compiler_options("cuda") == wrapped_compiler_options("gpu")
    assert "xla_gpu_graph_min_graph_size" not in profile_options("cpu")
    assert profile_options("gpu")["xla_gpu_graph_min_graph_size"] >= 1_000_000


def _event(name: str, start_ns: float, duration_ns: float, **stats: object) -> SimpleNamespace:
    return SimpleNamespace(
        name=name, start_ns=start_ns, duration_ns=duration_ns, stats=list(stats.items())
    )


def _plane(name: str, events: list[SimpleNamespace]) -> SimpleNamespace:
    return SimpleNamespace(name=name, lines=[SimpleNamespace(name="line", events=events)])


def test_gpu_trace_times_come_from_the_device_plane_averaged_over_runs() -> None:
    """A GPU trace: kernel events on the device plane carry no run id; the host's events
    tagged with the same instructions are their launches and are not counted."""
    from hlo_go.xla.profile import _instruction_times

    tags = {"hlo_module": "jit_f"}
    device = _plane(
        "/device:GPU:0",
        [
            _event("k1", 0, 4000, hlo_op="fusion.1", **tags),
            _event("k2", 5000, 2000, hlo_op="dot.2", **tags),
            _event("k1", 9000, 6000, hlo_op="fusion.1", **tags),
            _event("k2", 16000, 2000, hlo_op="dot.2", **tags),
            _event("other", 0, 100, hlo_op="x", hlo_module="jit_g"),
        ],
    )
    host = _plane(
        "/host:CPU",
        [
            _event("launch", 0, 50_000, hlo_op="fusion.1", run_id=-7, **tags),
            _event("launch", 60_000, 30_000, hlo_op="fusion.1", run_id=-6, **tags),
        ],
    )
    runs = _instruction_times(SimpleNamespace(planes=[host, device]), "jit_f", runs_traced=2)
    assert len(runs) == 1
    assert next(iter(runs.values())) == pytest.approx({"fusion.1": 5e-6, "dot.2": 2e-6})
    # a CPU trace (no device plane): the host's thunks, by run
    cpu = _instruction_times(SimpleNamespace(planes=[host]), "jit_f", runs_traced=2)
    assert cpu == {-7: pytest.approx({"fusion.1": 5e-5}), -6: pytest.approx({"fusion.1": 3e-5})}


def test_call_platform_and_clock() -> None:
    from hlo_go.api.inputs import call_platform
    from hlo_go.api.measure import choose_clock

    assert call_platform((np.ones(2), {"a": 1.0})) == jax.default_backend()
    assert call_platform((1, jnp.ones(2))) == "cpu"
    assert choose_clock("auto", "gpu") == "wall"
    assert choose_clock("cpu", "gpu") == "cpu"  # asked for: kept


def test_gpu_check_plan_goes_round_the_parts() -> None:
    from benchmarks.device.gpu_check import plan

    items = {"a": ("g1", "g2", "g3"), "b": ("g1",), "c": ("g1", "g2")}
    assert plan(items, ("a", "b", "c", "missing")) == [
        ("a", "g1"),
        ("b", "g1"),
        ("c", "g1"),
        ("a", "g2"),
        ("c", "g2"),
        ("a", "g3"),
    ]


def test_gpu_check_packs_a_kernel_dataset_into_one_archive(tmp_path: Path) -> None:
    """The device machine hands back at most 8 files: the kernels part's dataset (a folder
    per graph, one file per variant) travels as one archive that unpacks to the same tree."""
    import tarfile

    from benchmarks.device.gpu_check import pack_kernels

    root = tmp_path / "gpu_kernels"
    names = [f"g{k}/v{j}.npz" for k in range(3) for j in range(4)] + ["graphs/g0.hlo.gz"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
    got = pack_kernels(root)
    assert got["files"] == len(names)
    with tarfile.open(tmp_path / "gpu_kernels.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert members == {f"gpu_kernels/{n}": n.encode() for n in names}


def test_gpu_check_merge_keeps_earlier_items(tmp_path: Path) -> None:
    from benchmarks.device.gpu_check import earlier_items, summarize_lowering

    earlier = {
        "gpu": {
            "probe": {"g": {"hooks_fired": {}}},
            "lowering": summarize_lowering(
                {"g": {"priority-fusion": {"correct": True, "speedup": 1.2}}}
            ),
            "decorator": {"mlp": {"kept": "jax.jit"}},
            "calibration": {"steps": {"g": {}}, "median_step_error": 0.1, "profiles": {"g": {}}},
            "runs": [{"items": ["probe:g"], "seconds": 1.0}],
        }
    }
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(earlier))
    got = earlier_items(path, "gpu")
    assert got["items"]["lowering"] == {"g": {"priority-fusion": {"correct": True, "speedup": 1.2}}}
    assert got["items"]["profile"] == {"g": {}}
    assert got["calibration"]["median_step_error"] == 0.1
    assert "profiles" not in got["calibration"]
    assert got["runs"] == earlier["gpu"]["runs"]
    assert earlier_items(path, "cpu_dry_run") == {"items": {}, "calibration": None, "runs": []}


def test_lowering_on_an_unsupported_platform_is_refused_and_the_decorator_keeps_jax_jit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where lowering is not built (a TPU; here the CPU made to look like one), it is
    refused before XLA with a named error, and the decorator keeps jax.jit's executable."""
    import hlo_go
    from hlo_go.xla import LoweringError, program
    from hlo_go.xla import lowering as lowering_module

    def f(x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ x) + 1.0

    x = jnp.ones((64, 64))
    prog = program(f, (x,))
    assert lowering_module.lowering_unsupported("cpu") == ""
    assert lowering_module.lowering_unsupported("gpu") == ""
    assert "XLA:TPU is not supported" in lowering_module.lowering_unsupported("tpu")
    monkeypatch.setattr(lowering_module, "LOWERING_PLATFORMS", ())
    with pytest.raises(LoweringError, match=r"XLA:CPU is not supported.*docs/lowering\.md"):
        prog.lower()
    decorated = hlo_go.jit(f, options=hlo_go.Options(cache_dir=None, min_call_s=0.0))
    np.testing.assert_allclose(decorated(x), jax.jit(f)(x))
    record = decorated.records[0]
    assert record.kept == "jax.jit"
    assert "is not supported" in record.reason


def test_lowering_stage_per_platform() -> None:
    """XLA:GPU's pre-scheduler hook comes before layout assignment and fusion, so a GPU
    captures and swaps at the post-scheduler hook; XLA:CPU at the pre-scheduler one."""
    from hlo_go.xla import program
    from hlo_go.xla.hooks import lowering_stage

    assert lowering_stage("cpu") == "pre_scheduler"
    assert [lowering_stage(p) for p in ("gpu", "cuda", "rocm")] == ["post_scheduler"] * 3
    assert program(jnp.sin, (jnp.ones(3),)).stage == "pre_scheduler"
    with pytest.raises(ValueError, match="stage must be"):
        program(jnp.sin, (jnp.ones(3),), stage="post_fusion")


def _mlp_step(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    def loss(w: jax.Array) -> jax.Array:
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    value, grad = jax.value_and_grad(loss)(w)
    return value, w - 0.1 * grad


def test_the_gpu_lowering_path_runs_on_the_cpu_and_matches_jax_jit() -> None:
    """The GPU's way (capture and swap at the post-scheduler hook, the module handed back
    in our order and marked scheduled) run on XLA:CPU: fusion groups and a schedule are
    lowered, the outputs equal jax.jit's, and the executable runs our order."""
    from hlo_go.xla import program

    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(32, 32)), jnp.float32)
    x = jnp.asarray(rng.normal(size=(16, 32)), jnp.float32)
    prog = program(_mlp_step, (w, x), stage="post_scheduler")
    assert prog.prefusion.attributes.get("is_scheduled") == "true"  # captured after scheduling
    names = [i.name for i in prog.prefusion.entry.instructions]
    elementwise = [
        i.name
        for i in prog.prefusion.entry.instructions
        if i.opcode in ("tanh", "multiply", "subtract")
    ]
    assert len(elementwise) >= 2
    # Priorities rising along XLA's order (list scheduling then reorders ready ones).
    priority = {n: float(k) for k, n in enumerate(names)}
    executable = prog.lower(fusion=[elementwise[:2]], schedule=priority)
    want = jax.jit(_mlp_step)(w, x)
    got = executable(w, x)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert executable.order is not None and executable.module is not None
    assert set(executable.order) == {i.name for i in executable.module.entry.instructions}
    fusions = [i for i in executable.module.entry.instructions if i.opcode == "fusion"]
    assert any(i.name.startswith("hlo_go_fusion") for i in fusions)
    # XLA runs the swapped module in the imposed order (it may add instructions after).
    ran = [n for n in executable.entry_order if n in set(executable.order)]
    assert ran == [n for n in executable.order if n in set(ran)]


def test_gpu_fusion_kind_follows_xla_gpu() -> None:
    """A fusion with a reduction, scatter or transpose is kInput on XLA:GPU, others kLoop."""
    from hlo_go.xla.fusion import apply_fusion, gpu_fusion_kind

    module = parse_hlo(
        """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8,4]) -> (f32[8], f32[8,4]) {
  %x = f32[8,4]{1,0} parameter(0)
  %e = f32[8,4]{1,0} exponential(%x)
  %zero = f32[] constant(0)
  %r = f32[8]{0} reduce(%e, %zero), dimensions={1}, to_apply=%add
  %n = f32[8,4]{1,0} negate(%x)
  %t = f32[8,4]{1,0} tanh(%n)
  ROOT %out = (f32[8]{0}, f32[8,4]{1,0}) tuple(%r, %t)
}
"""
    )
    fused = apply_fusion(module, [["e", "zero", "r"], ["n", "t"]], kind=gpu_fusion_kind)
    kinds = sorted(i.attributes["kind"] for i in fused.entry.instructions if i.opcode == "fusion")
    assert kinds == ["kInput", "kLoop"]
    assert gpu_fusion_kind(list(module.entry.instructions)) == "kInput"
    assert gpu_fusion_kind([module.entry.instruction("n")]) == "kLoop"


def test_a_group_xla_gpu_would_not_build_is_refused_before_xla(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a GPU, groups are checked against XLA:GPU's fusion rules before the swap: a
    fusion of more operands and outputs than XLA:GPU's budget is a named FusionError; on
    the CPU the same group lowers."""
    from hlo_go.decisions.gpu_legality import MAX_OPERANDS_AND_OUTPUTS
    from hlo_go.xla import FusionError, program

    count = MAX_OPERANDS_AND_OUTPUTS + 2

    def f(*xs: jax.Array) -> jax.Array:
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total

    args = tuple(jnp.full((8,), float(k)) for k in range(count))
    prog = program(f, args)
    adds = [n.name for n in prog.prefusion.entry.instructions if n.opcode == "add"]
    assert len(adds) == count - 1
    got = prog.lower(fusion=[adds])(*args)
    np.testing.assert_allclose(np.asarray(got[0] if isinstance(got, list) else got), f(*args))
    monkeypatch.setattr(prog, "platform", "gpu")
    with pytest.raises(FusionError, match=r"XLA:GPU would not build.*operands and outputs"):
        prog.fused_module([adds])
