"""What the UI pages read, composed from the apps' selectors with a fixed number of queries per page.

Every function takes the user and returns plain data the templates only display; what a user may
see is decided by the apps' selectors (an unauthorised request is not found)."""

from governance.web.selectors.artifact import ArtifactPage, artifact_page, wizard_artifact_facts
from governance.web.selectors.catalog import (
    capacity_preview,
    license_catalog,
    license_detail,
    license_preview,
    license_version_diff,
    wizard_artifact,
    wizard_choices,
)
from governance.web.selectors.dashboard import Dashboard, dashboard, deployments_page
from governance.web.selectors.deployment import (
    DeploymentPage,
    MemoryChart,
    deployment_actions,
    deployment_blockers_part,
    deployment_evals,
    deployment_page,
    eval_progress,
    gate_decisions,
    memory_chart,
)
from governance.web.selectors.tools import (
    audit_page,
    ci_token,
    ci_tokens,
    clusters,
    token_teams,
    verification_job,
    verification_report,
)

__all__ = [
    "ArtifactPage",
    "Dashboard",
    "DeploymentPage",
    "MemoryChart",
    "artifact_page",
    "audit_page",
    "capacity_preview",
    "ci_token",
    "ci_tokens",
    "clusters",
    "dashboard",
    "deployment_actions",
    "deployment_blockers_part",
    "deployment_evals",
    "deployment_page",
    "deployments_page",
    "eval_progress",
    "gate_decisions",
    "license_catalog",
    "license_detail",
    "license_preview",
    "license_version_diff",
    "memory_chart",
    "token_teams",
    "verification_job",
    "verification_report",
    "wizard_artifact",
    "wizard_artifact_facts",
    "wizard_choices",
]
