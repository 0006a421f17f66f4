"""The one base of every error hlo-go raises on purpose.

Each error class of the library inherits :class:`HloGoError` and keeps its builtin
base (``HloParseError`` is still a ``ValueError``, ``UnknownMethodError`` still a
``KeyError``), so ``except hlo_go.HloGoError`` catches whatever the library names, and
code written against the builtin bases keeps working.

Warnings inherit :class:`HloGoWarning`.
"""

from __future__ import annotations

__all__ = ["HloGoError", "HloGoWarning"]


class HloGoError(Exception):
    """Base of every named error raised by hlo-go."""


class HloGoWarning(UserWarning):
    """Base of every warning issued by hlo-go."""
