"""Settings every test starts from."""

import pytest


@pytest.fixture(autouse=True)
def _live_call_rate(settings):
    """The live-call rate counts per user id in the cache, which outlives a test's database (a
    later test's user, with the same id, would inherit its calls): tests that mean to meet the
    limit set it themselves (tests/live/test_admission.py)."""
    settings.TURNSCOPE_LIVE_CALL_RATE = "100000/min"
