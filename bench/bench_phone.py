"""Every page on a phone (issue 61): 390x844, a phone's user agent, CPU throttled 4x.

    .venv/bin/python bench/bench_phone.py                        # every page, 3 repeats (idle machine)
    .venv/bin/python bench/bench_phone.py --pages model --repeats 1 --throttle 1   # a smoke test

Lighthouse's mobile profile, in chromium through playwright: a 390x844 touch screen at device
pixel ratio 1.75, a Moto G Power's user agent (which says "Mobile", so the app starts its
pages as it does for a phone) and the CPU slowed `--throttle` times with CDP's
Emulation.setCPUThrottlingRate. The network is not throttled: the server is on this machine.

One app server, warmed first (every page run once over the websocket, `warm_up.run_page`), and
beside it, in the same run, two bare Streamlit pages as yardsticks: one small plotly chart, and
no chart at all; and (unless --no-bare) four bare pages of one still picture: alone, after ten
widgets, after the same widgets in a popover, and before them (what the app's phone layout
rests on: widgets drawn before a figure, or with it, hold it back). For each page, `--repeats` times each, in rounds (every page once a round, every other round
in reverse order, so that the machine's drift over the run touches every page alike):

  cold   a new browser context (empty cache), then the page opened;
  warm   the same context, the page reloaded (Streamlit's and plotly's scripts cached).

Measured from the navigation's start, in the page itself (an init script):

  first figure   the first frame in which a figure is drawn and visible with a non-zero size:
                 a plotly chart's svg (.js-plotly-plot .main-svg), an image of the page (st.image),
                 a still figure's SVG image (.avz-still img: `figures.still`, what a page whose
                 charts are off draws) or the app's canvas maps (they mark `alibi-viz:maps-drawn` when
                 first drawn);
  LCP            the last 'largest-contentful-paint' entry before the page settled;
  settled        the start of the first second in which Streamlit showed no script running
                 (stApp's data-test-script-state, the running indicator) and the first figure
                 was drawn (a page with no figure: the script alone);
  head switch    /model only: a tap on head 3's button of the canvas to the next frame with that
                 head drawn (no server involved).

Prints one table of medians (ms) and each page's ratio to the bare pages' times; then each
page's first figure over the bare page's LCP measured in the same round, as the median of the
rounds' ratios, their range and how many rounds came within the 1.2x aimed at (the yardstick's
own paint varies by a fifth from run to run, so one ratio of medians says little). The numbers
go to bench/README.md with the machine, its load and the commit.

    .venv/bin/python bench/bench_phone.py --before-tree /tmp/before --pages lesson model --repeats 6

With --before-tree (a checkout of an earlier commit, e.g. `git worktree add /tmp/before HEAD~1`,
with the corpus linked in if a page needs it), a second app server runs that checkout's code,
each of its pages measured in the same rounds, next to this one's; a last table gives each
page's first figure now / before, a ratio per round (median and range), cold and warm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from alibi_viz_app.testing import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PHONE_UA,
    free_port,
    start_streamlit,
    stop_streamlit,
)

PAGES = {"bias": "", "lesson": "lesson", "model": "model", "compare": "compare",
         "extrapolation": "extrapolation", "inspect": "inspect"}
QUIET_MS = 1000
TIMEOUT_MS = 300_000

BARE_PLOTLY = """import plotly.graph_objects as go
import streamlit as st

st.title("A bare page")
st.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])), width="stretch")
"""
BARE_NONE = """import streamlit as st

st.title("A bare page")
st.write("No chart.")
"""
# What holds a phone's first figure back: one still picture (`figures.still`'s kind of figure,
# an SVG image) after ten widgets, the same widgets in a popover (drawn only when opened), and
# the picture before them (drawn in the same go).
BARE_STILL = """import base64
import streamlit as st

SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="360" height="240">'
       '<rect x="10" y="10" width="300" height="200" fill="#a33"/></svg>')
URI = "data:image/svg+xml;base64," + base64.b64encode(SVG.encode()).decode()


def widgets():
    for k in range(4):
        st.slider(f"slider {k}", 0, 10, 5)
    for k in range(3):
        st.selectbox(f"select {k}", ["a", "b"])
    for k in range(3):
        st.toggle(f"toggle {k}")


def still():
    st.html(f'<div class="avz-still"><img src="{URI}" width="360" height="240"></div>')


