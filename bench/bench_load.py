"""Load test: many browser sessions changing controls at once against one `streamlit run` server.

    .venv/bin/python bench/bench_load.py                           # 20 sessions x 60 s
    .venv/bin/python bench/bench_load.py --sessions 4 --seconds 20  # a quick look

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
  browsers'.

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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import CHROMIUM, CHROMIUM_ARGS, free_port, start_streamlit, stop_streamlit  # noqa: E402

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
    """When a page's websocket frames go out and come in (Python's clock, as events arrive)."""

    def __init__(self, page):
        self.sent: list[float] = []
        self.received: list[float] = []
        page.on("websocket", self._attach)

    def _attach(self, ws) -> None:
        ws.on("framesent", lambda _: self.sent.append(time.perf_counter()))
        ws.on("framereceived", lambda _: self.received.append(time.perf_counter()))

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
GRID_PANEL_MARKED = """want => [...document.querySelectorAll('.st-key-mh_fig_grid g.textpoint')]
    .some(t => t.textContent.startsWith(want))"""
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
            await page.wait_for_function(GRID_PANEL_MARKED, arg=f"▶ head {head}", timeout=ms)
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
    WIRES[page] = Wire(page)
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

def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants (from /proc/<pid>/task/*/children)."""
    pids, todo = [], [pid]
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
    """Samples the RSS of a process tree every `every` seconds; `peak_mib` is the highest sum."""

    def __init__(self, pid: int, every: float = 0.5):
        self.pid, self.every, self.peak_kib = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss_mib(self) -> float:
        return sum(status_kib(p, "VmRSS") for p in tree_pids(self.pid)) / 1024

    def hwm_mib(self) -> float:
        """Kernel's own peak (VmHWM) summed over the tree: catches spikes between samples."""
        return sum(status_kib(p, "VmHWM") for p in tree_pids(self.pid)) / 1024

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak_kib = max(self.peak_kib, int(self.rss_mib() * 1024))

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

    def __init__(self, server_pid: int, niceness: int):
        self.server_pid, self.niceness = server_pid, niceness
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def renice(self) -> int:
        """Renice chromium's threads now; returns how many threads were changed."""
        server = set(tree_pids(self.server_pid))
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by `pid` and its descendants."""
    total = 0
    for p in tree_pids(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


async def run(args) -> None:

    if args.model_page and not (ROOT / "assets" / "models" / "alibi" / "config.json").is_file():
        sys.exit("The shipped ALiBi model (assets/models/alibi) is missing: train it first, or "
                 "run with --no-model-page.")
    proc, url = start_streamlit(free_port(), log_name="bench_load_streamlit.log")
    stats, result = Stats(), {}
    started = time.perf_counter()
    try:
        await measure(args, url, proc, stats, result)
    finally:
        stop_streamlit(proc)
    report(args, stats, result, time.perf_counter() - started)


async def measure(args, url: str, proc, stats: Stats, result: dict) -> None:
    """One chromium (kept at --nice-browsers if asked) for the warm-up and the class."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        with contextlib.ExitStack() as stack:
            if args.nice_browsers:
                stack.enter_context(BrowserNice(proc.pid, args.nice_browsers))
            await class_at_work(args, url, proc, browser, stats, result)
        await browser.close()


async def class_at_work(args, url: str, proc, browser, stats: Stats, result: dict) -> None:
    """Warm up, then the class arrives and works; fills `result` with the server's numbers."""
    # Warm-up: one user loads both pages, so the model is loaded before the class arrives.
    warm = Stats()
    await warm_up(browser, url, warm, args.timeout, args.model_page)
    memory = MemoryWatch(proc.pid)
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
            cpu_start = cpu_seconds(proc.pid)

        watcher = asyncio.ensure_future(window_cpu())
        try:
            await asyncio.wait_for(asyncio.gather(*users), timeout=limit)
        except TimeoutError:
            stats.errors.append(f"watchdog: sessions still running after {limit:.0f} s, "
                                "stopped")
        watcher.cancel()
        window = time.monotonic() - plan.window_start if plan.window_start else 0
        if cpu_start is not None:
            result["cpu"] = (cpu_seconds(proc.pid) - cpu_start, window)
    result["hwm"] = memory.hwm_mib()
    result["rss_peak"] = memory.peak_mib


def report(args, stats: Stats, result: dict, wall: float) -> None:
    nice = f" (browsers at nice {args.nice_browsers})" if args.nice_browsers else ""
    sessions = f"{args.sessions} browser session{'s' if args.sessions > 1 else ''}"
    print(f"\n## Load test: {sessions} x {args.seconds:.0f} s, one server "
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
    if stats.external:
        print(f"\nRequests for other hosts (blocked; the test is loopback only): "
              f"{', '.join(sorted(stats.external))}")


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
    args = parser.parse_args()
    if not 1 <= args.sessions <= 50 or not 1 <= args.seconds <= 600:
        parser.error("--sessions must be 1-50 and --seconds 1-600 (this test is bounded)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
