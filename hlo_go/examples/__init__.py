"""HLO modules bundled with hlo-go, for the Quickstart and tests."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def example_path(name: str = "cnn_train_step") -> Path:
    """Path of a bundled example module (``names()`` lists them)."""
    path = _HERE / f"{name}.hlo"
    if not path.exists():
        raise FileNotFoundError(f"no bundled example {name!r}; have {names()}")
    return path


def names() -> list[str]:
    """Names of the bundled example modules."""
    return sorted(p.stem for p in _HERE.glob("*.hlo"))


__all__ = ["example_path", "names"]
