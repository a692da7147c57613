"""The documented mapping from the provider's group claim to this service's roles and teams
(docs/access.md, "Single sign-on"). Pure functions of the claims and the configured maps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governance.core.roles import Role


@dataclass(frozen=True, slots=True)
class MappedAccess:
    roles: frozenset[str]
    teams: frozenset[str]
    groups: tuple[str, ...]  # the claim's groups, as received (sorted), for the audit trail


def claim_groups(claims: Mapping[str, Any], claim: str) -> tuple[str, ...]:
    """The group names in `claim`: a list of strings (or one string). Anything else is no groups:
    a malformed claim must not grant a role."""
    value = claims.get(claim)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(sorted({item for item in value if isinstance(item, str) and item}))


def map_groups(groups: tuple[str, ...], role_groups: Mapping[str, str], team_groups: Mapping[str, str]) -> MappedAccess:
    """Roles and teams the groups grant. A group may grant one role or one team; groups not in the
    maps grant nothing."""
    roles = frozenset(role_groups[g] for g in groups if g in role_groups and role_groups[g] in Role.values)
    teams = frozenset(team_groups[g] for g in groups if g in team_groups)
    return MappedAccess(roles=roles, teams=teams, groups=groups)


def validate_role_map(name: str, mapping: Mapping[str, str]) -> None:
    """Settings check: every mapped role exists (a typo must not silently grant nothing)."""
    unknown = sorted({role for role in mapping.values() if role not in Role.values})
    if unknown:
        raise ValueError(f"{name}: unknown roles {', '.join(unknown)} (roles: {', '.join(Role.values)})")
