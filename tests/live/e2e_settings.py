"""Settings for the daphne processes the end-to-end tests start (never for production)."""

import os

from turnscope.settings import *  # noqa: F403
from turnscope.settings import CHANNEL_LAYERS

ROOT_URLCONF = "tests.live.e2e_urls"

# The flood test shrinks the channel layer so that a fast burst overflows it.
if os.environ.get("LIVE_E2E_CAPACITY"):
    CHANNEL_LAYERS = {"default": {**CHANNEL_LAYERS["default"]}}
    CHANNEL_LAYERS["default"]["CONFIG"] = {
        **CHANNEL_LAYERS["default"].get("CONFIG", {}),
        "capacity": int(os.environ["LIVE_E2E_CAPACITY"]),
    }
