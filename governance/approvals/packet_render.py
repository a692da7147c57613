"""The approval packet: evidence → HTML (Django template) → PDF/A-3b with evidence.json attached
(WeasyPrint) → empty signature fields for each role. Rendering reads only its arguments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from typing import Any

from django.template.loader import render_to_string
from django.utils import translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from weasyprint import HTML, Attachment
from weasyprint.urls import URLFetcher, URLFetcherResponse

from governance.approvals.packet_content import (
    ACTORS,
    DECISIONS,
    DEFAULT_EVAL_THRESHOLD,
    EVAL_STATUSES,
    OBLIGATION_STATUSES,
    ROLES,
    SEVERITIES,
    backing_cluster,
    chart_caption,
    concurrency_text,
    derivation_word,
    envelope_rows,
    fact_rows,
    format_gib,
    launch_command,
    layout_text,
    plan_model,
    summary,
    word,
)
from governance.approvals.signing import add_signature_fields
from governance.approvals.verification import EVIDENCE_ATTACHMENT
from governance.capacity.selectors import plan_interval_rows, plan_verdict
from governance.core.canonical import canonical_json
from governance.core.metrics import PACKET_RENDER, timed
from governance.deployments.reason_text import reason_message, reason_todo

PACKET_FORMAT = "governance.approval-packet/1"
GIB = 1024**3
CHART_SEGMENTS = (
    ("weights", gettext_lazy("Weights"), "#33658a"),
    ("kv_cache", gettext_lazy("KV cache"), "#86bbd8"),
    ("activations", gettext_lazy("Activations"), "#f6ae2d"),
    ("reserve", gettext_lazy("Reserve"), "#c7c7c7"),
)
# The body font first for each language: Noto Sans CJK (fonts-noto-cjk, installed by
# scripts/system-deps, subset and embedded by WeasyPrint) sets Chinese text and its punctuation with
# one face; DejaVu sets Latin text, and the other face is the fallback for a name in the other script.
FONTS = {
    "zh-hans": '"Noto Sans CJK SC", "DejaVu Sans", sans-serif',
    "en": '"DejaVu Sans", "Noto Sans CJK SC", sans-serif',
}
MAX_CHART_BARS = 16


@dataclass(frozen=True, slots=True)
class PacketInput:
    deployment_code: str
    evidence_digest: str
    evidence: dict[str, Any]
    eval_categories: dict[str, dict[str, Any]]  # eval code -> summary["categories"]
    audit_checkpoint: dict[str, Any] | None
    signatures: list[dict[str, str]]  # role, field, meaning of an approval, meaning of a rejection
    organisation: str
    # The readiness rule's reasons other than the signatures this packet collects: empty for any
    # packet a reviewer could sign (the sign-off service refuses otherwise); a preview shows them.
    blockers: tuple[dict[str, str], ...] = ()
    # The request's language (settings.LANGUAGES): every word of the packet is in it, whoever renders
    # it; the signature meanings above must already be in it (selectors.meaning_templates under it).
    language: str = "en"
    # eval code -> the cluster it ran on (the eval's own record, beside the evidence: its items
    # carry no cluster, and adding one would change the digest of every request's evidence)
    eval_clusters: dict[str, str] = field(default_factory=dict)


def attachment_document(data: PacketInput) -> dict[str, Any]:
    """What evidence.json holds; `evidence` is byte-for-byte the document the digest is over."""
    return {
        "format": PACKET_FORMAT,
        "organisation": data.organisation,
        "deployment": data.deployment_code,
        "evidence_digest": data.evidence_digest,
        "evidence": data.evidence,
        "eval_categories": data.eval_categories,
        "eval_clusters": data.eval_clusters,
        "audit_checkpoint": data.audit_checkpoint,
        "signatures": data.signatures,
        "language": data.language,  # the packet's language; the evidence and its digest have none
    }


def memory_chart_svg(plan: dict[str, Any] | None, font_family: str = "") -> str:
    """A stacked bar per GPU: weights / KV cache / activations / reserve, against the GPU's memory."""
    if not plan or "memory_per_gpu" not in plan:
        return ""
    memory = plan["memory_per_gpu"]
    capacity = max(int(memory.get("capacity") or 0), 1)
    used = {key: max(int(memory.get(key) or 0), 0) for key in ("weights", "kv_cache", "activations")}
    used["reserve"] = max(capacity - sum(used.values()), 0)
    parallel = plan.get("parallel") or {}
    gpus = int(parallel.get("gpus") or 1)
    # every replica (dp) is a copy of the same GPUs: one replica's are drawn (chart_caption says so)
    bars = min(max(gpus // max(int(parallel.get("dp") or 1), 1), 1), MAX_CHART_BARS)
    width, bar_height, gap, left, top = 480, 14, 4, 58, 6
    height = top + bars * (bar_height + gap) + 34
    scale = (width - left - 10) / max(capacity, sum(used.values()))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(_("Memory per GPU"))}"'
        # the packet's own faces: left to fontconfig, Chinese labels came out in the Japanese face
        + (f' font-family="{escape(font_family)}"' if font_family else "")
        + ">"
    ]
    for index in range(bars):
        y = top + index * (bar_height + gap)
        parts.append(f'<text x="0" y="{y + bar_height - 3}" font-size="9">GPU {index}</text>')
        x = float(left)
        for key, label, colour in CHART_SEGMENTS:
            w = used[key] * scale
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{colour}">'
                f"<title>{escape(str(label))} {used[key] / GIB:.1f} GiB</title></rect>"
            )
            x += w
    legend_y = top + bars * (bar_height + gap) + 14
    x = float(left)
    for key, label, colour in CHART_SEGMENTS:
        parts.append(f'<rect x="{x:.0f}" y="{legend_y - 8}" width="8" height="8" fill="{colour}"/>')
        parts.append(
            f'<text x="{x + 11:.0f}" y="{legend_y}" font-size="8">{escape(str(label))} {used[key] / GIB:.1f} GiB</text>'
        )
        x += 105
    parts.append("</svg>")
    return "".join(parts)


