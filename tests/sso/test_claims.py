"""The group claim -> roles and teams mapping: pure functions (docs/access.md, "Single sign-on")."""

from __future__ import annotations

import pytest

from governance.sso.claims import claim_groups, map_groups, validate_role_map

ROLES = {"gov-legal": "legal_reviewer", "gov-eng": "engineering_reviewer", "gov-typo": "legal_reviwer"}
TEAMS = {"team-platform": "platform"}


def test_groups_map_to_roles_and_teams_and_nothing_else() -> None:
    access = map_groups(("gov-legal", "team-platform", "everyone"), ROLES, TEAMS)
    assert access.roles == {"legal_reviewer"}
    assert access.teams == {"platform"}


def test_a_mapped_name_that_is_not_a_role_grants_nothing() -> None:
    assert map_groups(("gov-typo",), ROLES, TEAMS).roles == frozenset()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["b", "a", "a", ""], ("a", "b")),
        ("gov-legal", ("gov-legal",)),
        ({"gov-legal": True}, ()),  # not a list: no groups, never a role by accident
        ([1, None, "x"], ("x",)),
        (None, ()),
    ],
)
def test_claim_groups_reads_only_strings(value: object, expected: tuple[str, ...]) -> None:
    assert claim_groups({"groups": value}, "groups") == expected


def test_role_map_with_an_unknown_role_names_it() -> None:
    with pytest.raises(ValueError, match="legal_reviwer"):
        validate_role_map("OIDC_ROLE_GROUPS", ROLES)
