"""Shared fixtures: a real `streamlit run` server and Debian's chromium driven by playwright.

Browser tests are marked `browser`. They use /usr/bin/chromium (make test installs it as root);
playwright's own browser downloads are never used. Screenshots go to test-artifacts/ (git-ignored),
or to $ALIBI_VIZ_SCREENSHOTS when set (the README's screenshots are made that way).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# Under pytest-xdist each worker gets its share of the cores for torch (set before torch is
# imported, so the tests' own subprocesses inherit it too): two workers of two torch threads
# each on two cores spent about half their time waiting on each other (the conformance matrix
# took 32 s instead of 17 s).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    os.environ.setdefault("MKL_NUM_THREADS", str(_share))

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_streamlit(port: int, env: dict | None = None, log_name: str = "streamlit.log"):
    """Start `streamlit run app/main.py` on 127.0.0.1:port; return (process, base url)."""
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115 (closed with the process)
    cmd = [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.port", str(port),
           "--server.headless", "true", "--server.address", "127.0.0.1",
           "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early; see {ARTIFACTS / log_name}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("streamlit did not become healthy within 60 s")


def stop_streamlit(proc) -> None:
    """Stop a server started by start_streamlit: terminate, then kill after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


# Under pytest-xdist the controller starts one server for every worker's browser tests and
# hands its URL down in SHARED_SERVER (the workers start after pytest_configure, with its
# environment). One server per worker paid the app's cold start once each: about 7.7 CPU-s
# (importing the app's libraries, each page's first run and cached results), on cores the
# parallel part keeps busy 97% of the time. A server nobody asks costs its 0.6 s start.
SHARED_SERVER = "ALIBI_VIZ_TEST_SERVER_URL"
SHARED_SERVER_KEY = pytest.StashKey[subprocess.Popen]()


def pytest_configure(config):
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return  # a worker, or a run without workers: the fixture starts its own
    if not os.path.exists(CHROMIUM):
        return  # the browser tests skip
    try:
        proc, url = start_streamlit(free_port())
    except RuntimeError:
        return  # each worker's fixture tries again, and its tests say why it failed
    config.stash[SHARED_SERVER_KEY] = proc
    os.environ[SHARED_SERVER] = url


def pytest_unconfigure(config):
    proc = config.stash.get(SHARED_SERVER_KEY, None)
    if proc is not None:
        stop_streamlit(proc)
        os.environ.pop(SHARED_SERVER, None)


@pytest.fixture(scope="session")
def server_url():
    """Base URL of a streamlit server running the app for the whole session: the one the
    xdist controller started for every worker (SHARED_SERVER), else one of its own."""
    shared = os.environ.get(SHARED_SERVER)
    if shared:
        yield shared
        return
    proc, url = start_streamlit(free_port())
    yield url
    stop_streamlit(proc)


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, through playwright (skipped when chromium is missing)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (make test installs it as root: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


class WorkerPage:
    """One chromium page that a worker's browser tests take turns on, resized for each.

    Every test still opens its own URL, so it gets a Streamlit session of its own (a session
    is a websocket, which a navigation closes). What it shares is the renderer process: a page
    load of the app on 2 cores costs about 6 s in a fresh context and 2.5-4 s in a page that
    has loaded it before, because chromium has Streamlit's and plotly's scripts compiled
    already (measured on /, /compare, /model and /extrapolation in Spanish). A test that
    failed leaves the page behind it, and the next test gets a new one."""

    def __init__(self, browser):
        self.browser = browser
        self.context = None
        self.page = None

    def open(self, width: int, height: int):
        if self.page is None or self.page.is_closed():
            self.close()
            self.context = self.browser.new_context(viewport={"width": width, "height": height})
            self.page = self.context.new_page()
        else:
            self.page.set_viewport_size({"width": width, "height": height})
        self.page.set_default_timeout(60_000)
        return self.page

    def after(self, failed: bool) -> None:
        """Undo what a test may have changed on the page; a failed test's page is dropped."""
        if self.page is None:
            return
        if failed:
            self.close()
        else:
            self.page.emulate_media(media="null")

    def close(self) -> None:
        if self.context is not None:
            self.context.close()
        self.context = self.page = None


@pytest.fixture(scope="session")
def worker_page(browser):
    shared = WorkerPage(browser)
    yield shared
    shared.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test (`screen` reads whether the test failed)."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def screen(worker_page, request):
    """screen(width, height) -> the worker's shared page (WorkerPage) at that size; a test
    opens its own URL on it."""
    yield worker_page.open
    report = getattr(request.node, "report_call", None)
    worker_page.after(failed=report is None or not report.passed)


@pytest.fixture
def page(screen):
    """A browser page at 1400x1000 (the worker's shared page: see WorkerPage)."""
    return screen(1400, 1000)


@pytest.fixture
def fresh_page(browser):
    """A page in a context of its own with an empty cache, for a test that must see every
    request a first visit makes, or that adds an init script (which would stay on a shared
    page). (A test that listens to a shared page's events takes its listener off at the end:
    test_browser_model.runs_finished.)"""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


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
# first call records the page's state; it is polled every 50 ms. (Polled on every animation
# frame, its reading of the page's text cost chromium 8% more CPU over six page loads of
# every page: 12.0-12.8 CPU-s against 10.5-11.6 s, three rounds, 2026-12-05.)
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


# Every shown chart drawn at its box's width again, after the window was resized.
REDRAWN_AT_WIDTH_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent)
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


