"""The visible signature's font: pyHanko writes glyph advances as the font states them, and PDF
reads them per 1000 units of the em, so the stamp font must have 1000 units per em (DejaVu has
2048: every stamp was spread out letter by letter and clipped)."""

from __future__ import annotations

from typing import Any

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


def test_a_signer_named_in_chinese_gets_a_stamp_font_with_those_characters() -> None:
    from governance.approvals.signing import CJK_STAMP_FONT, _stamp_font_for

    if not CJK_STAMP_FONT.exists():
        pytest.skip("fonts-noto-cjk is not installed (scripts/system-deps)")
    latin = _stamp_font_for("Lena Legal\nlegal reviewer: approve")
    assert latin == stamp_font()
    path = _stamp_font_for("王芳\nlegal reviewer: approve")
    assert path is not None
    assert path != stamp_font()
    font = TTFont(str(path))
    cmap = font.getBestCmap()
    assert {ord("王"), ord("芳"), ord("a"), ord(":")} <= set(cmap)
    assert font["head"].unitsPerEm == 1000


def test_the_stamp_of_a_chinese_name_is_legible_in_poppler(tmp_path: Any) -> None:
    """The stamp drawn with the style a signature gets, on a real packet page: poppler reads the
    name back and every font is embedded (PDF/A)."""
    import io
    import shutil
    import subprocess

    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.stamp import TextStamp

    from governance.approvals.packet_render import html_to_pdfa
    from governance.approvals.signing import CJK_STAMP_FONT, STAMP_TEXT, _stamp_style

    if not CJK_STAMP_FONT.exists() or shutil.which("pdftotext") is None:
        pytest.skip("needs fonts-noto-cjk and poppler-utils (scripts/system-deps)")
    params = {
        "signer_name": "王芳",
        "role": "legal",
        "decision": "approved",
        "meaning_short": "approves on legal grounds",
        "fingerprint": "ab:cd:ef",
        "signed_at": "2026-12-01 10:00 UTC",
    }
    writer = IncrementalPdfFileWriter(io.BytesIO(html_to_pdfa("<p>packet</p>", b"{}")))
    TextStamp(writer, _stamp_style("".join(params.values())), text_params=params).apply(0, 42, 36)
    out = io.BytesIO()
    writer.write(out)
    pdf = tmp_path / "stamped.pdf"
    pdf.write_bytes(out.getvalue())
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "王芳" in text, text
    assert "legal reviewer: approved" in text
    assert STAMP_TEXT.startswith("%(signer_name)s")
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert "CJK" in fonts, fonts
    assert all(line.split()[-5] == "yes" for line in fonts.splitlines()[2:]), fonts


def test_the_stamp_speaks_the_packet_language_and_prints_utc() -> None:
    from datetime import UTC, datetime

    from django.utils import translation
    from django.utils.translation import gettext

    from governance.approvals.services.packet_jobs import STAMP_TEXT_MSGID, STAMP_TIME_MSGID, STAMP_WORDS
    from governance.approvals.signing import STAMP_TEXT, STAMP_TIME_FORMAT
    from tests.conftest import compile_messages

    compile_messages()
    assert STAMP_TEXT_MSGID == STAMP_TEXT  # English stamps are unchanged
    assert STAMP_TIME_MSGID == STAMP_TIME_FORMAT
    signed_at = datetime(2026, 12, 1, 19, 7, 42, tzinfo=UTC)
    assert signed_at.strftime(STAMP_TIME_FORMAT) == "2026-12-01 19:07 UTC"  # the packet's English format
    with translation.override("zh-hans"):
        template = gettext(STAMP_TEXT_MSGID)
        assert "审核人" in template
        assert template.count("%(") == STAMP_TEXT.count("%(")
        assert signed_at.strftime(gettext(STAMP_TIME_MSGID)) == "2026年12月1日 19:07 UTC"
        assert (str(STAMP_WORDS["legal"]), str(STAMP_WORDS["approve"])) == ("法务", "批准")
