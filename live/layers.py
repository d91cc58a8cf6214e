"""An in-memory channel layer for one process that stays cheap with many subscribers.

Channels' ``InMemoryChannelLayer`` sweeps every channel and every group membership for expired
messages on each ``receive`` and ``group_send``: with C connected viewers that is O(C) work per
message and per viewer, which dominates a busy single process (see ``bench/live.py``). This
subclass sweeps at most once per ``SWEEP_EVERY`` seconds; expiry is measured in tens of seconds,
so nothing expires noticeably later. Use it with
``CHANNEL_LAYERS = {"default": {"BACKEND": "live.layers.InMemoryChannelLayer"}}``.

It overrides a private method of channels: ``tests/live/test_layers.py`` pins channels' code it
was written against (4.3, bounded in pyproject.toml) and fails when it changes.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

SWEEP_EVERY = 1.0  # seconds


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    _last_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < SWEEP_EVERY:
            return
        self._last_sweep = now
        super()._clean_expired()
