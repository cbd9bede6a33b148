"""Load test: many browser sessions changing controls at once against one `streamlit run` server.

    .venv/bin/python bench/bench_load.py                           # 20 sessions x 60 s
    .venv/bin/python bench/bench_load.py --sessions 4 --seconds 20  # a quick look
    .venv/bin/python bench/bench_load.py --proxy 2                  # the class deployment
    .venv/bin/python bench/bench_load.py --proxy 2 --kill-replica-at 20   # and a failover

With `--proxy N` the server is the class deployment instead (deploy/run.sh: N replicas on
loopback behind nginx, on free ports, in a temporary folder) and every session goes through
nginx; everything else is the same, so the two runs compare.

Loopback only and bounded: one server on 127.0.0.1, one headless chromium (Debian's, through
playwright's asyncio API) holding one browser context, so one Streamlit session, per simulated
user. A warm-up user first opens the Model heads page (the shared model is loaded once) and the
bias explorer. Then the class arrives: half the users open the bias explorer, half the Model
heads page, at most `--arrivals` first loads at a time (20 tabs parsing Streamlit's 9 MB
bundle at once on 2 cores measures chromium, not the app). When all are in, everyone works for `--seconds`: alternately on the bias
explorer (typing a new head count) and the Model heads page (another layer, another head, or a
new short text that makes the model run), three changes per page with `--think` seconds (mean)
between them, switching pages through the sidebar as a student would. A watchdog stops
everything after the longest possible arrival phase plus `--seconds` plus `--grace`.

Reported:
* errors: uncaught exceptions in the page, crashed tabs, failed or >= 400 HTTP loads, and
  Streamlit exception or error boxes on the page after an update. Must be 0.
* updates not seen: a change whose chart did not update within `--timeout` seconds.
* time from a control change to the updated chart (p50/p95/max), per kind of change, and page
  switches and first loads.
* server memory: peak RSS of the streamlit process and any children (sampled every 0.5 s, and
  the kernel's VmHWM), beside its RSS after the warm-up: the model is shared, so the peak grows
  by per-session state only, not by a model copy per user.
* server round trip of each change: from the rerun request leaving the page (websocket frame
  sent) to the last frame received before the chart was drawn; the rest of a change's time is
  the browser (typing, plotly drawing) waiting for a core.
* server CPU while the class works, to tell the server's share of the 2 cores from the
  browsers' (with --proxy: every replica and nginx).
* the server's own time per script run (wall and CPU of the script thread, p50/p95, per
  page), from the timing log every server writes (ALIBI_VIZ_TIMING_LOG, alibi_viz_app/ui.py); with
  --proxy also the runs and sessions per replica.
* first visits (`--first-visits`, before the class): a cold-cache visit to the bias
  explorer and a second one in the same browser, directly to Streamlit and, with --proxy,
  through nginx: seconds to the first chart and bytes received (HTTP as encoded on the wire,
  and websocket). `--first-visit-mbit` throttles HTTP as a shared school network would.
* with `--kill-replica-at S` (and --proxy 2+): replica r1 gets SIGKILL S seconds into the
  work; reported are its users, how long each took to get a new session's first frame from
  a live replica, and the errors of everyone else (must be 0).

The machine is shared (2 cores, also running the 20 browsers): the latencies say how the app
degrades when 20 users and their browsers share 2 cores, not what one user on a laptop sees.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from alibi_viz_app.testing import (
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    start_class_stack,
    start_streamlit,
    stop_class_stack,
    stop_streamlit,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"  # git-ignored: the timing log of each run

VIEWPORT = {"width": 1280, "height": 900}
WIRES: dict = {}  # page -> Wire
ERROR_BOXES = "[data-testid='stException'], [data-testid='stAlertContentError']"
NOT_LOOPBACK = re.compile(r"^(https?|wss?)://(?!(127\.0\.0\.1|localhost)[:/])")

# The bias explorer's grid is the second plotly chart; one panel title (g.textpoint) per head.
BIAS_GRID_PANELS = """n => {
    const grid = document.querySelectorAll('.js-plotly-plot')[1];
    return grid && grid.querySelectorAll('g.textpoint').length === n;
}"""


@dataclass
class Stats:
    """What every simulated user recorded (filled from many coroutines, one event loop)."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    not_seen: list[str] = field(default_factory=list)
    external: set[str] = field(default_factory=set)  # non-loopback URLs the pages asked for
    server: dict[str, list[float]] = field(default_factory=dict)  # Wire.round_trip per kind
    actions: int = 0

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)
        self.actions += 1


