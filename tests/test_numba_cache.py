"""numba's on-disk cache is optional: hlo_go imports and runs with nowhere to write it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hlo_go.decisions import _jit

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import hlo_go
    from hlo_go.decisions import _jit
    from hlo_go.decisions.adjacency import build_adjacency, _counting_order
    assert hlo_go.__file__.startswith(__import__("sys").argv[1]), hlo_go.__file__
    assert _jit.HAVE_NUMBA and hasattr(_counting_order, "py_func")
    order = _counting_order(np.array([2, 0, 1, 0], np.int64), np.array([0, 2, 3, 4], np.int64))
    print("OK", sorted(order.tolist()))
    """
)


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
def test_import_without_a_writable_cache_location(tmp_path: Path) -> None:
    """Before: RuntimeError "cannot cache function '_counting_order': no locator available"
    at ``import hlo_go``. Here no location numba could cache in is writable: the package
    directory (a copy whose ``__pycache__`` entries are files, so no directory can be made
    there, even by root), HOME, XDG_CACHE_HOME and NUMBA_CACHE_DIR (paths under a file)."""
    copy = tmp_path / "site"
    shutil.copytree(
        ROOT / "hlo_go",
        copy / "hlo_go",
        ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"),
    )
    for package in [p for p in (copy / "hlo_go").rglob("*") if p.is_dir()] + [copy / "hlo_go"]:
        (package / "__pycache__").write_text("not a directory")
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": str(blocked / "home"),
        "XDG_CACHE_HOME": str(blocked / "cache"),
        "NUMBA_CACHE_DIR": str(blocked / "numba"),
        "JAX_PLATFORMS": "cpu",
    }
    env.pop("HLO_GO_NO_NUMBA", None)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(copy)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK [0, 1, 2, 3]" in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")
def test_cached_when_a_location_is_writable() -> None:
    from hlo_go.decisions.adjacency import _counting_order

    assert _counting_order._cache.__class__.__name__ == "FunctionCache"
