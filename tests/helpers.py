"""Checks the browser tests make on a page, and the command line run in a process: imported
by the test modules as `from helpers import ...` (pytest puts tests/ on the path of its test
modules, as it does for conftest.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from alibi_viz_app.testing import ARTIFACTS, ROOT

# Every label, button text, navigation link and heading cut by its own box (text wider than
# the box), as '<TAG>: text'.
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


# axe-core, the accessibility engine Lighthouse runs, as the axe-playwright-python package
# ships it (from the npm registry; nothing vendored here): WCAG 2.1 A and AA rules.
AXE_RUN_JS = """async () => {
  const result = await axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
    resultTypes: ['violations']});
  return result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => `${v.id} (${v.impact}): ` + v.nodes.slice(0, 3).map(
      n => n.target.join(' ') + ': ' + ((n.any[0] || n.all[0] || {}).message || '')).join(' | '));
}"""


def serious_accessibility_violations(page) -> list[str]:
    """axe-core's serious and critical WCAG 2.1 A/AA violations on the page as it is now
    (colour contrast among them), one line each: [] on an accessible page."""
    import axe_playwright_python

    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate((Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text())
    return page.evaluate(AXE_RUN_JS)


def screenshot(page, name: str) -> None:
    """Save a full-page screenshot to test-artifacts/ (and $ALIBI_VIZ_SCREENSHOTS if set)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    target = os.environ.get("ALIBI_VIZ_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=False)


# True once the app has been idle for `quiet` ms: no script run (Streamlit's stApp carries
# data-test-script-state), no running indicator, and nothing the page draws changing (the
# number of elements, of drawn plotly figures and of svg texts, the text's length). The
# first call records the page's state; it is polled every 50 ms, not on every animation
# frame, since reading the page's text on every frame costs chromium CPU the tests share.
SETTLED_JS = """(quiet) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const state = app ? app.getAttribute('data-test-script-state') : 'initial';
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  const busy = state !== 'notRunning' || (status && status.innerText.includes('Running'));
  const signature = [state, document.querySelectorAll('[data-testid="stElementContainer"]').length,
    [...document.querySelectorAll('.js-plotly-plot')].filter(p => p._fullLayout).length,
    document.querySelectorAll('svg text').length, document.body.innerText.length].join('|');
  const now = performance.now();
  if (busy || signature !== window.__settledSignature) {
    window.__settledSignature = signature;
    window.__settledSince = now;
    return false;
  }
  return now - window.__settledSince >= quiet;
}"""


def wait_for_app(page, quiet_ms: int = 250, timeout_ms: int | None = None) -> None:
    """Wait until Streamlit has finished running the script and the page has stopped
    changing for `quiet_ms` (SETTLED_JS): a condition, not a fixed sleep."""
    page.wait_for_selector("[data-testid='stApp']")
    page.evaluate("() => { window.__settledSignature = null; }")
    page.wait_for_function(SETTLED_JS, arg=quiet_ms, polling=50,
                           **({"timeout": timeout_ms} if timeout_ms else {}))


# SETTLED_JS polled by the page itself every 50 ms until it first holds (window.__settled),
# so that several pages are watched at the same time (wait_for_apps).
WATCH_SETTLED_JS = """(quiet) => {
  const settled = """ + SETTLED_JS + """;
  window.__settledSignature = null;
  window.__settled = false;
  clearInterval(window.__settledTimer);
  const poll = () => {
    if (settled(quiet)) { window.__settled = true; clearInterval(window.__settledTimer); }
  };
  window.__settledTimer = setInterval(poll, 50);
  poll();
}"""


def wait_for_apps(pages, quiet_ms: int = 250, timeout_ms: int | None = None) -> None:
    """wait_for_app on several pages (a class's browsers) at once: each page polls SETTLED_JS
    from the same moment, so ten pages that are already idle take one quiet period, not ten
    one after another; each still waits until its own page has been idle for `quiet_ms`. A
    page must not navigate meanwhile (a reload drops its watch: use wait_for_app)."""
    for page in pages:
        page.wait_for_selector("[data-testid='stApp']")
        page.evaluate(WATCH_SETTLED_JS, quiet_ms)
    for page in pages:
        page.wait_for_function("() => window.__settled === true", polling=50,
                               **({"timeout": timeout_ms} if timeout_ms else {}))


# Every shown chart drawn at its box's width again, after the window was resized (a chart in a
# closed expander has an offsetParent but is not shown: plotly redraws it when it opens).
REDRAWN_AT_WIDTH_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.checkVisibility())
  .every(p => { const svg = p.querySelector('.main-svg');
                return svg && Math.abs(svg.getBoundingClientRect().width - p.clientWidth) <= 2; })"""


def resize(page, width: int, height: int) -> None:
    """Resize the window of a page already loaded, then wait until every shown chart is drawn
    at its new width and the page has settled. Nothing in the app reads the window's size: the
    page's CSS and plotly's charts follow a resize as they follow a load at that size.
    Measured 2026-12-05, each against a page loaded at the new size: every lesson step at
    1024x768 resized to 1280x720 (the same chart boxes, panels and figure box); the bias
    explorer, Compare, Model heads and the Extrapolation lab in Russian at 1366 px resized to
    1024 px, and in Spanish at 1024 px resized to 390x844 (the same chart sizes, every figure
    text at the same width, and at 390 px the same page width and sideways-scrolling boxes).
    Also measured: Inspect a model and the Lesson in Spanish at 1366 px
    resized to 390x844, drawn, against each loaded at 390x844: every element's box the same
    (54 and 34 of them) and the same page width."""
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_function(REDRAWN_AT_WIDTH_JS, timeout=30_000)
    wait_for_app(page)


def draw_every_figure(page, timeout_ms: int = 180_000) -> None:
    """Bring every chart of the page into view in turn until plotly has drawn it (a chart
    far below the fold may wait to be drawn until it is scrolled to), then wait for the page
    to settle."""
    wait_for_app(page, timeout_ms=timeout_ms)
    charts = page.locator("[data-testid='stPlotlyChart']")
    for index in range(charts.count()):
        chart = charts.nth(index)
        if not chart.is_visible():
            continue  # in a closed expander or a hidden tab: nothing to draw
        chart.scroll_into_view_if_needed()
        chart.locator(".main-svg").first.wait_for(timeout=timeout_ms)
    wait_for_app(page, timeout_ms=timeout_ms)


# ----------------------------------------------------------------------------- command line

# The command line `alibi-viz ...` as CI reads it: exit status, stdout and stderr. The `cli`
# fixture calls `alibi_viz.cli.main` in the test's own process with pytest's file-descriptor
# capture, so what the C side or a library writes straight to fd 2 is read too: the same code,
# without the 3-4 s a new Python spends importing torch and transformers. `run_process` starts
# `python -m alibi_viz.cli` for what only a process shows (the module's `__main__`, variables
# read when huggingface_hub is imported).


def run_process(*args, env=None) -> subprocess.CompletedProcess:
    """`python -m alibi_viz.cli ARGS` in a process of its own, `env` added to this one's."""
    return subprocess.run([sys.executable, "-m", "alibi_viz.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, **(env or {})})


def choose(page, label: str, option: str, exact: bool = False) -> None:
    """Pick `option` in the selectbox labelled `label` (the first click can land while the
    page is still settling, so try again once or twice)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        page.get_by_role("combobox", name=label).click()
        try:
            page.get_by_role("option", name=option, exact=exact).click(timeout=5_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError(f"could not choose {option!r} in {label!r}")


@contextlib.contextmanager
def page_list_positions(page):
    """Where each script run put the page list, in order ("SIDEBAR", "HIDDEN"): read from the
    navigation messages on the websocket (a fragment's run sends none)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.Navigation_pb2 import Navigation

    positions = []

    def received(frame):
        msg = ForwardMsg()
        msg.ParseFromString(frame if isinstance(frame, bytes) else frame.encode())
        if msg.WhichOneof("type") == "navigation":
            positions.append(Navigation.Position.Name(msg.navigation.position))

    page.on("websocket", lambda ws: ws.on("framereceived", received))
    yield positions


PAGE_LIST = "[data-testid='stSidebarNav'] a"  # the page list's links, in the sidebar
