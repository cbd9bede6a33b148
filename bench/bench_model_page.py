"""Benchmark the Model heads page (/model) and compare it with bertviz's head_view.

    .venv/bin/pip install -c requirements-dev.lock -e '.[bench]'          # bertviz, for the comparison only
    apt-get install -y node-d3 libjs-requirejs libjs-jquery  # bertviz's JS libraries, offline
    .venv/bin/python bench/bench_model_page.py               # everything (about 15 minutes)
    .venv/bin/python bench/bench_model_page.py --quick       # small sizes only: a smoke test

Two tables, each measured side by side in one run:

1. Text change -> maps shown, at 128, 512 and 2048 tokens, with the shipped ALiBi model:
   the library calls the page makes (alibi_viz.models.attention.attention_maps and the
   alibi_viz.figures.heads builders), the page's rerun on the server (AppTest) and, in chromium,
   the time from typing a new text to the attention grid redrawn.
2. This page vs bertviz's head_view(attention, tokens, html_action="return") on the SAME
   attention maps (a tiny random BLOOM, 2 layers x 4 heads, as in issue 6), at 64, 256 and
   1024 tokens: bytes sent to the browser and time until the browser has drawn the view.
   bertviz's page fetches require.js, d3 and jQuery from a CDN; playwright's request routing
   answers those requests with Debian's copies, so nothing leaves the machine.

Bytes of our page are counted in chromium, for the text change alone: websocket frames the
page receives (Streamlit's protobuf messages, which carry the plotly specs) plus the
encoded size of every HTTP response in that window (CDP Network events; images of large
grids are fetched over HTTP from Streamlit's media endpoint). The one-time static assets
(Streamlit's JS bundle, cacheable) are reported on their own, as are bertviz's libraries.
Times are medians of `--repeats` runs; the machine is shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "bench" / "out"
PAGE_SIZES = [128, 512, 2048]
BERTVIZ_SIZES = [64, 256, 1024]
# head_view turns every probability into a Python float, then JSON text (28-45 bytes each),
# and copies that string a few times while building the page: peak RAM measured at 231 bytes
# per value (2 x 8 x 512^2 random maps). Skip a size whose build, plus ~4 GiB for chromium to
# open the result, would not fit in the memory available.
BERTVIZ_RAM_PER_VALUE = 250
BROWSER_RAM = 4 << 30
BERTVIZ_TIMEOUT_S = 150  # issue 6 measured 96 s for bertviz at 1024 tokens; more is "did not finish"
NOT_LOOPBACK = re.compile(r"^(https?|wss?)://(?!(127\.0\.0\.1|localhost)[:/])")  # blocked

# bertviz's require.config asks the CDN for these; Debian's packages ship them.
CDN_LIBRARIES = {
    "require.min.js": "/usr/share/javascript/requirejs/require.min.js",
    "d3.min.js": "/usr/share/nodejs/d3/dist/d3.min.js",
    "jquery.min.js": "/usr/share/javascript/jquery/jquery.min.js",
}
CDN_PACKAGES = {"require.min.js": "libjs-requirejs", "d3.min.js": "node-d3",
                "jquery.min.js": "libjs-jquery"}

PROSE = (
    "Attention with Linear Biases does not add position embeddings to the tokens. Instead, "
    "each head subtracts a penalty from its attention scores that grows linearly with the "
    "distance between the query and the key, so recent tokens count more than old ones. "
    "def half_life(slope):\n    return math.log(2) / slope\n\n"
)


def sample_text(num_tokens: int, variant: int = 0) -> str:
    """ASCII text of exactly `num_tokens` characters (one token each for the byte tokenizer of
    the shipped models); each `variant` starts elsewhere in the prose, so it misses the caches."""
    text = PROSE * (num_tokens // len(PROSE) + 2)
    start = (7 * variant) % len(PROSE)
    return text[start:start + num_tokens]


def median(values) -> float:
    return statistics.median(values)


def fmt_bytes(n: float) -> str:
    return f"{n / 1e6:,.2f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"


# ----------------------------------------------------------------------------- bertviz

def cdn_route(route) -> None:
    """Answer bertviz's CDN requests with Debian's copies (anything else: aborted, offline)."""
    name = route.request.url.rsplit("/", 1)[-1]
    name = name if name.endswith(".js") else name + ".js"
    local = CDN_LIBRARIES.get(name)
    if local is None:
        route.abort()
        return
    route.fulfill(path=local, content_type="application/javascript")


# The end of a "drawn" predicate: once its conditions hold, two animation frames must pass (a
# paint happened) before it answers true.
AFTER_A_PAINT = """
    if (window.__drawn) return true;
    if (!window.__waiting) {
        window.__waiting = true;
        requestAnimationFrame(() => requestAnimationFrame(() => { window.__drawn = true; }));
    }
    return false;
}"""

BERTVIZ_DRAWN = """() => {
    // head_view builds its SVG in one synchronous call: left tokens, right tokens, the
    // attention lines, then one checkbox per head. Done when the checkboxes exist, and
    // drawn when two animation frames have passed after that (a paint happened).
    const svg = document.querySelector('#vis svg');
    if (!svg || svg.children.length < 4) return false;""" + AFTER_A_PAINT


def bertviz_missing() -> list[str]:
    """The commands that install what the bertviz comparison needs and this machine lacks
    (empty when everything is there)."""
    missing = []
    if importlib.util.find_spec("bertviz") is None:
        missing.append(".venv/bin/pip install -c requirements-dev.lock -e '.[bench]'")
    packages = [CDN_PACKAGES[name] for name, path in CDN_LIBRARIES.items()
                if not Path(path).is_file()]
    if packages:
        missing.append("apt-get install -y " + " ".join(packages))
    return missing


def available_ram() -> int:
    """MemAvailable from /proc/meminfo, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def bertviz_html(maps, tokens) -> tuple[str, float]:
    """bertviz head_view's HTML for per-layer maps (heads, T, T); (html, seconds to build)."""
    from bertviz import head_view

    start = time.perf_counter()
    attention = [torch.from_numpy(m)[None] for m in maps]  # each (1, heads, T, T), as HF returns
    html = head_view(attention, tokens, html_action="return").data
    return html, time.perf_counter() - start


def bertviz_render(browser, html_file: Path, timeout_s: float) -> float | None:
    """Seconds from opening bertviz's saved HTML to its view drawn; None if not within timeout_s."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.route("https://cdnjs.cloudflare.com/**", cdn_route)
    try:
        start = time.perf_counter()
        page.goto(html_file.as_uri(), wait_until="commit", timeout=timeout_s * 1000)
        left = timeout_s - (time.perf_counter() - start)
        page.wait_for_function(BERTVIZ_DRAWN, polling="raf", timeout=max(1, left) * 1000)
        return time.perf_counter() - start
    except Exception as exc:  # playwright's TimeoutError, or a renderer that crashed
        print(f"  bertviz did not finish: {type(exc).__name__}: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return None
    finally:
        context.close()


def bertviz_table(browser, rows: list[dict]) -> None:
    """Fill each row (one size) with bertviz's HTML bytes, build time and render time."""
    for row in rows:
        for label, maps in (("shipped", row.pop("maps")), ("tiny", row.pop("tiny_maps"))):
            if maps is None:
                continue
            need = BERTVIZ_RAM_PER_VALUE * sum(m.size for m in maps)
            if need + BROWSER_RAM > available_ram():
                print(f"  bertviz {label} T={row['T']}: skipped, building its HTML needs about "
                      f"{need / 2**30:.1f} GiB of RAM", file=sys.stderr)
                row.update({f"bv_{label}_bytes": None, f"bv_{label}_build": None,
                            f"bv_{label}_render": None})
                continue
            html, build = bertviz_html(maps, row["tokens"])
            html_file = OUT / f"bertviz_{label}_{row['T']}.html"
            html_file.write_text(html)
            row[f"bv_{label}_bytes"] = len(html.encode())
            del html
            row[f"bv_{label}_build"] = build
            try:
                row[f"bv_{label}_render"] = bertviz_render(browser, html_file, BERTVIZ_TIMEOUT_S)
            finally:
                html_file.unlink()
            print(f"  bertviz {label} T={row['T']}: {row[f'bv_{label}_bytes'] / 1e6:.1f} MB, "
                  f"render {row[f'bv_{label}_render']}", file=sys.stderr)


# ----------------------------------------------------------------------------- our page

GRID_IMAGE = "document.querySelector('.st-key-mh_fig_grid .js-plotly-plot image')"
GRID_SHOWN = """want => {
    // The grid's title names the token count ("Layer 1: log10 attention, 2,048 tokens..."),
    // and its image (one PNG of every head) is a new one: shown once both hold and two
    // animation frames (a paint) have passed. The image check matters when the token count
    // is the same as before the change (repeats at one size).
    const title = document.querySelector('.st-key-mh_fig_grid .gtitle');
    if (!title || !title.textContent.includes(want)) return false;
    const image = """ + GRID_IMAGE + """;
    if (!image || image.getAttribute('href') === window.__oldImage) return false;""" + AFTER_A_PAINT

PAGE_IDLE = """() => {
    // The rerun is over: no element left from the previous run, no "Running" indicator,
    // and the head statistics (the last figure) drawn.
    const status = document.querySelector('[data-testid="stStatusWidget"]');
    return !document.querySelector('[data-stale="true"]')
        && !(status && status.innerText.includes('Running'))
        && !!document.querySelector('.st-key-mh_fig_stats .js-plotly-plot');
}"""


class ModelPageProbe:
    """One browser tab on /model that counts what the server sends it (websocket frames, HTTP
    bytes) and times text changes."""

    def __init__(self, browser, url: str, max_tokens: int, timeout_s: float = 300):
        self.timeout_ms = timeout_s * 1000
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.external: set[str] = set()
        self.context.route(NOT_LOOPBACK, self._block)  # nothing leaves the machine
        self.page = page = self.context.new_page()
        self.ws_bytes = self.http_bytes = 0
        self.errors: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        cdp = self.context.new_cdp_session(page)
        cdp.on("Network.loadingFinished", self._http)
        cdp.send("Network.enable")
        start = time.perf_counter()
        page.goto(f"{url}/model?tokens={max_tokens}", timeout=self.timeout_ms)
        page.wait_for_selector(".st-key-mh_fig_grid .gtitle", timeout=self.timeout_ms)
        page.wait_for_function(PAGE_IDLE, timeout=self.timeout_ms)
        self.first_load_s = time.perf_counter() - start
        self.first_load_bytes = self.ws_bytes + self.http_bytes

    def _block(self, route) -> None:
        self.external.add(route.request.url)
        route.abort()

    def _frame(self, payload) -> None:
        self.ws_bytes += len(payload)

    def _http(self, event) -> None:
        self.http_bytes += int(event.get("encodedDataLength", 0))

    def change_text(self, text: str, num_tokens: int) -> dict:
        """Type `text` and commit it; seconds to the grid shown and to the whole page updated,
        and the bytes received meanwhile."""
        page = self.page
        page.evaluate("() => { window.__drawn = false; window.__waiting = false; "
                      f"window.__oldImage = {GRID_IMAGE}?.getAttribute('href'); }}")
        box = page.get_by_label("Text", exact=True)
        sent_before = self.ws_bytes + self.http_bytes
        start = time.perf_counter()
        box.fill(text)
        box.press("Control+Enter")
        page.wait_for_function(GRID_SHOWN, arg=f", {num_tokens:,} tokens", polling="raf",
                               timeout=self.timeout_ms)
        shown = time.perf_counter() - start
        page.wait_for_function(PAGE_IDLE, timeout=self.timeout_ms)
        done = time.perf_counter() - start
        page.wait_for_timeout(300)  # late frames (forward messages after the script finished)
        return {"shown": shown, "done": done,
                "bytes": self.ws_bytes + self.http_bytes - sent_before}

    def close(self) -> None:
        self.context.close()


def measure_page(browser, url: str, sizes: list[int], repeats: int) -> dict[int, dict]:
    """Median seconds and bytes of text changes at each size, on one /model tab."""
    probe = ModelPageProbe(browser, url, max(sizes))
    results = {}
    try:
        variant = 100
        for T in sizes:
            runs = []
            for _ in range(repeats):
                variant += 1  # a text the server has not seen: its caches miss
                runs.append(probe.change_text(sample_text(T, variant), T))
            results[T] = {key: median([r[key] for r in runs]) for key in runs[0]}
            print(f"  page T={T}: {results[T]}", file=sys.stderr)
        results["first_load"] = {"s": probe.first_load_s, "bytes": probe.first_load_bytes}
        results["errors"] = probe.errors
        if probe.external:
            print(f"  /model asked for other hosts (blocked): {sorted(probe.external)}",
                  file=sys.stderr)
    finally:
        probe.close()
    return results


# ----------------------------------------------------------------------------- tables

def shipped_model():
    from alibi_viz.assets import DEFAULT_MODEL, shipped_models
    from alibi_viz.models.loading import load_model

    models = shipped_models()
    if DEFAULT_MODEL not in models:
        sys.exit("The shipped ALiBi model is missing (assets/models/alibi): train it first "
                 "(python -m experiments.train --arch alibi --out assets/models/alibi).")
    return load_model(models[DEFAULT_MODEL])


def timed(fn, repeats: int):
    """(median seconds, last result) of `repeats` calls of fn()."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return median(times), result


def library_table(sizes: list[int], repeats: int) -> None:
    """The library calls behind one text change, on the shipped model (layer 1, head 1)."""
    from alibi_viz.figures.heads import (
        attention_grid_figure,
        decomposition_figure,
        head_statistics_figure,
    )
    from alibi_viz.models.attention import (
        analyze_heads,
        attention_maps,
        decomposition_view,
        score_decomposition,
    )

    model, tokenizer, info = shipped_model()
    slopes = info.config_slopes
    print(f"\n## Library calls behind one text change ({info.num_layers} layers x "
          f"{info.num_heads} heads, median of {repeats}; seconds)")
    print("| tokens | attention_maps | analyze_heads (maps + stats + downsampling) "
          "| grid figure | score_decomposition + view | decomposition figure "
          "| statistics figure | total | figures' JSON |")
    print("|---|---|---|---|---|---|---|---|---|")
    for T in sizes:
        text = sample_text(T)
        maps_s, _ = timed(lambda: attention_maps(model, tokenizer, text, max_tokens=T), repeats)  # noqa: B023
        analysis_s, analysis = timed(
            lambda: analyze_heads(model, tokenizer, text, max_tokens=T, slopes=slopes), repeats)  # noqa: B023
        assert analysis.seq_len == T, (analysis.seq_len, T)
        grid_s, grid = timed(lambda: attention_grid_figure(
            analysis.layers[0], analysis.tokens, 0, slopes=info.slopes, selected=0,  # noqa: B023
            train_seq_len=128), repeats)
        dec_s, view = timed(lambda: decomposition_view(
            score_decomposition(model, tokenizer, text, 0, max_tokens=T)), repeats)  # noqa: B023
        row_s, row = timed(lambda: decomposition_figure(
            view, 0, slope=info.slopes[0], train_seq_len=128), repeats)  # noqa: B023
        stats_s, stats = timed(
            lambda: head_statistics_figure(analysis.stats, T, selected=(0, 0)), repeats)  # noqa: B023
        total = analysis_s + grid_s + dec_s + row_s + stats_s
        payload = sum(len(fig.to_json()) for fig in (grid, row, stats))
        print(f"| {T:,} | {maps_s:.3f} | {analysis_s:.3f} | {grid_s:.3f} | {dec_s:.3f} "
              f"| {row_s:.3f} | {stats_s:.3f} | {total:.2f} | {fmt_bytes(payload)} |")


def server_table(sizes: list[int], repeats: int) -> None:
    """The /model page's rerun after a text change, in Streamlit's AppTest (no browser)."""
    from alibi_viz_app.testing import run_app

    print(f"\n## /model rerun after a text change (AppTest, cache miss, median of {repeats})")
    print("| tokens | rerun (s) | plotly specs sent (grid + row + statistics) |")
    print("|---|---|---|")
    at = run_app("model_heads", params={"tokens": str(max(sizes))}, timeout=600)
    variant = 200
    for T in sizes:
        times = []
        for _ in range(repeats):
            variant += 1
            at.text_area(key="mh_text").set_value(sample_text(T, variant))
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        specs = sum(len(chart.proto.spec) for chart in at.get("plotly_chart"))
        print(f"| {T:,} | {median(times):.2f} | {fmt_bytes(specs)} |")


def browser_tables(args) -> None:
    """Text change -> maps shown on /model, then the same page beside bertviz, in chromium."""
    from playwright.sync_api import sync_playwright

    from alibi_viz.models.attention import attention_maps
    from alibi_viz.models.loading import load_model
    from alibi_viz.tiny_models import save_tiny_model
    from alibi_viz_app.testing import (
        CHROMIUM,
        CHROMIUM_ARGS,
        free_port,
        start_streamlit,
        stop_streamlit,
    )

    page_sizes, bv_sizes = args.page_sizes, args.bertviz_sizes
    missing = bertviz_missing()
    if missing:  # measure /model alone
        bv_sizes = []
    OUT.mkdir(parents=True, exist_ok=True)
    proc, url = start_streamlit(free_port(), log_name="bench_model_page_streamlit.log")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            ours = measure_page(browser, url, sorted(set(page_sizes + bv_sizes)), args.repeats)
            if ours["errors"]:
                print(f"page errors: {ours['errors']}", file=sys.stderr)
            print(f"\n## /model in chromium: text change -> maps shown (median of {args.repeats})")
            print("| tokens | text change -> grid drawn (s) | -> whole page updated (s) "
                  "| bytes received |")
            print("|---|---|---|---|")
            for T in page_sizes:
                r = ours[T]
                print(f"| {T:,} | {r['shown']:.2f} | {r['done']:.2f} | {fmt_bytes(r['bytes'])} |")
            first = ours["first_load"]
            print(f"\nFirst load of /model (Streamlit's static JS bundle, cacheable, and the "
                  f"default example): {fmt_bytes(first['bytes'])} in {first['s']:.1f} s.")
            if missing:
                print("\nbertviz comparison skipped: bertviz or its JavaScript libraries are "
                      "not installed. Install them with:")
                for command in missing:
                    print(f"    {command}")
                browser.close()
                return

            model, tokenizer, info = shipped_model()
            with tempfile.TemporaryDirectory() as tmp:
                tiny, tiny_tok, _ = load_model(save_tiny_model(Path(tmp) / "bloom", "bloom"))
            rows = []
            for T in bv_sizes:
                text = sample_text(T, 0)
                result = attention_maps(model, tokenizer, text, max_tokens=T)
                tiny_result = attention_maps(tiny, tiny_tok, text, max_tokens=T)
                assert len(result.tokens) == len(tiny_result.tokens) == T
                rows.append({"T": T, "tokens": result.tokens, "maps": result.maps,
                             "tiny_maps": tiny_result.maps if args.tiny else None})
            libraries = sum(Path(f).stat().st_size for f in CDN_LIBRARIES.values())
            bertviz_table(browser, rows)
            browser.close()
    finally:
        stop_streamlit(proc)

    def render(seconds):
        return f"{seconds:.1f}" if seconds is not None else f"did not finish in {BERTVIZ_TIMEOUT_S} s"

    def ratio(theirs, mine):
        return f"{theirs / mine:,.0f}x" if theirs is not None else f"> {BERTVIZ_TIMEOUT_S / mine:,.0f}x"

    print("\n## /model vs bertviz head_view on the same attention maps (shipped ALiBi model, "
          f"{info.num_layers} layers x {info.num_heads} heads; chromium)")
    print("| tokens | bertviz HTML | /model: bytes for the text change | bytes ratio "
          "| bertviz: build HTML (s) | bertviz: open -> drawn (s) "
          "| /model: text change -> maps drawn (s) | time ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        T, r = row["T"], ours[row["T"]]
        print(f"| {T:,} | {fmt_bytes(row['bv_shipped_bytes'])} | {fmt_bytes(r['bytes'])} "
              f"| {row['bv_shipped_bytes'] / r['bytes']:,.0f}x | {row['bv_shipped_build']:.1f} "
              f"| {render(row['bv_shipped_render'])} | {r['shown']:.2f} "
              f"| {ratio(row['bv_shipped_render'], r['shown'])} |")
    if args.tiny:
        print("\nbertviz on a tiny random BLOOM (2 layers x 4 heads, issue 6's setting; a "
              "quarter of the shipped model's heads, so a lower bound of bertviz's cost), "
              "against the same /model column:")
        print("| tokens | bertviz HTML | bytes ratio | bertviz: open -> drawn (s) | time ratio |")
        print("|---|---|---|---|---|")
        for row in rows:
            T, r = row["T"], ours[row["T"]]
            print(f"| {T:,} | {fmt_bytes(row['bv_tiny_bytes'])} "
                  f"| {row['bv_tiny_bytes'] / r['bytes']:,.0f}x | {render(row['bv_tiny_render'])} "
                  f"| {ratio(row['bv_tiny_render'], r['shown'])} |")
    print(f"\nbertviz also fetches require.js + d3 + jQuery ({fmt_bytes(libraries)}, served "
          "locally here); /model's bytes are the websocket frames and HTTP responses received "
          "between the text change and the updated page (its static bundle is the one-time "
          "first load above). bertviz's time is opening its saved HTML until the view is "
          "drawn (building the HTML in Python not included); /model's includes running the "
          "model on the server.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 128 tokens on the page, 64 for bertviz, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-tiny", dest="tiny", action="store_false",
                        help="skip bertviz on the tiny random BLOOM (issue 6's setting)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["library", "server", "browser"])
    args = parser.parse_args()
    args.page_sizes, args.bertviz_sizes = PAGE_SIZES, BERTVIZ_SIZES
    if args.quick:
        args.page_sizes, args.bertviz_sizes, args.repeats = [128], [64], 1
    torch.set_num_threads(1)
    print(f"# /model benchmark, {time.strftime('%Y-%m-%d %H:%M')}")
    if "library" not in args.skip:
        library_table(args.page_sizes, args.repeats)
    if "server" not in args.skip:
        server_table(args.page_sizes, args.repeats)
    if "browser" not in args.skip:
        browser_tables(args)


if __name__ == "__main__":
    main()
