"""Deprecated alias of :mod:`hlo_go.pretrained` (renamed in 0.2.0; removed in 0.3.0)."""

import warnings

from hlo_go.pretrained import *  # noqa: F403
from hlo_go.pretrained import __all__  # noqa: F401

warnings.warn(
    "hlo_go.policies was renamed hlo_go.pretrained; the alias goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
