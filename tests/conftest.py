"""Shared pytest setup.

JAX reads the CPU device count once, on first use, so it is set here before any
test module imports JAX: the collective samples in ``hlo_samples`` need 8 devices.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 8)

# Lets test modules import the sample registry as ``import hlo_samples``.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
