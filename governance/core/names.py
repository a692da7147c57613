"""Names that are printed where a reader signs (the approval packet) or decides: product, artifact,
team, target cluster, a derivative's planned name, an attached file's name. The one check every
serializer, form and service that takes such a name applies.

A Unicode control (Cc) or format (Cf) character never shows as itself: a bidi override (U+202E)
makes "exception<U+202E>fdp.exe" print as "exceptionexe.pdf", a zero-width space makes two names
that read alike differ. A name is text a person reads, so it holds neither (issue 43)."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf"})


def printed_name_problem(value: str) -> str | None:
    """What makes `value` unfit to print (the first hidden character, by code point and name),
    or None when every character shows as itself."""
    for character in value:
        if unicodedata.category(character) in HIDDEN_CATEGORIES:
            name = unicodedata.name(character, "a control character")
            return (
                f"contains U+{ord(character):04X} ({name}), a character that does not print as itself; "
                "a name may hold no control or format characters (bidi overrides, zero-width characters, "
                "line breaks)"
            )
    return None


def validate_printed_name(value: str) -> None:
    """A Django validator (forms and DRF fields alike): raises ValidationError with the problem."""
    problem = printed_name_problem(value)
    if problem is not None:
        raise ValidationError(problem, code="hidden_character")
