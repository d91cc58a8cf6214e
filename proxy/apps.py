from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Recording proxy"

    def ready(self) -> None:
        # The vocabulary the proxy produces (tool_call_response events) is registered in every
        # process, so documents holding such events import anywhere.
        # A server's recovery rounds record what gone servers left in the capture log.
        from live import instances, serve
        from proxy import (
            catchup,
            messages,  # noqa: F401
            recorders,
        )

        instances.add_hook(catchup.take_over_gone)
        instances.add_hook(recorders.supervise)
        instances.add_hook(catchup.prune_log)
        serve.add_companion(recorders.start_wanted, recorders.stop)
