from django.urls import path

from governance.deployments import api

urlpatterns = [
    path("", api.DeploymentListCreateApi.as_view(), name="deployment-list"),
    path("<uuid:code>", api.DeploymentDetailApi.as_view(), name="deployment-detail"),
    path("<uuid:code>/submit", api.DeploymentSubmitApi.as_view(), name="deployment-submit"),
    path("<uuid:code>/start-review", api.DeploymentStartReviewApi.as_view(), name="deployment-start-review"),
    path("<uuid:code>/withdraw", api.DeploymentWithdrawApi.as_view(), name="deployment-withdraw"),
    path("<uuid:code>/revoke", api.DeploymentRevokeApi.as_view(), name="deployment-revoke"),
    path("<uuid:code>/waivers", api.WaiverCreateApi.as_view(), name="deployment-waivers"),
    path("<uuid:code>/waivers/<uuid:waiver>/confirm", api.WaiverConfirmApi.as_view(), name="deployment-waiver-confirm"),
    path("<uuid:code>/evals", api.DeploymentEvalCreateApi.as_view(), name="deployment-evals"),
    path("<uuid:code>/usage", api.DeploymentUsageApi.as_view(), name="deployment-usage"),
    path(
        "<uuid:code>/obligations/<uuid:item>/acknowledge", api.ObligationAcknowledgeApi.as_view(), name="obligation-ack"
    ),
    path("<uuid:code>/obligations/<uuid:item>/review", api.ObligationReviewApi.as_view(), name="obligation-review"),
]
