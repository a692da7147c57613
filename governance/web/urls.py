from django.urls import path

from governance.web import views

urlpatterns = [path("", views.home, name="home")]