def _findings(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    waivers = evidence.get("waivers", [])
    rows = []
    for evaluation in evidence.get("licenses", []):
        for finding in evaluation.get("findings", []):
            waiver = next(
                (
                    w
                    for w in waivers
                    if w["license"] == evaluation["license"]
                    and w["code"] == finding["code"]
                    and w.get("clause", "") in ("", finding.get("clause"))
                ),
                None,
            )
            rows.append({"license": evaluation["license"], **finding, "waiver": waiver})
    return rows


def _chart_caption(plan: dict[str, Any]) -> str:
    parallel, memory = plan.get("parallel") or {}, plan.get("memory_per_gpu") or {}
    if not memory:
        return ""
    gpus, replicas = int(parallel.get("gpus") or 1), max(int(parallel.get("dp") or 1), 1)
    shown = min(max(gpus // replicas, 1), MAX_CHART_BARS)
    return chart_caption(gpus, replicas, shown, int(memory.get("capacity") or 0) / GIB)


def _launch_html(plan: dict[str, Any], envelope: dict[str, Any]) -> tuple[str, str] | None:
    launch = launch_command(plan, envelope)
    return (launch[0], command_html(launch[1])) if launch else None


def _blocker_row(blocker: dict[str, str]) -> dict[str, str]:
    """A readiness reason as the packet's table shows it, in the packet's language (the reason's own
    `message` and `fix` are English: the API's and the gate's contract), as the request page words it."""
    code, role = str(blocker.get("code") or ""), str(blocker.get("role") or "")
    return {
        **blocker,
        "role_label": word(ACTORS, role),
        "message_text": reason_message(blocker),
        "todo": reason_todo(code, role),
    }


def command_html(command: str) -> str:
    """A launch command for a table cell: each argument kept whole (a line breaks between arguments,
    never after the hyphen of "--max-" in "--max-model-len"); an argument too long for the column
    (a long path) may still break inside."""
    pieces = (
        f'<span class="nowrap">{escape(piece)}</span>' if len(piece) <= 40 else escape(piece)
        for piece in command.split(" ")
    )
    return mark_safe(" ".join(pieces))  # noqa: S308 (every piece escaped above)


def code_html(code: Any) -> str:
    """A finding or obligation code for a narrow column: escaped, with a line-break opportunity
    (<wbr>) after each '.' and '_' and nowhere else (the CSS keeps its words whole: `code.ident`)."""
    return mark_safe(re.sub(r"([._])", r"\1<wbr>", escape(str(code or ""))))  # noqa: S308 (escaped above)


def css_string(text: str) -> str:
    """`text` as one CSS string token for the <style> block (@page content): quotes, backslashes,
    angle brackets, ampersands and control characters as CSS escapes, so an organisation's name can
    neither end the string nor the style element."""
    escaped = "".join(ch if ch.isprintable() and ch not in '"\\<>&' else f"\\{ord(ch):x} " for ch in text)
    return f'"{escaped}"'


def page_counter_css() -> str:
    """The CSS `content` of "page n of m" in the active language (Chinese puts the words around both numbers)."""
    # Translators: the page number at the top of each packet page; keep {page} and {pages} as they are.
    pattern = _("page {page} of {pages}")
    parts = []
    # re.split with a group keeps the placeholders at the odd positions
    for index, piece in enumerate(re.split(r"\{(pages|page)\}", pattern)):
        if index % 2:
            parts.append(f"counter({piece})")
        elif piece:
            parts.append(css_string(piece))
    return " ".join(parts)


def render_html(data: PacketInput) -> str:
    """The packet's HTML, every word in the request's language (not the language of whoever or
    whatever renders it: a reviewer's UI language or the worker's default)."""
    with translation.override(data.language):
        return _render_html(data)


def _render_html(data: PacketInput) -> str:
    evidence = data.evidence
    capacity = evidence.get("capacity_plan") or {}
    plan = capacity.get("result") if isinstance(capacity, dict) else None
    evals = []
    for item in evidence.get("eval_results", []):
        categories = data.eval_categories.get(item.get("eval", ""), {})
        threshold = item.get("threshold")
        loose = threshold is not None and float(threshold) > DEFAULT_EVAL_THRESHOLD
        evals.append(
            {
                **item,
                "categories": sorted(categories.items()),
                # against the cases' references (where they have one): the columns show only then
                "accuracy": any(c.get("quantized_accuracy") is not None for c in categories.values()),
                "loose": loose,
                "status_label": word(EVAL_STATUSES, item.get("status")),
                "cluster": data.eval_clusters.get(str(item.get("eval") or ""), ""),
            }
        )
    artifact = evidence.get("artifact", {})
    memory = (plan or {}).get("memory_per_gpu") or {}
    return render_to_string(
        "approvals/packet.html",
        {
            "target_cluster": (evidence.get("request") or {}).get("target_cluster")
            or backing_cluster(evidence, data.eval_clusters),
            "derivation": derivation_word(artifact.get("derivation")),
            "plan_model": plan_model(plan or {}, artifact),
            "plan_layout": layout_text((plan or {}).get("parallel") or {}),
            "plan_intervals": plan_interval_rows(plan),
            "plan_verdict": plan_verdict(plan),
            "plan_concurrency": concurrency_text(plan or {}, evidence.get("serving_envelope") or {}),
            "plan_launch": _launch_html(plan or {}, evidence.get("serving_envelope") or {}),
            "memory": {key: format_gib(memory.get(key)) for key in ("weights", "kv_cache", "activations", "capacity")},
            "summary": summary(evidence, data.organisation),
            "fact_rows": fact_rows((evidence.get("request") or {}).get("facts") or {}),
            "envelope_rows": envelope_rows(evidence),
            "data": data,
            "evidence": evidence,
            "request": evidence.get("request", {}),
            "artifact": evidence.get("artifact", {}),
            "licenses": [
                {**item, "decision_label": word(DECISIONS, item.get("decision"))}
                for item in evidence.get("licenses", [])
            ],
            "findings": [
                {
                    **finding,
                    "code_html": code_html(finding.get("code")),
                    "severity_label": word(SEVERITIES, finding.get("severity")),
                }
                for finding in _findings(evidence)
            ],
            "waivers": [{**item, "code_html": code_html(item.get("code"))} for item in evidence.get("waivers", [])],
            "obligations": [
                {
                    **item,
                    "code_html": code_html(item.get("code")),
                    "status_label": word(OBLIGATION_STATUSES, item.get("status")),
                }
                for item in evidence.get("obligations", [])
            ],
            "capacity": capacity,
            "plan": plan,
            "chart_svg": memory_chart_svg(plan, FONTS.get(data.language, FONTS["en"]).replace('"', "")),
            "chart_caption": _chart_caption(plan or {}),
            "evals": evals,
            "blockers": [_blocker_row(b) for b in data.blockers],
            "checkpoint": data.audit_checkpoint,
            "signatures": [{**s, "role_label": word(ROLES, s.get("role"))} for s in data.signatures],
            "font_family": FONTS.get(data.language, FONTS["en"]),
            "html_lang": translation.to_language(data.language),
            "page_counter": page_counter_css(),
            "header_text": css_string(
                _("%(organisation)s · deployment approval packet") % {"organisation": data.organisation}
            ),
        },
    )


class PacketUrlFetcher(URLFetcher):
    """The packet's only assets are inline (the chart is inline SVG, fonts come from fontconfig):
    every URL but a data: URL is refused, so no text that reached the HTML can make WeasyPrint read
    a local file or call a host."""

    def fetch(self, url: str, headers: Any = None) -> URLFetcherResponse:
        if not url.lower().startswith("data:"):
            raise ValueError(f"the approval packet fetches nothing but its embedded data: assets, not {url[:80]!r}")
        return super().fetch(url, headers)


PACKET_URL_FETCHER = PacketUrlFetcher(allowed_protocols={"data"}, allow_redirects=False)


def html_to_pdfa(html: str, attachment: bytes) -> bytes:
    """PDF/A-3b (PDF 1.7 based) with the evidence attached as an associated file."""
    document = HTML(string=html, url_fetcher=PacketUrlFetcher(allowed_protocols={"data"}, allow_redirects=False))
    pdf = document.write_pdf(
        pdf_variant="pdf/a-3b",
        attachments=[
            Attachment(
                string=attachment.decode(),
                name=EVIDENCE_ATTACHMENT,
                relationship="Data",
                description="Evidence the approval binds to (RFC 8785 canonical JSON)",
            )
        ],
    )
    if pdf is None:
        raise RuntimeError("WeasyPrint wrote no PDF")
    return pdf


@timed(PACKET_RENDER)
def render_packet(data: PacketInput) -> bytes:
    """The unsigned packet with its signature fields, ready for the first signature."""
    attachment = canonical_json(attachment_document(data))
    return add_signature_fields(html_to_pdfa(render_html(data), attachment))
