from django.urls import path

from governance.gate import api

urlpatterns = [
    path("gate/check", api.GateCheckApi.as_view(), name="gate-check"),
    path("gate/decisions", api.GateDecisionListApi.as_view(), name="gate-decision-list"),
    path("gate/tokens", api.CiTokenListCreateApi.as_view(), name="gate-token-list"),
    path("gate/tokens/<uuid:code>/revoke", api.CiTokenRevokeApi.as_view(), name="gate-token-revoke"),
    path(
        "deployments/<uuid:code>/gate-decisions",
        api.DeploymentGateDecisionsApi.as_view(),
        name="deployment-gate-decisions",
    ),
]