async def keep_local(context, stats: Stats) -> None:
    """Abort every request that would leave the machine, and note its URL (loopback only)."""
    async def block(route):
        stats.external.add(route.request.url)
        await route.abort()

    await context.route(NOT_LOOPBACK, block)


def watch_page(page, user: int, stats: Stats) -> None:
    """Record JS exceptions, crashes and failed loads of `page` as errors."""
    page.on("pageerror", lambda exc: stats.errors.append(f"user {user}: page error: {exc}"))
    page.on("crash", lambda _: stats.errors.append(f"user {user}: tab crashed"))

    def failed(request):
        # Requests cut short by navigating away are not failures of the server; requests
        # for other hosts are blocked by keep_local and reported on their own.
        if "ERR_ABORTED" not in (request.failure or "") and request.url not in stats.external:
            stats.errors.append(f"user {user}: load failed: {request.url} {request.failure}")

    def response(r):
        # Opened at /model, Streamlit's frontend first looks for its server under that path
        # (/model/_stcore/health, .../host-config), gets 404 and falls back to /_stcore/:
        # its way of finding the base URL, not a failure.
        if r.status >= 400 and not (r.status == 404 and "/_stcore/" in r.url
                                    and "/model/_stcore/" in r.url):
            stats.errors.append(f"user {user}: HTTP {r.status} {r.url}")

    page.on("requestfailed", failed)
    page.on("response", response)


async def check_error_boxes(page, user: int, stats: Stats, where: str) -> None:
    count = await page.locator(ERROR_BOXES).count()
    if count:
        text = (await page.locator(ERROR_BOXES).first.inner_text())[:200]
        stats.errors.append(f"user {user}: {count} error box(es) on {where}: {text!r}")


class Wire:
    """When a page's websocket frames go out and come in (Python's clock, as events arrive),
    and when its websockets close and (re)open: a failover shows as a close, then a new
    websocket whose first frame is the new session's first run."""

    def __init__(self, page, user: int = -1):
        self.user = user
        self.sent: list[float] = []
        self.received: list[float] = []
        self.closed: list[float] = []
        self.first_frames: list[tuple[float, float]] = []  # (socket opened, its first frame)
        page.on("websocket", self._attach)

    def _attach(self, ws) -> None:
        opened, first = time.perf_counter(), []

        def received(_) -> None:
            now = time.perf_counter()
            self.received.append(now)
            if not first:
                first.append(now)
                self.first_frames.append((opened, now))

        ws.on("framesent", lambda _: self.sent.append(time.perf_counter()))
        ws.on("framereceived", received)
        ws.on("close", lambda _: self.closed.append(time.perf_counter()))

    def round_trip(self, start: float, end: float) -> float | None:
        """Seconds from the first frame sent after `start` (the rerun request) to the last
        frame received before `end` (the chart's data): the server's share of a change."""
        sent = next((t for t in self.sent if t >= start), None)
        received = [t for t in self.received if t <= end]
        if sent is None or not received or received[-1] < sent:
            return None
        return received[-1] - sent


async def timed(kind: str, user: int, stats: Stats, action, wait, timeout_s: float,
                wire: Wire | None = None) -> None:
    """Run `action`, then `wait` for the updated chart; record the seconds or a miss."""
    start = time.perf_counter()
    try:
        await action()
        await wait(timeout_s * 1000)
    except Exception as exc:  # playwright TimeoutError or a closed page
        stats.not_seen.append(f"user {user}: {kind}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:160]}")
        return
    end = time.perf_counter()
    stats.add(kind, end - start)
    trip = wire.round_trip(start, end) if wire else None
    if trip is not None:
        stats.server.setdefault(kind, []).append(trip)


# ----------------------------------------------------------------------------- the two pages

async def bias_change(page, rng, user, stats, timeout_s, shown: dict) -> None:
    """Type a new head count into the bias explorer; wait for that many grid panels."""
    box = page.get_by_label("Heads", exact=True)
    current = int(await box.input_value())
    heads = rng.choice([h for h in range(1, 17) if h != current])

    async def action():
        await box.fill(str(heads))
        await box.press("Enter")

    async def wait(ms):
        await page.wait_for_function(BIAS_GRID_PANELS, arg=heads, timeout=ms)

    await timed("bias explorer: head count", user, stats, action, wait, timeout_s,
                WIRES.get(page))
    await check_error_boxes(page, user, stats, "bias explorer")


GRID_TITLE_HAS = """want => (document.querySelector('.st-key-mh_fig_grid .gtitle')
    ?.textContent || '').includes(want)"""
