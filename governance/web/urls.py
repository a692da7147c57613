from django.urls import path

from governance.web.views import deployments, pages, tools

app_name = "web"
urlpatterns = [
    path("", pages.dashboard, name="dashboard"),
    path("requests/", pages.deployment_list, name="requests"),
    path("requests/new", deployments.wizard, name="wizard"),
    path("requests/new/preview", deployments.wizard_preview, name="wizard-preview"),
    path("requests/<uuid:code>/", deployments.deployment, name="deployment"),
    path("requests/<uuid:code>/evals", deployments.deployment_evals, name="deployment-evals"),
    path("requests/<uuid:code>/evals/new", deployments.eval_run_create, name="eval-create"),
    path("requests/<uuid:code>/submit", deployments.deployment_submit, name="deployment-submit"),
    path("requests/<uuid:code>/start-review", deployments.deployment_start_review, name="deployment-start-review"),
    path("requests/<uuid:code>/review", deployments.deployment_review, name="deployment-review"),
    path("requests/<uuid:code>/waivers", deployments.waiver_grant, name="waiver-grant"),
    path("requests/<uuid:code>/usage", deployments.usage_report, name="usage-report"),
    path(
        "requests/<uuid:code>/obligations/<uuid:item>/acknowledge",
        deployments.obligation_acknowledge,
        name="obligation-acknowledge",
    ),
    path(
        "requests/<uuid:code>/obligations/<uuid:item>/review", deployments.obligation_review, name="obligation-review"
    ),
    path("licenses/", pages.license_catalog, name="licenses"),
    path("licenses/<str:key>/", pages.license_detail, name="license"),
    path("licenses/<str:key>/diff", pages.license_diff, name="license-diff"),
    path("clusters/", pages.clusters, name="clusters"),
    path("clusters/<uuid:code>/test", pages.cluster_test, name="cluster-test"),
    path("clusters/<uuid:code>/discover", pages.cluster_discover_view, name="cluster-discover"),
    path("audit/", pages.audit, name="audit"),
    path("tokens/", tools.tokens, name="tokens"),
    path("tokens/<uuid:code>/revoke", tools.token_revoke, name="token-revoke"),
    path("verify/", tools.verify, name="verify"),
]
