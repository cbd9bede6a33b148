"""Benchmark the bias explorer: library time, page payload, server time and browser time.

    .venv/bin/python bench/bench_bias.py            # library + server side (about a minute)
    .venv/bin/python bench/bench_bias.py --browser  # also time control change -> chart in chromium

Everything is measured side by side in one run and printed as ratios as well as times, since a
lone absolute time means little on a shared 2-core machine. Medians of several repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch

ROOT = Path(__file__).resolve().parents[1]

from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # noqa: E402

from alibi_viz import alibi_bias, alibi_bias_sampled, alibi_slopes  # noqa: E402
from alibi_viz.display import display_positions  # noqa: E402

SIZES = [(8, 512), (64, 16_384), (128, 65_536)]


def median_time(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def library_table() -> None:
    print("\n## Bias computation (median of 5; seconds)")
    print("| heads x tokens | full textbook bias (numpy) | BLOOM row-constant tensor (torch) "
          "| sampled at 256x256 | full / sampled |")
    print("|---|---|---|---|---|")
    for heads, length in [(8, 512), (8, 2048), (32, 4096), (128, 65_536)]:
        slopes = alibi_slopes(heads)
        pos = display_positions(length, 256)
        sampled = median_time(lambda: alibi_bias_sampled(slopes, pos, pos))  # noqa: B023
        bloom = median_time(lambda: build_alibi_tensor(torch.ones(1, length), heads,  # noqa: B023
                                                       torch.float32))
        if heads * length * length * 8 <= 1 << 30:
            full = median_time(lambda: alibi_bias(slopes, length), repeats=3)  # noqa: B023
            full_s, ratio = f"{full:.4f}", f"{full / sampled:,.0f}x"
        else:
            full_s, ratio = "refused (BudgetError: over 1 GiB)", "-"
        print(f"| {heads} x {length:,} | {full_s} | {bloom:.4f} | {sampled:.4f} | {ratio} |")


def naive_heatmap_bytes(heads: int, length: int) -> int:
    """Bytes of the JSON a go.Heatmap grid at full resolution would send (float32, base64)."""
    bias = alibi_bias(alibi_slopes(heads), length).astype(np.float32)
    fig = go.Figure([go.Heatmap(z=np.where(np.isfinite(b), b, np.nan)) for b in bias])
    return len(fig.to_json())


def server_table() -> None:
    from alibi_viz_app.testing import run_app

    print("\n## Page rerun: server time and payload (AppTest, cache miss, median of 3)")
    print("| heads x tokens | rerun time (s) | charts payload (MB) | grid payload (MB) "
          "| naive go.Heatmap grid (MB) | naive / ours |")
    print("|---|---|---|---|---|---|")
    for heads, length in SIZES:
        times, payload, grid = [], 0, 0
        for repeat in range(3):
            at = run_app()
            # A different max bias each repeat makes every timed rerun a cache miss.
            at.number_input(key="be_heads").set_value(heads)
            at.number_input(key="be_len").set_value(length)
            at.number_input(key="be_max_bias").set_value(6.0 + repeat)
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
            specs = [chart.proto.spec for chart in at.get("plotly_chart")]
            payload = sum(len(s) for s in specs)
            grid = len(specs[1])
        if heads * length * length <= 8 * 2048 * 2048:
            naive = naive_heatmap_bytes(heads, length)
            naive_s, ratio = f"{naive / 1e6:.1f}", f"{naive / grid:,.0f}x"
        else:
            naive_s, ratio = "not buildable (> 1 GiB)", "-"
        print(f"| {heads} x {length:,} | {statistics.median(times):.3f} | {payload / 1e6:.2f} "
              f"| {grid / 1e6:.2f} | {naive_s} | {ratio} |")


def browser_table() -> None:
    from playwright.sync_api import sync_playwright

    from alibi_viz_app.testing import (
        CHROMIUM,
        CHROMIUM_ARGS,
        free_port,
        start_streamlit,
        stop_streamlit,
    )

    proc, url = start_streamlit(free_port(), log_name="bench_streamlit.log")
    print("\n## Browser: control change -> updated grid (chromium, median of 3)")
    print("| heads x tokens | first load (s) | change head count -> grid redrawn (s) |")
    print("|---|---|---|")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for heads, length in SIZES:
                loads, changes = [], []
                for repeat in range(3):
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    start = time.perf_counter()
                    page.goto(f"{url}/?heads={heads}&len={length}&max_bias={5 + repeat}")
                    page.wait_for_function(
                        f"() => document.querySelectorAll('.js-plotly-plot')[1]"
                        f"?.querySelectorAll('g.textpoint').length === {heads}", timeout=120_000)
                    loads.append(time.perf_counter() - start)
                    box = page.get_by_label("Heads", exact=True)
                    start = time.perf_counter()
                    box.fill(str(heads - 1))
                    box.press("Enter")
                    page.wait_for_function(
                        f"() => document.querySelectorAll('.js-plotly-plot')[1]"
                        f"?.querySelectorAll('g.textpoint').length === {heads - 1}",
                        timeout=120_000)
                    changes.append(time.perf_counter() - start)
                    page.close()
                print(f"| {heads} x {length:,} | {statistics.median(loads):.2f} "
                      f"| {statistics.median(changes):.2f} |")
            browser.close()
    finally:
        stop_streamlit(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--browser", action="store_true", help="also time the page in chromium")
    args = parser.parse_args()
    torch.set_num_threads(1)
    library_table()
    server_table()
    if args.browser:
        browser_table()


if __name__ == "__main__":
    main()
