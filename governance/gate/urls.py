from django.urls import path

from governance.gate import adapters, api

urlpatterns = [
    path("gate/check", api.GateCheckApi.as_view(), name="gate-check"),
    # progressive-delivery tools: thin views on the same decision (governance/gate/adapters.py)
    path("gate/argo", adapters.ArgoWebMetricApi.as_view(), name="gate-argo"),
    path("gate/flagger/confirm-promotion", adapters.FlaggerConfirmPromotionApi.as_view(), name="gate-flagger"),
    path("gate/github/protection-rule", adapters.GithubProtectionRuleApi.as_view(), name="gate-github"),
    path("gate/decisions", api.GateDecisionListApi.as_view(), name="gate-decision-list"),
    path("gate/tokens", api.CiTokenListCreateApi.as_view(), name="gate-token-list"),
    path("gate/tokens/<uuid:code>/revoke", api.CiTokenRevokeApi.as_view(), name="gate-token-revoke"),
    path(
        "deployments/<uuid:code>/gate-decisions",
        api.DeploymentGateDecisionsApi.as_view(),
        name="deployment-gate-decisions",
    ),
]
