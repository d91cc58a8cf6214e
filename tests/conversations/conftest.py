"""Fixtures the conversation pages' browser tests share."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (never a downloaded browser); skips without it."""
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.skip(f"{CHROMIUM} is absent (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()
