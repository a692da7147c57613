from django.urls import path

from governance.calibration import api

urlpatterns = [
    path("clusters/<uuid:code>/calibrations", api.ClusterCalibrationsApi.as_view(), name="cluster-calibrations"),
    path("clusters/<uuid:code>/startup-logs", api.ClusterStartupLogsApi.as_view(), name="cluster-startup-logs"),
    path("calibrations/<uuid:code>", api.CalibrationDetailApi.as_view(), name="calibration-detail"),
]