# What the grid draws: its PNG (long inputs) or, for short ones, its text (token labels).
GRID_SIGNATURE = """() => {
    const grid = document.querySelector('.st-key-mh_fig_grid .js-plotly-plot');
    const image = grid && grid.querySelector('image');
    return image ? image.getAttribute('href') : (grid ? grid.textContent : null);
}"""
GRID_NEW_TEXT = """([want, old]) => (document.querySelector('.st-key-mh_fig_grid .gtitle')
    ?.textContent || '').includes(want) && (""" + GRID_SIGNATURE + """)() !== old"""
# The chosen head's row (the grid marks no head: it is drawn once per layer).
ROW_TITLE_HAS = """want => (document.querySelector('.st-key-mh_fig_row .gtitle')
    ?.textContent || '').includes(want)"""
WORDS = ("attention", "bias", "slope", "head", "token", "distance", "linear", "query", "key",
         "softmax", "position", "decay", "train", "short", "test", "long", "the", "a", "of")


async def pick(page, key: str, option: str) -> None:
    """Choose `option` in the Streamlit selectbox whose widget key is `key`."""
    await page.locator(f".st-key-{key}").click()
    await page.get_by_role("option", name=option, exact=True).click()


async def model_change(page, rng, user, stats, timeout_s, shown: dict) -> None:
    """On the Model heads page: choose another layer or head, or type a new short text (a
    forward pass on the shared model); wait for the attention grid to show the change.
    `shown` holds the layer and head on screen (1-based) and the model's dimensions."""
    what = rng.choices(("layer", "head", "text"), weights=(4, 3, 3))[0]
    if what == "layer":
        layer = rng.choice([n for n in range(1, shown["layers"] + 1) if n != shown["layer"]])
        shown["layer"] = layer

        async def action():
            await pick(page, "mh_layer", str(layer))

        async def wait(ms):
            await page.wait_for_function(GRID_TITLE_HAS, arg=f"Layer {layer}:", timeout=ms)
    elif what == "head":
        head = rng.choice([n for n in range(1, shown["heads"] + 1) if n != shown["head"]])
        shown["head"] = head

        async def action():
            await page.locator(".st-key-mh_head").click()
            await page.get_by_role("option").nth(head - 1).click()

        async def wait(ms):
            await page.wait_for_function(ROW_TITLE_HAS, arg=f", head {head} ", timeout=ms)
    else:
        # Unique per user and change, so the shared caches miss and the model runs.
        words = [rng.choice(WORDS) for _ in range(rng.randint(12, 50))]
        text = f"user {user}: " + " ".join(words) + "."
        length = len(text)  # ASCII, byte tokenizer: one token per character

        before = {}

        async def action():
            # The new text may have as many tokens as the old one: wait for new maps too.
            before["grid"] = await page.evaluate(GRID_SIGNATURE)
            box = page.get_by_label("Text", exact=True)
            await box.fill(text)
            await box.press("Control+Enter")

        async def wait(ms):
            await page.wait_for_function(GRID_NEW_TEXT, arg=[f", {length} tokens", before["grid"]],
                                         timeout=ms)

    await timed(f"model heads: {what}", user, stats, action, wait, timeout_s, WIRES.get(page))
    await check_error_boxes(page, user, stats, "model heads")


async def model_ready(page, ms) -> None:
    """Wait until the Model heads page shows its grid."""
    await page.wait_for_selector(".st-key-mh_fig_grid .gtitle", timeout=ms)


async def switch_page(page, title: str, ready, user, stats, timeout_s) -> None:
    link = page.locator("[data-testid='stSidebarNav'] a", has_text=title)
    await timed(f"switch to {title}", user, stats, link.click, lambda ms: ready(page, ms),
                timeout_s, WIRES.get(page))


async def bias_ready(page, ms) -> None:
    await page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot')[1]"
        "?.querySelectorAll('g.textpoint').length > 0", timeout=ms)


def model_dims() -> dict:
    """Layers and heads of the shipped ALiBi model (the Model heads page's default)."""
    config = json.loads((ROOT / "assets" / "models" / "alibi" / "config.json").read_text())
    return {"layers": int(config["n_layer"]), "heads": int(config["n_head"])}


# ----------------------------------------------------------------------------- one user

@dataclass
class Schedule:
    """How the class arrives and works: first loads at most `arrivals` at a time; when all
    have loaded, everyone changes controls for `seconds`, pausing `think` s (mean) between
    changes, as a person reading the chart would."""

    seconds: float
    think: float
    timeout_s: float
    with_model: bool
    total: int
    arrivals: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(2))
    everyone_in: asyncio.Event = field(default_factory=asyncio.Event)
    arrived_count: int = 0
    window_start: float = 0.0  # time.monotonic() when the window opened
    window_end: float = 0.0

    def arrived(self) -> None:
        """One more user has loaded (or given up); the last one opens the window."""
        self.arrived_count += 1
        if self.arrived_count == self.total:
            self.window_start = time.monotonic()
            self.window_end = self.window_start + self.seconds
            self.everyone_in.set()