st.title("A bare page")
LAYOUT
"""
BARE_STILLS = {
    "bare: still picture": "still()",
    "bare: 10 widgets, then the picture": "widgets()\nstill()",
    "bare: 10 widgets in a popover, then the picture": "with st.popover('Settings'):\n"
                                                       "    widgets()\nstill()",
    "bare: the picture, then 10 widgets": "still()\nwidgets()",
}

# Watches the page from its first script on (an init script, run again on every navigation).
WATCH_JS = """(() => {
  const b = window.__bench = {figure: null, lcp: null, busy: 0, settled: null};
  new PerformanceObserver((list) => {
    if (b.settled === null) for (const e of list.getEntries()) b.lcp = e.startTime;
  }).observe({type: 'largest-contentful-paint', buffered: true});
  const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const figure = () =>
    performance.getEntriesByName('alibi-viz:maps-drawn').length > 0 ||
    [...document.querySelectorAll('.js-plotly-plot .main-svg')].some(shown) ||
    [...document.querySelectorAll('.avz-still img')].some(
      (img) => img.complete && img.naturalWidth > 0 && shown(img)) ||
    [...document.querySelectorAll('[data-testid="stImage"] img')].some(
      (img) => img.complete && img.naturalWidth > 0 && shown(img));
  const frame = () => {
    const now = performance.now();
    if (b.figure === null && figure()) b.figure = now;
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : 'initial';
    const status = document.querySelector('[data-testid="stStatusWidget"]');
    if (state !== 'notRunning' || (status && status.innerText.includes('Running'))) b.busy = now;
    const ready = b.figure !== null || window.__benchNoFigure;
    const quiet = Math.max(b.busy, b.figure || 0);  // no script running, the figure drawn
    if (b.settled === null && ready && app && now - quiet >= QUIET_MS) b.settled = quiet;
    if (b.settled === null) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
})();""".replace("QUIET_MS", str(QUIET_MS))

HEAD_SWITCH_JS = """(button) => new Promise((done) => {
  const root = button.getRootNode().querySelector('.avm');
  const t0 = performance.now();
  button.click();
  requestAnimationFrame(() => setTimeout(() =>
    done(root.dataset.head === button.dataset.head ? performance.now() - t0 : null), 0));
})"""


def offline_proxy() -> dict:
    """Chromium's proxy setting that keeps every request on this machine: a proxy on a closed
    loopback port, which only loopback bypasses. Not a page.route: with a route the browser
    uses no HTTP cache, and a reload without its cache is not a warm visit."""
    return {"server": f"http://127.0.0.1:{free_port()}", "bypass": "127.0.0.1,localhost"}


def serve(script: Path, what: str, cwd: Path | None = None, env: dict | None = None):
    """`streamlit run` of `script` on a free port, once healthy: (process, base url); `what`
    names it if it does not start."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
         "--server.headless", "true", "--server.address", "127.0.0.1",
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"{what} did not start")


def serve_bare(folder: Path, script: str, name: str):
    """A one-page script served (`serve`): (process, base url)."""
    path = folder / f"{name}.py"
    path.write_text(script)
    return serve(path, f"the bare page {name}")


def serve_tree(tree: Path):
    """The app of another checkout (`--before-tree`), that tree first on Python's path
    (`serve`): (process, base url)."""
    return serve(tree / "alibi_viz_app" / "main.py", f"the app of {tree}", cwd=tree,
                 env={**os.environ, "PYTHONPATH": str(tree)})


def warm(url: str, pages: dict) -> None:
    """Every page run once on the server before any is timed (a browser-less visit)."""
    import asyncio

    from alibi_viz_app.warm_up import run_page

    port = int(url.rsplit(":", 1)[1])
    for path in pages.values():
        result = asyncio.run(run_page(port, path, ""))
        if result["status"] != "FINISHED_SUCCESSFULLY":
            print(f"warning: warm-up of /{path} ended {result['status']}", file=sys.stderr)


def measure(page, url: str, no_figure: bool) -> dict:
    """Open (or reload) `url` on `page` and return the page's own times, in ms."""
    if page.url == url:
        page.reload(wait_until="commit")
    else:
        page.goto(url, wait_until="commit")
    if no_figure:
        page.evaluate("() => { window.__benchNoFigure = true; }")
    page.wait_for_function("() => window.__bench && window.__bench.settled !== null",
                           timeout=TIMEOUT_MS, polling=200)
    return page.evaluate("() => ({figure: window.__bench.figure, lcp: window.__bench.lcp,"
                         " settled: window.__bench.settled})")


def head_switch(page) -> float | None:
    """/model: tap head 3 of the canvas maps; ms until the next frame, None if not drawn."""
    button = page.locator(".avm button[data-head='2']")
    button.wait_for(timeout=TIMEOUT_MS)
    return page.locator(".avm button[data-head='2']").evaluate(HEAD_SWITCH_JS)


