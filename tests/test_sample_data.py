"""The parser tests' inputs are themselves valid: XLA's parser accepts every one.

Covers the JAX-generated samples of ``hlo_samples`` (both stages) and the
hand-written modules in ``tests/data/xla_style``.
"""

from __future__ import annotations

from pathlib import Path

import hlo_samples
import jax
import pytest

from hlo_go.xla.bridge import xla_parse

XLA_STYLE_DIR = Path(__file__).resolve().parent / "data" / "xla_style"
XLA_STYLE_FILES = sorted(XLA_STYLE_DIR.glob("*.hlo"))


@pytest.mark.parametrize("stage", hlo_samples.STAGES)
@pytest.mark.parametrize("name", sorted(hlo_samples.SAMPLES))
def test_sample_text_is_accepted_by_xla(name: str, stage: str) -> None:
    if name in hlo_samples.MULTI_DEVICE and len(jax.devices()) < hlo_samples.NUM_DEVICES:
        pytest.skip("needs 8 CPU devices")
    text = hlo_samples.hlo_text(name, stage)
    assert text.startswith("HloModule ")
    xla_parse(text)


def test_unknown_sample_and_stage_are_rejected() -> None:
    with pytest.raises(KeyError):
        hlo_samples.hlo_text("no_such_sample", "optimized")
    with pytest.raises(ValueError):
        hlo_samples.hlo_text("cond_switch", "half-optimized")


def test_xla_style_files_exist_and_are_documented() -> None:
    assert len(XLA_STYLE_FILES) >= 12
    readme = (XLA_STYLE_DIR / "README.md").read_text()
    for path in XLA_STYLE_FILES:
        assert f"`{path.name}`" in readme, f"{path.name} is not described in README.md"


@pytest.mark.parametrize("path", XLA_STYLE_FILES, ids=lambda p: p.name)
def test_xla_style_file_is_accepted_by_xla(path: Path) -> None:
    # These files are known to parse, so XLA's parser cannot abort the process
    # on them: parsing in-process is safe and fast.
    xla_parse(path.read_text())
