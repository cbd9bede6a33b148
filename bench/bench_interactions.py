"""What a click costs the server in a real browser session, this tree against another commit.

    .venv/bin/python bench/bench_interactions.py                       # against 3648743
    .venv/bin/python bench/bench_interactions.py --baseline <commit>
    .venv/bin/python bench/bench_interactions.py --baseline none       # this tree only

bench_server.py measures a rerun under AppTest, which always reruns the whole script; a page
that reruns only a fragment on a click (Model heads' head picker) is measured here, as a
student causes it: chromium (Debian's) drives one `streamlit run` server per tree, and the
server process's own CPU time (/proc/<pid>/stat: user + system, all its threads) is read
before and after each interaction, once the page has finished drawing. For each tree, in one
run, side by side:

  first chart, just started  a fresh server (started as `make run` starts it), a fresh browser,
                             as soon as the server answers: goto the page -> first chart drawn
                             (/ and /model, each on its own fresh server)
  first chart, warm          the same page again, three times, each in a fresh browser context
  another head / layer       the Model heads pickers (median of --repeats)
  new text, 128 / 512 / 2,048  the text box, a fresh text of that many tokens (token cap
                             raised): server CPU, and wall time until the layer's maps
                             are drawn in chromium (the grid's title shows the new length)
  first visit, each page     HTTP and websocket MB a fresh browser receives from the warm
                             server, straight from Streamlit (`make run`, no proxy)

Run it on an idle machine (nothing else: the README in this folder says what else ran).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench_server import run_at_commit  # noqa: E402 (a script beside this one)

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "3648743"  # main before issue 28's work (and this round's variant and figure fixes)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TICKS = os.sysconf("SC_CLK_TCK")
PAGES = ("/", "/compare", "/model", "/inspect", "/extrapolation", "/lesson")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_server(tree: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # as `make run` starts it: alibi_viz_app/serve.py where the tree has one, else streamlit run
    command = (["-m", "alibi_viz_app.serve"] if (tree / "app" / "serve.py").is_file()
               else ["-m", "streamlit", "run", "alibi_viz_app/main.py"])
    proc = subprocess.Popen(
        [sys.executable, *command, "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def settle(page) -> None:
    """Wait until the script (or fragment) run is over and the charts are drawn."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=120_000)
    page.wait_for_timeout(400)


def pick(page, key: str, option: str) -> None:
    """Choose `option` (the start of its text) in the selectbox with widget key `key`."""
    box = page.locator(f".st-key-{key} [role='combobox']")
    box.click()
    box.fill(option)  # the list narrows to the options holding this text
    page.get_by_role("option").filter(has_text=re.compile(rf"^{re.escape(option)}\b")).first.click()


def first_chart(browser, url: str, path: str) -> float:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url + path)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=180_000)
    seconds = time.perf_counter() - start
    settle(page)
    context.close()
    return seconds


def first_visit_bytes(browser, url: str, path: str) -> tuple[float, float]:
    """(HTTP MB, websocket MB) a first visit to `path` receives, straight from Streamlit (as
    `make run` serves it, no proxy), in a fresh context (cold browser cache): headers and
    bodies as they crossed the wire, until the page is idle."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    requests, frames = [], []
    page.on("requestfinished", lambda request: requests.append(request))
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(len(data))))
    page.goto(url + path)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=180_000)
    settle(page)
    page.wait_for_timeout(1500)  # late requests (fonts, images) finish
    http = 0
    for request in requests:
        sizes = request.sizes()
        http += sizes["responseBodySize"] + sizes["responseHeadersSize"]
    context.close()
    return http / 1e6, sum(frames) / 1e6


def measure(page, pid: int, action) -> float:
    before = cpu_seconds(pid)
    action()
    settle(page)
    return cpu_seconds(pid) - before


GRID_TITLE = ".st-key-mh_fig_grid .gtitle"


def until_drawn(page, tokens: int) -> None:
    """Wait until the layer's grid shows a text of `tokens` tokens (its title says so)."""
    page.wait_for_function(
        f"() => (document.querySelector('{GRID_TITLE}')?.textContent || '')"
        f".includes(', {tokens:,} tokens')", timeout=180_000)


def text_of(tokens: int, k: int) -> str:
    """About `tokens` bytes of Python-like text (one token per byte), different for each k."""
    line = f"def f{k}(x):\n    return x * {k} + len('alibi')  # {k}\n"
    return (line * (tokens // len(line) + 1))[:tokens]


def run_tree(tree: Path, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for path in ("/", "/model"):  # the bias explorer (the landing page) and Model heads
            proc, url = start_server(tree)
            out[f"first chart {path}, just-started server (s)"] = [first_chart(browser, url, path)]
            out[f"first chart {path}, warm server (s)"] = [first_chart(browser, url, path)
                                                           for _ in range(3)]
            if path == "/":
                proc.terminate()
                proc.wait(30)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 768})
            page = context.new_page()
            page.goto(url + "/model")
            page.wait_for_selector(".st-key-mh_fig_row .main-svg", timeout=180_000)
            settle(page)
            for k in range(repeats):
                out.setdefault("another head (server CPU-s)", []).append(measure(
                    page, proc.pid, lambda k=k: pick(page, "mh_head", f"head {2 + k % 7}")))
            for k in range(repeats):
                out.setdefault("another layer (server CPU-s)", []).append(measure(
                    page, proc.pid, lambda k=k: pick(page, "mh_layer", str(1 + (k + 1) % 4))))
            for tokens in (128, 512, 2048):
                page.locator(".st-key-mh_tokens input").fill(str(tokens))
                page.keyboard.press("Enter")
                settle(page)
                walls = out.setdefault(f"new text, {tokens:,} tokens: until drawn (s)", [])
                for k in range(max(2, repeats // 2)):
                    size = tokens - 1 - k  # a new length each time: the grid's title tells

                    def type_text(size=size, k=k, walls=walls):
                        start = time.perf_counter()
                        page.locator(".st-key-mh_text textarea").fill(text_of(size, k))
                        page.locator("h1").first.click()  # leaving the box applies it
                        until_drawn(page, size)
                        walls.append(time.perf_counter() - start)
                    out.setdefault(f"new text, {tokens:,} tokens (server CPU-s)", []).append(
                        measure(page, proc.pid, type_text))
            context.close()
            for path in PAGES:  # the server is warm: what the page itself sends
                http, ws = first_visit_bytes(browser, url, path)
                out[f"first visit {path}: HTTP (MB)"] = [http]
                out[f"first visit {path}: websocket (MB)"] = [ws]
        finally:
            proc.terminate()
            proc.wait(30)
            browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare with, or 'none'")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    start, load = time.time(), os.getloadavg()[0]
    after = run_tree(ROOT, args.repeats)
    before = (None if args.baseline == "none"
              else run_at_commit(args.baseline, lambda tree: run_tree(tree, args.repeats)))
    print(f"\n## A real browser session (median of {args.repeats}; load average {load:.2f} at "
          f"the start, {time.time() - start:.0f} s in all)")
    if before is None:
        print("| measure | this tree |\n|---|---|")
        for kind, samples in after.items():
            print(f"| {kind} | {statistics.median(samples):.3f} |")
        return
    print(f"| measure | {args.baseline} | this tree | before / after |\n|---|---|---|---|")
    for kind, samples in after.items():
        now = statistics.median(samples)
        old = statistics.median(before[kind]) if kind in before else float("nan")
        print(f"| {kind} | {old:.3f} | {now:.3f} | {old / now:.1f}x |")


if __name__ == "__main__":
    main()
