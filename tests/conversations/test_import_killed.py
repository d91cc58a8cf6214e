"""An import killed (SIGKILL) mid-run and run again stores every conversation exactly once:
``manage.py import`` of a generated ChatGPT export and ``manage.py ingest --each`` of a folder
of recordings, each in a process of its own on a database of its own (SQLite, or the
``DATABASE_URL`` PostgreSQL server in a database named after this test run)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.importers.samples import chatgpt_tools

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONVERSATIONS = 600
PAD = "Padding so that the export is large enough to be killed in the middle of. " * 40


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=300)


@pytest.fixture
def database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(SQLITE_PATH=str(tmp_path / "killed.sqlite3"), PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE="turnscope.settings")
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    made = manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                  "User.objects.create_user('owner')")
    assert made.returncode == 0, made.stderr
    return env, tmp_path / "killed.sqlite3"


def killed_after(env: dict[str, str], args: list[str], lines: int) -> int:
    """Run ``manage.py *args``, SIGKILL it once it has printed ``lines`` lines; how many it
    printed."""
    process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = 0
    deadline = time.monotonic() + 240
    assert process.stdout is not None
    try:
        while seen < lines and time.monotonic() < deadline:
            if not process.stdout.readline():
                break
            seen += 1
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert seen >= lines, f"it printed {seen} lines, then stopped by itself"
    assert process.returncode == -signal.SIGKILL
    return seen


def stored(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute(
            "SELECT source FROM conversations_conversation ORDER BY source")]


def test_an_import_killed_and_run_again_stores_each_conversation_once(database, tmp_path):
    env, path = database
    export = []
    for number in range(CONVERSATIONS):
        conversation = chatgpt_tools()
        conversation["conversation_id"] = conversation["id"] = f"k{number:04d}"
        conversation["title"] = f"Killed #{number}"
        conversation["mapping"]["u1"]["message"]["content"]["parts"][0] += PAD
        export.append(conversation)
    file = tmp_path / "conversations.json"
    file.write_bytes(orjson.dumps(export))
    args = ["import", "--owner", "owner", str(file)]
    printed = killed_after(env, args, 100)
    before = stored(path)
    assert printed <= len(before) < CONVERSATIONS  # killed in the middle
    again = manage(env, *args)
    assert again.returncode == 0, again.stderr
    rows = [line.split("\t") for line in again.stdout.splitlines()]
    assert sum(row[2] == "already imported" for row in rows) == len(before)
    after = stored(path)
    assert after == sorted(f"chatgpt:k{n:04d}" for n in range(CONVERSATIONS))  # once each


def test_an_ingest_each_killed_and_run_again_stores_each_file_once(database, tmp_path):
    env, path = database
    folder = tmp_path / "recordings"
    folder.mkdir()
    for number in range(CONVERSATIONS):
        text = f"answer {number} {PAD}"
        (folder / f"r{number:04d}.jsonl").write_text(
            '{"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
            '"model":"claude-x","content":[],"usage":{}}}\n'
            '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
            + orjson.dumps(text).decode() + '}}\n'
            '{"type":"content_block_stop","index":0}\n'
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{}}\n'
            '{"type":"message_stop"}\n')
    args = ["ingest", "--provider", "anthropic", "--owner", "owner", "--each", "--batch", "25",
            str(folder)]
    killed_after(env, args, 100)
    before = stored(path)
    assert 100 <= len(before) < CONVERSATIONS
    again = manage(env, *args)
    assert again.returncode == 0, again.stderr
    rows = [line.split("\t") for line in again.stdout.splitlines()]
    assert len(rows) == CONVERSATIONS
    assert sum(len(row) == 4 and row[3] == "already imported" for row in rows) == len(before)
    after = stored(path)
    assert len(after) == len(set(after)) == CONVERSATIONS  # none twice, none missing
    with sqlite3.connect(path) as db:
        titles = {row[0] for row in db.execute("SELECT title FROM conversations_conversation")}
    assert len(titles) == CONVERSATIONS  # every file's own answer, none missing
