from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "governance.web"
    label = "web"
