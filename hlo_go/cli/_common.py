"""What every ``hlo-go`` subcommand shares: the input positional, ``--cluster``, output
paths checked before any work, ``-v`` / ``-q``, the console, and exit codes.

Exit codes (:data:`EXIT_OK`, :data:`EXIT_FAILED`, :data:`EXIT_USAGE`): 0 when every
input was handled, 1 when any input failed (the others are still reported), 2 for a bad
command line (argparse's own code, and :class:`UsageError` found after parsing).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from hlo_go.errors import HloGoError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DEFAULT_CLUSTER = "host-cpu-1"
"""The ``--cluster`` default of every subcommand: this host's CPU as one XLA device (the
``host-cpu-N`` presets of :mod:`hlo_go.sim.presets`), where ``--measure`` measures."""

INPUTS_METAVAR = "HLO"
INPUTS_HELP = "HLO text files (.hlo, .hlo.gz, .txt) or corpus graph names (`hlo-go corpus list`)"

_HANDLER_FLAG = "_hlo_go_cli_handler"


class UsageError(ValueError, HloGoError):
    """A command line that parses but cannot run (e.g. two flags that exclude each other);
    exit code 2."""


def version() -> str:
    """The installed hlo-go version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("hlo-go")
    except PackageNotFoundError:
        from hlo_go import __version__

        return __version__


def add_logging_flags(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """Adds ``-v/--verbose`` (repeatable) and ``-q/--quiet``.

    Args:
      parser: the parser.
      top: the top-level parser (its defaults set the values); a subcommand's copies
        leave a value given before the subcommand in place.
    """
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if top else argparse.SUPPRESS,
        help="log more: -v the library's progress (INFO), -vv everything (DEBUG)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="no progress bars or lines; log errors only",
    )


def configure_logging(*, verbose: int = 0, quiet: bool = False) -> None:
    """Sends the ``hlo_go`` logger's records to standard error at the chosen level.

    WARNING by default, INFO with ``-v``, DEBUG with ``-vv``, ERROR with ``-q``. Calling
    it again replaces the handler it added before (so repeated :func:`hlo_go.cli.main`
    calls in one process log once).

    Args:
      verbose: how many ``-v`` were given.
      quiet: ``-q`` was given.
    """
    logger = logging.getLogger("hlo_go")
    for handler in list(logger.handlers):
        if getattr(handler, _HANDLER_FLAG, False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    setattr(handler, _HANDLER_FLAG, True)
    logger.addHandler(handler)
    if quiet:
        level = logging.ERROR
    else:
        level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logger.setLevel(level)


def make_console() -> Console:
    """The console commands print to: the terminal's width, or (piped) wide enough that
    no line is wrapped or cropped (tables page themselves to 100 columns)."""
    if sys.stdout.isatty():
        return Console()
    return Console(width=100_000)


def print_error(console: Console, message: object, *, heading: str = "error") -> None:
    """``error: message`` in red, the message printed verbatim (no markup)."""
    console.print(f"[red]{heading}:[/red] ", end="")
    console.print(str(message).strip(), markup=False, highlight=False)


def add_inputs(
    parser: argparse.ArgumentParser, *, nargs: str | int = "+", help: str = INPUTS_HELP
) -> None:
    """Adds the one positional of every subcommand: ``inputs`` (metavar ``HLO``)."""
    parser.add_argument("inputs", nargs=nargs, metavar=INPUTS_METAVAR, help=help)


def cluster_type(spec: str) -> Any:
    """argparse type of ``--cluster``: a loaded :class:`~hlo_go.sim.Cluster`.

    Raises:
      argparse.ArgumentTypeError: an unknown preset (listing them) or a bad file.
    """
    from hlo_go.sim import names
    from hlo_go.sources import load_cluster

    try:
        return load_cluster(spec)
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown cluster {spec!r}; presets: {', '.join(names())}, or a .toml/.json file"
        ) from None
    except (ValueError, OSError) as error:
        raise argparse.ArgumentTypeError(f"cluster {spec!r}: {error}") from None


def clusters_type(spec: str) -> list[Any]:
    """argparse type of ``--clusters``: comma-separated presets or cluster files, each a
    loaded :class:`~hlo_go.sim.Cluster` (:func:`cluster_type`).

    Raises:
      argparse.ArgumentTypeError: none given, an unknown preset or a bad file.
    """
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("give at least one cluster")
    return [cluster_type(part) for part in parts]


def add_cluster(parser: argparse.ArgumentParser, *, what: str = "the cluster to simulate") -> None:
    """Adds ``--cluster`` (default :data:`DEFAULT_CLUSTER`, checked at parse time)."""
    from hlo_go.sim import names

    presets = ", ".join(n for n in names() if not n.startswith("host-cpu-"))
    presets += ", host-cpu-1..8, host-cpu-1..8-learned"
    parser.add_argument(
        "--cluster",
        type=cluster_type,
        default=DEFAULT_CLUSTER,
        metavar="NAME|FILE",
        help=f"{what}: a preset ({presets}) or a .toml/.json cluster file "
        f"(default {DEFAULT_CLUSTER}: this host's CPU, where measurements run)",
    )


def add_moves(parser: argparse.ArgumentParser) -> None:
    """Adds ``--moves M`` (default None: the policy's own, :func:`hlo_go.rl.policy_moves`)."""
    parser.add_argument(
        "--moves",
        type=bounded(int, low=0),
        metavar="M",
        help="zero-shot: then move the M groups the policy's move head scores highest, in "
        "turn, keeping each move that pays (default: 16 for a policy with a move head, else 0)",
    )


def _nearest_existing(path: Path) -> Path:
    for parent in (path, *path.parents):
        if parent.exists():
            return parent
    return Path(".")


def check_out_dir(value: str) -> str:
    """argparse type of an output directory: not an existing file, creatable, writable.

    Raises:
      argparse.ArgumentTypeError: the reason it cannot be written.
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is an existing file, not a directory")
    base = _nearest_existing(path.absolute())
    if not base.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {value!r}: {str(base)!r} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {value!r}: {str(base)!r} is not writable")
    return value


def check_out_file(value: str) -> str:
    """argparse type of an output file: not a directory, its directory creatable and
    writable (``-`` passes: standard output).

    Raises:
      argparse.ArgumentTypeError: the reason it cannot be written.
    """
    if value == "-":
        return value
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a directory, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot overwrite {value!r}: not writable")
    check_out_dir(str(path.absolute().parent))
    return value


def bounded(kind: type, *, low: float | None = None, high: float | None = None) -> Callable:
    """argparse type: a number of ``kind`` in ``[low, high]`` (NaN refused)."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
        if value != value:  # NaN
            raise argparse.ArgumentTypeError(f"not a number: {text!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            span = f"{'-inf' if low is None else low}..{'inf' if high is None else high}"
            raise argparse.ArgumentTypeError(f"{text} is outside {span}")
        return value

    convert.__name__ = kind.__name__
    return convert


__all__ = [
    "DEFAULT_CLUSTER",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "add_cluster",
    "add_inputs",
    "add_logging_flags",
    "bounded",
    "check_out_dir",
    "check_out_file",
    "cluster_type",
    "configure_logging",
    "make_console",
    "print_error",
    "version",
]
