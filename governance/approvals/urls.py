from django.urls import path

from governance.approvals import api

urlpatterns = [
    path("verify", api.VerifyApi.as_view(), name="approval-verify"),
    path("verifications/<uuid:code>", api.VerificationApi.as_view(), name="approval-verification"),
    path("ca.pem", api.CaCertificateApi.as_view(), name="approval-ca"),
    path("crl", api.CrlApi.as_view(), name="approval-crl"),
    path("packets/<str:sha256>", api.PacketByHashApi.as_view(), name="approval-packet-by-hash"),
    path("deployments/<uuid:code>/packet", api.PacketApi.as_view(), name="approval-packet"),
    path("deployments/<uuid:code>/signoffs", api.SignOffApi.as_view(), name="approval-signoffs"),
]
