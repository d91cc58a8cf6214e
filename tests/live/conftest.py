from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache


@pytest.fixture(autouse=True)
def _clear_local_cache():
    # Tail and heartbeat keys are per turn id, so a shared Redis needs no clearing.
    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()
    yield


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("stranger", password="pw-stranger-123")
