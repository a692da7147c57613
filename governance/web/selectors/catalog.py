"""The request wizard's choices and live license preview, and the license catalog."""

from __future__ import annotations

import difflib
import re
from typing import Any

from governance.artifacts.models import ModelArtifact
from governance.artifacts.selectors import artifacts_visible_to
from governance.core.models import Team
from governance.evaluations.models import Cluster
from governance.licenses.models import License, LicenseTerm, LicenseVersion
from governance.web import labels

# --- wizard -----------------------------------------------------------------------------------


def wizard_choices(user: Any) -> dict[str, Any]:
    """The wizard's choices: each artifact the user may see as (code, name, license key), plain
    values (the dropdown shows nothing more; the chosen one is read whole by wizard_artifact), and
    the licenses as (key, name)."""
    return {
        "artifacts": list(
            # the visibility rule (a DISTINCT over team joins) as a subquery, so it is not planned
            # and sorted together with the joined rows
            ModelArtifact.objects.filter(pk__in=artifacts_visible_to(user).values("pk"))
            .order_by("name")
            .values_list("code", "name", "license__key")
        ),
        "licenses": list(License.objects.order_by("key").values_list("key", "name")),
        "teams": list(Team.objects.filter(members=user).order_by("name").values_list("name", flat=True))
        if getattr(user, "is_authenticated", False)
        else [],
        "clusters": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
    }


def wizard_artifact(user: Any, code: str) -> ModelArtifact | None:
    """The artifact chosen in the wizard (one of wizard_choices), whole: the preview evaluates its
    license and the request is made for it. None when none is chosen or the user may not see it."""
    if not code:
        return None
    return (
        ModelArtifact.objects.filter(pk__in=artifacts_visible_to(user).values("pk"), code=code)
        .select_related("license", "license_version", "team", "parent")
        .defer("license_version__text")  # the license text is never shown here
        .first()
    )


# --- license catalog --------------------------------------------------------------------------


def license_catalog() -> list[dict[str, Any]]:
    """Each license with its newest published version (what the table shows: never the texts)."""
    versions = (
        LicenseVersion.objects.filter(published_at__isnull=False)
        .only("license_id", "version", "effective_date", "published_at")
        .order_by("-effective_date")
    )
    current: dict[int, LicenseVersion] = {}
    for version in versions:
        current.setdefault(version.license_id, version)
    return [
        {"key": lic.key, "name": lic.name, "spdx_id": lic.spdx_id, "current": current.get(lic.pk)}
        for lic in License.objects.only("key", "name", "spdx_id").order_by("key")
    ]


def license_detail(key: str, version: str | None = None) -> dict[str, Any]:
    from governance.core.errors import NotFoundError

    try:
        found = License.objects.get(key=key)  # unique: no ordering, as first() would add
    except License.DoesNotExist:
        raise NotFoundError(f"unknown license {key!r}") from None
    versions = list(found.versions.defer("text").order_by("-effective_date", "-created_at"))  # text: not shown
    current = next((v for v in versions if v.version == version), None) if version else None
    current = current or next((v for v in versions if v.published_at is not None), versions[0] if versions else None)
    terms = list(current.terms.order_by("position")) if current else []
    return {
        "license": found,
        "versions": versions,
        "version": current,
        "terms": [_term_view(t) for t in terms],
    }


_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^}]*))?\}")
# What a placeholder stands for before a deployment's facts fill it (the license page shows terms).
_FIGURES = {"value_display": "the deployment's own figure", "value": "the deployment's own figure"}


def readable_message(template: str, params: dict[str, Any]) -> str:
    """A term's message as a reader sees it on the license page: the term's own parameters filled
    in (`{limit:,}` as 100,000,000), the deployment's figures in words, nothing in braces."""

    def fill(found: re.Match[str]) -> str:
        name, spec = found.group(1), found.group(2) or ""
        if name in params:
            try:
                return format(params[name], spec)
            except (TypeError, ValueError):
                return str(params[name])
        return _FIGURES.get(name, "…")

    return _PLACEHOLDER.sub(fill, template or "")


def _term_view(term: LicenseTerm) -> dict[str, Any]:
    return {
        "code": term.code,
        "severity": term.severity,
        "severity_label": labels.label("severity", term.severity),
        "clause": term.clause,
        "message": readable_message(term.message, term.params),
        "how_to_comply": readable_message(term.how_to_comply, term.params),
        "condition": term.condition,
        "confidence": term.confidence,
        "confidence_label": labels.label("confidence", term.confidence),
        "params": term.params,
    }


