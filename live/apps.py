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
        instances.add_hook(_render_pending)


async def _reap_gone() -> None:
    """A server's recovery round: the turns of servers that are gone are finished at once."""
    from asgiref.sync import sync_to_async

    from live import recovery

    await sync_to_async(recovery.reap_orphans)()


RENDER_ROUND = 0.5  # seconds of background rendering per round of the server's loop
RENDER_DEFER = 60.0  # seconds a queued turn may wait while this process streams live turns
RENDER_BEHIND = 600.0  # ... while this process's recording catches up (then it is stuck)


async def _render_pending() -> None:
    """A server's round of background rendering (``conversations.warming``): the turns
    recorded since, rendered once for their page and exports. In a thread of its own, not the
    one the requests' database work shares, so a long queue (a big import) delays no page.
    While this process streams live turns it waits (its CPU is theirs: the fan-out's latency
    is what viewers feel, a warm export only saves a later wait), unless a turn has waited
    ``RENDER_DEFER`` seconds already. While this process's exchanges wait in the capture log
    to be recorded it waits too, up to ``RENDER_BEHIND``: the recording is what is missing, a
    warm export is not (under load rendering took a fifth of the recording threads' time
    while they caught up)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from conversations import warming
    from live import capture, instances, tasks

    streaming = tasks.streaming_here() > 0

    def round_() -> None:
        try:
            behind = capture.get_log().waiting(instances.owner()) > 0
            if behind and not warming.waited(RENDER_BEHIND):
                return
            if not streaming or warming.waited(RENDER_DEFER):
                warming.drain_for(RENDER_ROUND)
        finally:
            # A pool thread's connections would stay open between rounds (and hold a test
            # database): this round's are closed, the next opens its own.
            connections.close_all()

    await sync_to_async(round_, thread_sensitive=False)()


def _check_allowed_origins(app_configs, **kwargs):  # type: ignore[no-untyped-def]
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    from live.origins import check_origins

    try:
        check_origins(list(getattr(settings, "TURNSCOPE_ALLOWED_ORIGINS", [])))
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="live.E001")]
    return []