@pytest.fixture
def cli(capfd, monkeypatch):
    """cli(*args) -> CompletedProcess of `alibi_viz.cli.main(args)` run in this process; the
    environment variables main sets for itself (HF_HUB_OFFLINE, TRANSFORMERS_VERBOSITY) are
    put back after the test."""
    from alibi_viz.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1"))
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", os.environ.get("TRANSFORMERS_VERBOSITY", "error"))
    monkeypatch.chdir(ROOT)

    def run(*args) -> subprocess.CompletedProcess:
        argv = [str(a) for a in args]
        capfd.readouterr()  # whatever the test printed before
        code = main(argv)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


# ----------------------------------------------------------------------------- class deployment

DEPLOY = ROOT / "deploy" / "run.sh"
NGINX = "/usr/sbin/nginx"


@dataclass
class ClassStack:
    """A running `deploy/run.sh` stack: nginx at `url` in front of `replica_ports`; `timing`
    is the replicas' ALIBI_VIZ_TIMING_LOG when one was given."""

    url: str
    run_dir: Path
    replica_ports: list[int]
    env: dict = field(repr=False, default_factory=dict)
    timing: Path | None = None

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run `deploy/run.sh ARGS` against this stack (status, kill-replica K, stop...)."""
        done = subprocess.run([str(DEPLOY), *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:  # what run.sh said, not only its exit status
            raise AssertionError(f"deploy/run.sh {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}{done.stderr}")
        return done

    def pids(self) -> dict[str, int]:
        """The pid of each replica (r1, r2, ...) and of nginx's master, from the pid files."""
        return {f.stem: int(f.read_text()) for f in sorted(self.run_dir.glob("*.pid"))
                if f.read_text().strip()}


def start_class_stack(run_dir: Path, replicas: int = 2, env: dict | None = None) -> ClassStack:
    """Start `deploy/run.sh start` on free loopback ports, its files in `run_dir`."""
    ports: list[int] = []
    while len(ports) < replicas + 1:
        port = free_port()
        if port not in ports:
            ports.append(port)
    listen, replica_ports = ports[0], ports[1:]
    env = {**os.environ, **(env or {}), "ALIBI_VIZ_RUN_DIR": str(run_dir),
           "ALIBI_VIZ_REPLICA_PORTS": " ".join(map(str, replica_ports)),
           "ALIBI_VIZ_PYTHON": sys.executable}
    timing = env.get("ALIBI_VIZ_TIMING_LOG")
    stack = ClassStack(f"http://127.0.0.1:{listen}", run_dir, replica_ports, env,
                       Path(timing) if timing else None)
    done = stack.run("start", "--replicas", str(replicas), "--port", str(listen),
                     "--listen", "127.0.0.1", check=False)
    if done.returncode != 0:
        raise RuntimeError(f"deploy/run.sh start failed:\n{done.stdout}{done.stderr}")
    return stack


def stop_class_stack(stack: ClassStack) -> None:
    """`deploy/run.sh stop`: nginx and every replica, no process left behind."""
    stack.run("stop", check=False)


# ----------------------------------------------------------------------------- parallel runs

# `make test` runs the suite on every core with pytest-xdist (`-n`, `--dist loadgroup`). The
# tests of a module that builds a module-scoped fixture (a trained toy model, a loaded model,
# the class stack) run on one worker, one after another, so the fixture is built once;
# browser tests share one Streamlit server and one chromium per worker (the session fixtures
# above) and are dealt out one by one. Groups start longest first, so no long group is left
# for the end.
#
# The groups are made by the scheduler below, not by `xdist_group` marks: xdist 3.8 marks a
# test's group by appending "@group" to `item._nodeid`, which pytest 9 no longer reads (a
# node's id is `item._id`), so with pytest 9 every mark was silently ignored and each
# module's tests were spread over both workers (the class stack of test_deploy started twice,
# 25 s each).
# Seconds each group took on an idle 2-core machine (`--durations`), to order them.
LONG_GROUPS = {"test_storm": 27, "test_deploy": 60, "test_fuzz_pages": 60, "test_i18n": 45,
               "test_train": 30, "test_app_extrapolation": 30, "test_app_lesson": 30,
               "test_multihost": 105, "test_browser_phone": 63}
# Modules whose tests are independent page loads, or long checks of models each builds
# itself (a module fixture there is cheap): dealt out one by one.
UNGROUPED = {"test_browser_presentation", "test_browser_model", "test_browser_bias_explorer",
             "test_browser_compare", "test_browser_lesson", "test_conformance"}


def group_of(nodeid: str) -> str:
    """The unit a worker takes whole: the test's module, or the test itself in UNGROUPED."""
    module = nodeid.split("::", 1)[0]
    return nodeid if Path(module).stem in UNGROUPED else module


def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadgroup`, xdist's scope scheduler with `group_of` as the scope."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ModuleGroups(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Order the collection so that LONG_GROUPS come first, the longest first (the scheduler
    hands the groups out in this order: `--no-loadscope-reorder`)."""
    rank = {name: -seconds for name, seconds in LONG_GROUPS.items()}
    items.sort(key=lambda item: rank.get(item.path.stem, 0))  # stable: order kept within
