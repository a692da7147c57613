"""A readiness reason's message and what to do about it, in the reader's language: for the pages
and the approval packet (which renders in the request's language).

The reason's `message` is English and stays so in the API, the gate's answers and the decision log
(their contract: DESIGN.md, docs/gate.md). The pages word it by its code instead, reading the
parameters back from the English message (each pattern below is the format string of
deployments.readiness, which is a pure function and has no language). A message no pattern
matches (a reason added since, a usage report's own words) is shown as it is: never dropped.
Texts quoted from elsewhere stay in their language: a license catalog's finding text (English, as
the packet says), a planner note, a usage report's reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.utils import translation
from django.utils.translation import gettext, gettext_lazy

Words = Callable[[dict[str, str]], str]

# The stored codes a message names, in the same words as the web UI's tables (one translation
# serves both; deployments sits below web and cannot import them).
_REVIEW_ROLES = {"legal": gettext_lazy("Legal"), "engineering": gettext_lazy("Engineering")}
_OBLIGATION_STATUSES = {
    "open": gettext_lazy("Open"),
    "acknowledged": gettext_lazy("Acknowledged, waiting for legal"),
    "accepted": gettext_lazy("Accepted by legal"),
    "rejected": gettext_lazy("Not accepted: answer again"),
    "superseded": gettext_lazy("No longer required"),
}


def _role(params: dict[str, str]) -> str:
    role = params.get("role") or ""
    return str(_REVIEW_ROLES.get(role, role)).lower()


def _weights(digest: str | None) -> str:
    return gettext("the weights") if not digest or digest == "the weights" else digest


def _planner(text: str) -> str:
    return "" if not text else gettext(" (planner: %(note)s)") % {"note": text}


def _signature_missing(p: dict[str, str]) -> str:
    return gettext("No %(role)s signature is on record.") % {"role": _role(p)}


def _signature_stale(p: dict[str, str]) -> str:
    return gettext("The %(role)s signature covers evidence %(old)s, not the current %(new)s.") % {**p, "role": _role(p)}


def _license_finding(p: dict[str, str]) -> str:
    return gettext("%(license)s, finding %(finding)s (clause %(clause)s): %(text)s") % p


def _obligation(p: dict[str, str]) -> str:
    status = str(_OBLIGATION_STATUSES.get(p["status"], p["status"]))
    return gettext("%(license)s: obligation %(obligation)s (clause %(clause)s): %(status)s") % {**p, "status": status}


def _does_not_fit(p: dict[str, str]) -> str:
    return gettext("The serving plan does not fit the target GPUs.") + _planner(p.get("note") or "")


def _over_budget(p: dict[str, str]) -> str:
    return gettext("The serving plan fits only on %(gpus)s GPUs %(kind)s, more than its budget of %(budget)s.") % {
        **p,
        "kind": f"({p['kind']})" if p.get("kind") else "",
    }


def _tight(p: dict[str, str]) -> str:
    note = p.get("note") or ""
    return gettext(
        "The serving plan fits at its central figures only, not at the pessimistic end of its intervals."
    ) + _planner(note if note.startswith("Tight") else "")


def _outside_interval(p: dict[str, str]) -> str:
    # The figures stay as the rule words them (numbers and units), as a planner note does.
    return (
        gettext(
            "A startup log of this deployment (%(engine)s on cluster %(cluster)s) falls outside the capacity plan's "
            "interval: %(figures)s"
        )
        % p
    )


def _eval_missing(p: dict[str, str]) -> str:
    text = gettext("No %(precision)s eval served %(digest)s through an engine.") % {
        "precision": p["precision"],
        "digest": _weights(p.get("digest")),
    }
    if p.get("screening"):
        text += " " + gettext("Screening runs simulate quantization and never count.")
    return text


def _eval_pending(p: dict[str, str]) -> str:
    return gettext("The %(precision)s eval of %(digest)s is still running.") % {
        "precision": p["precision"],
        "digest": _weights(p.get("digest")),
    }


def _eval_failed(p: dict[str, str]) -> str:
    return gettext("The %(precision)s eval of %(digest)s did not pass: %(runs)s") % p


def _eval_stale(p: dict[str, str]) -> str:
    return (
        gettext(
            "The passed %(precision)s eval of %(digest)s served another configuration (%(changes)s): an engine "
            "change or a new parallel layout needs a fresh eval."
        )
        % p
    )


def _eval_digest(p: dict[str, str]) -> str:
    return gettext("The passed %(precision)s eval covers weights %(evaluated)s, not the approved %(digest)s.") % p


def _eval_regressed(p: dict[str, str]) -> str:
    return (
        gettext(
            "The %(scheme)s eval on %(config)s regressed in %(category)s: candidate accuracy %(after)s against "
            "%(before)s in the last approved run on %(previous)s (more than its threshold %(threshold)s lower)."
        )
        % p
    )


def _file_missing(p: dict[str, str]) -> str:
    return gettext("The checkpoint carries no LICENSE file: nothing in it says it is %(declared)s.") % p


def _unidentified(p: dict[str, str]) -> str:
    return gettext("%(path)s (%(fingerprint)s) is a text the organisation has not classified.") % p


def _mismatch(p: dict[str, str]) -> str:
    return gettext("%(path)s is %(matches)s, but the artifact is registered as %(declared)s.") % p


def _card_mismatch(p: dict[str, str]) -> str:
    return gettext("The model card says license: %(card)s, but the artifact is registered as %(declared)s.") % p


def _refused(p: dict[str, str]) -> str:
    return gettext("The checkpoint's files were refused when they were read: %(reason)s") % p


def _precision_mismatch(p: dict[str, str]) -> str:
    return gettext("The weights are %(summary)s, not %(serving)s.") % p


def _parent_missing(p: dict[str, str]) -> str:
    return (
        gettext("The weights are %(summary)s, a quantized derivative, but no baseline is registered as its parent.") % p
    )


def _parent_mismatch(p: dict[str, str]) -> str:
    return gettext("The parent %(parent)s is not the checkpoint these weights were made from: %(differences)s") % p


def _usage(p: dict[str, str]) -> str:
    if p["text"] == "a usage report crossed license terms":
        return gettext("A usage report crossed license terms.")
    return gettext("A usage report crossed license terms: %(text)s") % p


# code -> [(the English format of deployments.readiness as a pattern, its words)]
_ENTRIES: dict[str, list[tuple[str, Words]]] = {
    "signature.missing": [(r"no (?P<role>\w+) signature is on record", _signature_missing)],
    "signature.stale": [
        (
            r"the (?P<role>\w+) signature covers evidence (?P<old>\S+), not the current (?P<new>\S+)",
            _signature_stale,
        )
    ],
    "license.blocker": [
        (r"(?P<license>[^:]+): (?P<finding>\S+) \((?P<clause>[^)]*)\): (?P<text>.*)", _license_finding)
    ],
    "license.licensor_approval_required": [
        (r"(?P<license>[^:]+): (?P<finding>\S+) \((?P<clause>[^)]*)\): (?P<text>.*)", _license_finding)
    ],
    "obligation.not_accepted": [
        (
            r"(?P<license>[^:]+): obligation (?P<obligation>\S+) \((?P<clause>[^)]*)\) is (?P<status>\w+)",
            _obligation,
        )
    ],
    "usage.threshold_crossed": [(r"(?P<text>.+)", _usage)],
    "capacity.missing": [
        (r"no capacity plan is in the evidence", lambda _p: gettext("No capacity plan is in the evidence."))
    ],
    "capacity.pending": [
        (r"the capacity plan is still computing", lambda _p: gettext("The capacity plan is still computing."))
    ],
    "capacity.failed": [(r"the capacity plan failed", lambda _p: gettext("The capacity plan failed."))],
    "capacity.does_not_fit": [(r"the serving plan does not fit the target GPUs(?:: (?P<note>.*))?", _does_not_fit)],
    "capacity.over_budget": [
        (
            r"the serving plan fits only on (?P<gpus>\d+) GPUs(?: \((?P<kind>[^)]*)\))?, more than its budget of "
            r"(?P<budget>\d+)",
            _over_budget,
        )
    ],
    "capacity.tight": [(r"(?P<note>.*)", _tight)],
    "capacity.outside_interval": [
        (
            r"a startup log of this deployment \((?P<engine>.+?) on cluster (?P<cluster>.+?)\) falls outside the "
            r"capacity plan's interval: (?P<figures>.*)",
            _outside_interval,
        )
    ],
    "eval.missing": [
        (
            r"no (?P<precision>\S+) eval served (?P<digest>the weights|\S+) through an engine"
            r"(?P<screening> \(screening.*\))?",
            _eval_missing,
        )
    ],
    "eval.pending": [(r"the (?P<precision>\S+) eval(?: of (?P<digest>.+?))? is still running", _eval_pending)],
    "eval.failed": [(r"the (?P<precision>\S+) eval of (?P<digest>\S*) did not pass: (?P<runs>.*)", _eval_failed)],
    "eval.stale": [
        (
            r"the passed (?P<precision>\S+) eval of (?P<digest>\S*) served another config \((?P<changes>[^)]*)\):.*",
            _eval_stale,
        )
    ],
    "eval.digest_mismatch": [
        (
            r"the passed (?P<precision>\S+) eval covers weights (?P<evaluated>.+), not the approved (?P<digest>\S*)",
            _eval_digest,
        )
    ],
    "eval.regressed": [
        (
            r"the (?P<scheme>\S+) eval on (?P<config>.+?) regressed in (?P<category>\S+): candidate accuracy "
            r"(?P<after>\S+) against (?P<before>\S+) in the last approved run on (?P<previous>.+?) "
            r"\(more than its threshold (?P<threshold>\S+) lower\)",
            _eval_regressed,
        )
    ],
    "license.file_missing": [
        (r"the checkpoint carries no LICENSE file: nothing in it says it is (?P<declared>.*)", _file_missing)
    ],
    "license.unidentified": [
        (r"(?P<path>\S+) \((?P<fingerprint>[^)]*)\) is a text the organisation has not classified", _unidentified)
    ],
    "license.mismatch": [
        (
            r"the model card says license: (?P<card>.+), but the artifact is registered as (?P<declared>.*)",
            _card_mismatch,
        ),
        (r"(?P<path>\S+) is (?P<matches>.+), but the artifact is registered as (?P<declared>.*)", _mismatch),
    ],
    "artifact.inspection_refused": [
        (r"the checkpoint's files were refused when they were read: (?P<reason>.*)", _refused)
    ],
    "artifact.parent_missing": [
        (
            r"the weights are (?P<summary>.+), a quantized derivative, but no baseline is registered as its parent",
            _parent_missing,
        )
    ],
    "artifact.parent_mismatch": [
        (
            r"the parent (?P<parent>.+?) is not the checkpoint these weights were made from: (?P<differences>.*)",
            _parent_mismatch,
        )
    ],
    "weights.precision_mismatch": [(r"the weights are (?P<summary>.+), not (?P<serving>\S+)", _precision_mismatch)],
}
PATTERNS: dict[str, list[tuple[re.Pattern[str], Words]]] = {
    code: [(re.compile(pattern, re.S), words) for pattern, words in entries] for code, entries in _ENTRIES.items()
}


def reason_message(blocker: dict[str, Any]) -> str:
    """The reason's message in the active language (its English `message` where no pattern of its
    code matches, and as it is in English: the reason's own words are the English text)."""
    message = str(blocker.get("message", ""))
    if _english():
        return message
    for pattern, words in PATTERNS.get(str(blocker.get("code", "")), []):
        found = pattern.fullmatch(message)
        if found:
            return words({key: value or "" for key, value in found.groupdict().items()})
    return message


