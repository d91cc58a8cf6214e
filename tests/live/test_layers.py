"""live.layers.InMemoryChannelLayer: channels' in-memory layer, sweeping expired messages at
most once per SWEEP_EVERY seconds instead of on every receive and group_send.

It overrides a private method, so canaries pin channels' code (4.3, bounded in pyproject.toml):
the sweep it throttles and the calls that run it. If channels changes them, re-read the subclass
against the new code; if channels stops sweeping on every call, drop the subclass."""

from __future__ import annotations

import inspect

import pytest
from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer as ChannelsLayer

from live import layers
from tests.support import source_fingerprint


def sweeps_during(layer, monkeypatch, sends: int) -> int:
    """How many full sweeps ``sends`` group sends to a group of two channels run."""
    count = 0
    sweep = ChannelsLayer._clean_expired

    def counting(self):
        nonlocal count
        count += 1
        sweep(self)

    monkeypatch.setattr(ChannelsLayer, "_clean_expired", counting)

    async def run():
        for name in ("a", "b"):
            await layer.group_add("g", f"viewer.{name}")
        for n in range(sends):
            await layer.group_send("g", {"type": "x", "n": n})

    async_to_sync(run)()
    return count


def test_channels_sweeps_on_every_group_send(monkeypatch):
    """The cost the subclass removes."""
    assert sweeps_during(ChannelsLayer(), monkeypatch, 20) == 20


def test_ours_sweeps_at_most_once_per_interval(monkeypatch):
    assert sweeps_during(layers.InMemoryChannelLayer(), monkeypatch, 20) == 1


def test_ours_still_sweeps_once_the_interval_has_passed(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(layers.time, "monotonic", lambda: clock[0])
    layer = layers.InMemoryChannelLayer()
    assert sweeps_during(layer, monkeypatch, 3) == 1
    clock[0] += layers.SWEEP_EVERY / 2
    assert sweeps_during(layer, monkeypatch, 3) == 0
    clock[0] += layers.SWEEP_EVERY / 2
    assert sweeps_during(layer, monkeypatch, 3) == 1


@pytest.mark.parametrize("method", ["receive", "group_send"])
def test_channels_runs_the_sweep_from_receive_and_group_send(method):
    assert "self._clean_expired()" in inspect.getsource(getattr(ChannelsLayer, method))


def test_the_sweep_is_the_code_the_subclass_was_written_for():
    """``_clean_expired()`` takes no arguments, walks every channel and group, and nothing but
    the layer's own calls depends on when it runs."""
    assert source_fingerprint(ChannelsLayer._clean_expired) == "8a86d9cb81a2a7d2"
