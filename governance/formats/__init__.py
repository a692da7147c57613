"""One date format and one date-and-time format per language (settings.FORMAT_MODULE_PATH).

Django's own locales mix several (English: "Dec. 1, 2026", "12/01/2026 7:07 p.m." and
"Dec. 1, 2026, 7:07 p.m." depending on which name a template asks for). Here every date name
of a language gives the same pattern, so a page, the period report and the approval packet print a
moment one way whichever name they use; the time carries its zone (UTC unless one is activated).
"""
