"""Shared fixtures: a real `streamlit run` server and Debian's chromium driven by playwright.

Browser tests are marked `browser`. They use /usr/bin/chromium (make test installs it as root);
playwright's own browser downloads are never used. Screenshots go to test-artifacts/ (git-ignored),
or to $ALIBI_VIZ_SCREENSHOTS when set (the README's screenshots are made that way).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from alibi_viz_app.testing import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    free_port,
    start_streamlit,
    stop_streamlit,
)

# Under pytest-xdist each worker gets its share of the cores for torch (set before torch is
# imported, so the tests' own subprocesses inherit it too): two workers of two torch threads
# each on two cores spent about half their time waiting on each other (the conformance matrix
# took 32 s instead of 17 s).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    os.environ.setdefault("MKL_NUM_THREADS", str(_share))

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


# ----------------------------------------------------------------------------- command line


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
               "test_multihost": 105, "test_browser_phone": 63, "test_packaging": 100}
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
