"""Method names a flag accepts, checked when the command line is parsed.

:func:`valid_names` is the one lookup: the names each flag takes, read from the
registries (:mod:`hlo_go.methods` for fusion and schedule names,
:mod:`hlo_go.baselines.registry`, :mod:`hlo_go.sharding.methods`). :func:`method_type` and :func:`method_list_type` turn
it into argparse types whose errors list the valid names for that flag only.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from hlo_go import methods

TASKS = ("fusion", "schedule", "baseline", "sharding")
"""What a method flag decides: ``--fusion``, ``--schedule`` (measure), baselines
(``--method`` / ``--baselines``), SPMD sharding (shard ``--method``)."""

XLA_ORDER = methods.XLA_ORDER
"""``--schedule``'s name for XLA's own order."""


def valid_names(task: str) -> list[str]:
    """The method names a flag of ``task`` accepts.

    Args:
      task: one of :data:`TASKS`.

    Returns:
      The names, in registry order. ``"baseline"`` lists the single names; any ``+``
      combination of one placement, one scheduling and one fusion name is valid too.

    Raises:
      ValueError: an unknown task.
    """
    from hlo_go.baselines.registry import names

    if task in ("fusion", "schedule"):
        return list(methods.names(task))
    if task == "baseline":
        return names()
    if task == "sharding":
        from hlo_go.sharding.methods import names as sharding_names

        return sharding_names()
    raise ValueError(f"unknown method task {task!r}; tasks: {', '.join(TASKS)}")


def _check(task: str, name: str) -> str:
    name = name.strip()
    if task == "baseline":
        from hlo_go.baselines.registry import get

        try:
            get(name)
        except (KeyError, ValueError) as error:
            message = str(error.args[0] if error.args else error)
            raise argparse.ArgumentTypeError(message) from None
        return name
    if task in ("fusion", "schedule"):
        try:
            return methods.check_name(task, name)
        except KeyError as error:  # methods.UnknownMethodError
            raise argparse.ArgumentTypeError(str(error.args[0] if error.args else error)) from None
    known = valid_names(task)
    if name not in known:
        raise argparse.ArgumentTypeError(
            f"unknown {task} method {name!r}; choose from: {', '.join(known)}"
        )
    return name


def method_type(task: str) -> Callable[[str], str]:
    """argparse type of one method name of ``task`` (the error lists the valid names)."""

    def convert(text: str) -> str:
        return _check(task, text)

    convert.__name__ = f"{task} method"
    return convert


def method_list_type(task: str) -> Callable[[str], list[str]]:
    """argparse type of comma-separated method names of ``task``."""

    def convert(text: str) -> list[str]:
        chosen = [_check(task, part) for part in text.split(",") if part.strip()]
        if not chosen:
            raise argparse.ArgumentTypeError("give at least one method name")
        return chosen

    convert.__name__ = f"{task} methods"
    return convert


def names_help(task: str) -> str:
    """``"a, b, c"``: the valid names of ``task`` for a help text."""
    return ", ".join(valid_names(task))


__all__ = ["TASKS", "XLA_ORDER", "method_list_type", "method_type", "names_help", "valid_names"]
