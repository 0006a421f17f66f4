"""Shared pytest setup.

JAX reads its settings once, on first use, so they are set here before any test module
imports JAX.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Compile time dominates the suite (policy networks, lowered corpus graphs), and the tests
# check behaviour, not speed. Four settings, all made through the environment so that the
# processes tests start (CLI runs, pinned children, a second process reading a cache)
# get them too:
# - LLVM's own optimizations are skipped (``--xla_backend_optimization_level=0``);
#   XLA's HLO passes, and so every lowering and fusion decision, are unchanged.
# - Where this jaxlib still has it, XLA:CPU's older elemental kernel emitter is used
#   (``--xla_cpu_use_fusion_emitters=false``): its kernels compile about three times
#   faster than the MLIR fusion emitters' (the PPO update of the experiments' small
#   policy: 14 s -> 4.5 s of CPU). Newer jaxlibs dropped the flag, and XLA aborts on a
#   flag it does not know, so a child process tries it first.
#   ``HLO_GO_TEST_OPTIMIZED=1`` keeps XLA's defaults for both.
# - One persistent compilation cache per test run, shared by the xdist workers, so a
#   program that several tests build (the same policy on the same small graph) compiles
#   once. It starts empty for each run and is removed at its end.
# - Every process has 8 CPU devices (the collective samples in ``hlo_samples`` need them),
#   set through XLA_FLAGS rather than ``jax.config`` so that child processes have them
#   too: JAX's cache key depends on the device count, and a CLI run with 1 device would
#   not find what a test with 8 compiled.
_EMITTER_FLAG = "--xla_cpu_use_fusion_emitters=false"


def _xla_knows(flag: str) -> bool:
    """Whether this jaxlib's XLA starts with ``flag`` (it aborts on unknown flags)."""
    probe = "import jax; jax.devices('cpu')"
    env = {**os.environ, "XLA_FLAGS": flag, "JAX_PLATFORMS": "cpu"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


_flags = os.environ.get("XLA_FLAGS", "")
if os.environ.get("HLO_GO_TEST_OPTIMIZED") != "1":
    if "--xla_backend_optimization_level" not in _flags:
        _flags = f"{_flags} --xla_backend_optimization_level=0"
    # Tried once per run (xdist workers and child processes inherit the answer).
    if os.environ.get("HLO_GO_TEST_EMITTER_TRIED") != "1":
        os.environ["HLO_GO_TEST_EMITTER_TRIED"] = "1"
        if "--xla_cpu_use_fusion_emitters" not in _flags and _xla_knows(_EMITTER_FLAG):
            _flags = f"{_flags} {_EMITTER_FLAG}"
if "--xla_force_host_platform_device_count" not in _flags:
    _flags = f"{_flags} --xla_force_host_platform_device_count=8"
os.environ["XLA_FLAGS"] = _flags.strip()
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
_XLA_CACHE = Path(tempfile.gettempdir()) / f"hlo-go-test-xla-cache-{_RUN}"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_XLA_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")


# Lets test modules import the sample registry as ``import hlo_samples``.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Removes this run's compilation cache (in the controller, after every worker)."""
    if not hasattr(session.config, "workerinput"):
        shutil.rmtree(_XLA_CACHE, ignore_errors=True)
