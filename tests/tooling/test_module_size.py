"""No module over 600 lines outside tests and migrations (issue 35): a module that long mixes
several jobs, and a new engineer cannot find their way in it."""

from __future__ import annotations

from pathlib import Path

from tests.support import REPO

LIMIT = 600

# Modules being split, each with who splits it and why it is long meanwhile; an entry leaves
# when its split lands (all of issue 35's have). A new long module is split, not listed.
BEING_SPLIT: frozenset[str] = frozenset()

_SKIPPED_DIRS = {"tests", "migrations", "node_modules", "__pycache__"}


def too_long(root: Path, limit: int = LIMIT) -> dict[str, int]:
    """The modules under ``root`` longer than ``limit`` lines (path relative to root: lines),
    leaving out tests, migrations and hidden or installed directories (``.venv``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if any(p in _SKIPPED_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found["/".join(parts)] = lines
    return found


def test_no_module_over_the_limit():
    over = {p: n for p, n in too_long(REPO).items() if p not in BEING_SPLIT}
    assert not over, f"modules over {LIMIT} lines (split them by job): {over}"


def test_the_count_sees_a_long_module_and_skips_tests_and_migrations(tmp_path):
    long = "x = 1\n" * (LIMIT + 1)
    (tmp_path / "app" / "migrations").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "app" / "long.py").write_text(long)
    (tmp_path / "app" / "short.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "app" / "migrations" / "0001_initial.py").write_text(long)
    (tmp_path / "tests" / "test_long.py").write_text(long)
    assert too_long(tmp_path) == {"app/long.py": LIMIT + 1}
