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


def _django_setup_error(**env: str) -> str:
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "governance.settings_tests", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    return result.stderr


def test_local_login_off_without_sso_is_refused_at_start() -> None:
    assert "OIDC_ISSUER" in _django_setup_error(LOCAL_LOGIN_ENABLED="false")


def test_sso_without_its_endpoints_names_what_is_missing() -> None:
    error = _django_setup_error(OIDC_ISSUER="https://idp.example.org", OIDC_CLIENT_ID="governance")
    assert "OIDC_CLIENT_SECRET" in error
    assert "OIDC_TOKEN_ENDPOINT" in error


def test_a_role_map_that_is_not_json_names_the_variable() -> None:
    assert "OIDC_ROLE_GROUPS" in _django_setup_error(OIDC_ROLE_GROUPS="gov-legal=legal_reviewer")
