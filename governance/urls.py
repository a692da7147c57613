from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path
from django_ratelimit.decorators import ratelimit
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance.approvals.api import DeploymentReviewApi
from governance.artifacts.api import ArtifactDetailApi, ArtifactListCreateApi, ArtifactShareApi, ArtifactSignatureApi
from governance.capacity.api import CapacityPlanCreateApi, CapacityPlanDetailApi, PlannerPlanApi
from governance.core.api import MeApi
from governance.core.exceptions import not_found
from governance.core.health import healthz
from governance.observability.views import metrics
from governance.sso import views as sso_views

api_v1: list[URLPattern | URLResolver] = [
    path("me", MeApi.as_view(), name="me"),
    path("audit/", include("governance.audit.urls")),
    path("approvals/", include("governance.approvals.urls")),
    path("licenses/", include("governance.licenses.urls")),
    path("planner/plan", PlannerPlanApi.as_view(), name="planner-plan"),
    path("artifacts", ArtifactListCreateApi.as_view(), name="artifact-list"),
    path("artifacts/<uuid:code>", ArtifactDetailApi.as_view(), name="artifact-detail"),
    # A review decision is a signed sign-off: the approvals app answers the deployments' review URL.
    path("deployments/<uuid:code>/review", DeploymentReviewApi.as_view(), name="deployment-review"),
    path("artifacts/<uuid:code>/share", ArtifactShareApi.as_view(), name="artifact-share"),
    path("artifacts/<uuid:code>/signature", ArtifactSignatureApi.as_view(), name="artifact-signature"),
    path("deployments/", include("governance.deployments.urls")),
    path("", include("governance.evaluations.urls")),
    path("", include("governance.calibration.urls")),
    path("", include("governance.gate.urls")),
    path("", include("governance.canary.urls")),
    path("", include("governance.quantization.urls")),
    path("capacity/plans", CapacityPlanCreateApi.as_view(), name="capacity-plan-create"),
    path("capacity/plans/<uuid:code>", CapacityPlanDetailApi.as_view(), name="capacity-plan-detail"),
    path("schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path(
        "accounts/login/",
        ratelimit(key="ip", rate=settings.LOGIN_RATE, method="POST", block=True)(auth_views.LoginView.as_view()),
        name="login",
    ),
    # Signed in through the provider: the provider's session ends too (governance.sso.views.logout).
    path("accounts/logout/", sso_views.logout, name="logout"),
    path("oidc/", include("governance.sso.urls")),
    path("api/v1/", include((api_v1, "api"), namespace="v1")),
    path(
        "api/docs/",
        # The split view serves its script as a file: no inline script, so the CSP holds here too.
        SpectacularSwaggerSplitView.as_view(url_name="v1:schema", permission_classes=[]),
        name="api-docs",
    ),
    path("", include("governance.web.urls")),
]

# An unrouted path under /api/ answers the API's JSON error shape, not the HTML page.
handler404 = not_found
