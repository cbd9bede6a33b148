"""Build time and payload of the compare page's two figures (min of 5 builds, uncached).

    .venv/bin/python bench/bench_compare.py
"""
import time

from alibi_viz.figures.compare import score_matrices_figure, score_vs_distance_figure  # noqa: E402
from alibi_viz.positional import (
    DEFAULT_METHODS,  # noqa: E402
    METHODS,  # noqa: E402
)

SELECTIONS = {"6 default": {m: {} for m in DEFAULT_METHODS}, "all 8": {m: {} for m in METHODS}}
print(f"{'methods':>9} {'length':>7} {'mode':>9} | {'curves s':>8} {'curves B':>9} | "
      f"{'matrix s':>8} {'matrix B':>9} | {'total B':>9}")
for label, selection in SELECTIONS.items():
    for length in (512, 16_384, 65_536):
        for mode in ("causal", "symmetric"):
            row = []
            for build in (score_vs_distance_figure, score_matrices_figure):
                times = []
                for _ in range(5):
                    t = time.perf_counter()
                    fig = build(selection, length, mode)
                    times.append(time.perf_counter() - t)
                row += [min(times), len(fig.to_json())]
            print(f"{label:>9} {length:>7,} {mode:>9} | {row[0]:8.3f} {row[1]:9,} | "
                  f"{row[2]:8.3f} {row[3]:9,} | {row[1] + row[3]:9,}")
