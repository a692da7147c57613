from django.urls import path

from governance.canary import api

urlpatterns = [
    path("canary/analyses", api.CanaryAnalysisCreateApi.as_view(), name="canary-analyses"),
    path("canary/analyses/<uuid:code>", api.CanaryAnalysisDetailApi.as_view(), name="canary-analysis"),
    path("canary/analyses/<uuid:code>/decide", api.CanaryAnalysisDecideApi.as_view(), name="canary-analysis-decide"),
    path("canary/plan-measurements", api.PlanMeasurementExportApi.as_view(), name="canary-plan-measurements"),
]
