"""License texts and the model card's front matter, as found in a checkpoint.

`license_fingerprint` is the one definition of "the same license text": the service fingerprints
the texts its legal reviewers classify with it, and the node fingerprints what it finds, so a text
matches across artifacts whatever its line wrapping. Normalisation, kept simple so it never drifts:

1. Unicode NFKC (a non-breaking space, a full-width letter or a ligature becomes its plain form);
2. a byte-order mark is dropped;
3. every run of whitespace (line breaks, tabs, indentation) becomes one space, and the ends are stripped;
4. lower-case (headings written in capitals elsewhere are the same words).

Nothing else: punctuation, copyright lines and years stay, because a changed holder or year is a
different text that a reviewer should see once (the service shows a line diff against the nearest
classified text).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from planner.cluster.base import unstorable
from planner.inspectjob.reading import read_bounded, read_prefix, reading
from planner.inspectjob.report import InspectionRefused, InspectLimits, LicenseFile, ModelCard, Problem

_WHITESPACE = re.compile(r"\s+")
_BRACKETS = re.compile(r"[\[\]{}]")
LICENSE_PREFIXES = {"license": "license", "licence": "license", "use_policy": "use_policy", "notice": "notice"}
CARD_FIELDS = ("license", "license_name", "license_link", "base_model_relation")


def normalise_license_text(text: str) -> str:
    """NFKC, no byte-order mark, whitespace runs collapsed to one space, stripped, lower-case."""
    text = unicodedata.normalize("NFKC", text).replace("\ufeff", "")
    return _WHITESPACE.sub(" ", text).strip().lower()


def license_fingerprint(text: str) -> str:
    """`sha256:` + SHA-256 of the normalised text's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(normalise_license_text(text).encode("utf-8")).hexdigest()


def license_kind(relative: str) -> str | None:
    """license / use_policy / notice for a top-level LICENSE*, LICENCE*, USE_POLICY*, NOTICE* (any case)."""
    if "/" in relative:
        return None
    lowered = relative.lower()
    return next((kind for prefix, kind in LICENSE_PREFIXES.items() if lowered.startswith(prefix)), None)


def read_license(root: Path, relative: str, kind: str, limits: InspectLimits) -> tuple[LicenseFile, list[Problem]]:
    """A license file larger than the bound refuses the checkpoint (no license is near 512 KiB). A text
    that is not UTF-8 is kept, decoded with replacement characters, and is a problem: its fingerprint is
    stable, so a reviewer can still classify it once, but two such texts differing only in the replaced
    bytes would share it."""
    raw = read_bounded(root, relative, limits.max_license_bytes, "license file")
    nul = raw.find(0)
    if nul >= 0:  # no license is binary, and the service's database holds no NUL in text
        raise InspectionRefused(relative, f"a NUL byte at offset {nul:,}: not a license text")
    problems = []
    try:
        text, utf8 = raw.decode("utf-8"), True
    except UnicodeDecodeError as exc:
        text, utf8 = raw.decode("utf-8", errors="replace"), False
        problems.append(Problem(relative, "license.not_utf8", f"not UTF-8 (byte {exc.start}); read with replacements"))
    entry = LicenseFile(
        path=relative,
        kind=kind,
        sha256=hashlib.sha256(raw).hexdigest(),
        fingerprint=license_fingerprint(text),
        text=text,
        utf8=utf8,
    )
    return entry, problems


def _front_matter(text: str) -> tuple[bool, str | None]:
    """(opened, the YAML between a first line `---` and the next line `---` or `...`; None if never closed)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return False, None
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return True, "\n".join(lines[1:number])
    return True, None


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets (quotes ignored: an upper bound, which is what a bound needs)."""
    level = deepest = 0
    for match in _BRACKETS.finditer(text):
        level = level + 1 if match.group() in "[{" else max(0, level - 1)
        deepest = max(deepest, level)
    return deepest


def _string(value: Any) -> str | None:
    """A scalar field as text; None for anything else, and for text the report cannot carry (YAML's
    \\0 and \\uD800 escapes make a NUL or an unpaired surrogate)."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = str(value)
    return None if unstorable(text) else text


def read_card(root: Path, relative: str, limits: InspectLimits) -> tuple[ModelCard | None, list[Problem]]:
    """The model card's license and lineage fields from README.md's YAML front matter (yaml.safe_load:
    no tags, no objects). Only the first max_card_bytes are read: a card's front matter comes first."""
    raw = read_prefix(root, relative, limits.max_card_bytes)
    text = raw.decode("utf-8", errors="replace")
    opened, block = _front_matter(text)
    if not opened:
        return None, [Problem(relative, "card.no_front_matter", "the model card has no YAML front matter")]
    if block is None:
        return None, [Problem(relative, "card.unterminated", "the front matter's closing --- was not found")]
    if len(block.encode()) > limits.max_front_matter_bytes:
        raise InspectionRefused(relative, f"front matter above {limits.max_front_matter_bytes:,} bytes")
    if _flow_depth(block) > limits.max_json_depth:  # PyYAML's pure-Python parser would take seconds first
        raise InspectionRefused(relative, f"front matter nested deeper than {limits.max_json_depth} levels")
    with reading(relative):
        try:
            data = yaml.safe_load(block)
        except RecursionError:
            raise InspectionRefused(relative, "front matter nested too deep") from None
        except yaml.YAMLError as exc:
            return None, [Problem(relative, "card.yaml", f"the front matter is not YAML: {str(exc)[:200]}")]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, [Problem(relative, "card.yaml", "the front matter is not a mapping")]
    problems = []
    fields: dict[str, str | None] = {}
    for key in CARD_FIELDS:
        value = data.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            problems.append(Problem(relative, "card.field", f"{key}: a list; the first, {value[0]!r}, is read"))
            value = value[0]
        fields[key] = _string(value)
        if value is not None and fields[key] is None:
            found = unstorable(value) if isinstance(value, str) else None
            problems.append(Problem(relative, "card.field", f"{key}: {found or 'not a string'}"))
    base = data.get("base_model")
    bases = [base] if isinstance(base, str) else base if isinstance(base, list) else []
    base_models = tuple(b[:300] for b in bases if isinstance(b, str) and not unstorable(b))[:64]
    if base is not None and not base_models:
        problems.append(Problem(relative, "card.field", "base_model: not a string or a list of strings"))
    elif any(isinstance(b, str) and unstorable(b) for b in bases):
        problems.append(Problem(relative, "card.field", "base_model: an entry with a NUL or unpaired surrogate"))
    card = ModelCard(
        license=fields["license"],
        license_name=fields["license_name"],
        license_link=fields["license_link"],
        base_model=base_models,
        base_model_relation=fields["base_model_relation"],
    )
    return card, problems
