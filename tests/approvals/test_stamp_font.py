"""The visible signature's font: pyHanko writes glyph advances as the font states them, and PDF
reads them per 1000 units of the em, so the stamp font must have 1000 units per em (DejaVu has
2048: every stamp was spread out letter by letter and clipped)."""

from __future__ import annotations

import pytest
from fontTools.ttLib import TTFont

from governance.approvals.signing import stamp_font


def test_the_stamp_font_has_1000_units_per_em() -> None:
    path = stamp_font()
    if path is None:
        pytest.skip("no stamp font installed")
    font = TTFont(str(path))
    assert font["head"].unitsPerEm == 1000
    advance, _ = font["hmtx"][font.getBestCmap()[ord("a")]]
    assert 400 < advance < 700  # a lower-case letter is about half an em wide