def is_timeout(exc: Exception) -> bool:
    return type(exc).__name__ == "TimeoutError"


async def user_session(browser, url: str, user: int, plan: Schedule, stats: Stats) -> None:
    """One student: open the bias explorer, wait for the class, then change controls on both
    pages until the window closes."""
    rng = random.Random(user)
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(plan.timeout_s * 1000)
    await keep_local(context, stats)
    page = await context.new_page()
    watch_page(page, user, stats)
    WIRES[page] = Wire(page, user)
    arrived = False
    try:
        # Half the class starts on each page, so both are busy however slow the changes are.
        on_model = plan.with_model and user % 2 == 1
        length = 64 * (1 + user % 8)  # users differ, so the server's caches do not answer all
        async with plan.arrivals:
            if on_model:
                await timed("first load (Model heads)", user, stats,
                            lambda: page.goto(f"{url}/model", wait_until="commit"),
                            lambda ms: model_ready(page, ms), plan.timeout_s)
            else:
                await timed("first load (bias explorer)", user, stats,
                            lambda: page.goto(f"{url}/?len={length}", wait_until="commit"),
                            lambda ms: bias_ready(page, ms), plan.timeout_s)
        plan.arrived()
        arrived = True
        await plan.everyone_in.wait()
        deadline = plan.window_end
        shown = {"layer": 1, "head": 1, **(model_dims() if plan.with_model else {})}
        while time.monotonic() < deadline:
            for _ in range(3):
                if time.monotonic() >= deadline:
                    break
                change = model_change if on_model else bias_change
                await change(page, rng, user, stats, plan.timeout_s, shown)
                await asyncio.sleep(rng.uniform(0.5, 1.5) * plan.think)
            if plan.with_model and time.monotonic() < deadline:
                on_model = not on_model
                if on_model:
                    await switch_page(page, "Model heads", model_ready, user, stats, plan.timeout_s)
                else:
                    await switch_page(page, "Bias explorer", bias_ready, user, stats,
                                      plan.timeout_s)
    except Exception as exc:  # anything unexpected is recorded, never a crash of the run
        line = f"user {user}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        (stats.not_seen if is_timeout(exc) else stats.errors).append(line)
    finally:
        if not arrived:
            plan.arrived()  # so that the others do not wait for this user
        await context.close()


async def warm_up(browser, url: str, stats: Stats, timeout_s: float, with_model: bool) -> None:
    """One user opens the Model heads page (loading the shared model) and the bias explorer."""
    context = await browser.new_context(viewport=VIEWPORT)
    await keep_local(context, stats)
    page = await context.new_page()
    watch_page(page, -1, stats)
    try:
        if with_model:
            await timed("warm-up: first load of Model heads", -1, stats,
                        lambda: page.goto(f"{url}/model", wait_until="commit"),
                        lambda ms: model_ready(page, ms), timeout_s)
        await timed("warm-up: first load of bias explorer", -1, stats,
                    lambda: page.goto(url, wait_until="commit"),
                    lambda ms: bias_ready(page, ms), timeout_s)
    finally:
        await context.close()


# ----------------------------------------------------------------------------- server memory

def tree_pids(*roots: int) -> list[int]:
    """The `roots` and all their descendants (from /proc/<pid>/task/*/children)."""
    pids, todo = [], list(roots)
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemoryWatch:
    """Samples the RSS of process trees every `every` seconds; `peak_mib` is the highest sum.
    Also keeps each process's last CPU time seen, so a killed replica's CPU still counts."""

    def __init__(self, pids: list[int], every: float = 0.5):
        self.pids, self.every, self.peak_kib = pids, every, 0
        self.cpu_seen: dict[int, float] = {}
        self.hwm_seen: dict[int, int] = {}  # KiB, per process: a killed one's peak counts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss_mib(self) -> float:
        return sum(status_kib(p, "VmRSS") for p in tree_pids(*self.pids)) / 1024

    def hwm_mib(self) -> float:
        """Kernel's own peak (VmHWM) summed over the tree: catches spikes between samples."""
        self._see_hwm()
        return sum(self.hwm_seen.values()) / 1024

    def _see_hwm(self) -> None:
        for p in tree_pids(*self.pids):
            self.hwm_seen[p] = max(self.hwm_seen.get(p, 0), status_kib(p, "VmHWM"))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak_kib = max(self.peak_kib, int(self.rss_mib() * 1024))
            self.cpu_seen.update(cpu_by_pid(self.pids))
            self._see_hwm()

    def cpu_since(self, start: dict[int, float]) -> float:
        """CPU seconds used since `start` (a cpu_by_pid) by the processes alive then."""
        self.cpu_seen.update(cpu_by_pid(self.pids))
        return sum(self.cpu_seen.get(pid, cpu) - cpu for pid, cpu in start.items())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024


