"""The production environment documented in the README passes ``check --deploy`` cleanly."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

from tests.support import REPO


def documented_env() -> dict[str, str]:
    """The ``sh`` block under the README's "Deployment" heading, as variables."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Deployment"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    env = {}
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition("=")
            env[name] = value
    return env


def check_deploy(env: dict[str, str], tmp_path) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    full.update(env, TURNSCOPE_VAR_DIR=str(tmp_path))
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


def test_the_documented_production_env_passes_check_deploy(tmp_path):
    env = documented_env()
    assert env["SECRET_KEY"] == "..."
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    # The check needs no database or Redis: keep the documented ones out of it.
    env.pop("DATABASE_URL"), env.pop("REDIS_URL")
    out = check_deploy(env, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout


def test_without_it_check_deploy_warns(tmp_path):
    """The test above can fail: the same check without the HTTPS settings does."""
    out = check_deploy({"DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50),
                        "ALLOWED_HOSTS": "turnscope.example.com"}, tmp_path)
    assert out.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert warning in out.stderr + out.stdout
