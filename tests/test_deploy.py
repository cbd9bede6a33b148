"""The class deployment (deploy/run.sh): two Streamlit replicas behind nginx, on free ports.

One stack for the module, with ALIBI_VIZ_TIMING_LOG set: every script run of every replica
appends {replica, session, ...} to one file, which tells which replica served which browser.
The failover test kills a replica, so it runs after the others; the last test stops the stack.
"""

from __future__ import annotations

import gzip
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from alibi_viz_app.testing import (
    CHROMIUM,
    NGINX,
    ROOT,
    free_port,
    start_class_stack,
    stop_class_stack,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.deploy,
    pytest.mark.skipif(not os.path.exists(NGINX),
                       reason="nginx is not installed (make test installs it as root: "
                              "apt-get install nginx)"),
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason="chromium is not installed (make test installs it as root)"),
]

FAILOVER_S = 10  # the bound: a killed replica's student is back on their view
BIAS_GRID_PANELS = """n => {
    const grid = document.querySelectorAll('.js-plotly-plot')[1];
    return grid && grid.querySelectorAll('g.textpoint').length === n;
}"""
VIEW = "/?heads=12&len=300&mode=symmetric"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """nginx and two replicas on free loopback ports; each run logged to stack.timing."""
    run_dir = tmp_path_factory.mktemp("class")
    timing = run_dir / "timing.jsonl"
    stack = start_class_stack(run_dir, replicas=2, env={"ALIBI_VIZ_TIMING_LOG": str(timing)})
    yield stack
    stop_class_stack(stack)


# ----------------------------------------------------------------------------- helpers

def runs(stack) -> list[dict]:
    """Every script run logged so far, oldest first."""
    if not stack.timing.exists():
        return []
    return [json.loads(line) for line in stack.timing.read_text().splitlines() if line]


def wait_for_run(stack, page, where, timeout_s: float = 90) -> dict:
    """The first logged run, among those after index `where`, of a session not seen before
    `where`: the run of the browser that just opened a page. Waits for it."""
    seen = {run["session"] for run in runs(stack)[:where]}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = [run for run in runs(stack)[where:] if run["session"] not in seen]
        if fresh:
            return fresh[0]
        page.wait_for_timeout(200)
    raise AssertionError(f"no new session ran within {timeout_s} s")


def get(url: str, headers: dict | None = None):
    """(status, headers, body) of a GET, without following the body's encoding."""
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.headers, response.read()


def replica_of(stack, cookie: str) -> str:
    """Which replica nginx routes a browser with this alibi_replica cookie to (/healthz)."""
    _, headers, _ = get(stack.url + "/healthz", {"Cookie": f"alibi_replica={cookie}"})
    return headers["X-Alibi-Replica"]


def cookie_for(stack, replica: str) -> str:
    """A cookie value that nginx routes to `replica`."""
    for _ in range(200):
        cookie = secrets.token_hex(16)
        if replica_of(stack, cookie) == replica:
            return cookie
    raise AssertionError(f"no cookie routes to {replica}")


