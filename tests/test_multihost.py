"""A class on several machines, on one: network namespaces as hosts on a bridge.

Each namespace is a host with its own address and ports: a front host runs nginx
(`deploy/run.sh start` with ALIBI_VIZ_UPSTREAMS), two app hosts run one replica each
(`deploy/run.sh start --replicas-only`, listening on their own address), a store host runs
redis-server, the class store of both replicas. The bridge lives in a namespace of its own
(the switch), so no firewall rule of this machine sees the traffic; the test's chromium, in
this machine's namespace, reaches the front host through one more veth into the switch.

Stopping a host means killing every process in its namespace by pid (`ip netns pids`): its
students come back on the other host, and a class's answers, kept in the store host's Redis,
are all still counted. The last test stops everything and checks that no process and no
namespace is left.
Needs root (namespaces), ip, nginx, redis-server and chromium; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers import wait_for_app

from alibi_viz_app.class_store import open_store
from alibi_viz_app.testing import CHROMIUM, NGINX, ROOT

IP = shutil.which("ip") or "/usr/sbin/ip"
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
RUN_SH = ROOT / "deploy" / "run.sh"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.deploy,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (ip netns add)"),
    pytest.mark.skipif(not os.path.exists(IP), reason="iproute2's ip is not installed"),
    pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (make nginx)"),
    pytest.mark.skipif(not os.path.exists(REDIS),
                       reason="redis-server is not installed (make redis)"),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
]

FAILOVER_S = 10      # the bound: a stopped host's student is back on their view
REPLICA_PORT = 8601  # the same on both app hosts: each host has its own ports
FRONT_PORT = 8080
VIEW = "/?heads=12&len=300&mode=symmetric"
BIAS_GRID_PANELS = """n => {
    const grid = document.querySelectorAll('.js-plotly-plot')[1];
    return grid && grid.querySelectorAll('g.textpoint').length === n;
}"""
# This run's names and subnet (two runs at once, e.g. two checkouts, do not collide).
TAG = f"av{os.getpid() % 100000}"
SUBNET = f"10.{100 + os.getpid() % 100}.{os.getpid() // 100 % 250}"
HOSTS = {"front": 1, "app1": 2, "app2": 3, "store": 4}   # host -> last byte of its address
BROWSER_SIDE = 254                                        # this machine's address on the bridge


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, timeout=20, check=check)


def netns(host: str) -> str:
    return f"{TAG}-{host}"


def address(host: str) -> str:
    return f"{SUBNET}.{HOSTS[host]}"


def ns_pids(host: str) -> list[int]:
    """Every process running in the host's namespace."""
    done = ip("netns", "pids", netns(host), check=False)
    return [int(pid) for pid in done.stdout.split()]


def our_namespaces() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").stdout.splitlines()
            if line.startswith(f"{TAG}-")]


@dataclass
class Hall:
    """The running hosts: `url` is the front host's nginx; `run_dirs` each host's run.sh
    folder; `timing` each app host's ALIBI_VIZ_TIMING_LOG."""

    url: str
    tmp: Path
    run_dirs: dict[str, Path] = field(default_factory=dict)
    timing: dict[str, Path] = field(default_factory=dict)
    redis: subprocess.Popen | None = None

    def env(self, host: str, **extra: str) -> dict:
        return {**os.environ, "ALIBI_VIZ_RUN_DIR": str(self.run_dirs[host]),
                "ALIBI_VIZ_PYTHON": sys.executable, **extra}

    def run_sh(self, host: str, *args: str, env: dict | None = None, timeout: float = 300):
        """`deploy/run.sh ARGS` inside the host's namespace."""
        return subprocess.run([IP, "netns", "exec", netns(host), str(RUN_SH), *args], cwd=ROOT,
                              env=env or self.env(host), capture_output=True, text=True,
                              timeout=timeout)

    def logged(self) -> dict[str, list[dict]]:
        """Every script run logged so far by each app host, each with its "host"."""
        return {host: [{**json.loads(line), "host": host}
                       for line in path.read_text().splitlines() if line]
                if path.exists() else [] for host, path in self.timing.items()}

    def mark(self) -> dict[str, int]:
        """How many runs each host has logged: a point to look for runs after."""
        return {host: len(runs) for host, runs in self.logged().items()}

    def runs(self, after: dict[str, int] | None = None) -> list[dict]:
        """The runs logged after the mark `after` (all runs without one), host by host."""
        return [run for host, runs in self.logged().items()
                for run in runs[(after or {}).get(host, 0):]]

    def sessions_before(self, mark: dict[str, int]) -> set[str]:
        return {run["session"] for host, runs in self.logged().items()
                for run in runs[:mark[host]]}


