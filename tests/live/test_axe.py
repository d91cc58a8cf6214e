"""axe-core on every page a reader sees, light and dark: the conversation list, every bundled
sample conversation, a conversation while a turn streams, and the admin payload page (where
only what Turnscope adds is held to it: violations inside Django's stock admin templates are
reported, not failed). Zero violations; a new one fails the test.

axe-core is the npm package pinned by ``tests/tooling/package.json`` and its lock, installed
there (``npm ci``, by ``.ci/run`` or the first run; ``node_modules`` is gitignored); without npm
the test skips. It is injected by Playwright, never loaded by a page (nor from a CDN).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AXE_DIR = e2e.REPO / "tests" / "tooling"  # package.json + lock: axe-core, pinned
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
SCHEMES = ("light", "dark")
SHOTS = e2e.REPO / "artifacts" / "axe"
# What Turnscope renders inside an admin change form: the payload value and an event's body.
OURS_IN_ADMIN = (".field-value_view", ".field-body_view", ".json-value")


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE_JS.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: cannot install axe-core (tests/tooling)")
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(AXE_DIR)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not AXE_JS.exists():
            pytest.skip(f"npm ci (tests/tooling) failed: {done.stderr[-500:]}")
    return AXE_JS.read_text()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("axe-e2e")
    env = e2e.base_env(tmp)
    setup = e2e.prepare(env)
    # The admin needs staff; and one payload over the inline limit, shown as a preview.
    made = subprocess.run([sys.executable, "-c", STAFF_AND_PAYLOADS], cwd=e2e.REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    setup["admin"] = json.loads(made.stdout.strip().splitlines()[-1])
    server = e2e.Daphne(env, tmp / "daphne.log")
    manager, browser = e2e.chromium()
    yield {"setup": setup, "server": server, "browser": browser}
    browser.close()
    manager.stop()
    server.stop()


STAFF_AND_PAYLOADS = """
import json, django, orjson
django.setup()
from django.contrib.auth import get_user_model
from conversations.models import Event, ProviderPayload
get_user_model().objects.filter(username="e2e").update(is_staff=True, is_superuser=True)
small = ProviderPayload.objects.order_by("size").values_list("pk", flat=True).last()
big = ProviderPayload.objects.create(provider="anthropic", format="anthropic.content_block",
    version="v1", value=orjson.dumps({"items": [{"text": "x" * 300, "n": n}
                                                for n in range(4000)]}).decode())
event = Event.objects.exclude(body="{}").values_list("pk", flat=True).first()
import uuid
from conversations import forking, store
from conversations.models import Conversation, Turn
from streams.builder import EventRecord
source = Conversation.objects.filter(title__icontains="tide").order_by("created_at").first()
fork = forking.fork(source, 0, owner=source.owner, title="A re-run")
store.record_turns([store.NewTurn(Turn.Role.AGENT, [EventRecord("message", text="Again.")],
                                  provider="openai", model="gpt-5", finished=True)], fork)
print(json.dumps({"payload": str(small), "big": str(big.pk), "event": str(event),
                  "missing": str(uuid.uuid4()), "fork": str(fork.pk)}))
