"""What keeps a module from compiling on one device of a platform, said before XLA does.

XLA reports such modules from deep inside its pipeline (an internal RET_CHECK in
``sharding-remover`` for a manually partitioned module, an unknown custom-call target at
run time), or compiles them into something else than the original computed (a per-device
program of a partitioned module, its collectives run over one device);
:func:`unsupported_reasons` names the instruction and the reason first. Modules XLA printed
after optimizing them are turned back into pre-fusion ones first
(:func:`hlo_go.xla.optimized.recover_prefusion`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hlo_go.hlo import HloModule
from hlo_go.xla.inputs import warn_elided_constants

# Custom-call targets that only one kind of platform implements, by prefix.
PLATFORM_CUSTOM_CALLS: dict[str, tuple[str, ...]] = {
    "tpu": ("tpu_custom_call",),  # Pallas/Mosaic kernels
    "cuda": ("__cublas", "__cudnn", "__triton", "__gpu", "__cusolver"),
}

# Custom calls that mark values of a manually partitioned (shard_map) module.
MANUAL_PARTITION_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape")

# Instructions that exchange values between devices.
COLLECTIVES = frozenset({
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-permute", "collective-broadcast",
})  # fmt: skip


def unsupported_reasons(module: HloModule, platform: str = "cpu") -> list[str]:
    """Why ``module`` cannot run unpartitioned on one ``platform`` device (empty: no reason known).

    Args:
      module: the module.
      platform: ``"cpu"``, ``"cuda"`` (or ``"gpu"``), ``"tpu"``.

    Returns:
      One line per reason, naming the first instruction it applies to.
    """
    platform = "cuda" if platform in ("gpu", "rocm") else platform
    reasons: list[str] = []
    seen: set[str] = set()
    for comp, instr in module.instructions():
        where = f"%{instr.name} in {comp.name}"
        if instr.opcode == "custom-call":
            target = instr.attributes.get("custom_call_target", "").strip('"')
            for owner, prefixes in PLATFORM_CUSTOM_CALLS.items():
                if owner != platform and target.startswith(prefixes) and target not in seen:
                    seen.add(target)
                    reasons.append(f"{where} calls {target!r}, a {owner} kernel")
            if target in MANUAL_PARTITION_TARGETS and "manual" not in seen:
                seen.add("manual")
                reasons.append(
                    f"{where} ({target}) belongs to a manually partitioned (shard_map) module, "
                    "which compiles only as several partitions"
                )
        base = instr.opcode.removesuffix("-start")
        if base in COLLECTIVES and "collective" not in seen:
            size = collective_group_size(instr.attributes, module.attributes)
            if size > 1:
                seen.add("collective")
                reasons.append(
                    f"{where} ({base}) exchanges values within groups of {size} devices: "
                    "the module is one device's program of a partitioned (or replicated) "
                    "computation and does "
                    "not compute the original's values alone; pass the module before "
                    "partitioning (jax.jit(f).lower(...).as_text(dialect='hlo')) or the "
                    "function itself, or run it over several devices (hlo_go.xla.spmd)"
                )
    return reasons


def collective_group_size(attributes: Mapping[str, str], header: Mapping[str, str]) -> int:
    """Devices in the largest group a collective exchanges values within.

    ``replica_groups={{0,1},{2,3}}`` (explicit), ``replica_groups=[2,2]<=[4]`` (iota:
    the last dimension is the group size) and ``replica_groups=mesh['a'=2,'b'=4] {'b'}``
    (mesh axes: the named axes' product) give their groups; ``source_target_pairs``
    (collective-permute) count 2 when any pair moves a value to another device; no or
    empty groups mean all the module's replicas, or partitions where the collective has a
    ``channel_id``.
    """
    pairs = attributes.get("source_target_pairs")
    if pairs is not None:
        numbers = [int(n) for n in re.findall(r"\d+", pairs)]
        moves = any(a != b for a, b in zip(numbers[::2], numbers[1::2], strict=False))
        return 2 if moves else 1
    groups = attributes.get("replica_groups", "").strip()
    if groups.startswith("mesh["):  # mesh['a'=2,'b'=4] {'b'}: the named axes' product
        axes = dict(re.findall(r"'([^']*)'\s*=\s*(\d+)", groups[: groups.index("]")]))
        named = re.findall(r"'([^']*)'", groups[groups.rindex("{") :]) if "{" in groups else []
        size = 1
        for axis in named:
            size *= int(axes.get(axis, 1))
        return size
    if groups.startswith("["):  # iota form: [groups,size]<=[devices]...
        dims = [int(n) for n in groups[1 : groups.index("]")].split(",") if n.strip()]
        return dims[-1] if dims else 1
    explicit = re.findall(r"\{([^{}]*)\}", groups)
    sizes = [len([n for n in g.split(",") if n.strip()]) for g in explicit]
    if any(sizes):
        return max(sizes)
    key = "num_partitions" if "channel_id" in attributes else "replica_count"
    try:
        return int(header.get(key, "1"))
    except ValueError:
        return 1


def screen(module: HloModule, platform: str, *, stacklevel: int = 4) -> str | None:
    """Checks a module given as HLO before it is compiled for one ``platform`` device.

    Warns (:class:`~hlo_go.xla.inputs.ElidedConstantsWarning`) about constants printed
    as ``{...}``.

    Returns:
      None if nothing known keeps it from running; else the reasons
      (:func:`unsupported_reasons`) joined by ``"; "``, for the caller's error.
    """
    warn_elided_constants(module, stacklevel=stacklevel)
    reasons = unsupported_reasons(module, platform)
    return "; ".join(reasons) if reasons else None
