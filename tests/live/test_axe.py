"""axe-core on every page a reader sees, light and dark: the conversation list, every bundled
sample conversation, a conversation while a turn streams, and the admin payload page (where
only what Turnscope adds is held to it: violations inside Django's stock admin templates are
reported, not failed). Zero violations; a new one fails the test.

axe-core comes from npm (``npm install axe-core`` into ``var/axe``, gitignored) the first time;
without npm (or the package) the test skips. It is injected by Playwright, never loaded by a
page.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AXE_DIR = e2e.REPO / "var" / "axe"
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
SCHEMES = ("light", "dark")
# What Turnscope renders inside an admin change form: the payload value and an event's body.
OURS_IN_ADMIN = (".field-value_view", ".field-body_view", ".json-value")


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE_JS.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: cannot fetch axe-core")
        AXE_DIR.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix",
                               str(AXE_DIR), "axe-core@4"], capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0 or not AXE_JS.exists():
            pytest.skip(f"npm install axe-core failed: {done.stderr[-500:]}")
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
print(json.dumps({"payload": str(small), "big": str(big.pk), "event": str(event)}))
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
    return [("/", None)] + [(f"/c/{pk}/", None) for pk in samples.values()]


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
