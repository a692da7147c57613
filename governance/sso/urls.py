from django.urls import path

from governance.sso import views

# mozilla-django-oidc reverses these names (un-namespaced).
urlpatterns = [
    path("authenticate/", views.SsoSignInView.as_view(), name="oidc_authentication_init"),
    path("callback/", views.SsoCallbackView.as_view(), name="oidc_authentication_callback"),
    path("step-up/", views.step_up, name="oidc_step_up"),
]