# ----------------------------------------------------------------------------- the run

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class BrowserNice:
    """Keeps every chromium thread this script started at `niceness` (checked every 0.5 s:
    chromium sets its renderers' priorities itself, so one renice at launch does not last)."""

    def __init__(self, server_pids: list[int], niceness: int):
        self.server_pids, self.niceness = server_pids, niceness
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def renice(self) -> int:
        """Renice chromium's threads now; returns how many threads were changed."""
        server = set(tree_pids(*self.server_pids))
        changed = 0
        for pid in tree_pids(os.getpid()):
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if pid in server or not name.startswith(("chromium", "chrome")):
                continue
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    tid = int(task.name)
                    if os.getpriority(os.PRIO_PROCESS, tid) != self.niceness:
                        os.setpriority(os.PRIO_PROCESS, tid, self.niceness)  # per thread
                        changed += 1
                except OSError:  # the thread ended meanwhile
                    pass
        return changed

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.renice()

    def __enter__(self):
        self.renice()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds used so far by each of `pids` and their descendants."""
    seconds = {}
    for p in tree_pids(*pids):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime (fields 14 and 15)
        seconds[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


@dataclass
class Servers:
    """What the class talks to: one `streamlit run` (`proc`), or with --proxy N replicas
    behind nginx (`stack`, deploy/run.sh). `direct_url` is one Streamlit server without a
    proxy (the first replica when proxied): the first visits are measured there too."""

    url: str
    direct_url: str
    timing: Path  # ALIBI_VIZ_TIMING_LOG of every server: one JSON line per script run
    label: str
    proc: object = None
    stack: object = None

    def pids(self) -> list[int]:
        """The server processes (each replica and nginx's master when proxied)."""
        return [self.proc.pid] if self.proc else list(self.stack.pids().values())


def start_servers(args) -> Servers:
    OUT.mkdir(exist_ok=True)
    timing = OUT / f"bench_load_timing_{os.getpid()}.jsonl"
    timing.unlink(missing_ok=True)
    env = {"ALIBI_VIZ_TIMING_LOG": str(timing)}
    if args.proxy:
        run_dir = Path(tempfile.mkdtemp(prefix="bench_load_class_"))
        print(f"deploy/run.sh: {args.proxy} replicas, logs in {run_dir}/logs", file=sys.stderr)
        stack = start_class_stack(run_dir, replicas=args.proxy, env=env)
        return Servers(stack.url, f"http://127.0.0.1:{stack.replica_ports[0]}", timing,
                       f"{args.proxy} replicas behind nginx", stack=stack)
    proc, url = start_streamlit(free_port(), env=env, log_name="bench_load_streamlit.log")
    return Servers(url, url, timing, "one server", proc=proc)


async def run(args) -> None:

    if args.model_page and not (ROOT / "assets" / "models" / "alibi" / "config.json").is_file():
        sys.exit("The shipped ALiBi model (assets/models/alibi) is missing: train it first, or "
                 "run with --no-model-page.")
    servers = start_servers(args)
    stats, result = Stats(), {}
    started = time.perf_counter()
    try:
        await measure(args, servers, stats, result)
    finally:
        if servers.proc:
            stop_streamlit(servers.proc)
        else:
            stop_class_stack(servers.stack)
    report(args, servers, stats, result, time.perf_counter() - started)


async def measure(args, servers: Servers, stats: Stats, result: dict) -> None:
    """One chromium (kept at --nice-browsers if asked) for the warm-up and the class."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        with contextlib.ExitStack() as stack:
            if args.nice_browsers:
                stack.enter_context(BrowserNice(servers.pids(), args.nice_browsers))
            await class_at_work(args, servers, browser, stats, result)
        await browser.close()


# ----------------------------------------------------------------------------- first visits

FIRST_VISIT = "/?len=256"


async def first_visit(browser, url: str, stats: Stats, mbit: float) -> dict:
    """A first visit to the bias explorer with a cold browser cache (a fresh context), then
    the same page again in that context: for each, seconds to the first chart and to the
    whole grid, HTTP bytes received (headers + encoded bodies: a gzipped or cached response
    counts what crossed the wire) and websocket bytes received. `mbit` > 0 throttles HTTP to
    that many Mbit/s (Chrome's network emulation), as a shared school network might."""
    context = await browser.new_context(viewport=VIEWPORT)
    # Not keep_local: routing requests turns playwright's HTTP cache off, and the second
    # visit measures that cache. The app asks for no other host (tests/test_browser_*); any
    # such request is noted here instead, and fails on an offline machine.
    page = await context.new_page()
    page.on("request", lambda r: NOT_LOOPBACK.match(r.url) and stats.external.add(r.url))
    watch_page(page, -2, stats)
    if mbit:
        cdp = await context.new_cdp_session(page)
        await cdp.send("Network.enable")
        rate = mbit * 1e6 / 8  # bytes per second
        await cdp.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": 20, "downloadThroughput": rate,
            "uploadThroughput": rate})
    sizes, frames = [], []
    page.on("requestfinished", lambda r: sizes.append(asyncio.ensure_future(r.sizes())))
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(len(data))))
    visits = {}
    try:
        for visit in ("first visit", "second visit"):
            sizes.clear()
            frames.clear()
            start = time.perf_counter()
            await page.goto(url + FIRST_VISIT, wait_until="commit")
            await page.wait_for_selector(".js-plotly-plot")
            chart = time.perf_counter() - start
            await bias_ready(page, 120_000)
            grid = time.perf_counter() - start
            await page.wait_for_timeout(1000)  # late requests (fonts, media) finish
            done = await asyncio.gather(*sizes, return_exceptions=True)
            http = sum(d["responseBodySize"] + d["responseHeadersSize"] for d in done
                       if isinstance(d, dict))
            visits[visit] = {"chart": chart, "grid": grid, "http": http, "ws": sum(frames),
                             "requests": len(done)}
    finally:
        await context.close()
    return visits