def build_network() -> None:
    """The switch namespace with a bridge; one namespace per host, each with a veth on the
    bridge and its address; a veth from this machine's namespace, for the browser."""
    ip("netns", "add", netns("switch"))
    ip("-n", netns("switch"), "link", "add", "br0", "type", "bridge")
    ip("-n", netns("switch"), "link", "set", "br0", "up")
    for k, host in enumerate(HOSTS):
        inside, port = f"{TAG}h{k}", f"{TAG}s{k}"
        ip("netns", "add", netns(host))
        ip("link", "add", inside, "type", "veth", "peer", "name", port)
        ip("link", "set", inside, "netns", netns(host))
        ip("link", "set", port, "netns", netns("switch"))
        ip("-n", netns("switch"), "link", "set", port, "master", "br0", "up")
        ip("-n", netns(host), "addr", "add", f"{address(host)}/24", "dev", inside)
        ip("-n", netns(host), "link", "set", inside, "up")
        ip("-n", netns(host), "link", "set", "lo", "up")
    inside, port = f"{TAG}hb", f"{TAG}sb"
    ip("link", "add", inside, "type", "veth", "peer", "name", port)
    ip("link", "set", port, "netns", netns("switch"))
    ip("-n", netns("switch"), "link", "set", port, "master", "br0", "up")
    ip("addr", "add", f"{SUBNET}.{BROWSER_SIDE}/24", "dev", inside)
    ip("link", "set", inside, "up")


def kill_host(host: str) -> list[int]:
    """SIGKILL every process of the host, by pid, until none is left (at most 5 s)."""
    killed = []
    for _ in range(50):
        pids = ns_pids(host)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return killed


def tear_down(hall: Hall | None) -> None:
    """run.sh stop on each host, then any process left killed by pid, then the namespaces
    and this machine's end of the browser's veth. Safe to call twice."""
    if hall is not None:
        for host in ("front", "app1", "app2"):
            if netns(host) in our_namespaces() and hall.run_dirs.get(host):
                hall.run_sh(host, "stop", timeout=60)
        if hall.redis is not None and hall.redis.poll() is None:
            hall.redis.terminate()
            try:
                hall.redis.wait(timeout=10)
            except subprocess.TimeoutExpired:
                hall.redis.kill()
                hall.redis.wait(timeout=10)
    for name in our_namespaces():
        kill_host(name[len(TAG) + 1:])
        ip("netns", "del", name, check=False)
    # This machine's end of the browser's veth: the kernel would remove it with the switch
    # namespace, but later (namespaces are freed in the background).
    ip("link", "del", f"{TAG}hb", check=False)


def get(url: str, headers: dict | None = None, timeout: float = 30):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.headers, response.read()


def host_of(hall: Hall, cookie: str) -> str:
    """Which app host nginx sends a browser with this cookie to (r1: app1, r2: app2)."""
    _, headers, _ = get(hall.url + "/healthz", {"Cookie": f"alibi_replica={cookie}"})
    return {"r1": "app1", "r2": "app2"}[headers["X-Alibi-Replica"]]


def cookie_for(hall: Hall, host: str) -> str:
    for _ in range(200):
        cookie = secrets.token_hex(16)
        if host_of(hall, cookie) == host:
            return cookie
    raise AssertionError(f"no cookie routes to {host}")


def open_context(browser, hall: Hall, cookie: str | None = None):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(120_000)
    if cookie:
        context.add_cookies([{"name": "alibi_replica", "value": cookie, "url": hall.url}])
    return context


def wait_for_run(hall: Hall, page, where: dict[str, int], timeout_s: float = 120,
                 script: str = "bias") -> dict:
    """The first run of `script` (the bias explorer unless said), logged after the mark
    `where`, of a session not seen before it."""
    seen = hall.sessions_before(where)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fresh = [run for run in hall.runs(where)
                 if run["session"] not in seen and run["page"] == script]
        if fresh:
            return fresh[0]
        page.wait_for_timeout(200)
    raise AssertionError(f"no new session ran within {timeout_s} s")


