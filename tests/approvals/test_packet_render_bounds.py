"""Finding 1 (render time) and finding 7 (URL fetcher): the packet's text gets break opportunities,
so the longest text the API accepts renders in well under 10 s; WeasyPrint fetches nothing but the
packet's own embedded (data:) assets."""

from __future__ import annotations

import time
from typing import Any

import pytest

from governance.approvals import packet_render
from governance.approvals.packet_render import PacketInput, html_to_pdfa, render_packet
from governance.approvals.selectors import meaning_templates
from governance.core.canonical import canonical_sha256

MAX_TEXT = 4000  # the API's limit on how_met, a waiver's reason, a comment (see the schema)


def _input(how_met: str) -> PacketInput:
    evidence: dict[str, Any] = {
        "request": {"product_name": "长" * 200, "team": "platform", "facts": {"use_case": "internal"}},
        "obligations": [
            {"license": "llama-3.1", "code": "attribution", "clause": "5(a)", "status": "accepted", "how_met": how_met}
        ],
        "waivers": [],
        "licenses": [],
    }
    return PacketInput(
        deployment_code="bench",
        evidence_digest=canonical_sha256(evidence),
        evidence=evidence,
        eval_categories={},
        audit_checkpoint=None,
        signatures=meaning_templates(),
        organisation="Test Org",
    )


def _render_seconds(how_met: str) -> float:
    start = time.perf_counter()
    pdf = render_packet(_input(how_met))
    elapsed = time.perf_counter() - start
    assert pdf.startswith(b"%PDF")
    return elapsed


@pytest.mark.slow
@pytest.mark.parametrize("text", ["义" * MAX_TEXT, "x" * MAX_TEXT], ids=["cjk", "one-long-token"])
def test_the_longest_allowed_text_renders_in_well_under_10_s(text: str) -> None:
    """A ratio to the same packet with a one-word answer, measured in turn in the same process, so a
    loaded machine slows both alike (bench/approvals.py reports the seconds: 2.7 s, target 10 s).
    Without break opportunities the longest text took 40-140x the short one (20-73 s vs 0.5 s);
    with them about 1.5x idle, and up to 5.6x in CI with the serial suites beside the workers (it failed
    a 5x bound there once). 15x sits between that noise and the defect's 40x; the best of two runs of
    each keeps one scheduling hiccup out."""
    render_packet(_input("warm"))  # fonts and fontconfig caches, as in a running worker
    short = min(_render_seconds("on the box") for _ in range(2))
    longest = min(_render_seconds(text) for _ in range(2))
    assert longest < 15 * short, f"{longest:.2f} s vs {short:.2f} s for a one-word answer"


def test_the_fetcher_serves_data_urls_only() -> None:
    assert packet_render.PACKET_URL_FETCHER("data:text/plain;base64,aGk=").read() == b"hi"
    for url in ("file:///etc/passwd", "http://127.0.0.1:9/x.css", "https://example.org/a.png", "ftp://x/y"):
        with pytest.raises(ValueError, match="fetches nothing"):
            packet_render.PACKET_URL_FETCHER(url)


def test_rendering_never_fetches_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from weasyprint.urls import URLFetcher

    fetched: list[str] = []
    real = URLFetcher.fetch

    def recording(self: URLFetcher, url: str, headers: Any = None) -> Any:
        fetched.append(url)
        return real(self, url, headers)

    monkeypatch.setattr(URLFetcher, "fetch", recording)
    html = (
        '<html><head><link rel="stylesheet" href="file:///etc/hostname"></head>'
        '<body><img src="file:///etc/passwd"><img src="http://127.0.0.1:9/x.png">'
        '<img src="data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=">'
        "</body></html>"
    )
    assert html_to_pdfa(html, b"{}").startswith(b"%PDF")
    assert [url for url in fetched if not url.startswith("data:")] == []
