"""What a reader of ChatGPT or Claude.ai expects of the pages, in a real browser on a real
daphne (issue 36): the prompt field has the focus after New conversation and Fork; the list
does not scroll sideways at 360 px; the branches of a conversation show at each fork point,
both ways; a whole answer is copied as markdown, each turn has a permalink, and a search
inside a conversation finds turns the page has not loaded yet. Screenshots go to
artifacts/reader-ui/."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHOTS = e2e.REPO / "artifacts" / "reader-ui"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reader-ui-e2e")
    # A key makes the composer usable; nothing here sends, and nothing could leave the machine.
    env = e2e.base_env(tmp, TURNSCOPE_PAGE_TURNS="4", OPENAI_API_KEY="sk-unused",
                       TURNSCOPE_UPSTREAM_OPENAI="http://127.0.0.1:9")
    setup = e2e.prepare(env)
    made = subprocess.run([sys.executable, "-c", BRANCHES], cwd=e2e.REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    setup.update(json.loads(made.stdout.strip().splitlines()[-1]))
    server = e2e.Daphne(env, tmp / "daphne.log")
    manager, browser = e2e.chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield {"setup": setup, "server": server, "browser": browser}
    browser.close()
    manager.stop()
    server.stop()


# A conversation of several exchanges (more than a page of 4 turns), a fork of it, and a
# re-run of its second answer: what the branch and search tests read.
BRANCHES = r"""
import json, django
django.setup()
from django.contrib.auth import get_user_model
from conversations import forking, store
from conversations.models import Conversation
from conversations.models import Turn
from streams.builder import EventRecord
user = get_user_model().objects.get(username="e2e")

def answer(text, provider="openai", model="gpt-5"):
    return store.NewTurn(Turn.Role.AGENT, [EventRecord("message", text=text)],
                         provider=provider, model=model, end_reason="end_turn", finished=True)

turns = []
for n in range(1, 6):
    turns += [store.user_turn(f"Question {n}: what about topic {n}?"),
              answer(f"## Answer {n}\n\nThe **answer** to question {n} is below." +
                     (" The needle is here." if n == 1 else ""))]