"""


def run_axe(world, axe_source, path, scheme, *, wait=None, ours=None):
    context = world["browser"].new_context(viewport={"width": 1280, "height": 900},
                                           color_scheme=scheme)
    context.add_cookies([{"name": "sessionid", "value": world["setup"]["session"],
                          "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    page.set_default_timeout(20000)
    try:
        page.goto(world["server"].url + path)
        if wait:
            wait(page)
        if not ours:
            # Everything a reader can open is checked too: every collapsed panel (the
            # ledger, reasoning, inputs) and a marker's source card.
            page.evaluate("""() => {
              document.querySelectorAll('main details').forEach(d => { d.open = true; });
              const marker = document.querySelector('.cite-marker');
              if (marker) marker.focus();
            }""")
        page.evaluate(axe_source)
        result = page.evaluate("""async (ours) => {
          const r = await axe.run(document, {resultTypes: ['violations']});
          return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
              ours: !ours || ours.some(s => { try { const el = document.querySelector(
                n.target[n.target.length - 1]); return !!(el && el.closest(s)); }
                catch (e) { return false; } })}))}));
        }""", list(ours) if ours else None)
    finally:
        context.close()
    failing = []
    for violation in result:
        nodes = [n for n in violation["nodes"] if n["ours"]]
        if nodes:
            failing.append({**violation, "nodes": nodes})
        elif ours:
            print(f"stock admin template ({path}): {violation['id']}: {violation['help']}")
    return failing


def _pages(world):
    samples = world["setup"]["samples"]
    tides = samples["anthropic-tides"]
    return [("/", None)] + [(f"/c/{pk}/", None) for pk in samples.values()] + [
        # Every other page type a reader opens: a missing page, Compare, a search inside a
        # conversation without script, a fork with its branches, Fork here and Re-run.
        (f"/c/{world['setup']['admin']['missing']}/", None),
        (f"/c/{tides}/turns/1/compare/", None),
        (f"/c/{tides}/find/?q=tide", None),
        (f"/c/{world['setup']['admin']['fork']}/", None),
        (f"/c/{tides}/turns/1/fork/", None),
        (f"/c/{tides}/turns/1/rerun/", None),
        (f"/c/{tides}/turns/1/payloads/", None),
        # Sources: domains (with its chart), a domain's hosts and citing turns, URLs, the
        # turns citing a URL, the models side by side (with their charts).
        ("/sources/", None), ("/sources/urls/", None), ("/sources/models/", None),
        ("/sources/hosts/?domain=example.com", None),
        ("/sources/turns/?url=https%3A%2F%2Fexample.com%2F", None),
    ]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_list_and_every_sample_have_no_violations(world, axe_source, scheme):
    found = {}
    for path, _ in _pages(world):
        violations = run_axe(world, axe_source, path, scheme)
        if violations:
            found[path] = violations
    assert not found, summary(found)


def summary(found: dict) -> str:
    """One line per violation and page: what it is and where (the first few nodes)."""
    lines = []
    for path, violations in found.items():
        for v in violations:
            targets = "; ".join(n["target"] for n in v["nodes"][:4])
            lines.append(f"{path}: {v['id']} ({v['impact']}, {len(v['nodes'])}): {targets}")
    return "\n".join(lines)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_api_docs_have_no_violations(world, axe_source, scheme):
    def loaded(page):
        page.wait_for_selector(".swagger-ui .opblock")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"api-docs-{scheme}.png"))

    violations = run_axe(world, axe_source, "/api/v1/docs", scheme, wait=loaded)
    assert not violations, summary({"/api/v1/docs": violations})


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_streaming_conversation_has_no_violations(world, axe_source, scheme):
    server = world["server"]
    conversation = world["setup"]["watch"][0 if scheme == "light" else 1]
    server.post(f"/_e2e/run/{conversation}/anthropic-tides/?speed=0.5&coalesce=0.05")
    e2e.wait_for_turn(server, conversation)

    def streaming(page):
        page.wait_for_function("() => document.querySelector('main').dataset.streaming "
                               "=== 'yes' && document.querySelector('.streaming-tail') "
                               "&& document.querySelector('.streaming-tail').textContent")

    path = f"/c/{conversation}/"
    violations = run_axe(world, axe_source, path, scheme, wait=streaming)
    assert not violations, summary({path: violations})


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_admin_payload_and_event_pages_add_no_violations(world, axe_source, scheme):
    ids = world["setup"]["admin"]
    found = {}
    for path in (f"/admin/conversations/providerpayload/{ids['payload']}/change/",
                 f"/admin/conversations/providerpayload/{ids['big']}/change/",
                 f"/admin/conversations/event/{ids['event']}/change/"):
        violations = run_axe(world, axe_source, path, scheme, ours=OURS_IN_ADMIN)
        if violations:
            found[path] = violations
    assert not found, summary(found)
