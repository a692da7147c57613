"""The project's own PDF/A-3b check (veraPDF, the reference validator, is a Java program that
neither Debian nor PyPI packages; this checks the rules a packet could break in practice):
identification in the XMP metadata, a PDF 1.x header, an sRGB output intent with its ICC profile,
every font embedded (poppler's pdffonts), no encryption, a file identifier, no JavaScript or launch
actions, and each attachment declared as an associated file with its relationship (PDF/A-3)."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

from pyhanko.pdf_utils.generic import NameObject
from pyhanko.pdf_utils.reader import PdfFileReader


def pdfa_3b_problems(path: Path) -> list[str]:
    data = path.read_bytes()
    problems: list[str] = []
    if not re.match(rb"%PDF-1\.[4-7]", data):
        problems.append(f"header {data[:8]!r}: PDF/A-3 is based on PDF 1.7")
    reader = PdfFileReader(io.BytesIO(data))
    if reader.encrypted:
        problems.append("encrypted")
    if "/ID" not in reader.trailer:
        problems.append("no file identifier (/ID) in the trailer")
    root = reader.root
    if "/Metadata" not in root:
        problems.append("no XMP metadata")
    else:
        xmp = root["/Metadata"].get_object().data
        if not re.search(rb'pdfaid:part(="|>)3', xmp):
            problems.append("XMP does not say pdfaid:part 3")
        if not re.search(rb'pdfaid:conformance(="|>)B', xmp):
            problems.append("XMP does not say pdfaid:conformance B")
    intents = root.get("/OutputIntents")
    intents = intents.get_object() if intents is not None else []
    if not any(
        intent.get_object().get("/S") == NameObject("/GTS_PDFA1") and "/DestOutputProfile" in intent.get_object()
        for intent in intents
    ):
        problems.append("no PDF/A output intent with an ICC profile")
    if b"/JavaScript" in data or b"/JS " in data or b"/Launch" in data:
        problems.append("JavaScript or a launch action")
    names = root.get("/Names")
    files = names.get_object().get("/EmbeddedFiles") if names is not None else None
    if files is not None:
        listing = files.get_object().get("/Names", [])
        specs = [listing[index + 1].get_object() for index in range(0, len(listing), 2)]
        for spec in specs:
            if "/AFRelationship" not in spec:
                problems.append(f"attachment {spec.get('/F')} has no /AFRelationship")
        if specs and "/AF" not in root:
            problems.append("attachments are not listed as associated files (/AF)")
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    for line in fonts.splitlines()[2:]:
        # columns: name type encoding emb sub uni object ID; the type may hold spaces ("CID Type 0C"),
        # so emb is counted from the end
        columns = line.split()
        if len(columns) < 8 or columns[-5] != "yes":
            problems.append(f"font not embedded: {line}")
    if len(fonts.splitlines()) <= 2:
        problems.append("no fonts at all")
    return problems