long, _ = store.record_turns(turns, store.NewConversation(title="Five questions", owner=user))
fork = forking.fork(long, 2, owner=user, title="Five questions (fork)")
store.record_turns([store.user_turn("A forked question"), answer("A forked answer.")], fork)
rerun = forking.fork(long, 2, owner=user, title="Five questions (re-run)")
store.record_turns([answer("A re-run answer.", "anthropic", "claude-sonnet-4-5")], rerun)
print(json.dumps({"long": str(long.pk), "fork": str(fork.pk), "rerun": str(rerun.pk)}))
"""


def page_for(world, *, width=1024, height=800, **options):
    context = world["browser"].new_context(viewport={"width": width, "height": height},
                                           **options)
    context.add_cookies([{"name": "sessionid", "value": world["setup"]["session"],
                          "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    page.set_default_timeout(20000)
    return page


def focused(page) -> dict:
    return page.evaluate("() => { const el = document.activeElement; "
                         "return {tag: el.tagName, id: el.id, name: el.name || ''}; }")


# -- 8: the prompt field has the focus ------------------------------------------------------


def test_new_conversation_puts_the_focus_in_the_prompt_field(world):
    page = page_for(world)
    page.goto(world["server"].url + "/")
    page.get_by_role("button", name="New conversation").focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/c/*/#composer")
    page.wait_for_load_state("load")
    page.wait_for_function("() => document.activeElement && "
                           "document.activeElement.id === 'composer-prompt'")
    page.keyboard.type("Typed straight away")
    assert page.input_value("#composer-prompt") == "Typed straight away"
    assert focused(page)["id"] == "composer-prompt"
    page.context.close()


def test_fork_puts_the_focus_in_the_prompt_field(world):
    page = page_for(world)
    sample = world["setup"]["samples"]["anthropic-tides"]
    page.goto(f"{world['server'].url}/c/{sample}/")
    page.locator("section.turn.agent").first.get_by_role("link", name="Fork here").click()
    page.get_by_role("button", name="Fork").click()
    page.wait_for_url("**/c/*/#composer")
    page.wait_for_load_state("load")
    page.wait_for_function("() => document.activeElement && "
                           "document.activeElement.id === 'composer-prompt'")
    page.keyboard.type("Next question")
    assert page.input_value("#composer-prompt") == "Next question"
    page.context.close()


# -- 9: no sideways scrolling at 360 px -----------------------------------------------------


def test_the_list_does_not_scroll_sideways_at_360_px(world):
    page = page_for(world, width=360, height=740)
    page.goto(world["server"].url + "/")
    widths = page.evaluate("""() => {
      const root = document.documentElement;
      const wide = Array.from(document.querySelectorAll('body *'))
        .filter((el) => el.getBoundingClientRect().right > root.clientWidth + 0.5)
        .map((el) => el.tagName.toLowerCase() + (el.name ? '[name=' + el.name + ']' : '')
             + (el.className && typeof el.className === 'string' ? '.' + el.className : ''));
      return {scroll: root.scrollWidth, client: root.clientWidth, wide: wide.slice(0, 8)};
    }""")
    page.screenshot(path=str(SHOTS / "list-360.png"), full_page=True)
    assert widths["scroll"] <= widths["client"], widths
    assert not widths["wide"], widths
    page.context.close()


# -- 7: branches at each fork point, both ways ----------------------------------------------


def branch_nav(page, index):
    nav = page.locator(f'nav.branches[data-branches="{index}"]')
    nav.wait_for()
    return nav


def test_branches_show_at_the_fork_point_both_ways(world):
    setup, url = world["setup"], world["server"].url
    page = page_for(world)
    # The original's newest turns are a window of 4: the fork point (3) is in an earlier one.
    page.goto(f"{url}/c/{setup['long']}/?from=2")
    nav = branch_nav(page, 3)
    assert "Branch 1 / 3" in nav.inner_text()
    page.screenshot(path=str(SHOTS / "branches-original.png"), full_page=True)
    nav.get_by_role("link", name="Next branch: Five questions (fork)").click()
    page.wait_for_url(f"**/c/{setup['fork']}/**")
    nav = branch_nav(page, 3)
    assert "Branch 2 / 3" in nav.inner_text()
    # The turn the link named is the one the reader lands on.
    assert page.locator("section.turn[data-index='3']").inner_text().count("A forked question")
    nav.get_by_role("link", name="Next branch: Five questions (re-run)").click()
    page.wait_for_url(f"**/c/{setup['rerun']}/**")
    nav = branch_nav(page, 3)
    assert "Branch 3 / 3" in nav.inner_text()
    page.screenshot(path=str(SHOTS / "branches-rerun.png"), full_page=True)
    nav.locator("summary").click()
    nav.get_by_role("link", name="Five questions", exact=True).click()
    page.wait_for_url(f"**/c/{setup['long']}/**")
    page.wait_for_function("() => location.hash.startsWith('#turn-')")
    assert "Branch 1 / 3" in branch_nav(page, 3).inner_text()
    page.context.close()


# -- 13: copy an answer, a permalink on each turn, search inside the conversation ----------


def test_copy_answer_puts_its_markdown_with_footnotes_on_the_clipboard(world):
    page = page_for(world, permissions=["clipboard-read", "clipboard-write"])
    sample = world["setup"]["samples"]["anthropic-tides"]
    page.goto(f"{world['server'].url}/c/{sample}/")
    turn = page.locator("section.turn.agent").first
    turn.get_by_role("button", name="Copy answer").click()
    turn.get_by_role("button", name="Copied as Markdown").wait_for()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert "## Turn" not in copied  # the answer, not the export's heading
    footnotes = [line for line in copied.splitlines() if line.startswith("[^t")]
    assert footnotes and all(": Source " in line for line in footnotes), copied[-500:]
    marker = footnotes[0].split("]:")[0] + "]"
    assert copied.index(marker) < copied.index(footnotes[0])  # cited in the text, above
    page.context.close()


def test_each_turn_has_a_visible_permalink(world):
    page = page_for(world)
    long = world["setup"]["long"]
    page.goto(f"{world['server'].url}/c/{long}/")
    turn = page.locator("section.turn").first
    link = turn.locator("a.permalink")
    assert link.is_visible() and link.inner_text().startswith("Permalink")
    turn_id = turn.get_attribute("data-turn-id")
    link.click()
    page.wait_for_url(f"**/c/{long}/?turn={turn_id}#turn-{turn_id}")
    assert page.locator(f"#turn-{turn_id}").is_visible()
    page.context.close()


def test_search_inside_a_conversation_finds_turns_not_loaded(world):
    page = page_for(world)
    long = world["setup"]["long"]
    page.goto(f"{world['server'].url}/c/{long}/")
    # Only the newest 4 turns are on the page: the needle (turn 1) is not.
    assert page.locator("section.turn").count() == 4
    assert "needle" not in page.locator("[data-turns]").inner_text()
    box = page.get_by_role("searchbox", name="Search this conversation")
    box.fill("topic 5")
    box.press("Enter")
    results = page.locator("[data-find-results] li")
    results.first.wait_for()
    assert results.count() == 1 and "Turn 8" in results.first.inner_text()
    results.first.get_by_role("link").click()  # on the page: scrolled to and marked
    page.locator("section.turn[data-index='8'] mark.find-mark").wait_for()
    page.screenshot(path=str(SHOTS / "find-on-page.png"))
    box.fill("NEEDLE")
    box.press("Enter")
    page.get_by_text("1 turn found").wait_for()
    results.first.get_by_role("link").click()
    page.wait_for_url("**find=NEEDLE**")
    mark = page.locator("section.turn[data-index='1'] mark.find-mark")
    mark.wait_for()
    assert mark.inner_text() == "needle"
    assert page.evaluate("() => document.activeElement.dataset.index") == "1"
    page.screenshot(path=str(SHOTS / "find-loaded.png"))
    page.context.close()
