from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage


class SsoConfig(AppConfig):
    name = "governance.sso"
    label = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        checks.register(check_role_map)


def check_role_map(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """OIDC_ROLE_GROUPS must name roles that exist: a typo would silently grant nothing."""
    from django.conf import settings
    from django.core import checks

    from governance.sso.claims import validate_role_map

    try:
        validate_role_map("OIDC_ROLE_GROUPS", settings.OIDC_ROLE_GROUPS)
    except ValueError as exc:
        return [checks.Error(str(exc), id="sso.E001")]
    return []
