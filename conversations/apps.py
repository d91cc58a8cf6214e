from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Producers register their vocabulary values on import; load them all so the
        # registries are complete wherever Django runs.
        import providers.registry  # noqa: F401  (every registered provider's adapters)
        import streams.run  # noqa: F401  (and the builder it runs)
