"""What a derivative carries of its parent's terms: the parent's license, use-policy and notice files,
copied as they are, and a model card naming the base model, the relation and the license.

Licenses ask for this of whoever redistributes a derivative (Llama: "a copy of this Agreement" and
"Built with Llama"; Apache-2.0 4.a and 4.d: a copy of the license and the NOTICE file), and the
inspection of a derivative without them is a finding for legal (license.file_missing): the quantize
job writes them so that what it makes is complete as it stands.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from planner.inspectjob.licenses import license_kind

CARD_NAME = "README.md"


def _yaml_scalar(value: str) -> str:
    """One YAML double-quoted scalar: a JSON string (YAML reads JSON's escapes), ASCII only, so that a
    name with ':' or '#', a line break, or U+2028 (a line break to str.splitlines, which finds the
    front matter's closing ---) stays one field of the card."""
    return json.dumps(value, ensure_ascii=True)


def model_card(*, base_model: str, license_key: str, name: str, recipe: str) -> str:
    """The derivative's card: Hugging Face's front-matter fields for lineage and license."""
    lines = [
        "---",
        f"base_model: {_yaml_scalar(base_model)}",
        "base_model_relation: quantized",
        f"license: {_yaml_scalar(license_key)}",
        "---",
        f"# {name}",
        "",
        f"A quantized derivative of {base_model}, made with the `{recipe}` recipe (llm-compressor).",
        "The license and notice files of the base model are included unchanged and apply to it.",
        "",
    ]
    return "\n".join(lines)


def carry_obligations(source: Path, target: Path, spec: dict[str, Any], recipe_name: str) -> list[str]:
    """Copy the parent's top-level LICENSE*/LICENCE*/USE_POLICY*/NOTICE* (regular files only: a
    symbolic link is not followed) into `target` and write its model card. Returns the names copied."""
    copied = []
    for path in sorted(source.iterdir()):
        if path.is_symlink() or not path.is_file() or license_kind(path.name) is None:
            continue
        shutil.copyfile(path, target / path.name)
        copied.append(path.name)
    card = model_card(
        base_model=str(spec.get("base_model") or source.name),
        license_key=str(spec.get("license") or "other"),
        name=str(spec.get("output_name") or target.name),
        recipe=recipe_name,
    )
    (target / CARD_NAME).write_text(card, encoding="utf-8")
    return copied
