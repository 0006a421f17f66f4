"""Where the variant and placement graphs are kept: a build-on-demand cache, one
directory per jax/jaxlib version, laid out like the committed corpus (``index.json``
and ``data/NAME.STAGE.hlo.gz``).

The directory is ``$HLO_GO_CORPUS_VARIANTS`` when set, else
``$XDG_CACHE_HOME/hlo-go/corpus-variants/jax-X_jaxlib-Y`` (``~/.cache`` when
``XDG_CACHE_HOME`` is unset). The versions are read from the installed distributions'
metadata, so finding the directory never imports JAX.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from hlo_go.errors import HloGoError

ENV_VAR = "HLO_GO_CORPUS_VARIANTS"
# The splits kept in the cache, and the flag of `python -m hlo_go.corpus_build` for each.
CACHED_SPLITS = ("variants", "placement")


class VariantNotBuiltError(FileNotFoundError, HloGoError):
    """A variant or placement graph that is registered but not in the cache (or was built
    from another config): the message names the command that builds it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def version_key() -> str:
    """``"jax-X_jaxlib-Y"``: the cache directory's name for the installed versions."""
    return f"jax-{_version('jax')}_jaxlib-{_version('jaxlib')}"


def variants_root() -> Path:
    """The cache directory of the installed jax/jaxlib (it may not exist yet)."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hlo-go" / "corpus-variants" / version_key()


def build_command(split: str, name: str | None = None) -> str:
    """The shell command that builds ``split`` (or just graph ``name``) into the cache."""
    if name is not None:
        return f"python -m hlo_go.corpus_build {name}"
    return f"python -m hlo_go.corpus_build --{split} --jobs N"


__all__ = [
    "CACHED_SPLITS",
    "ENV_VAR",
    "VariantNotBuiltError",
    "build_command",
    "variants_root",
    "version_key",
]
