"""The evidence document of a request: license evaluations, obligations derived from them, the
capacity plan and eval runs. Recomputing it voids reviewers' decisions on an older digest."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.artifacts.models import ModelArtifact
from governance.artifacts.selectors import artifact_signature_facts
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.calibration.models import StartupLog
from governance.calibration.selectors import startup_logs_of
from governance.capacity.models import CapacityPlan
from governance.capacity.services import capacity_plan_request
from governance.core.canonical import canonical_sha256
from governance.core.errors import ApplicationError
from governance.core.outbox import outbox_enqueue
from governance.deployments.choices import SERVING_DEFAULTS, TERMINAL, ObligationStatus, Status
from governance.deployments.models import Approval, DeploymentRequest, ObligationItem, SignOff
from governance.deployments.readiness import served_config_key
from governance.deployments.selectors import active_waivers, latest_capacity_plan
from governance.deployments.services.transitions import SYSTEM, Actor, deployment_lock, deployment_transition
from governance.evaluations.evals import candidate_accuracy, eval_evidence, eval_evidence_item
from governance.evaluations.models import EvalKind, EvalRun, EvalStatus
from governance.evaluations.selectors import artifact_self_description, cluster_by_name
from governance.licenses.engine import ENGINE_VERSION
from governance.licenses.facts import FactsError, normalize_facts
from governance.licenses.selectors import fx_table, license_evaluate
from governance.licenses.services import license_evaluation_store
from planner.engines.registry import serving_engine
from planner.plan import engine_default_max_num_seqs
from planner.specs import gpu_from_dict


def validate_facts(facts: Any) -> None:
    """The same rules as POST /api/v1/licenses/evaluate."""
    try:
        normalize_facts(facts, known_currencies=fx_table().currencies)
    except FactsError as exc:
        raise ApplicationError(
            "Invalid input. " + "; ".join(f"{k}: {v}" for k, v in exc.fields.items()),
            extra={"fields": dict(exc.fields.items())},
        ) from None


def planner_inputs(deployment: DeploymentRequest) -> dict[str, Any]:
    """The capacity planner's inputs for the request: its model, serving plan and engine (the plan
    must judge the engine the gate will compare, not the planner's default)."""
    artifact = deployment.artifact
    inputs = serving_plan_inputs(
        artifact.architecture_key or artifact.config, artifact.source_repo, deployment.serving_plan
    )
    # A target cluster the service knows: the plan takes its own evidence (calibration profile, startup logs)
    # ahead of the catalog's, as a plan naming that cluster does (issue 47).
    target = cluster_by_name(deployment.target_cluster) if deployment.target_cluster else None
    if target is not None:
        inputs["cluster"] = str(target.code)
    return inputs


def serving_plan_inputs(model: Any, model_path: str, plan: dict[str, Any]) -> dict[str, Any]:
    """The planner's inputs for a model (a catalog key or a config.json) served as a serving plan
    says: a request's, or the wizard's before anything is stored."""
    # The memory profile the planner judges the engine by (TensorRT-LLM's is keyed `trtllm` there;
    # `transformers serve`, with none of its own, is planned under its stated stand-in's).
    engine = serving_engine(str(plan.get("engine") or SERVING_DEFAULTS["engine"]))
    inputs: dict[str, Any] = {
        "engine": engine.planner_key,
        "model": model,
        "precision": plan["precision"],
        "gpu": plan["gpu"],
        "max_model_len": plan.get("max_model_len"),
        **{
            name: plan.get(name, SERVING_DEFAULTS[name])
            for name in ("concurrency", "gpu_memory_utilization", "kv_dtype")
        },
        "model_path": model_path,
    }
    if plan.get("engine_version") and engine.profile_key is not None:  # a stand-in plans its own default
        inputs["engine_version"] = plan["engine_version"]
    if plan.get("gpu_spec"):  # a GPU outside the catalog, as the request states it
        inputs["gpu_spec"] = plan["gpu_spec"]
    for name in ("tp", "pp", "ep", "dp"):
        if plan.get(name):
            inputs[name] = plan[name]
    if plan.get("concurrency") is None:
        # No concurrency stated: the engine is launched with its own default batch (vLLM's 1024 or 256
        # sequences), not with --max-num-seqs 1, and the plan reserves memory for that batch; its fit
        # still asks for one full-length sequence (the concurrency default).
        gpu = gpu_from_dict(plan["gpu_spec"]) if plan.get("gpu_spec") else str(plan["gpu"])
        inputs["max_num_seqs"] = engine_default_max_num_seqs(inputs["engine"], inputs.get("engine_version"), gpu)
    return inputs