async def first_visits(args, servers: Servers, browser, stats: Stats) -> dict:
    """`--first-visits` cold first visits to each target, alternating: {target: [visits]}."""
    targets = {"direct (Streamlit)": servers.direct_url}
    if servers.stack:
        targets["through nginx"] = servers.url
    out = {name: [] for name in targets}
    for _ in range(args.first_visits):
        for name, url in targets.items():
            out[name].append(await first_visit(browser, url, stats, args.first_visit_mbit))
    return out


# ----------------------------------------------------------------------------- the class

async def kill_replica_later(args, servers: Servers, plan: Schedule, result: dict) -> None:
    """--kill-replica-at S: SIGKILL replica r1 S seconds into the class's work."""
    await plan.everyone_in.wait()
    await asyncio.sleep(args.kill_replica_at)
    result["killed_at"] = time.perf_counter()
    await asyncio.to_thread(servers.stack.run, "kill-replica", "1")


async def class_at_work(args, servers: Servers, browser, stats: Stats, result: dict) -> None:
    """Warm up, then the class arrives and works; fills `result` with the server's numbers."""
    # Warm-up: one user loads both pages, so the model is loaded before the class arrives.
    url, pids = servers.url, servers.pids()
    warm = Stats()
    await warm_up(browser, url, warm, args.timeout, args.model_page)
    if servers.stack:  # the direct first visits go to r1 only: warm it up on its own too
        await warm_up(browser, servers.direct_url, warm, args.timeout, args.model_page)
    if args.first_visits:
        result["first_visits"] = await first_visits(args, servers, browser, warm)
    memory = MemoryWatch(pids)
    result["rss_warm"] = memory.rss_mib()
    print(f"warm-up: {warm.latencies}, errors {warm.errors + warm.not_seen}, "
          f"server RSS {result['rss_warm']:.0f} MiB", file=sys.stderr)
    plan = Schedule(seconds=args.seconds, think=args.think, timeout_s=args.timeout,
                    with_model=args.model_page, total=args.sessions,
                    arrivals=asyncio.Semaphore(args.arrivals))
    with memory:
        users = [user_session(browser, url, u, plan, stats) for u in range(args.sessions)]
        limit = args.sessions * args.timeout / args.arrivals + args.seconds + args.grace
        cpu_start = None

        async def window_cpu():
            nonlocal cpu_start
            await plan.everyone_in.wait()
            cpu_start = cpu_by_pid(pids)
            result["window_t0"] = time.time()

        watcher = asyncio.ensure_future(window_cpu())
        killer = (asyncio.ensure_future(kill_replica_later(args, servers, plan, result))
                  if args.kill_replica_at is not None else None)
        try:
            await asyncio.wait_for(asyncio.gather(*users), timeout=limit)
        except TimeoutError:
            stats.errors.append(f"watchdog: sessions still running after {limit:.0f} s, "
                                "stopped")
        watcher.cancel()
        if killer:
            killer.cancel()
        result["window_t1"] = time.time()
        window = time.monotonic() - plan.window_start if plan.window_start else 0
        if cpu_start is not None:
            result["cpu"] = (memory.cpu_since(cpu_start), window)
    result["hwm"] = memory.hwm_mib()
    result["rss_peak"] = memory.peak_mib
    result["runs"] = server_runs(servers.timing, result.get("window_t0", 0),
                                 result["window_t1"])


