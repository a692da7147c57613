from django.urls import path

from governance.calibration import api

urlpatterns = [
    path("clusters/<uuid:code>/calibrations", api.ClusterCalibrationsApi.as_view(), name="cluster-calibrations"),
    path("calibrations/<uuid:code>", api.CalibrationDetailApi.as_view(), name="calibration-detail"),
]
