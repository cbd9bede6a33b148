"""Presentation mode on a projector, in a real browser: every lesson step fits 1024x768 and
1280x720 with nothing cut, a clicker's keys move the lesson, and the bare app fits 1024x768.
Screenshots of every step at 1024x768 go to test-artifacts/ (and $ALIBI_VIZ_SCREENSHOTS)."""

import re

import pytest
from conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, wait_for_app

pytestmark = pytest.mark.browser

STEPS = 8
FIRST_LOAD_MS = 180_000
CUT_LABELS_JS = """() => {
  const cut = [];
  const items = document.querySelectorAll(
    'button p, button div, [data-testid="stSidebarNavLink"] span, h1, h2, h3');
  for (const el of items) {
    if (!el.offsetParent || el.clientWidth === 0) continue;  // hidden or collapsed
    if (el.scrollWidth > el.clientWidth + 1) cut.push(el.tagName + ': ' + el.textContent);
  }
  return cut;
}"""
FIGURE_BOX_JS = """() => {
  const plot = document.querySelector('.js-plotly-plot');
  if (!plot) return null;
  const r = plot.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
          width: window.innerWidth, height: window.innerHeight};
}"""


@pytest.fixture(params=[(1024, 768), (1280, 720)], ids=["1024x768", "1280x720"])
def projector(request, browser):
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page, width, height
    context.close()


def open_step(page, server_url: str, step: int) -> None:
    page.goto(f"{server_url}/lesson?step={step}&present=1")
    page.get_by_role("heading", name=re.compile(rf"^{step}\. ")).wait_for(timeout=FIRST_LOAD_MS)
    wait_for_app(page)
    reveal = page.get_by_role("button", name="Reveal the answer")
    if reveal.count():
        reveal.click()
        reveal.wait_for(state="detached", timeout=FIRST_LOAD_MS)
        if step < STEPS:  # every step but the misconceptions draws its figure now
            page.wait_for_selector(".js-plotly-plot", timeout=FIRST_LOAD_MS)
        wait_for_app(page)


@pytest.mark.parametrize("step", range(1, STEPS + 1))
def test_every_step_fits_the_projector(projector, server_url, step):
    """Presentation mode, step N: no label, button or heading is cut; the step's figure (after
    the answer is revealed) lies inside the viewport without scrolling; body text >= 20 px."""
    page, width, height = projector
    open_step(page, server_url, step)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.evaluate(CUT_LABELS_JS) == []
    box = page.evaluate(FIGURE_BOX_JS)
    if box is not None:  # the misconceptions step has no figure until "Show me"
        assert box["top"] >= 0 and box["left"] >= 0, box
        assert box["bottom"] <= box["height"] + 1 and box["right"] <= box["width"] + 1, box
    size = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector("
                         "'[data-testid=\"stMarkdownContainer\"] p')).fontSize)")
    assert size >= 20
    if width == 1024:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"lesson_present_step{step}.png"))
        if step == 4:
            import os
            from pathlib import Path

            target = os.environ.get("ALIBI_VIZ_SCREENSHOTS")
            if target:
                Path(target).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(target) / "lesson_present.png"))


def heading(page) -> str:
    return page.get_by_role("heading", name=re.compile(r"^\d\. ")).first.text_content()


def test_clicker_keys_move_the_lesson(browser, server_url):
    """PageDown, →, Space go forward; PageUp, ← go back; End and Home jump; the URL's step
    and the heading follow. Keys typed into a text box do not move the lesson."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(60_000)
    open_step(page, server_url, 2)
    expected = [("PageDown", 3), ("ArrowRight", 4), ("Space", 5), ("PageUp", 4),
                ("ArrowLeft", 3), ("End", STEPS), ("Home", 1)]
    for key, step in expected:
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press(key)
        page.wait_for_url(re.compile(rf"step={step}(&|$)"), timeout=30_000)
        page.get_by_role("heading", name=re.compile(rf"^{step}\. ")).wait_for()
        wait_for_app(page)
    open_step(page, server_url, 3)  # step 3 has a number box
    page.get_by_label("Heads").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("PageDown")
    page.wait_for_timeout(1500)
    assert re.search(r"step=3(&|$)", page.url)
    context.close()


@pytest.mark.parametrize("path", ["", "compare", "model", "inspect", "extrapolation", "lesson"])
def test_bare_app_fits_1024_wide(browser, server_url, path):
    """Outside presentation mode every page at 1024x768 has no cut button or navigation label."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{server_url}/{path}")
    page.wait_for_selector("[data-testid='stSidebarNavLink']", timeout=FIRST_LOAD_MS)
    wait_for_app(page)
    assert page.evaluate(CUT_LABELS_JS) == []
    context.close()


def test_chromium_is_debians(browser):
    """The browser tests drive /usr/bin/chromium with the project's flags."""
    assert CHROMIUM == "/usr/bin/chromium" and "--no-sandbox" in CHROMIUM_ARGS
