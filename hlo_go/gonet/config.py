"""``PolicyConfig``: every size and ablation switch of the GO policy, in one frozen dataclass."""

from __future__ import annotations

import dataclasses

TASKS: tuple[str, ...] = ("placement", "scheduling", "fusion")
"""The three decisions the policy makes, in their default order."""


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    """Sizes and switches of :class:`hlo_go.gonet.GOPolicy`.

    The defaults are the full model of the GO paper at a size that runs forward +
    sample on an 80,000-node graph in about a second on two CPU cores. Ablations
    switch one component off: ``attention=False``, ``modulation=False``,
    ``task_recurrence=False``, ``gnn_layers=0..K``.
    """

    # Width d of every node embedding (GNN, attention, heads, action embeddings).
    hidden_size: int = 64
    # K, GraphSAGE layers (0: the input embedding alone, no message passing).
    gnn_layers: int = 3
    # False: no attention; each task layer is a position-wise feed-forward block only.
    attention: bool = True
    # Attention layers per task stack (the stack's parameters are shared by all tasks).
    attention_layers: int = 1
    # Attention heads h; hidden_size must be a multiple of it.
    num_heads: int = 4
    # L, nodes per segment of the topological order (a power of two).
    segment_length: int = 64
    # Previous segments cached as memory (M = memory_segments * L; 0: no memory).
    memory_segments: int = 1
    # Segments processed together per step of the scan over segments (a power of two).
    segments_per_step: int = 16
    # True: a node attends only to itself and earlier nodes in topological order.
    causal: bool = True
    # Hidden width of the feed-forward block, as a multiple of hidden_size (0: no block).
    ffn_multiplier: int = 2
    # False: no feature modulation (FiLM scale 1, shift 0 everywhere).
    modulation: bool = True
    # False: every task reads the GNN embedding alone, not the previous task's actions.
    task_recurrence: bool = True
    # Order the tasks are decided in; a permutation of TASKS.
    task_order: tuple[str, ...] = TASKS
    # B, bins of the schedule and fusion priority categoricals (bin b -> b / (B - 1)).
    priority_bins: int = 16
    # Node-count buckets per doubling (1: powers of two; 4: steps of 1/8 of the power).
    buckets_per_octave: int = 4
    # True: also a move head, a score per colocation group of how much moving it to
    # another device speeds the step (trained on simulated single moves, hlo_go.rl.moves).
    move_head: bool = False
    # True: each node's features also carry where it falls in an unbounded-device
    # schedule (start, slack, concurrency; hlo_go.graph.timeline_features).
    timeline_features: bool = False

    def __post_init__(self) -> None:
        if sorted(self.task_order) != sorted(TASKS):
            raise ValueError(f"task_order must be a permutation of {TASKS}, got {self.task_order}")
        for name in ("hidden_size", "num_heads", "segment_length", "segments_per_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("gnn_layers", "attention_layers", "memory_segments", "ffn_multiplier"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        for name in ("segment_length", "segments_per_step", "buckets_per_octave"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two, got {value}")
        if self.priority_bins < 2:
            raise ValueError(f"priority_bins must be >= 2, got {self.priority_bins}")

    @property
    def memory_length(self) -> int:
        """M, the nodes of cached memory each segment attends to."""
        return self.memory_segments * self.segment_length
