"""Where progressive-delivery tools plug in: thin views on the gate's one decision (services.
gate_decide: the same conditions, the canary stage included, logged and audited like every check),
each answering in its tool's documented shape. Authenticated like the gate: a team CI token with
scope gate:check, issued for the request and environment (Authorization: Bearer).

- Argo Rollouts `web` metric provider: POST the gate check's body; the answer's `phase` is what an
  AnalysisTemplate's conditions read (`Successful`, `Failed`, or `Inconclusive` while a canary is
  pending or waits for an engineering reviewer: Argo pauses for a human).
- Flagger `confirm-promotion` webhook: Flagger POSTs `{name, namespace, phase, checksum, metadata}`;
  `metadata` (strings only) names the request, environment, digest and the serving envelope as JSON.
  HTTP 200 advances; 412 (with the reasons) halts the promotion.
- GitHub custom deployment protection rule: the organisation's GitHub App receives the
  `deployment_protection_rule` event (action `requested`) and, after checking its
  `X-Hub-Signature-256`, relays it here with the gate check it stands for (its CI token, as any
  pipeline). The answer is the body GitHub's callback takes (`POST {deployment_callback_url}`:
  `{environment_name, state: approved|rejected, comment}`, comment at most 1024 characters), with the
  callback URL beside it: the App forwards it as it is.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.core.authentication import BearerTokenAuthentication
from governance.core.errors import invalid_input
from governance.core.models import ApiToken
from governance.deployments.readiness import ReasonCode
from governance.gate import services
from governance.gate.api import GateCheckInputSerializer, HasGateScope, TokenRateThrottle
from governance.gate.conditions import GateCheck
from governance.gate.selectors import gate_deployment_for_token

logger = logging.getLogger(__name__)
NOT_LOGGED = {"message": "The gate could not record its decision; treat this as deny.", "extra": {}}

# Denials that a wait resolves (Argo: Inconclusive, a pause), not a change of what is deployed.
WAITING_CODES = frozenset({ReasonCode.CANARY_PENDING})


def decide(token: ApiToken, data: dict[str, Any]) -> dict[str, Any] | None:
    """The gate's decision for validated check input, as the gate's own answer (and logged); None
    when the decision could not be logged (the caller answers 503: fail closed, as the gate)."""
    deployment = gate_deployment_for_token(token, data["deployment"], data["environment"])
    check = GateCheck(
        environment=data["environment"], artifact_digest=data["artifact_digest"], serving=dict(data["serving"])
    )
    try:
        decision, approval = services.gate_decide(token=token, deployment=deployment, check=check)
    except Exception:
        logger.exception("gate decision could not be logged", extra={"deployment": str(deployment.code)})
        return None
    return {
        "decision": str(decision.decision),
        "decision_id": str(decision.code),
        "reasons": decision.reasons,
        "evidence_digest": decision.evidence_digest,
        "approval": approval,
    }


def argo_phase(answer: dict[str, Any]) -> str:
    if answer["decision"] == "allow":
        return "Successful"
    codes = {reason["code"] for reason in answer["reasons"]}
    return "Inconclusive" if codes <= WAITING_CODES else "Failed"


class _AdapterApi(APIView):
    authentication_classes = [BearerTokenAuthentication]  # machines only: no session, no CSRF surface
    permission_classes = [HasGateScope]
    throttle_classes = [TokenRateThrottle]


class ArgoWebMetricApi(_AdapterApi):
    @extend_schema(
        request=GateCheckInputSerializer,
        responses={200: OpenApiTypes.OBJECT},
        summary="Argo Rollouts web metric: the gate's decision and its phase",
    )
    def post(self, request: Request) -> Response:
        serializer = GateCheckInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        answer = decide(cast(ApiToken, request.auth), dict(serializer.validated_data))
        if answer is None:
            return Response(NOT_LOGGED, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({**answer, "phase": argo_phase(answer)})


class FlaggerMetadataSerializer(serializers.Serializer):
    deployment = serializers.UUIDField()
    environment = serializers.CharField(default="production")
    artifact_digest = serializers.CharField()
    serving = serializers.CharField(help_text="the serving envelope as a JSON object (Flagger's metadata is strings)")


class FlaggerWebhookSerializer(serializers.Serializer):
    name = serializers.CharField()
    namespace = serializers.CharField()
    phase = serializers.CharField()
    checksum = serializers.CharField(required=False, allow_blank=True)
    metadata = FlaggerMetadataSerializer()


class FlaggerConfirmPromotionApi(_AdapterApi):
    @extend_schema(
        request=FlaggerWebhookSerializer,
        responses={200: OpenApiTypes.OBJECT, 412: OpenApiTypes.OBJECT},
        summary="Flagger confirm-promotion: 200 advances, 412 halts",
    )
    def post(self, request: Request) -> Response:
        hook = FlaggerWebhookSerializer(data=request.data)
        hook.is_valid(raise_exception=True)
        metadata = dict(hook.validated_data["metadata"])
        try:
            serving = json.loads(metadata["serving"])
        except ValueError:
            raise invalid_input("metadata.serving", "must be the serving envelope as a JSON object") from None
        check = GateCheckInputSerializer(
            data={
                "deployment": str(metadata["deployment"]),
                "environment": metadata["environment"],
                "artifact_digest": metadata["artifact_digest"],
                "serving": serving,
            }
        )
        check.is_valid(raise_exception=True)
        answer = decide(cast(ApiToken, request.auth), dict(check.validated_data))
        if answer is None:
            return Response(NOT_LOGGED, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        answer["canary"] = {key: hook.validated_data[key] for key in ("name", "namespace", "phase")}
        advance = answer["decision"] == "allow"
        return Response(answer, status=status.HTTP_200_OK if advance else status.HTTP_412_PRECONDITION_FAILED)


GITHUB_COMMENT_MAX = 1024


class GithubEventSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["requested"])
    environment = serializers.CharField()
    deployment_callback_url = serializers.URLField()
    event = serializers.CharField(required=False)


class GithubProtectionRuleSerializer(serializers.Serializer):
    event = GithubEventSerializer(help_text="the deployment_protection_rule webhook payload, as GitHub sent it")
    check = GateCheckInputSerializer(help_text="the gate check this environment's rollout stands for")


def github_comment(answer: dict[str, Any]) -> str:
    if answer["decision"] == "allow":
        text = f"Governance gate: allow (decision {answer['decision_id']})"
    else:
        reasons = "; ".join(f"{r['code']}: {r['fix']}" for r in answer["reasons"])
        text = f"Governance gate: deny (decision {answer['decision_id']}). {reasons}"
    return text if len(text) <= GITHUB_COMMENT_MAX else text[: GITHUB_COMMENT_MAX - 1] + "…"


class GithubProtectionRuleApi(_AdapterApi):
    @extend_schema(
        request=GithubProtectionRuleSerializer,
        responses={200: OpenApiTypes.OBJECT},
        summary="GitHub deployment protection rule: approved or rejected",
    )
    def post(self, request: Request) -> Response:
        relay = GithubProtectionRuleSerializer(data=request.data)
        relay.is_valid(raise_exception=True)
        event, check = relay.validated_data["event"], dict(relay.validated_data["check"])
        if event["environment"] != check["environment"]:
            raise invalid_input(
                "check.environment", f"the event is for {event['environment']!r}, not {check['environment']!r}"
            )
        answer = decide(cast(ApiToken, request.auth), check)
        if answer is None:
            return Response(NOT_LOGGED, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(
            {
                "callback_url": event["deployment_callback_url"],
                "body": {
                    "environment_name": event["environment"],
                    "state": "approved" if answer["decision"] == "allow" else "rejected",
                    "comment": github_comment(answer),
                },
                "gate": answer,
            }
        )
