"""The package's import graph, read from the source (AST): private jax/jaxlib names in one
module, lower layers importing no higher one, no import cycles between files."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hlo_go"
# The one module allowed to touch private jax/jaxlib names.
PRIVATE_HOME = PACKAGE / "xla" / "_jaxlib.py"
# What each lower layer (first component under hlo_go) must not import. The layers:
# hlo -> graph -> decisions -> sim / xla -> baselines -> rl -> methods / api / cli, with the
# corpus store beside graph and calibration above both sim and xla.
_TOP = frozenset(
    {
        "baselines", "rl", "gonet", "sharding", "api", "evaluate", "methods",
        "calibration", "cli", "passes", "corpus_build", "pretrained",
    }
)  # fmt: skip
NEVER: dict[str, frozenset[str]] = {
    "hlo": _TOP | {"graph", "decisions", "sim", "xla", "corpus"},
    "graph": _TOP | {"decisions", "sim", "xla"},
    "decisions": _TOP | {"sim", "xla"},
    "corpus": _TOP | {"sim", "xla"},
    "sim": _TOP | {"xla"},
    "xla": _TOP | {"sim"},
    "baselines": frozenset({"rl", "api", "evaluate", "methods", "calibration", "cli"}),
}
# File-level cycles that may remain.
ALLOWED_CYCLES = [
    frozenset({"hlo_go.hlo.ir", "hlo_go.hlo.printer"}),
]


def _files() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


FILES = _files()


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every name ``module`` imports (module level or inside a function), with its line;
    ``from a import b`` gives ``a`` and ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def _is_private_jax(name: str) -> bool:
    parts = name.split(".")
    if parts[0] == "jaxlib":
        return len(parts) > 1 and parts[1].startswith("_")
    return parts[:2] == ["jax", "_src"]


def _resolve(name: str) -> str | None:
    """The package module a dotted import name lands in (None: outside the package)."""
    while name and name not in FILES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(*, faces: bool) -> dict[str, set[str]]:
    """Module -> modules it imports; package ``__init__`` faces only with ``faces``."""
    edges: dict[str, set[str]] = {m: set() for m in FILES}
    for module, path in FILES.items():
        for name, _ in _imports(module, path):
            if not name.startswith("hlo_go"):
                continue
            target = _resolve(name)
            if target is None or target == module:
                continue
            if faces or FILES[target].name != "__init__.py":
                edges[module].add(target)
    return edges


def _sub(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_scan_sees_the_package() -> None:
    assert "hlo_go.xla._jaxlib" in FILES and "hlo_go.methods" in FILES
    names = {name for name, _ in _imports("hlo_go.xla._jaxlib", PRIVATE_HOME)}
    assert any(_is_private_jax(n) for n in names)  # the check finds what it looks for


@pytest.mark.parametrize(
    ("name", "private"),
    [
        ("jaxlib._jax", True),
        ("jaxlib._hlo.HloModule", True),
        ("jax._src.lib", True),
        ("jaxlib", False),
        ("jax.extend", False),
        ("jax.numpy", False),
    ],
)
def test_private_name_rule(name: str, private: bool) -> None:
    assert _is_private_jax(name) is private


def test_private_jax_names_only_in_jaxlib_module() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
        for module, path in FILES.items()
        if path != PRIVATE_HOME
        for name, line in _imports(module, path)
        if _is_private_jax(name)
    ]
    assert not offenders, "private jax/jaxlib imports outside hlo_go/xla/_jaxlib.py:\n" + "\n".join(
        offenders
    )


def test_lower_layers_import_no_higher_layer() -> None:
    edges = _edges(faces=True)
    breaches = sorted(
        f"{a} -> {b}"
        for a, targets in edges.items()
        for b in targets
        if _sub(b) in NEVER.get(_sub(a), frozenset())
    )
    assert not breaches, "lower layers importing higher ones:\n" + "\n".join(breaches)


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [frozenset({"a", "b", "c"})]


def test_no_file_level_import_cycles() -> None:
    cycles = [c for c in _cycles(_edges(faces=False)) if c not in ALLOWED_CYCLES]
    assert not cycles, "import cycles between files:\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in cycles
    )