def server_runs(timing: Path, t0: float, t1: float) -> list[dict]:
    """The timing log's runs that ended while the class worked (the app's own cost of each
    rerun, apart from any browser's)."""
    if not timing.exists():
        return []
    runs = [json.loads(line) for line in timing.read_text().splitlines() if line.strip()]
    return [run for run in runs if t0 <= run["t"] <= t1]


def report(args, servers: Servers, stats: Stats, result: dict, wall: float) -> None:
    nice = f" (browsers at nice {args.nice_browsers})" if args.nice_browsers else ""
    sessions = f"{args.sessions} browser session{'s' if args.sessions > 1 else ''}"
    print(f"\n## Load test: {sessions} x {args.seconds:.0f} s, {servers.label} "
          f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores shared by the server and the "
          f"browsers{nice}; think time {args.think:.0f} s; {wall:.0f} s in all)")
    print("| what | changes | change -> chart drawn: p50 (s) | p95 (s) | max (s) "
          "| server round trip: p50 (s) | p95 (s) |")
    print("|---|---|---|---|---|---|---|")
    for kind, values in sorted(stats.latencies.items()):
        trips = stats.server.get(kind)
        trip = (f"{statistics.median(trips):.2f} | {percentile(trips, 95):.2f}" if trips
                else "- | -")
        print(f"| {kind} | {len(values)} | {statistics.median(values):.2f} "
              f"| {percentile(values, 95):.2f} | {max(values):.2f} | {trip} |")
    cpu = result.get("cpu")
    changes = sum(len(v) for k, v in stats.latencies.items() if not k.startswith("first load"))
    cpu_text = (f"{cpu[0]:.0f} CPU-s in {cpu[1]:.0f} s ({100 * cpu[0] / cpu[1]:.0f}% of one "
                f"core), {cpu[0] / max(changes, 1):.2f} CPU-s per change"
                if cpu and cpu[1] > 0 else "-")
    print("\n| errors | updates not seen within timeout | server RSS after warm-up (MiB) "
          "| server peak RSS (MiB, sampled / VmHWM) | server CPU while the class works |")
    print("|---|---|---|---|---|")
    print(f"| {len(stats.errors)} | {len(stats.not_seen)} | {result.get('rss_warm', 0):.0f} "
          f"| {result.get('rss_peak', 0):.0f} / {result.get('hwm', 0):.0f} | {cpu_text} |")
    for line in (stats.errors + stats.not_seen)[:20]:
        print(f"- {line}")
    report_server_runs(result.get("runs", []), bool(servers.stack))
    report_first_visits(args, result.get("first_visits"))
    if "killed_at" in result:
        report_failover(stats, result["killed_at"])
    if stats.external:
        print(f"\nRequests for other hosts (blocked, or noted during the first visits; the "
              f"test is loopback only): "
              f"{', '.join(sorted(stats.external))}")


def quantiles(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} | {percentile(values, 95):.3f}"


def report_server_runs(runs: list[dict], per_replica: bool) -> None:
    """The server's own time per script run while the class worked (ALIBI_VIZ_TIMING_LOG):
    wall and CPU of the script thread, without any browser or network time."""
    if not runs:
        print("\nServer time per rerun: no runs logged (ALIBI_VIZ_TIMING_LOG).")
        return
    print("\n### Server time per script run while the class works (timing log)")
    print("| page | runs | wall p50 (s) | wall p95 (s) | CPU p50 (s) | CPU p95 (s) |")
    print("|---|---|---|---|---|---|")
    for page in sorted({run["page"] for run in runs}):
        mine = [run for run in runs if run["page"] == page]
        print(f"| {page} | {len(mine)} | {quantiles([r['wall_s'] for r in mine])} "
              f"| {quantiles([r['cpu_s'] for r in mine])} |")
    if per_replica:
        counts = {}
        for run in runs:
            counts.setdefault(run["replica"], set()).add(run["session"])
        print("\nRuns (sessions) per replica: " + ", ".join(
            f"{name}: {sum(r['replica'] == name for r in runs)} ({len(sessions)})"
            for name, sessions in sorted(counts.items())))


