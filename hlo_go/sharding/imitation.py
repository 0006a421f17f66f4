"""Deprecated alias of :mod:`hlo_go.sharding.learned.imitation` (moved in 0.2.0; removed in
0.3.0)."""

import warnings

from hlo_go.sharding.learned.imitation import (  # noqa: F401
    ImitationExample,
    ImitationResult,
    imitation_targets,
    teacher_gap,
    train_imitation,
)

warnings.warn(
    "hlo_go.sharding.imitation moved to hlo_go.sharding.learned.imitation; the alias goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
