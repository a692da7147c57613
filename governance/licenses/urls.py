from django.urls import path

from governance.licenses import api

urlpatterns = [
    path("evaluate", api.LicenseEvaluateApi.as_view(), name="license-evaluate"),
    path("", api.LicenseListApi.as_view(), name="license-list"),
    path("texts/", api.LicenseTextListApi.as_view(), name="license-text-list"),
    path("texts/<str:fingerprint>", api.LicenseTextDetailApi.as_view(), name="license-text-detail"),
    path("texts/<str:fingerprint>/classify", api.LicenseTextClassifyApi.as_view(), name="license-text-classify"),
    path("<str:key>/", api.LicenseDetailApi.as_view(), name="license-detail"),
]
