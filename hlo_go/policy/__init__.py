"""Deprecated alias of :mod:`hlo_go.gonet` (renamed in 0.2.0; removed in 0.3.0)."""

import warnings

from hlo_go.gonet import *  # noqa: F403
from hlo_go.gonet import __all__  # noqa: F401

warnings.warn(
    "hlo_go.policy was renamed hlo_go.gonet; the alias goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
