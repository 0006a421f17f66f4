"""The ``hlo-go`` command: one parser, one module per subcommand or group.

::

    hlo-go summarize [HLO ...]          per-computation cost table of HLO modules
    hlo-go roundtrip HLO ...            parse, print, and check XLA accepts the printed text
    hlo-go corpus build|list|show       the workload corpus
    hlo-go simulate HLO ...             simulated step time, memory, timeline on --cluster
    hlo-go baseline HLO ... --method M  placement / scheduling / fusion baselines
    hlo-go train|finetune|infer         the GO policy (PPO)
    hlo-go teachers|imitate             search teachers; imitation of them (no prior input)
    hlo-go passes HLO                   search an order of XLA's HLO passes
    hlo-go measure HLO ...              lower fusion / schedule decisions into XLA; time vs XLA
    hlo-go eval HLO ...                 baselines and the GO policy per input; table, files
    hlo-go shard HLO ... --mesh 2x4     SPMD shardings: simulate and measure
    hlo-go calibrate [NAME ...]         measure this host's kernels, train a cost model on them

Every subcommand takes its inputs as the positional ``HLO`` (HLO text files or corpus
graph names), ``--cluster`` defaulting to ``host-cpu-1`` (this host, where measurements
run), and ``-v`` / ``-q`` (logging of the ``hlo_go`` logger, progress output). Exit codes
(:mod:`hlo_go.cli._common`): 0 every input handled, 1 some input failed (the others are
still reported), 2 a bad command line.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from rich.console import Console

from hlo_go.cli import (
    baseline,
    calibrate,
    corpus,
    evaluate,
    measure,
    passes,
    shard,
    simulate,
    summarize,
    teach,
    train,
)
from hlo_go.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    UsageError,
    add_logging_flags,
    configure_logging,
    make_console,
    print_error,
    version,
)

__all__ = ["build_parser", "main"]

_log = logging.getLogger("hlo_go.cli")


def build_parser() -> argparse.ArgumentParser:
    """The ``hlo-go`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="hlo-go", description="Learned graph optimization for XLA HLO."
    )
    parser.add_argument(
        "--version", action="version", version=f"hlo-go {version()}", help="print the version"
    )
    add_logging_flags(parser, top=True)
    shared = argparse.ArgumentParser(add_help=False)
    add_logging_flags(shared)
    parents = [shared]
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    summarize.add_commands(sub, parents)
    simulate.add_command(sub, parents)
    shard.add_command(sub, parents)
    baseline.add_command(sub, parents)
    train.add_commands(sub, parents)
    teach.add_commands(sub, parents)
    passes.add_command(sub, parents)
    measure.add_command(sub, parents)
    evaluate.add_command(sub, parents)
    corpus.add_commands(sub, parents)
    calibrate.add_command(sub, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``hlo-go``.

    Args:
      argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
      The exit code: 0, 1 (some input failed) or 2 (bad command line).
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: 2 for a bad command line, 0 for --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    configure_logging(verbose=args.verbose, quiet=args.quiet)
    console = make_console()
    try:
        return args.func(args, console)
    except UsageError as error:
        print_error(Console(stderr=True), f"{args.command}: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        print_error(console, "interrupted")
        return 130
    except Exception as error:  # a failure no command named: one line, traceback at -vv
        _log.debug("traceback", exc_info=True)
        text = str(error).strip().splitlines()
        print_error(console, f"{type(error).__name__}: {text[0] if text else ''}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
