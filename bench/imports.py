"""Import throughput of a large ChatGPT data export, end to end (detect, read, run every turn
through the stream runner, store in SQLite).

    uv run python -m bench.imports [--conversations 2000] [--mb 100] [--zip]

The export is generated from the shapes of the fixtures in ``../shared/fixtures/chat-exports``
(browsing with citations, a branched tree, 2025 web search with content references, reasoning
as a tool message): each generated conversation is one of them with fresh ids, its thread
lengthened with more question/answer pairs until the file reaches ``--mb``. It is written to a
temporary file as it is generated and imported from there, streamed. Prints conversations/s,
MB/s and the peak memory of the process. Target: 100 MB in under a minute, under 500 MB.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
_tmp = tempfile.mkdtemp(prefix="turnscope-bench-")
os.environ["SQLITE_PATH"] = str(Path(_tmp) / "bench.sqlite3")
os.environ.setdefault("TURNSCOPE_VAR_DIR", _tmp)
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from conversations import uploads  # noqa: E402
from conversations.models import Conversation, Event  # noqa: E402
from tests.support import SHARED  # noqa: E402

EXPORTS = SHARED / "fixtures" / "chat-exports"
TEMPLATES = ["librechat__chatgpt-export.json", "librechat__chatgpt-tree.json",
             "enchanted-twin__conversations.json"]


def templates() -> list[dict[str, Any]]:
    out = []
    for name in TEMPLATES:
        out += orjson.loads((EXPORTS / name).read_bytes())
    return out


def _thread(conversation: dict[str, Any]) -> list[str]:
    mapping, node, path = conversation["mapping"], conversation["current_node"], []
    while node:
        path.append(node)
        node = mapping[node]["parent"]
    return path[::-1]


def generate(template: dict[str, Any], number: int, target: int, pairs: list[tuple[dict, dict]]
             ) -> bytes:
    """One conversation shaped like ``template``: fresh ids, its thread lengthened with
    question/answer pairs until its JSON reaches about ``target`` bytes."""
    prefix = f"g{number:05d}-"
    conversation = orjson.loads(orjson.dumps(template))
    mapping = {}
    for node_id, node in conversation["mapping"].items():
        node = dict(node, id=prefix + node_id,
                    parent=prefix + node["parent"] if node["parent"] else None,
                    children=[prefix + c for c in node["children"]])
        if node.get("message"):
            node["message"] = dict(node["message"], id=prefix + node["message"]["id"])
        mapping[prefix + node_id] = node
    conversation["mapping"] = mapping
    conversation["current_node"] = prefix + conversation["current_node"]
    conversation["conversation_id"] = conversation["id"] = f"{prefix}{template['id']}"[:64]
    conversation["title"] = f"{template['title']} #{number}"
    size = len(orjson.dumps(conversation))
    leaf, extra = conversation["current_node"], 0
    while size < target:
        question, answer = pairs[(number + extra) % len(pairs)]
        for message in (question, answer):
            node_id = f"{prefix}x{extra}-{message['author']['role']}"
            mapping[leaf]["children"].append(node_id)
            mapping[node_id] = {"id": node_id, "parent": leaf, "children": [],
                                "message": dict(message, id=node_id)}
            leaf = node_id
            size += len(orjson.dumps(mapping[node_id])) + 2
        extra += 1
    conversation["current_node"] = leaf
    return orjson.dumps(conversation)


def write_export(path: Path, count: int, megabytes: float) -> int:
    shapes = templates()
    pairs = []
    for shape in shapes:
        thread = [shape["mapping"][n]["message"] for n in _thread(shape)]
        thread = [m for m in thread if m and m["author"]["role"] in ("user", "assistant")
                  and m.get("recipient", "all") == "all" and m["content"].get("parts")
                  and isinstance(m["content"]["parts"][0], str) and m["content"]["parts"][0]]
        pairs += [(q, a) for q, a in itertools.pairwise(thread)
                  if q["author"]["role"] == "user" and a["author"]["role"] == "assistant"]
    total = int(megabytes * 1024 * 1024)
    written = 0
    with path.open("wb") as out:
        out.write(b"[\n")
        for number in range(count):
            if number:
                out.write(b",\n")
            # What is left, shared among the conversations still to come (some shapes are
            # larger than the average on their own).
            target = (total - written) // (count - number)
            data = generate(shapes[number % len(shapes)], number, target, pairs)
            out.write(data)
            written += len(data)
        out.write(b"\n]\n")
    return path.stat().st_size


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--mb", type=float, default=100.0, help="size of the generated export")
    parser.add_argument("--zip", action="store_true", help="import it as the .zip ChatGPT "
                        "sends (conversations.json inside)")
    parser.add_argument("--profile", action="store_true", help="run the import under cProfile "
                        "and print where its time goes")
    args = parser.parse_args()
    if not all((EXPORTS / name).exists() for name in TEMPLATES):
        sys.exit(f"{EXPORTS} is absent: the benchmark generates its export from those shapes")
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    path = Path(_tmp) / "conversations.json"
    size = write_export(path, args.conversations, args.mb)
    if args.zip:
        archive = Path(_tmp) / "export.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(path, "conversations.json")
        path.unlink()
        path = archive
    file_size = path.stat().st_size
    before = peak_rss_mb()
    files = [uploads.Upload(path.name, lambda: path.open("rb"), file_size)]
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(lambda: list(uploads.import_files(files, owner=owner)))
        pstats.Stats(profiler).sort_stats("cumtime").print_stats(45)
        return
    start = time.perf_counter()
    imported = failed = forks = 0
    for result in uploads.import_files(files, owner=owner):
        if isinstance(result, uploads.Imported):
            imported += 1
            forks += len(result.forks)
        elif isinstance(result, uploads.Failed):
            failed += 1
    elapsed = time.perf_counter() - start
    peak = peak_rss_mb()
    mb = size / (1024 * 1024)
    print(f"export: {args.conversations} conversations, {mb:.1f} MB of JSON"
          + (f" ({file_size / 1024 / 1024:.1f} MB zipped)" if args.zip else ""))
    print(f"imported: {imported} conversations (+{forks} forks), {failed} problems, "
          f"{Conversation.objects.count()} conversations and {Event.objects.count()} events "
          "stored")
    print(f"time: {elapsed:.1f} s   {imported / elapsed:,.0f} conversations/s   "
          f"{mb / elapsed:.2f} MB/s   (target: 100 MB in under 60 s)")
    print(f"peak memory: {peak:.0f} MB (the process held {before:.0f} MB before the import; "
          "target under 500 MB)")


if __name__ == "__main__":
    main()