def capacity_plan_queue(deployment: DeploymentRequest, actor: Actor) -> CapacityPlan:
    requested_by = actor if isinstance(actor, User) else None
    return capacity_plan_request(inputs=planner_inputs(deployment), actor=requested_by, subject=deployment)


def _license_evaluations(deployment: DeploymentRequest, actor: Actor) -> list[dict[str, Any]]:
    """Evaluate the facts under the current version of every license in the artifact's lineage."""
    results = []
    for pinned in deployment.artifact.license_versions():
        version, evaluation = license_evaluate(pinned.license.key, deployment.facts)
        license_evaluation_store(version=version, subject=deployment, evaluation=evaluation, actor=actor)
        results.append(
            {
                "license": version.license.key,
                "version": version.version,
                "text_sha256": version.digest,
                "decision": evaluation.decision,
                "engine_version": ENGINE_VERSION,
                "findings": [finding.as_dict() for finding in evaluation.findings],
            }
        )
    return results


def _obligations_sync(deployment: DeploymentRequest, evaluations: list[dict[str, Any]]) -> None:
    """One obligation item per obligation finding; items no finding asks for any more are superseded."""
    wanted: dict[str, tuple[str, dict[str, Any]]] = {}
    for evaluation in evaluations:
        for finding in evaluation["findings"]:
            if finding["severity"] == "obligation":
                fingerprint = canonical_sha256(
                    [evaluation["license"], finding["code"], finding["clause"], finding["params"]]
                )
                wanted[fingerprint] = (evaluation["license"], finding)
    existing = {item.fingerprint: item for item in deployment.obligations.all()}
    for fingerprint, (license_key, finding) in wanted.items():
        item = existing.get(fingerprint)
        if item is None:
            ObligationItem.objects.create(
                request=deployment,
                license_key=license_key,
                finding_code=finding["code"],
                clause=finding["clause"],
                params=finding["params"],
                message=finding["message"],
                fingerprint=fingerprint,
            )
        elif item.status == ObligationStatus.SUPERSEDED:
            item.status = ObligationStatus.OPEN
            item.save(update_fields=["status", "updated_at"])
    for fingerprint, item in existing.items():
        if fingerprint not in wanted and item.status != ObligationStatus.SUPERSEDED:
            item.status = ObligationStatus.SUPERSEDED
            item.save(update_fields=["status", "updated_at"])


def _capacity_evidence(deployment: DeploymentRequest) -> dict[str, Any] | None:
    stored = latest_capacity_plan(deployment)
    if stored is None:
        return None
    evidence: dict[str, Any] = {
        "plan": str(stored.code),
        "status": stored.status,
        "fits": stored.fits,
        "result": stored.result,
        "planner_version": stored.planner_version,
    }
    measured = [
        {
            "log": str(log.code),
            "cluster": log.cluster.name,
            "engine": log.engine,
            "engine_version": log.engine_version,
            "tp": log.planned.get("tp") or 1,
            "pp": log.planned.get("pp") or 1,
            "kv_pool_bytes": log.figures.get("available_kv_cache_memory"),
            "kv_capacity_tokens": log.figures.get("gpu_kv_cache_tokens"),
        }
        for log in startup_logs_of(subject_type=DeploymentRequest._meta.label_lower, subject_id=str(deployment.code))
        .select_related("cluster")
        .order_by("created_at")
    ]
    if measured:  # only then: the evidence of a request with no startup log is what it was (its digest too)
        evidence["measured"] = measured
    return evidence


