"""docs/first-run-ui.md against what runs it (tests/e2e/test_first_run_ui.py), on every run: every
screenshot it embeds is committed and small, no committed screenshot is left out of it, and each
button the browser test clicks is named in the doc exactly as the page names it."""

from __future__ import annotations

import re

from tests.conftest import ROOT

DOC = ROOT / "docs" / "first-run-ui.md"
IMAGES = ROOT / "docs" / "images" / "first-run-ui"
MAX_PNG_BYTES = 150_000  # read inline in a browser or on a forge: a screenshot loads at once
# What the doc tells each person to click, as the English pages say it; the browser test clicks
# these texts (the Chinese reviewer's buttons by their forms).
CLICKS = (
    "Create the request",
    "Submit for review",
    "Start the review",
    "Start the eval run",
    "Record my decision",
    "Download the approval packet (PDF)",
)


def embedded_images() -> list[str]:
    """The screenshots the doc embeds, in its order."""
    return re.findall(r"!\[[^\]]*\]\(images/first-run-ui/([^)]+\.png)\)", DOC.read_text())


def test_the_doc_embeds_committed_small_screenshots_and_names_each_click() -> None:
    text = DOC.read_text()
    images = embedded_images()
    assert images, "docs/first-run-ui.md embeds no screenshot"
    assert len(images) == len(set(images)), "an image is embedded twice"
    for name in images:
        path = IMAGES / name
        assert path.exists(), f"{name} is missing: run tests/e2e/test_first_run_ui.py with UPDATE_DOC_SCREENSHOTS=1"
        assert path.stat().st_size <= MAX_PNG_BYTES, f"{name}: {path.stat().st_size} bytes"
    committed = {p.name for p in IMAGES.glob("*.png")}
    assert committed == set(images), f"committed but not in the doc: {sorted(committed - set(images))}"
    for label in CLICKS:
        assert f"**{label}**" in text, f"the doc does not name the button {label!r}"
