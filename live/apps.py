from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "live"
    verbose_name = "Live turns"
    default_auto_field = "django.db.models.BigAutoField"
