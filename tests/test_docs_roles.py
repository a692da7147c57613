"""docs/access.md names the roles exactly as the code does (governance.core.roles.Role): the list
it gives, and every role-like name it uses (`…_reviewer`, the OIDC role map's values)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from governance.core.roles import Role

ACCESS = Path(__file__).resolve().parent.parent / "docs" / "access.md"


def test_the_role_list_is_the_codes() -> None:
    text = ACCESS.read_text()
    listed = re.search(r"Roles are Django groups \(([^:]*):", text)
    assert listed is not None, "docs/access.md no longer lists the roles in its first paragraph"
    assert re.findall(r"`([a-z_]+)`", listed.group(1)) == list(Role.values)


def test_every_role_name_the_page_uses_is_a_role() -> None:
    text = ACCESS.read_text()
    reviewer_names = set(re.findall(r"\b[a-z]+_reviewer\b", text))
    assert reviewer_names <= set(Role.values), reviewer_names - set(Role.values)
    role_map = re.search(r"OIDC_ROLE_GROUPS='(\{.*?\})'", text, re.DOTALL)
    assert role_map is not None
    assert set(json.loads(role_map.group(1)).values()) == set(Role.values)
