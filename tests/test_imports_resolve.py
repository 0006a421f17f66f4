"""Every ``from hlo_go... import name`` in the package, the benchmarks and the experiments
names a module and a name that exist, and none is a deprecated alias, including imports
inside functions (scripts such as ``benchmarks/device/gpu_check.py`` import lazily and run
only where a GPU is lent)."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    p for d in ("hlo_go", "benchmarks", "experiments") for p in (ROOT / d).rglob("*.py")
)


def _hlo_go_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from hlo_go... import name`` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        module = node.module if isinstance(node, ast.ImportFrom) and node.level == 0 else None
        if module and (module == "hlo_go" or module.startswith("hlo_go.")):
            found.extend((node.lineno, module, a.name) for a in node.names)
    return found


def test_every_hlo_go_import_resolves() -> None:
    missing = []
    for path in SOURCES:
        for line, module, name in _hlo_go_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}: from {module} import {name}"
            try:
                imported = importlib.import_module(module)
            except ImportError as error:
                missing.append(f"{where} ({error})")
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                present = name == "*" or hasattr(imported, name)
            if any(issubclass(w.category, DeprecationWarning) for w in caught):
                missing.append(f"{where} (a deprecated alias)")
            if not present:
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{where} (no such name)")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("module", ["hlo_go.sim.validation"])
def test_the_check_catches_a_missing_module(module: str) -> None:
    with pytest.raises(ImportError):
        importlib.import_module(module)
