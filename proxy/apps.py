from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Recording proxy"

    def ready(self) -> None:
        # The vocabulary the proxy produces (tool_call_response events) is registered in every
        # process, so documents holding such events import anywhere.
        from proxy import messages  # noqa: F401