def _approvals(deployment: DeploymentRequest) -> list[tuple[Any, EvalRun | None]]:
    """Each approval of the request, oldest first: (when, the passed served eval it relied on), as
    recorded when it was given (models.Approval; the migration filled in earlier approvals)."""
    return [
        (approval.approved_at, approval.relied_on_eval)
        for approval in Approval.objects.filter(deployment=deployment).select_related("relied_on_eval")
    ]


def _compare_with_last_approval(deployment: DeploymentRequest, eval_results: list[dict[str, Any]]) -> None:
    """A passed served eval that finished after an approval and served the approved weights on
    another engine, engine version or tp/pp/ep than the eval that approval relied on gets both runs'
    per-category candidate accuracy (`accuracy`, `last_approved_eval`) for readiness to compare.
    Fixed once the run finished (later approvals do not change it); every other item, and so the
    evidence digest of a request without such a run, is unchanged."""
    served = [i for i in eval_results if i["kind"] == EvalKind.SERVED and i["status"] == EvalStatus.PASSED]
    if deployment.approved_at is None or not served:
        return
    approvals = _approvals(deployment)
    runs = {str(run.code): run for run in EvalRun.objects.filter(code__in=[item["eval"] for item in served])}
    for item in served:
        run = runs[item["eval"]]
        before = [relied_on for when, relied_on in approvals if when < run.updated_at]
        previous = before[-1] if before else None
        if (
            previous is None
            or previous.pk == run.pk
            or previous.candidate_digest.lower() != run.candidate_digest.lower()
        ):
            continue
        reference = eval_evidence_item(previous)
        if served_config_key(item) == served_config_key(reference):
            continue
        item["accuracy"] = candidate_accuracy(run)
        item["last_approved_eval"] = {
            **{key: reference[key] for key in ("eval", "engine", "engine_version", "serving")},
            "accuracy": candidate_accuracy(previous),
        }


