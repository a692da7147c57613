"""zh-Hans is complete: every msgid the templates and the code ask for (the approval packet's
included) has a translation that is not fuzzy, each translation keeps its msgid's placeholders,
and the catalog compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.i18n.catalog import CATALOG, parse_po, untranslated, used_entries

PLACEHOLDER = re.compile(r"%\([a-z_]+\)[sd]|\{[a-z_]+\}|<[a-z]+[^>]*>|</[a-z]+>")

pytestmark = pytest.mark.skipif(shutil.which("xgettext") is None, reason="needs GNU gettext (scripts/system-deps)")


def test_every_msgid_in_use_is_translated() -> None:
    missing = untranslated(used_entries(), parse_po(CATALOG.read_text(encoding="utf-8")))
    assert not missing, "untranslated in locale/zh_Hans:\n" + "\n".join(f"{e.where}: {e.msgid!r}" for e in missing)


def test_translations_keep_their_placeholders_and_markup() -> None:
    wrong = []
    for entry in parse_po(CATALOG.read_text(encoding="utf-8")):
        expected = sorted(PLACEHOLDER.findall(entry.msgid))
        if entry.plural:
            expected = sorted(set(expected) | set(PLACEHOLDER.findall(entry.plural)))
        for translation in entry.translations:
            found = sorted(PLACEHOLDER.findall(translation))
            if translation and (sorted(set(found)) != sorted(set(expected))):
                wrong.append(f"{entry.msgid!r} -> {translation!r}")
    assert not wrong, "\n".join(wrong)


def test_the_catalog_compiles() -> None:
    result = subprocess.run(
        ["msgfmt", "--check-format", "--check-header", "-o", "/dev/null", str(CATALOG)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_extractor_sees_a_missing_translation(tmp_path: Path) -> None:
    """The check can fail: a template asking for a msgid the catalog lacks is reported."""
    template = tmp_path / "probe.html"
    template.write_text('{% load i18n %}<p>{% translate "A sentence nobody has translated yet" %}</p>')
    missing = untranslated(used_entries([template], root=tmp_path), parse_po(CATALOG.read_text(encoding="utf-8")))
    assert [(entry.where, entry.msgid) for entry in missing] == [
        ("probe.html.py:1", "A sentence nobody has translated yet")
    ]
