from django.urls import include, path

from governance.web.views import artifacts, deployments, pages, teams, tools

app_name = "web"

# One request's page and the forms on it, under requests/<code>/.
request_patterns = [
    path("", deployments.deployment, name="deployment"),
    path("blockers", deployments.deployment_blockers, name="deployment-blockers"),
    path("evals", deployments.deployment_evals, name="deployment-evals"),
    path("evals/new", deployments.eval_run_create, name="eval-create"),
    path("submit", deployments.deployment_submit, name="deployment-submit"),
    path("withdraw", deployments.deployment_withdraw, name="deployment-withdraw"),
    path("start-review", deployments.deployment_start_review, name="deployment-start-review"),
    path("review", deployments.deployment_review, name="deployment-review"),
    path("packet-preview", deployments.packet_preview, name="packet-preview"),
    path("waivers", deployments.waiver_grant, name="waiver-grant"),
    path("usage", deployments.usage_report, name="usage-report"),
    path("obligations/<uuid:item>/acknowledge", deployments.obligation_acknowledge, name="obligation-acknowledge"),
    path("obligations/<uuid:item>/review", deployments.obligation_review, name="obligation-review"),
]
license_patterns = [
    path("", pages.license_catalog, name="licenses"),
    path("texts/<str:fingerprint>", pages.license_text, name="license-text"),
    path("texts/<str:fingerprint>/classify", pages.license_text_classify_view, name="license-text-classify"),
    path("<str:key>/", pages.license_detail, name="license"),
    path("<str:key>/diff", pages.license_diff, name="license-diff"),
]
cluster_patterns = [
    path("", pages.clusters, name="clusters"),
    path("<uuid:code>/test", pages.cluster_test, name="cluster-test"),
    path("<uuid:code>/discover", pages.cluster_discover_view, name="cluster-discover"),
]
team_patterns = [
    path("", teams.teams, name="teams"),
    path("new", teams.team_new, name="team-create"),
    path("<uuid:code>/", teams.team, name="team"),
    path("<uuid:code>/members", teams.team_member_add_view, name="team-member-add"),
    path("<uuid:code>/members/remove", teams.team_member_remove_view, name="team-member-remove"),
    path("<uuid:code>/leads", teams.team_lead_add_view, name="team-lead-add"),
    path("<uuid:code>/leads/remove", teams.team_lead_remove_view, name="team-lead-remove"),
]
urlpatterns = [
    path("", pages.dashboard, name="dashboard"),
    path("requests/", pages.deployment_list, name="requests"),
    path("requests/new", deployments.wizard, name="wizard"),
    path("requests/new/preview", deployments.wizard_preview, name="wizard-preview"),
    path("requests/new/artifact", deployments.wizard_artifact, name="wizard-artifact"),
    path("artifacts/<uuid:code>/", artifacts.artifact, name="artifact"),
    path("artifacts/<uuid:code>/parent", artifacts.artifact_parent, name="artifact-parent"),
    path("requests/<uuid:code>/", include(request_patterns)),
    path("licenses/", include(license_patterns)),
    path("clusters/", include(cluster_patterns)),
    path("audit/", pages.audit, name="audit"),
    path("audit/report.csv", pages.audit_report_csv, name="audit-report-csv"),
    path("audit/report.pdf", pages.audit_report_pdf, name="audit-report-pdf"),
    path("teams/", include(team_patterns)),
    path("tokens/", tools.tokens, name="tokens"),
    path("tokens/<uuid:code>/revoke", tools.token_revoke, name="token-revoke"),
    path("verify/", tools.verify, name="verify"),
    path("verify/<uuid:code>/", tools.verification, name="verification"),
]