def license_version_diff(key: str, old: str, new: str) -> dict[str, Any]:
    """Terms added, removed or changed between two versions (matched by code and clause), and a
    unified diff of the full text when both have one."""
    from governance.core.errors import NotFoundError

    versions = {v.version: v for v in LicenseVersion.objects.filter(license__key=key, version__in=[old, new])}
    if old not in versions or new not in versions:
        raise NotFoundError("no such license version")
    before = {(t.code, t.clause): _term_view(t) for t in versions[old].terms.all()}
    after = {(t.code, t.clause): _term_view(t) for t in versions[new].terms.all()}
    compared = ("severity", "condition", "params", "message", "how_to_comply", "confidence")
    changed = []
    for ref in sorted(before.keys() & after.keys()):
        fields = [
            {"name": f, "old": before[ref][f], "new": after[ref][f]}
            for f in compared
            if before[ref][f] != after[ref][f]
        ]
        if fields:
            changed.append({"code": ref[0], "clause": ref[1], "fields": fields})
    text_diff = list(
        difflib.unified_diff(versions[old].text.splitlines(), versions[new].text.splitlines(), old, new, lineterm="")
    )
    return {
        "old": versions[old],
        "new": versions[new],
        "added": [after[ref] for ref in sorted(after.keys() - before.keys())],
        "removed": [before[ref] for ref in sorted(before.keys() - after.keys())],
        "changed": changed,
        "text_diff": text_diff,
    }


def capacity_preview(model: Any, model_path: str, serving_plan: dict[str, Any]) -> dict[str, Any] | None:
    """The capacity verdict the request would get, before anything is stored: the planner run here
    (a plan takes well under a second), on the serving plan as the API would take it. None while the
    model (a catalog key or a config.json) or a valid serving plan is still missing."""
    from governance.capacity.serializers import config_errors
    from governance.capacity.services import capacity_plan_run
    from governance.core.errors import ApplicationError
    from governance.deployments.serializers import ServingPlanSerializer
    from governance.deployments.services import serving_plan_inputs

    if not model or (isinstance(model, dict) and config_errors(model)):
        return None
    serializer = ServingPlanSerializer(data=serving_plan)
    if not serializer.is_valid():
        return None
    plan = dict(serializer.validated_data)
    try:
        result = capacity_plan_run(serving_plan_inputs(model, model_path, plan))
    except ApplicationError as exc:
        return {"error": exc.message}
    parallel = result.get("parallel") or {}
    budget = plan.get("max_gpus")
    gpus = int(parallel.get("gpus") or 0)
    return {
        "fits": bool(result.get("fits")),
        "parallel": parallel,
        "gpu": str((result.get("gpu") or {}).get("key") or plan.get("gpu") or ""),
        "budget": budget,
        # fits, but only on more GPUs than the budget: the readiness rule's capacity.over_budget
        "over_budget": bool(result.get("fits")) and budget is not None and gpus > int(budget),
    }


def license_preview(artifact: Any, license_key: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The license decision the request would get, before anything is stored (reads only)."""
    from governance.core.errors import ApplicationError
    from governance.licenses.facts import FactsError
    from governance.licenses.selectors import license_evaluate

    keys = sorted({v.license.key for v in artifact.license_versions()}) if artifact is not None else [license_key]
    keys = [key for key in keys if key]
    results = []
    try:
        for key in keys:
            version, evaluation = license_evaluate(key, facts)
            results.append(
                {
                    "license": key,
                    "name": version.license.name,
                    "version": version.version,
                    "decision": evaluation.decision,
                    "decision_label": labels.label("decision", evaluation.decision),
                    "findings": [
                        {
                            **f.as_dict(),
                            **labels.finding_words(f.as_dict()),
                            "severity_label": labels.label("severity", f.severity),
                            "confidence_label": labels.label("confidence", f.confidence),
                        }
                        for f in evaluation.findings
                    ],
                }
            )
    except FactsError as exc:
        return {"results": [], "errors": dict(exc.fields.items())}
    except ApplicationError as exc:
        return {"results": [], "errors": {"license": exc.message}}
    return {
        "results": results,
        "errors": {},
        "revenue": facts.get("monthly_revenue"),
        "monthly_active_users": facts.get("monthly_active_users"),
    }
