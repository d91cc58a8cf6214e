"""bench.scale runs end to end on a tiny store (the figures themselves are not checked: the
machine's load decides them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import PROVIDER_FIXTURES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(not PROVIDER_FIXTURES.exists(), reason="../shared/fixtures is absent")
def test_scale_bench_smoke(tmp_path):
    env = {**os.environ, "TURNSCOPE_BENCH_CACHE": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--conversations", "50", "--repeat", "1",
         "--json"], cwd=REPO, env=env, capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    figures = json.loads(done.stdout)["sqlite"]
    assert figures["conversations"] == 51  # and bench.long's, built before the pages are timed
    assert figures["built"]["generated"] is True
    rows = figures["requests"]
    assert {"login page (floor)", "list page 1", "list last page", "staff list page 1",
            "search no hit",
            "API list", "admin events", "admin events, kind filter",
            "admin attributions, domain search"} <= set(rows)
    assert all(row["ms"] > 0 for row in rows.values())
    assert rows["login page (floor)"]["x_floor"] == 1.0  # each round's floor over itself
    again = subprocess.run(  # the store is cached: not built again
        [sys.executable, "-m", "bench.scale", "--conversations", "50", "--repeat", "1",
         "--json"], cwd=REPO, env=env, capture_output=True, timeout=600, check=False)
    assert json.loads(again.stdout)["sqlite"]["built"] == {"generated": False}
