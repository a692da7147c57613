from django.urls import path

from governance.licenses import api

urlpatterns = [
    path("evaluate", api.LicenseEvaluateApi.as_view(), name="license-evaluate"),
    path("", api.LicenseListApi.as_view(), name="license-list"),
    path("<str:key>/", api.LicenseDetailApi.as_view(), name="license-detail"),
]
