import importlib

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Producers register their vocabulary values on import; load them all so the
        # registries are complete wherever Django runs.
        import streams.run  # noqa: F401  (and the builder it runs)
        from providers import ADAPTERS

        for module in ADAPTERS.values():
            importlib.import_module(module)
