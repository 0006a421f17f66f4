"""Measured result rows as the measuring benchmarks write them, for their summary tests."""

from __future__ import annotations


def rows(graph: str, **relative: float | None) -> dict:
    """One graph's ``{"rows": [...]}``: a row per variant (``fuse_all_legal`` names
    ``fuse-all-legal``) with its relative time; ``None``: the variant was wrong."""
    return {
        "rows": [
            {"graph": graph, "variant": v.replace("_", "-"), "correct": r is not None,
             "relative": r}
            for v, r in relative.items()
        ]
    }  # fmt: skip
