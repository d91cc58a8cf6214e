from django.apps import AppConfig
from django.core import checks


class LiveConfig(AppConfig):
    name = "live"
    verbose_name = "Live turns"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(_check_allowed_origins, checks.Tags.security)
        from live import instances

        instances.add_hook(_reap_gone)


async def _reap_gone() -> None:
    """A server's recovery round: the turns of servers that are gone are finished at once."""
    from asgiref.sync import sync_to_async

    from live import recovery

    await sync_to_async(recovery.reap_orphans)()


def _check_allowed_origins(app_configs, **kwargs):  # type: ignore[no-untyped-def]
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    from live.origins import check_origins

    try:
        check_origins(list(getattr(settings, "TURNSCOPE_ALLOWED_ORIGINS", [])))
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="live.E001")]
    return []
