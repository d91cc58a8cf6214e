"""Settings every test starts from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings as hypothesis_settings

# No per-example deadline: on a loaded 2-core machine an example past Hypothesis's 200 ms failed
# tests that check behaviour, not speed (speed is bench/'s job).
hypothesis_settings.register_profile("turnscope", deadline=None)
hypothesis_settings.load_profile("turnscope")


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