def report_first_visits(args, visits: dict | None) -> None:
    """First visit (cold cache) and second visit: time to the first chart and bytes."""
    if not visits:
        return
    link = f"HTTP throttled to {args.first_visit_mbit:g} Mbit/s" if args.first_visit_mbit \
        else "loopback, no throttling"
    print(f"\n### First visit to the bias explorer (median of {args.first_visits}; {link})")
    print("| target | visit | first chart (s) | whole grid (s) | HTTP received (MB) "
          "| requests | websocket received (MB) |")
    print("|---|---|---|---|---|---|---|")
    for target, runs in visits.items():
        for visit in ("first visit", "second visit"):
            rows = [run[visit] for run in runs]

            def med(key, rows=rows):
                return statistics.median(row[key] for row in rows)

            print(f"| {target} | {visit} | {med('chart'):.2f} | {med('grid'):.2f} "
                  f"| {med('http') / 1e6:.2f} | {med('requests'):.0f} | {med('ws') / 1e6:.2f} |")


def report_failover(stats: Stats, killed_at: float) -> None:
    """--kill-replica-at: who was on the killed replica (their websocket closed within 5 s
    of the kill), how long until each got a new session's first frame from a live replica,
    and the errors of everyone else, which must be 0."""
    wires = [wire for wire in WIRES.values() if wire.user >= 0]
    hit = {w.user for w in wires if any(killed_at <= t <= killed_at + 5 for t in w.closed)}
    back = []
    for wire in wires:
        if wire.user in hit:
            firsts = [frame for opened, frame in wire.first_frames if opened >= killed_at]
            back.append(min(firsts) - killed_at if firsts else None)
    seen = [b for b in back if b is not None]

    def of(line: str) -> int | None:
        match = re.match(r"user (-?\d+):", line)
        return int(match.group(1)) if match else None

    problems = stats.errors + stats.not_seen
    live = [line for line in problems if of(line) not in hit]
    print("\n### Replica r1 killed (SIGKILL) while the class works")
    print("| users on r1 | back on a live replica | back after: p50 (s) | max (s) "
          "| errors + unseen updates, users on r1 | same, everyone else |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(hit)} | {len(seen)} | {statistics.median(seen) if seen else 0:.1f} "
          f"| {max(seen) if seen else 0:.1f} | {len(problems) - len(live)} | {len(live)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="concurrent browser sessions")
    parser.add_argument("--seconds", type=float, default=60, help="how long each one works")
    parser.add_argument("--timeout", type=float, default=90,
                        help="seconds to wait for one chart update before counting it unseen")
    parser.add_argument("--think", type=float, default=2.0,
                        help="mean pause between one user's changes (seconds)")
    parser.add_argument("--nice-browsers", type=int, default=0, metavar="N",
                        help="run chromium at this niceness (e.g. 19), so that the server gets "
                             "the cores first, as when every student has their own laptop")
    parser.add_argument("--arrivals", type=int, default=2,
                        help="users whose first page load may run at the same time")
    parser.add_argument("--grace", type=float, default=120,
                        help="watchdog slack: stop everything this long after the longest "
                             "possible arrival phase plus --seconds")
    parser.add_argument("--no-model-page", dest="model_page", action="store_false",
                        help="only the bias explorer")
    parser.add_argument("--proxy", type=int, default=0, metavar="N",
                        help="run the class deployment instead: N replicas behind nginx "
                             "(deploy/run.sh), the sessions going through nginx")
    parser.add_argument("--first-visits", type=int, default=3, metavar="K",
                        help="cold-cache first visits measured per target before the class "
                             "(direct, and through nginx with --proxy); 0: none")
    parser.add_argument("--first-visit-mbit", type=float, default=0, metavar="M",
                        help="throttle the first visits' HTTP to M Mbit/s (0: loopback speed)")
    parser.add_argument("--kill-replica-at", type=float, default=None, metavar="S",
                        help="with --proxy 2 or more: SIGKILL replica r1 S seconds into the "
                             "class's work; report who came back and everyone else's errors")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 50 or not 1 <= args.seconds <= 600:
        parser.error("--sessions must be 1-50 and --seconds 1-600 (this test is bounded)")
    if not 0 <= args.proxy <= 8 or not 0 <= args.first_visits <= 10:
        parser.error("--proxy must be 0-8 and --first-visits 0-10")
    if args.kill_replica_at is not None and args.proxy < 2:
        parser.error("--kill-replica-at needs --proxy 2 or more (a live replica to go to)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