def _english() -> bool:
    return (translation.get_language() or "en").split("-")[0] == "en"


def reason_todo(code: str, role: str) -> str:
    """What to do about one readiness reason, in the active language (the reason's own `fix` is
    English, for the API and the gate): the request page's "What to do" and the packet's."""
    if code == "obligation.not_accepted":
        if role == "legal":
            return gettext("Accept or reject how the requester meets this obligation.")
        return gettext("Say how this obligation is met.")
    if code == "capacity.pending":
        return gettext("The capacity plan is computing; this page updates when it is done.")
    if code == "capacity.over_budget":
        return gettext(
            "Change the serving plan (precision, context length, concurrency) so that it fits in the GPU budget, "
            "or raise the budget if that many GPUs are available."
        )
    if code.startswith("capacity."):
        return gettext("Change the serving plan (GPUs, precision, parallel layout) so that it fits.")
    if code == "eval.pending":
        return gettext("The eval run is in progress.")
    if code == "eval.missing":
        return gettext("Run the eval of the served precision on the cluster.")
    if code.startswith("eval."):
        return gettext("Run the eval again, or the requester changes the precision.")
    if code == "license.unidentified":
        return gettext("Open the license text, read it and classify it once as a license version.")
    if code == "license.mismatch":
        return gettext("Decide which terms apply; the requester registers the artifact under them.")
    if code == "license.file_missing":
        return gettext("Obtain the license the weights were published under and add it to the checkpoint.")
    if code in ("weights.precision_mismatch", "artifact.parent_missing", "artifact.inspection_refused"):
        return gettext("Serve the weights at the precision they are stored in, with their baseline registered.")
    if code == "license.licensor_approval_required":
        return gettext("Obtain the licensor's approval, then record it as a waiver with its reference.")
    if code == "license.blocker":
        # A blocker is waived only with the licensor's written permission and two legal reviewers
        # (readiness.waiver_in_force): say both, not "legal records a waiver".
        return gettext(
            "Change the deployment so the term no longer applies. Otherwise only the licensor's written "
            "permission lifts it: one legal reviewer records a waiver with the permission attached and a "
            "second legal reviewer confirms it."
        )
    if code.startswith("usage."):
        return gettext("Review the new findings; the request is approved again by signing.")
    return gettext("Review the current evidence and sign the approval packet.")
