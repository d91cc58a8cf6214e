"""``python manage.py serve``: Turnscope under daphne, as it is deployed — the pages, the API,
the admin, the live websockets and the recording proxy in one process.

Unlike ``daphne turnscope.asgi:application`` it can serve the static files (unless
``--no-static``: then the proxy in front serves ``/static/`` from ``STATIC_ROOT``, filled by
``manage.py collectstatic``), it finishes at start the turns a stopped server left streaming,
and on Ctrl-C or SIGTERM it stops the live turns it runs so each records its interruption with
the text it had, instead of waiting to be found orphaned.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from live import recovery


class Command(BaseCommand):
    help = "Serve Turnscope with daphne: pages, API, admin, live websockets and the proxy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1",
                            help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-static", action="store_true",
                            help="leave /static/ to the proxy in front (collectstatic fills "
                            "STATIC_ROOT)")
        parser.add_argument("--proxy-headers", action="store_true",
                            help="behind a proxy: the client's address, port and scheme are "
                            "the X-Forwarded-For, -Port and -Proto headers it sets, read from "
                            "the right within TURNSCOPE_TRUSTED_PROXIES hops (default 1)")

    def handle(self, *args: Any, **options: Any) -> None:
        self.check_migrations()  # says so when the database is behind the code
        # Turns a stopped server left streaming, quiet long enough to be sure no other
        # process runs them (several processes may serve one database).
        reaped = recovery.reap_orphans()
        if reaped:
            self.stdout.write(f"finished {len(reaped)} turn(s) a stopped server left streaming "
                              "as interrupted")
        static = not options["no_static"]
        where = ("served here, from the apps and STATICFILES_DIRS" if static
                 else f"left to the proxy (manage.py collectstatic fills {settings.STATIC_ROOT})")
        self.stdout.write(f"Turnscope on http://{options['host']}:{options['port']}/ "
                          f"(static files {where}); Ctrl-C stops it.")
        from live import serve

        serve.serve(options["host"], options["port"], static=static,
                    verbosity=options["verbosity"], proxy_headers=options["proxy_headers"])
