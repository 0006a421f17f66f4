"""Running a benchmark's measurement in a child process with 8 CPU devices.

JAX reads its CPU device count once, when it starts; a benchmark that needs 8 devices
(``jax_num_cpu_devices``) runs its ``measure(quick)`` in a fresh interpreter, whatever the
harness process has already initialized.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

DEVICES = 8


def run_in_child(module: str, *, quick: bool) -> dict[str, Any]:
    """Runs ``python -m MODULE OUT [--quick]`` and returns the JSON it wrote to OUT.

    The module's ``__main__`` block calls :func:`child_main` with its ``measure``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        command = [sys.executable, "-m", module, out] + (["--quick"] if quick else [])
        subprocess.run(command, check=True)
        with open(out) as f:
            return json.load(f)


def child_main(measure: Callable[[bool], dict[str, Any]], argv: list[str]) -> None:
    """The child's side: 8 CPU devices, ``measure(quick)``, the result written as JSON."""
    import jax

    jax.config.update("jax_num_cpu_devices", DEVICES)
    result = measure("--quick" in argv)
    with open(argv[0], "w") as f:
        json.dump(result, f)