def build_evidence(deployment: DeploymentRequest, evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """The evidence document (DESIGN.md): its canonical SHA-256 is the evidence digest."""
    now = timezone.now()
    artifact: ModelArtifact = deployment.artifact
    eval_results = eval_evidence(deployment)
    _compare_with_last_approval(deployment, eval_results)
    return {
        "request": {
            "code": str(deployment.code),
            "team": deployment.team.name,
            "product_name": deployment.product_name,
            "environments": deployment.environments,
            "facts": deployment.facts,
            "target_cluster": deployment.target_cluster,
        },
        "artifact": {
            "code": str(artifact.code),
            "name": artifact.name,
            "source_repo": artifact.source_repo,
            "revision": artifact.revision,
            "weights_digest": artifact.weights_digest,
            "derivation": artifact.derivation,
            "parent": str(artifact.parent.code) if artifact.parent else None,
            # What the checkpoint's own files say (its precision, card, license texts), not what was
            # typed: readiness checks the serving plan and the declared license against it.
            **artifact_self_description(artifact),
            # The weights signed in the OpenSSF model-signing format (the key only once signed, so
            # the digest of evidence that predates signing is unchanged).
            **({"signature": signature} if (signature := artifact_signature_facts(artifact)) else {}),
        },
        "licenses": evaluations,
        "waivers": [
            {
                "license": w.license_key,
                "code": w.finding_code,
                "clause": w.clause,
                "severity": w.severity,
                "reason": w.reason,
                "expires_at": w.expires_at.isoformat(),
                "granted_by": w.granted_by.username,
                "confirmed_by": w.confirmed_by.username if w.confirmed_by else None,
                # the licensor's written permission: any change to the document changes the digest
                "permission": (
                    {"name": w.permission_name, "size": w.permission_size, "sha256": w.permission_sha256}
                    if w.permission_sha256
                    else None
                ),
            }
            for w in active_waivers(deployment, now)
        ],
        "obligations": [
            {
                "license": o.license_key,
                "code": o.finding_code,
                "clause": o.clause,
                "status": o.status,
                "how_met": o.how_met,
            }
            for o in deployment.obligations.exclude(status=ObligationStatus.SUPERSEDED).order_by("fingerprint")
        ],
        "capacity_plan": _capacity_evidence(deployment),
        "eval_results": eval_results,
        "serving_envelope": deployment.serving_plan,
    }


def finding_keys(licenses: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """What a finding is, for deciding whether an evaluation changed (not its measured values). The
    clause counts: Kimi K2's display duty over 100M MAU is another finding than the same duty over
    USD 20M of revenue. Usage reports compare with the same keys to decide what a report crossed."""
    return {(e["license"], f["code"], f["severity"], f.get("clause", "")) for e in licenses for f in e["findings"]}


def deployment_evidence_refresh(
    deployment: DeploymentRequest, actor: Actor, reason: str, *, only_if_findings_change: bool = False
) -> bool:
    """Re-evaluate and recompute the evidence (row locked). When the digest changes, reviewers'
    decisions on the old digest are voided and an approved request returns to review.
    `only_if_findings_change` (usage reports): keep the evidence, and so the sign-offs, unless
    the evaluation found something different. Returns True when the evidence changed."""
    evaluations = _license_evaluations(deployment, actor)
    unchanged = deployment.evidence is not None and finding_keys(evaluations) == finding_keys(
        deployment.evidence.get("licenses", [])
    )
    if only_if_findings_change and unchanged:
        return False
    _obligations_sync(deployment, evaluations)
    evidence = build_evidence(deployment, evaluations)
    digest = canonical_sha256(evidence)
    if digest == deployment.evidence_digest:
        return False
    previous = deployment.evidence_digest
    deployment.evidence, deployment.evidence_digest = evidence, digest
    deployment.save(update_fields=["evidence", "evidence_digest", "updated_at"])
    # A direct call, not a signal: voiding is a business rule. The approvals app needs no call of
    # its own: a packet of another digest is superseded by definition (approvals.selectors.current_packets).
    signoffs_void_stale(deployment, actor, reason)
    audit_record(
        actor=actor,
        action=AuditAction.DEPLOYMENT_REEVALUATED,
        obj=deployment,
        data={
            "reason": reason,
            "previous_digest": previous,
            "evidence_digest": digest,
            "decisions": {e["license"]: e["decision"] for e in evaluations},
        },
    )
    if deployment.status == Status.APPROVED:
        deployment_transition(deployment, Status.IN_REVIEW, actor, f"evidence changed: {reason}")
    return True


def signoffs_void_stale(deployment: DeploymentRequest, actor: Actor, reason: str) -> int:
    """Void every live sign-off on a digest other than the current one, each audited
    (`approval.signoff_voided`). The one place a sign-off is voided because the evidence changed:
    the sign-off is one record (its PDF signature is live exactly while it is), so this leaves no
    live signature on an old digest anywhere. Returns how many."""
    now = timezone.now()
    stale = (
        SignOff.objects.select_for_update(of=("self",))
        .filter(deployment=deployment, voided_at__isnull=True)
        .exclude(evidence_digest=deployment.evidence_digest)
        .select_related("signer")
    )
    count = 0
    for signoff in stale:
        signoff.voided_at, signoff.void_reason = now, reason
        signoff.save(update_fields=["voided_at", "void_reason", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.SIGNOFF_VOIDED,
            obj=deployment,
            data={"role": signoff.role, "reviewer": signoff.signer.username, "reason": reason},
        )
        count += 1
    return count


def _live_requests() -> QuerySet[DeploymentRequest]:
    """Requests whose evidence still matters: submitted, in review or approved."""
    return DeploymentRequest.objects.filter(status__in=[Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED])


def deployments_reevaluate(*, license_key: str | None = None, request_ids: list[int] | None = None) -> int:
    """Re-evaluate live requests (e.g. after a new license version): evidence changes send approved
    requests back to review."""
    live = _live_requests()
    if request_ids is not None:
        live = live.filter(pk__in=request_ids)
    changed = 0
    for deployment in live.select_related("artifact"):
        if license_key and license_key not in {v.license.key for v in deployment.artifact.license_versions()}:
            continue
        with transaction.atomic():
            locked = deployment_lock(deployment)
            reason = f"license {license_key} re-evaluation" if license_key else "license re-evaluation"
            if deployment_evidence_refresh(locked, SYSTEM, reason):
                changed += 1
    return changed


def on_capacity_plan_computed(sender: Any = None, *, plan: CapacityPlan, **kwargs: Any) -> None:
    """Receiver of capacity.signals.plan_computed: a computed plan is evidence of its request."""
    if plan.deployment_id is None:
        return
    deployment = DeploymentRequest.objects.filter(pk=plan.deployment_id).first()
    if deployment is None or deployment.status in TERMINAL:
        return
    with transaction.atomic():
        deployment_evidence_refresh(deployment_lock(deployment), "system:capacity", f"capacity plan {plan.status}")


def on_startup_log_recorded(sender: Any = None, *, log: StartupLog, **kwargs: Any) -> None:
    """Receiver of calibration.signals.startup_log_recorded: a log of a request's deployment is evidence of it
    (readiness holds it against the plan's intervals)."""
    if log.subject_type != DeploymentRequest._meta.label_lower:
        return
    deployment = DeploymentRequest.objects.filter(code=log.subject_id).first()
    if deployment is None or deployment.status in TERMINAL:
        return
    with transaction.atomic():
        deployment_evidence_refresh(deployment_lock(deployment), "system:calibration", "startup log recorded")


def on_eval_finished(sender: Any = None, *, evaluation: Any, **kwargs: Any) -> None:
    """Receiver of evaluations.signals.eval_finished: a finished eval run is evidence of its request."""
    deployment = evaluation.request
    if deployment is None:
        return
    reason = f"{evaluation.scheme} eval {evaluation.status}"
    if deployment.status not in TERMINAL:
        with transaction.atomic():
            deployment_evidence_refresh(deployment_lock(deployment), "system:evals", reason)
    if evaluation.status == EvalStatus.PASSED and evaluation.kind == EvalKind.SERVED:
        # The same weights in the team's other live requests: the passed eval is theirs too.
        others = (
            _live_requests()
            .filter(team_id=deployment.team_id, artifact__weights_digest=evaluation.candidate_digest)
            .exclude(pk=deployment.pk)
        )
        for other in others:
            with transaction.atomic():
                deployment_evidence_refresh(deployment_lock(other), "system:evals", f"{reason} (reused)")


def on_license_version_published(sender: Any = None, *, license_key: str, **kwargs: Any) -> None:
    """Receiver of licenses.signals.version_published: re-evaluate in the background (through the
    outbox: the version is saved even when the broker is down, and the re-evaluation follows)."""
    outbox_enqueue("deployments.reevaluate_license", license_key)


def on_artifact_inspected(sender: Any = None, *, artifact: ModelArtifact, **kwargs: Any) -> None:
    """Receiver of evaluations.signals.artifact_inspected: what the files say is evidence of every
    live request for the artifact, and for its derivatives (their parent check compares the two
    readings); drafts read it when they are submitted."""
    ids = list(
        _live_requests().filter(Q(artifact=artifact) | Q(artifact__parent=artifact)).values_list("pk", flat=True)
    )
    if ids:
        deployments_reevaluate(request_ids=ids)


def on_license_text_classified(sender: Any = None, *, fingerprint: str, **kwargs: Any) -> None:
    """Receiver of licenses.signals.text_classified: requests whose artifact carries the text."""
    ids = [
        deployment.pk
        for deployment in _live_requests().only("pk", "evidence")
        if any(
            item.get("fingerprint") == fingerprint
            for item in (((deployment.evidence or {}).get("artifact") or {}).get("inspection") or {}).get(
                "license_files"
            )
            or []
        )
    ]
    if ids:
        deployments_reevaluate(request_ids=ids)
