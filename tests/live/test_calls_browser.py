"""A newcomer with no key: ``manage.py demo``, log in, New conversation, type a prompt, Send
(from the keyboard), watch the answer stream in with its search and a citation (the recorded
provider), Fork here, Re-run on another provider, Compare. Screenshots in the test's tmp dir."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROMPT = "Why are there two high tides a day?"


def start_demo(tmp_path, port, *options):
    env = e2e.base_env(tmp_path)
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
                     "TURNSCOPE_RECORDED_UPSTREAM"):
        env.pop(variable, None)
    log = (tmp_path / "demo.log").open("w")
    proc = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port), *options],
                            cwd=e2e.REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((tmp_path / "demo.log").read_text()[-3000:])
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            text = (tmp_path / "demo.log").read_text()
            return proc, log, re.search(r"password\s+(\S+)", text).group(1), text
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the demo did not start")


def agent_section(page, conversation_path, index):
    return page.locator(f'section.turn[data-index="{index}"]')


def test_a_newcomer_sends_forks_reruns_and_compares(tmp_path):
    port = e2e.free_port()
    manager, browser = e2e.chromium()
    proc, log, password, printed = start_demo(tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    try:
        assert "anthropic  recorded provider" in printed
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(30000)
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", "demo")
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")

        page.get_by_role("button", name="New conversation").click()
        page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/#composer$"))
        original = page.url.split("#")[0]
        page.wait_for_function("() => document.getElementById('conversation')"
                               ".dataset.live === 'open'")
        provider = page.locator("select[name=provider]")
        assert "(recorded)" in provider.locator("option[value=anthropic]").inner_text()
        page.screenshot(path=str(tmp_path / "1-composer.png"), full_page=True)

        # type, and send from the keyboard
        page.locator("textarea[name=prompt]").fill(PROMPT)
        page.locator("textarea[name=prompt]").press("Control+Enter")
        agent = page.locator('section.turn.agent[data-index="1"]')
        agent.wait_for()
        page.wait_for_function(
            "() => { const t = document.querySelector('section.turn.agent .streaming-tail');"
            " return t && t.textContent.trim().length > 20; }")
        streaming = agent.get_attribute("data-status")
        page.wait_for_function(  # Send is off while it streams
            "() => document.querySelector('[data-composer-send]').disabled")
        page.screenshot(path=str(tmp_path / "2-streaming.png"), full_page=True)
        page.wait_for_selector('section.turn.agent[data-index="1"][data-status="complete"]')
        page.wait_for_selector('section.turn.agent[data-index="1"] .sources li')
        page.wait_for_function("() => !window.turnscopeLive.busy()")
        assert streaming == "streaming"
        assert page.locator('section.turn.user[data-index="0"]').inner_text().find(PROMPT) >= 0
        assert agent.locator(".cite").count() > 0  # a citation in the text
        assert agent.locator(".activity").count() > 0  # the search
        assert agent.locator(".recorded-chip").count() == 1
        page.screenshot(path=str(tmp_path / "3-answered.png"), full_page=True)

        # a second turn, stopped mid-stream: it keeps what streamed
        page.locator("textarea[name=prompt]").fill("And how does the waggle dance work?")
        page.get_by_role("button", name="Send").click()
        page.wait_for_function(
            "() => { const t = document.querySelector("
            "'section.turn.agent[data-index=\"3\"] .streaming-tail');"
            " return t && t.textContent.trim().length > 10; }")
        page.get_by_role("button", name="Stop").click()
        page.wait_for_selector('section.turn.agent[data-index="3"][data-status="interrupted"]')
        page.wait_for_function("() => !window.turnscopeLive.busy()")
        stopped = page.locator('section.turn.agent[data-index="3"]')
        assert "interrupted" in stopped.inner_text().lower()
        assert stopped.locator(".message").count() >= 1  # what streamed is kept
        assert not page.locator("[data-composer-send]").is_disabled()
        page.screenshot(path=str(tmp_path / "3b-stopped.png"), full_page=True)

        # Fork here
        agent.get_by_role("link", name="Fork here").click()
        page.get_by_role("button", name="Fork").click()
        page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/#composer$"))
        assert page.url.split("#")[0] != original
        assert page.locator("section.turn").count() == 2
        assert "forked from" in page.locator(".conversation-meta").inner_text()
        page.screenshot(path=str(tmp_path / "4-fork.png"), full_page=True)

        # Re-run with another provider (OpenAI, recorded)
        page.goto(original)
        page.locator('section.turn.agent[data-index="1"]').get_by_role(
            "link", name="Re-run with…").click()
        page.select_option("select[name=provider]", "openai")
        assert page.locator("input[name=model]").input_value().startswith("gpt")
        page.get_by_role("button", name="Re-run").click()
        page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/$"))
        assert page.url != original
        page.wait_for_selector('section.turn.agent[data-index="1"][data-status="complete"]')
        page.wait_for_selector('section.turn.agent[data-index="1"] .sources li')
        assert "openai" in page.locator('section.turn.agent[data-index="1"] .model-chip'
                                        ).inner_text()
        page.screenshot(path=str(tmp_path / "5-rerun.png"), full_page=True)

        # Compare
        page.get_by_role("link", name="Compare the answers").click()
        page.wait_for_selector(".compare-column")
        assert page.locator(".compare-column").count() == 2
        heads = page.locator(".compare-head").all_inner_texts()
        assert any("anthropic" in h for h in heads) and any("openai" in h for h in heads)
        sources = page.locator(".compare-sources").inner_text()
        assert "Cited by both" in sources and "Cited by only one" in sources
        assert page.locator(".compare-table .cited").count() > 0
        page.screenshot(path=str(tmp_path / "6-compare.png"), full_page=True)
    finally:
        browser.close()
        manager.stop()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        print("screenshots and the demo's log:", tmp_path)
