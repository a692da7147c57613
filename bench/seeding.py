"""What the benchmarks' seeds share: an artifact registered through the service, and the facts of
a commercial hosted service (imported inside the seed functions, after Django is set up)."""

from __future__ import annotations

from typing import Any

# A US company's hosted production service with 2M monthly active users.
COMMERCIAL_FACTS: dict[str, Any] = {
    "use_case": "external_commercial",
    "commercial_entity": True,
    "hosted_service": True,
    "production": True,
    "monthly_active_users": 2_000_000,
    "org_country": "US",
}


def register_artifact(actor: Any, team: Any, name: str, repo: str, license_key: str, arch: str, byte: str) -> Any:
    """A base model registered by `actor` for `team`; `byte` (two hex digits) makes its digest."""
    from governance.artifacts.services import artifact_register

    data = {"name": name, "source_repo": repo, "revision": "main", "weights_digest": "sha256:" + byte * 32}
    return artifact_register(actor=actor, team=team, data={**data, "license": license_key, "architecture_key": arch})
