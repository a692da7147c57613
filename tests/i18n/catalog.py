"""What the zh-Hans catalog must translate: the msgids the templates and the Python code ask for,
extracted the way `makemessages` does (Django's templatize, then GNU xgettext), and the catalog's
own entries (translated: a non-empty msgstr that is not marked fuzzy)."""

from __future__ import annotations

import ast
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from django.utils.translation import templatize

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
XGETTEXT = [
    "xgettext",
    "--language=Python",
    "--from-code=UTF-8",
    "--keyword=gettext_noop",
    "--keyword=gettext_lazy",
    "--keyword=ngettext_lazy:1,2",
    "--keyword=pgettext:1c,2",
    "--keyword=npgettext:1c,2,3",
    "--keyword=pgettext_lazy:1c,2",
    "--keyword=npgettext_lazy:1c,2,3",
    "--no-wrap",
    "--output=-",
]


@dataclass(frozen=True)
class Entry:
    context: str
    msgid: str
    plural: str
    translations: tuple[str, ...]
    fuzzy: bool
    where: str  # the first source reference

    @property
    def key(self) -> tuple[str, str]:
        return (self.context, self.msgid)


def parse_po(text: str) -> list[Entry]:
    """A .po/.pot file's entries (the header, msgid "", left out)."""
    entries: list[Entry] = []
    fields: dict[str, str] = {}
    flags: list[str] = []
    where = ""
    current: str | None = None

    def flush() -> None:
        nonlocal fields, flags, where, current
        if fields.get("msgid"):
            translations = tuple(v for k, v in sorted(fields.items()) if k.startswith("msgstr"))
            entries.append(
                Entry(
                    fields.get("msgctxt", ""),
                    fields["msgid"],
                    fields.get("msgid_plural", ""),
                    translations,
                    "fuzzy" in flags,
                    where,
                )
            )
        fields, flags, where, current = {}, [], "", None

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            flush()
        elif line.startswith("#,"):
            flags += [flag.strip() for flag in line[2:].split(",")]
        elif line.startswith("#:"):
            where = where or line[2:].split()[0]
        elif line.startswith("#"):
            continue
        elif line.startswith('"') and current is not None:
            fields[current] += ast.literal_eval(line)
        else:
            name, _, value = line.partition(" ")
            if name == "msgid" and "msgid" in fields:  # an entry without a blank line before it
                flush()
            current = name
            fields[name] = ast.literal_eval(value)
    flush()
    return entries


def used_entries(sources: list[Path] | None = None, root: Path = ROOT) -> list[Entry]:
    """Every msgid the templates and governance/ (not migrations) ask for; or those of `sources`
    (paths under `root`)."""
    if sources is None:
        sources = sorted((ROOT / "templates").rglob("*.html")) + sorted(
            path for path in (ROOT / "governance").rglob("*.py") if "migrations" not in path.parts
        )
    with tempfile.TemporaryDirectory() as folder:
        inputs = []
        for path in sources:
            relative = path.relative_to(root)
            if path.suffix == ".html":
                target = Path(folder) / (str(relative) + ".py")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(templatize(path.read_text(encoding="utf-8"), origin=str(relative)), encoding="utf-8")
                inputs.append(str(target))
            else:
                inputs.append(str(path))
        listing = Path(folder) / "files.txt"
        listing.write_text("\n".join(inputs))
        pot = subprocess.run(
            [*XGETTEXT, "--files-from", str(listing)], capture_output=True, text=True, check=True, cwd=folder
        ).stdout
    prefix = folder + "/"
    return [
        replace(entry, where=entry.where.removeprefix(prefix).removeprefix(str(root) + "/")) for entry in parse_po(pot)
    ]


def untranslated(used: list[Entry], catalog: list[Entry]) -> list[Entry]:
    translated = {entry.key for entry in catalog if not entry.fuzzy and all(entry.translations)}
    return [entry for entry in used if entry.key not in translated]
