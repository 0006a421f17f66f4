"""Deprecated: the ``hlo-go train / finetune / infer`` commands moved to
:mod:`hlo_go.cli.train`; :func:`load_graph` is :func:`hlo_go.sources.load_graph`.

Kept for one release: importing a name from here warns ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings
from typing import Any

_MOVED = {"load_graph": "hlo_go.sources"}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    warnings.warn(
        f"hlo_go.rl.cli.{name} moved to {_MOVED[name]}.{name}; the old name goes in the "
        "next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_MOVED[name]), name)
