"""The adapters stand alone: importing and running every one of them loads no Django and none
of the app's packages (``conversations``, ``live``, ``api``)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

SCRIPT = """
import sys
import providers
for name in providers.ADAPTERS:
    providers.adapter(name)
parser = providers.stream_parser("anthropic")
parser.feed(b'data: {"type": "ping"}\\n\\n')
parser.close()
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"django", "conversations", "live", "api"})
print(",".join(loaded))
"""


def test_adapters_import_nothing_of_the_app() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(REPO)},
    )
    assert result.stdout.strip() == "", f"the adapters loaded {result.stdout.strip()}"