STEP_JS = """(step) => [...document.querySelectorAll('h2')]
  .some(h => h.innerText.trim().startsWith(step + '.'))"""
# The lesson's step-3 question (8 heads), as alibi_viz names it (tests/test_browser_class.py).
HEADS_8 = f"s3-{zlib.crc32(json.dumps([8]).encode()):08x}"


def on_step(page, step: int, timeout_ms: float) -> None:
    page.wait_for_function(STEP_JS, arg=step, timeout=timeout_ms, polling=100)


def open_lesson(browser, hall: Hall, host: str, path: str, width=1024, height=768):
    """A browser on `host` (by its cookie) showing the lesson at `path`, settled."""
    context = open_context(browser, hall, cookie_for(hall, host))
    context.set_default_timeout(90_000)
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(hall.url + path)
    wait_for_app(page, timeout_ms=180_000)
    return context, page


def set_heads(page, heads: int) -> None:
    box = page.locator(".st-key-be_heads input")
    box.fill(str(heads))
    box.press("Enter")
    page.wait_for_function(BIAS_GRID_PANELS, arg=heads)


@pytest.fixture(scope="module")
def hall(tmp_path_factory):
    """The four hosts, started; everything stopped and removed afterwards."""
    tmp = tmp_path_factory.mktemp("hall")
    tmp.chmod(0o755)
    hall = None
    try:
        build_network()
        hall = Hall(f"http://{address('front')}:{FRONT_PORT}", tmp)
        store_dir = tmp / "store"
        store_dir.mkdir()
        hall.redis = subprocess.Popen(
            [IP, "netns", "exec", netns("store"), REDIS, "--bind", address("store"),
             "--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no",
             "--dir", str(store_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = f"redis://{address('store')}:6379/0"

        starting = {}
        for host in ("app1", "app2"):
            hall.run_dirs[host] = tmp / host
            hall.timing[host] = tmp / host / "timing.jsonl"
            hall.run_dirs[host].mkdir()
            env = hall.env(host, ALIBI_VIZ_REPLICA_ADDRESS="0.0.0.0",
                           ALIBI_VIZ_REPLICA_PORTS=str(REPLICA_PORT),
                           ALIBI_VIZ_CLASS_STORE=store, ALIBI_VIZ_WARM_UP="0",
                           ALIBI_VIZ_TIMING_LOG=str(hall.timing[host]))
            starting[host] = subprocess.Popen(
                [IP, "netns", "exec", netns(host), str(RUN_SH), "start", "--replicas-only",
                 "--replicas", "1"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True)
        for host, process in starting.items():
            out, _ = process.communicate(timeout=300)
            assert process.returncode == 0, f"{host}: run.sh start --replicas-only:\n{out}"

        hall.run_dirs["front"] = tmp / "front"
        upstreams = " ".join(f"{address(h)}:{REPLICA_PORT}" for h in ("app1", "app2"))
        done = hall.run_sh("front", "start", "--port", str(FRONT_PORT),
                           "--listen", address("front"),
                           env=hall.env("front", ALIBI_VIZ_UPSTREAMS=upstreams))
        assert done.returncode == 0, f"front: run.sh start:\n{done.stdout}{done.stderr}"
        yield hall
    finally:
        tear_down(hall)


# ----------------------------------------------------------------------------- the tests

def test_front_host_sends_to_the_app_hosts_addresses(hall):
    """The front host's nginx has the app hosts' addresses as upstreams, not loopback, and
    each app host reaches the store host."""
    conf = (hall.run_dirs["front"] / "nginx.conf").read_text()
    for host in ("app1", "app2"):
        assert f"server {address(host)}:{REPLICA_PORT} " in conf
    assert not re.search(r"^\s*server 127\.", conf, flags=re.M)
    assert (hall.run_dirs["front"] / "replicas").read_text() == ""  # no replica on the front
    # status on each host: the front asks the app hosts' replicas over the network.
    front = hall.run_sh("front", "status")
    assert front.returncode == 0, front.stdout + front.stderr
    for k, host in enumerate(("app1", "app2"), start=1):
        assert re.search(rf"^upstream r{k} +{re.escape(address(host))}:{REPLICA_PORT} +healthy$",
                         front.stdout, flags=re.M), front.stdout
    assert re.search(r"^nginx .*/healthz ok$", front.stdout, flags=re.M), front.stdout
    for host in ("app1", "app2"):
        app = hall.run_sh(host, "status", env=hall.env(host))
        assert app.returncode == 0, app.stdout + app.stderr
        assert re.search(rf"^replica r1 +127\.0\.0\.1:{REPLICA_PORT} +healthy$", app.stdout,
                         flags=re.M), app.stdout
        assert "nginx        on the front host" in app.stdout
    for host in ("app1", "app2"):
        ping = subprocess.run([IP, "netns", "exec", netns(host), sys.executable, "-c",
                               "import redis, sys; print(redis.Redis.from_url(sys.argv[1]).ping())",
                               f"redis://{address('store')}:6379/0"],
                              capture_output=True, text=True, timeout=30)
        assert ping.stdout.strip() == "True", ping.stderr


def test_students_spread_over_the_hosts(hall, browser):
    """New browsers land on both app hosts (nginx's random cookie), and a browser opened
    through the front host draws its charts on the host its cookie routes to."""
    landed = set()
    for _ in range(40):  # a first visit without a cookie: a coin toss per visit
        _, headers, _ = get(hall.url + "/")
        assert "alibi_replica=" in headers["Set-Cookie"]
        landed.add(headers["X-Alibi-Replica"])
    assert landed == {"r1", "r2"}

    for host in ("app1", "app2"):
        context = open_context(browser, hall, cookie_for(hall, host))
        page = context.new_page()
        where = hall.mark()
        page.goto(hall.url + VIEW)
        page.wait_for_function(BIAS_GRID_PANELS, arg=12)
        assert wait_for_run(hall, page, where)["host"] == host
        context.close()


def test_one_browsers_reruns_stay_on_one_host(hall, browser):
    """Three head counts typed: every run in one session, all on one app host."""
    context = open_context(browser, hall)
    page = context.new_page()
    where = hall.mark()
    page.goto(hall.url + "/?heads=2")
    page.wait_for_function(BIAS_GRID_PANELS, arg=2)
    first = wait_for_run(hall, page, where)
    for heads in (3, 5, 7):
        set_heads(page, heads)
    deadline = time.monotonic() + 60
    while len([r for r in hall.runs(where) if r["session"] == first["session"]]) < 4:
        assert time.monotonic() < deadline, "the reruns were not logged"
        page.wait_for_timeout(200)
    mine = hall.runs(where)
    assert {run["session"] for run in mine} == {first["session"]}
    assert {run["host"] for run in mine} == {first["host"]}
    context.close()


def test_a_stopped_app_host_s_students_come_back_on_the_other(hall, browser):
    """Every process of one app host killed by pid: its student's page is back, on the other
    host, with the same view (heads 12, length 300, symmetric) within 10 s; the other host's
    student keeps their session. A class (teacher on app2, a student on each host, both
    answered step 3's question) keeps both answers in the store host's Redis, and the
    stopped host's student is back on the teacher's step."""
    contexts = []
    teacher_context, teacher = open_lesson(browser, hall, "app2", "/lesson?class=new")
    contexts.append(teacher_context)
    teacher.wait_for_function("() => /[?&]class=(?!new)[^&]{5}/.test(location.search)")
    code = parse_qs(urlsplit(teacher.url).query)["class"][0]
    pupils = {}
    for host in ("app1", "app2"):
        context, pupils[host] = open_lesson(browser, hall, host, f"/lesson?class={code}", 400, 800)
        contexts.append(context)
    for step in (2, 3):
        teacher.locator(".st-key-ls_next button").first.click()
        on_step(teacher, step, 30_000)
        for pupil in pupils.values():
            on_step(pupil, step, 10_000)
    for pupil in pupils.values():
        radio = pupil.locator("[class*='st-key-cls_answer_']")
        radio.locator("label").filter(has_text=re.compile("^Yes$")).click()
        wait_for_app(pupil)
    teacher.get_by_text("2 answered").wait_for(timeout=10_000)
    pupil_reloads = []
    pupils["app1"].on("framenavigated", lambda frame: frame == pupils["app1"].main_frame
                      and pupil_reloads.append(1))

    victim_context = open_context(browser, hall, cookie_for(hall, "app1"))
    victim = victim_context.new_page()
    where = hall.mark()
    victim.goto(hall.url + VIEW)
    victim.wait_for_function(BIAS_GRID_PANELS, arg=12)
    assert wait_for_run(hall, victim, where)["host"] == "app1"

    survivor_context = open_context(browser, hall, cookie_for(hall, "app2"))
    survivor = survivor_context.new_page()
    closed = []
    survivor.on("websocket", lambda ws: ws.on("close", lambda _: closed.append(ws.url)))
    where = hall.mark()
    survivor.goto(hall.url + "/?heads=3")
    survivor.wait_for_function(BIAS_GRID_PANELS, arg=3)
    survivor_session = wait_for_run(hall, survivor, where)["session"]

    victim_reloads = []
    victim.on("framenavigated", lambda frame: frame == victim.main_frame
              and victim_reloads.append(1))
    where = hall.mark()
    stopped_at, stopped_wall = time.monotonic(), time.time()
    assert kill_host("app1"), "app1 had no process"
    assert ns_pids("app1") == []
    front = hall.run_sh("front", "status")  # it names the stopped host, and fails
    assert front.returncode == 1, front.stdout + front.stderr
    assert re.search(rf"^upstream r1 +{re.escape(address('app1'))}:{REPLICA_PORT} +not answering$",
                     front.stdout, flags=re.M), front.stdout
    assert re.search(r"^upstream r2 .* healthy$", front.stdout, flags=re.M), front.stdout
    back = wait_for_run(hall, victim, where, timeout_s=FAILOVER_S + 20)
    back_after = time.monotonic() - stopped_at
    while not victim_reloads:  # nginx's failover script reloads the page (deploy/nginx.conf)
        assert time.monotonic() - stopped_at < FAILOVER_S + 20, "the page was not reloaded"
        victim.wait_for_timeout(100)
    wait_for_app(victim, timeout_ms=60_000)
    victim.wait_for_function(BIAS_GRID_PANELS, arg=12)
    drawn_after = time.monotonic() - stopped_at
    print(f"\nhost app1 stopped: the student's page ran on {back['host']} after "
          f"{back['t'] - stopped_wall:.1f} s (server's clock), seen by the test after "
          f"{back_after:.1f} s, its chart drawn and settled after {drawn_after:.1f} s")
    assert back["host"] == "app2"
    assert back_after < FAILOVER_S, f"back after {back_after:.1f} s"
    assert victim.locator(".st-key-be_heads input").input_value() == "12"
    assert victim.locator(".st-key-be_len input").input_value() == "300"
    assert "symmetric" in victim.locator(".st-key-be_mode label:has(input:checked)").inner_text()

    # The class: the stopped host's student is back on step 3, every answer still counted.
    while not pupil_reloads:
        assert time.monotonic() - stopped_at < FAILOVER_S + 20, "the student was not reloaded"
        pupils["app1"].wait_for_timeout(100)
    wait_for_app(pupils["app1"], timeout_ms=180_000)
    on_step(pupils["app1"], 3, 10_000)
    lesson = wait_for_run(hall, pupils["app1"], where, script="lesson")
    print(f"the class's student of app1: the lesson ran on {lesson['host']} after "
          f"{lesson['t'] - stopped_wall:.1f} s (server's clock); the test saw the "
          f"teacher's step there after {time.monotonic() - stopped_at:.1f} s, after checking "
          f"the other student first")
    assert lesson["host"] == "app2"
    assert lesson["t"] - stopped_wall < FAILOVER_S
    teacher.get_by_text("2 answered").wait_for(timeout=10_000)
    store = open_store(f"redis://{address('store')}:6379/0")
    try:
        assert store.counts(code, HEADS_8).total == 2
    finally:
        store.close()

    where = hall.mark()
    set_heads(survivor, 5)
    assert not closed
    deadline = time.monotonic() + 60
    while not any(run["session"] == survivor_session for run in hall.runs(where)):
        assert time.monotonic() < deadline, "the survivor's rerun was not logged"
        survivor.wait_for_timeout(200)
    for context in (victim_context, survivor_context, *contexts):
        context.close()


def test_stop_leaves_no_process_and_no_namespace(hall):
    """run.sh stop on every host, the store stopped: no process in any namespace, then no
    namespace and no veth of this run."""
    for host in ("front", "app1", "app2"):
        done = hall.run_sh(host, "stop", timeout=60)
        assert done.returncode == 0, done.stderr
    hall.redis.terminate()
    hall.redis.wait(timeout=10)
    for host in HOSTS:
        assert ns_pids(host) == [], host
    tear_down(None)
    assert our_namespaces() == []
    assert ip("link", "show", f"{TAG}hb", check=False).returncode != 0