def run(browser, url: str, throttle: float, repeats: int, no_figure: bool, switch: bool) -> dict:
    """cold and warm samples of one page: {"cold": [...], "warm": [...]} of measure()'s dicts."""
    samples = {"cold": [], "warm": []}
    for _ in range(repeats):
        context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                      has_touch=True, device_scale_factor=1.75,
                                      user_agent=PHONE_UA)
        context.add_init_script(WATCH_JS)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})
        for kind in ("cold", "warm"):
            sample = measure(page, url, no_figure)
            if switch:
                sample["switch"] = head_switch(page)
            samples[kind].append(sample)
        context.close()
    return samples


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cell(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def ratio(value, base) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


AIM = 1.2  # issue 61: a page's first figure within 1.2x a bare page's largest paint


def paired(samples: list[dict], bases: list[dict], key: str, base_key: str) -> list[float]:
    """Round by round, `key` of a page's sample over `base_key` of the sample measured beside
    it in the same round (both lists in round order): ratios that the machine's drift
    between rounds does not move."""
    return [a[key] / b[base_key] for a, b in zip(samples, bases, strict=True)
            if a[key] and b[base_key]]


def spread(ratios: list[float]) -> str:
    """The median of `ratios` and their range."""
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="*", default=list(PAGES), choices=list(PAGES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--throttle", type=float, default=4.0, help="CPU slowdown (Lighthouse: 4)")
    parser.add_argument("--no-bare", dest="bare", action="store_false",
                        help="leave out the bare pages of a still picture among widgets")
    parser.add_argument("--before-tree", type=Path, default=None,
                        help="a checkout of an earlier commit: its pages measured alongside")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    pages = {name: PAGES[name] for name in args.pages}
    app, app_url = start_streamlit(free_port(), log_name="bench_phone.log")
    bare = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            bare = [serve_bare(Path(folder), BARE_PLOTLY, "bare_plotly"),
                    serve_bare(Path(folder), BARE_NONE, "bare_none")]
            stills = {name: serve_bare(Path(folder), BARE_STILL.replace("LAYOUT", layout),
                                       f"bare_still_{k}")
                      for k, (name, layout) in enumerate(BARE_STILLS.items())} if args.bare else {}
            bare += stills.values()
            if args.before_tree:
                bare.append(serve_tree(args.before_tree.resolve()))
                warm(bare[-1][1], pages)
            warm(app_url, pages)
            targets = [("bare: one plotly chart", bare[0][1] + "/", False),
                       ("bare: no chart", bare[1][1] + "/", True)]
            targets += [(name, url + "/", False) for name, (_proc, url) in stills.items()]
            for path in pages.values():
                targets.append((f"/{path}", f"{app_url}/{path}", False))
                if args.before_tree:
                    targets.append((f"/{path} (before)", f"{bare[-1][1]}/{path}", False))
            rows = {name: {"cold": [], "warm": []} for name, _url, _no_figure in targets}
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                     proxy=offline_proxy())
                for repeat in range(args.repeats):  # every page once a round: drift hits all alike
                    print(f"round {repeat + 1} of {args.repeats} ...", file=sys.stderr, flush=True)
                    # every other round backwards: no page always measured before its neighbour
                    for name, url, no_figure in targets[::1 if repeat % 2 == 0 else -1]:
                        samples = run(browser, url, args.throttle, 1, no_figure,
                                      switch=name == "/model")
                        for kind, values in samples.items():
                            rows[name][kind] += values
                browser.close()
    finally:
        stop_streamlit(app)
        for proc, _url in bare:
            stop_streamlit(proc)

    print(f"\nPhone pages at 390x844, CPU throttled {args.throttle:g}x, median of "
          f"{args.repeats} (ms from navigation start)\n")
    head = ("| page | cold first figure | cold LCP | cold settled | warm first figure | "
            "warm LCP | warm settled | head switch | cold first figure / bare plotly | "
            "cold settled / bare none | first figure / bare none's LCP, cold and warm |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    base_figure = median(s["figure"] for s in rows["bare: one plotly chart"]["cold"])
    base_settled = median(s["settled"] for s in rows["bare: no chart"]["cold"])
    base_lcp = [median(s["lcp"] for s in rows["bare: no chart"][kind]) for kind in ("cold", "warm")]
    for name, samples in rows.items():
        cold, warm_ = samples["cold"], samples["warm"]
        values = [median(s[k] for s in cold) for k in ("figure", "lcp", "settled")]
        values += [median(s[k] for s in warm_) for k in ("figure", "lcp", "settled")]
        switch = median(s.get("switch") for s in cold + warm_)
        print(f"| {name} | " + " | ".join(cell(v) for v in values) + f" | {cell(switch)} | "
              f"{ratio(values[0], base_figure)} | {ratio(values[2], base_settled)} | "
              f"{ratio(values[0], base_lcp[0])}, {ratio(values[3], base_lcp[1])} |")
    print(f"\nFirst figure / bare none's LCP in the same round: the median of the rounds' "
          f"ratios [lowest-highest], and the rounds within {AIM}x\n")
    print("| page | cold | warm | rounds within, cold and warm |\n|---|---|---|---|")
    yardstick = rows["bare: no chart"]
    for name, samples in rows.items():
        if name == "bare: no chart":
            continue
        ratios = [paired(samples[kind], yardstick[kind], "figure", "lcp")
                  for kind in ("cold", "warm")]
        within = ", ".join(f"{sum(r <= AIM for r in kind)} of {len(kind)}" for kind in ratios)
        print(f"| {name} | {spread(ratios[0])} | {spread(ratios[1])} | {within} |")
    if args.before_tree:
        print(f"\nFirst figure now / before ({args.before_tree}): the median of the rounds' "
              "ratios [lowest-highest]\n")
        print("| page | cold | warm |\n|---|---|---|")
        for path in pages.values():
            now, before = rows[f"/{path}"], rows[f"/{path} (before)"]
            cells = [spread(paired(now[kind], before[kind], "figure", "figure"))
                     for kind in ("cold", "warm")]
            print(f"| /{path} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
