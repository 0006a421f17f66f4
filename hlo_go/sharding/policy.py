"""Deprecated alias of :mod:`hlo_go.sharding.learned` (moved in 0.2.0; removed in 0.3.0)."""

import warnings

from hlo_go.sharding.learned import *  # noqa: F403
from hlo_go.sharding.learned import __all__  # noqa: F401
from hlo_go.sharding.strategies import MAX_STRATEGIES  # noqa: F401

warnings.warn(
    "hlo_go.sharding.policy moved to hlo_go.sharding.learned; the alias goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
