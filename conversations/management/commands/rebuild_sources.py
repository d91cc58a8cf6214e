"""Make the Sources pages' rows and their roll-up again from the stored events: after an
upgrade changed how a source's domain is found (a newer Public Suffix List) or how the rows are
counted. One transaction: the pages show the old figures until it commits, never half."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from conversations import source_index
from conversations.models import SourceTally


class Command(BaseCommand):
    help = "Make the Sources pages' rows and their roll-up again from the stored events."

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        with transaction.atomic():
            rows = source_index.rebuild()
        self.stdout.write(f"{rows} rows and {SourceTally.objects.count()} roll-up cells in "
                          f"{time.perf_counter() - started:.1f} s")
