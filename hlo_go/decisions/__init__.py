"""Decisions (placement, schedule priority, fusion priority) and their validation."""

from hlo_go.decisions.decisions import Decisions

__all__ = ["Decisions"]
