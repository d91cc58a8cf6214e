from django.apps import AppConfig


class OtlpConfig(AppConfig):
    name = "otlp"
    verbose_name = "OpenTelemetry traces"
    default_auto_field = "django.db.models.BigAutoField"