def open_context(browser, stack, cookie: str | None = None):
    """A browser context (its own cookies, so its own session), with a preset cookie."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(90_000)
    if cookie:
        context.add_cookies([{"name": "alibi_replica", "value": cookie, "url": stack.url}])
    return context


def set_heads(page, heads: int) -> None:
    """Type a head count into the bias explorer; wait until the grid has that many panels."""
    box = page.locator(".st-key-be_heads input")
    box.fill(str(heads))
    box.press("Enter")
    page.wait_for_function(BIAS_GRID_PANELS, arg=heads)


def error_boxes(page) -> int:
    return page.locator("[data-testid='stException'], [data-testid='stAlertContentError'],"
                        " [role='dialog']").count()


# ----------------------------------------------------------------------------- the tests

def assert_bundle_precompressed(url: str) -> tuple[str, bytes]:
    """The page's main JS bundle comes gzipped from a file made once by run.sh (a
    Content-Length, not a chunked on-the-fly stream), cached for a year as immutable.
    Returns (the bundle's path, its gzipped body)."""
    _, _, html = get(url + "/")
    bundle = re.search(r'<script type="module"[^>]* src="\./(static/js/index\.[^"]+\.js)"',
                       html.decode()).group(1)
    status, headers, body = get(f"{url}/{bundle}", {"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert int(headers["Content-Length"]) == len(body)  # served from a file: precompressed
    return bundle, body


def test_bundle_is_precompressed_and_cached_for_a_year(stack):
    """The main JS bundle comes gzipped from the .gz made once by run.sh (a Content-Length,
    not a chunked on-the-fly stream), cached for a year as immutable; the page is not."""
    status, headers, _html = get(stack.url + "/")
    assert status == 200 and "max-age" not in headers.get("Cache-Control", "")
    bundle, body = assert_bundle_precompressed(stack.url)
    import streamlit

    original = Path(streamlit.__file__).parent / "static" / bundle
    assert gzip.decompress(body) == original.read_bytes()
    assert len(body) < original.stat().st_size / 2


def test_healthz_answers_ok(stack):
    """/healthz is 200 "ok" from a replica, and says which one."""
    status, headers, body = get(stack.url + "/healthz")
    assert (status, body) == (200, b"ok")
    assert headers["X-Alibi-Replica"] in ("r1", "r2")


def test_websocket_through_nginx_renders_charts(stack, browser):
    """The bias explorer opened through nginx draws its charts: its websocket goes through
    nginx, and nginx sets the cookie that keeps the browser on its replica."""
    context = open_context(browser, stack)
    page = context.new_page()
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    where = len(runs(stack))
    page.goto(stack.url + "/?heads=4")
    page.wait_for_function(BIAS_GRID_PANELS, arg=4)
    assert wait_for_run(stack, page, where)["replica"] in ("r1", "r2")
    assert sockets and all(url.startswith(stack.url.replace("http", "ws")) for url in sockets)
    assert "alibi_replica" in {cookie["name"] for cookie in context.cookies()}
    context.close()


def test_reruns_stay_on_one_replica(stack, browser):
    """One browser's reruns (three head counts typed) all run in one session on one replica."""
    context = open_context(browser, stack)
    page = context.new_page()
    where = len(runs(stack))
    page.goto(stack.url + "/?heads=2")
    page.wait_for_function(BIAS_GRID_PANELS, arg=2)
    session = wait_for_run(stack, page, where)["session"]
    for heads in (3, 5, 7):
        set_heads(page, heads)
    deadline = time.monotonic() + 60
    while len([r for r in runs(stack)[where:] if r["session"] == session]) < 4:
        assert time.monotonic() < deadline, "the reruns were not logged"
        page.wait_for_timeout(200)
    mine = runs(stack)[where:]
    assert {run["session"] for run in mine} == {session}  # no new session on another replica
    assert len({run["replica"] for run in mine}) == 1
    context.close()


def test_cookies_spread_browsers_over_both_replicas(stack, browser):
    """nginx's random cookies send new browsers to both replicas, and a browser holding a
    cookie lands where that cookie routes: here one browser on each replica. (Both also
    open the failover test's view, so both replicas have it cached.)"""
    landed = set()
    for _ in range(40):  # a first visit without a cookie: a coin toss per visit
        _, headers, _ = get(stack.url + "/")
        assert "alibi_replica=" in headers["Set-Cookie"]
        landed.add(headers["X-Alibi-Replica"])
    assert landed == {"r1", "r2"}

    for replica in ("r1", "r2"):
        context = open_context(browser, stack, cookie_for(stack, replica))
        page = context.new_page()
        where = len(runs(stack))
        page.goto(stack.url + VIEW)
        page.wait_for_function(BIAS_GRID_PANELS, arg=12)
        assert wait_for_run(stack, page, where)["replica"] == replica
        context.close()


def test_killed_replica_students_come_back_on_the_live_one(stack, browser):
    """SIGKILL the replica of a student showing heads 12, length 300, symmetric: within 10 s
    the page is back, reloaded by nginx's failover script, in a new session on the other
    replica with the same view. A student on the surviving replica keeps their session and
    sees no error."""
    victim_context = open_context(browser, stack)
    victim = victim_context.new_page()
    where = len(runs(stack))
    victim.goto(stack.url + VIEW)
    victim.wait_for_function(BIAS_GRID_PANELS, arg=12)
    doomed = wait_for_run(stack, victim, where)["replica"]
    live = {"r1": "r2", "r2": "r1"}[doomed]

    survivor_context = open_context(browser, stack, cookie_for(stack, live))
    survivor = survivor_context.new_page()
    closed = []
    survivor.on("websocket", lambda ws: ws.on("close", lambda _: closed.append(ws.url)))
    where = len(runs(stack))
    survivor.goto(stack.url + "/?heads=3")
    survivor.wait_for_function(BIAS_GRID_PANELS, arg=3)
    survivor_session = wait_for_run(stack, survivor, where)["session"]
    reloads = []
    victim.on("framenavigated", lambda frame: frame == victim.main_frame and reloads.append(1))

    where = len(runs(stack))
    killed_at = time.monotonic()
    stack.run("kill-replica", doomed[1:])
    back = wait_for_run(stack, victim, where, timeout_s=FAILOVER_S + 20)
    back_after = time.monotonic() - killed_at
    assert back["replica"] == live
    assert back_after < FAILOVER_S, f"back after {back_after:.1f} s"
    victim.wait_for_function(BIAS_GRID_PANELS, arg=12)
    assert victim.locator(".st-key-be_heads input").input_value() == "12"
    assert victim.locator(".st-key-be_len input").input_value() == "300"
    assert "symmetric" in victim.locator(".st-key-be_mode label:has(input:checked)").inner_text()
    assert reloads, "the page was not reloaded"
    assert stack.run("status", check=False).returncode == 1  # it reports the dead replica

    print(f"failover: back on {live} after {back_after:.1f} s")

    where = len(runs(stack))
    set_heads(survivor, 5)
    assert error_boxes(survivor) == 0 and not closed
    deadline = time.monotonic() + 60
    while not any(run["session"] == survivor_session for run in runs(stack)[where:]):
        assert time.monotonic() < deadline, "the survivor's rerun was not logged"
        survivor.wait_for_timeout(200)
    victim_context.close()
    survivor_context.close()


def test_stop_leaves_no_process(stack):
    """`deploy/run.sh stop` ends nginx (master and workers) and every replica."""
    pids = stack.pids()
    assert "nginx" in pids
    workers = [int(p.name) for p in Path("/proc").iterdir()
               if p.name.isdigit() and _parent(int(p.name)) == pids["nginx"]]
    assert workers
    stack.run("stop")

    def running(pid: int) -> bool:
        try:  # a zombie (Z) waits for its parent to reap it: it runs nothing
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    assert not [pid for pid in [*pids.values(), *workers] if running(pid)]
    assert not list(stack.run_dir.glob("*.pid"))


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- private checkout

@pytest.mark.skipif(os.geteuid() != 0, reason="only root's nginx hands its workers to another "
                    "user (nobody); an ordinary user's workers can read that user's checkout")
def test_checkout_in_a_private_folder_still_serves_the_bundle(tmp_path):
    """A checkout under a 0700 folder (a fresh `git clone` into `mktemp -d`, a home directory),
    started as root with run.sh's defaults: nginx's workers run as nobody, who cannot enter
    it, so run.sh keeps the static copy and the workers' temp folder where they can (status
    says where, and as whom), and the bundle still comes gzipped from disk with the year-long
    cache header. `stop` removes the temp folder."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    checkout = private / "p"
    checkout.mkdir()
    shutil.copytree(ROOT / "deploy", checkout / "deploy",
                    ignore=shutil.ignore_patterns("run", ".static-cache"))
    for name in ("alibi_viz_app", "alibi_viz", "assets"):  # read by the replicas (root), not by nginx
        (checkout / name).symlink_to(ROOT / name)
    run_sh = checkout / "deploy" / "run.sh"
    listen, replica = free_port(), free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ALIBI_VIZ_")}
    env.update(ALIBI_VIZ_PYTHON=sys.executable, ALIBI_VIZ_REPLICA_PORTS=str(replica),
               ALIBI_VIZ_WARM_UP="0")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(run_sh), *args], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=300)

    started = run("start", "--replicas", "1", "--port", str(listen), "--listen", "127.0.0.1")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        status = run("status")
        print(status.stdout)
        assert status.returncode == 0, status.stdout + status.stderr
        static = re.search(r"^static +(\S+) +readable by nginx's workers \(user nobody\)$",
                           status.stdout, re.M)
        assert static, status.stdout
        assert not Path(static.group(1)).resolve().is_relative_to(private.resolve())

        url = f"http://127.0.0.1:{listen}"
        bundle, body = assert_bundle_precompressed(url)
        import streamlit

        original = Path(streamlit.__file__).parent / "static" / bundle
        assert gzip.decompress(body) == original.read_bytes()
        # no request was refused (nginx's error log keeps only critical errors, and a worker
        # denied a file logs an error: the access log's status says it)
        access_log = (checkout / "deploy" / "run" / "logs" / "access.log").read_text()
        assert '" 200 ' in access_log and '" 403 ' not in access_log, access_log
        worker_tmp = Path((checkout / "deploy" / "run" / "worker_tmp").read_text().strip())
        assert worker_tmp.is_dir() and worker_tmp.stat().st_uid == pwd.getpwnam("nobody").pw_uid
    finally:
        stopped = run("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not worker_tmp.exists()
