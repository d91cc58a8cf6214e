"""Settings every test starts from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _live_call_rate(settings):
    """The live-call rate counts per user id in the cache, which outlives a test's database (a
    later test's user, with the same id, would inherit its calls): tests that mean to meet the
    limit set it themselves (tests/live/test_admission.py)."""
    settings.TURNSCOPE_LIVE_CALL_RATE = "100000/min"


@pytest.fixture(autouse=True, scope="session")
def _capture_log_of_its_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test process captures into a log of its own (``live.capture``), never var/'s."""
    from django.conf import settings

    settings.TURNSCOPE_CAPTURE_PATH = str(tmp_path_factory.mktemp("capture") / "log.sqlite3")
    yield
