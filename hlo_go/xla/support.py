"""What keeps a module from compiling on one device of a platform, said before XLA does.

XLA reports such modules from deep inside its pipeline (an internal RET_CHECK in
``sharding-remover`` for a manually partitioned module, an unknown custom-call target at
run time); :func:`unsupported_reasons` names the instruction and the reason first.
"""

from __future__ import annotations

from hlo_go.hlo import HloModule
from hlo_go.xla.inputs import warn_elided_constants

# Custom-call targets that only one kind of platform implements, by prefix.
PLATFORM_CUSTOM_CALLS: dict[str, tuple[str, ...]] = {
    "tpu": ("tpu_custom_call",),  # Pallas/Mosaic kernels
    "cuda": ("__cublas", "__cudnn", "__triton", "__gpu", "__cusolver"),
}

# Custom calls that mark values of a manually partitioned (shard_map) module.
MANUAL_PARTITION_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape")


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
    return reasons


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
