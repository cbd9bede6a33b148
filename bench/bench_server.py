"""The server's own cost of each kind of interaction, this tree against another commit, side by side.

    .venv/bin/python bench/bench_server.py                      # against 3648743 (before issue 28)
    .venv/bin/python bench/bench_server.py --baseline <commit>  # against any commit
    .venv/bin/python bench/bench_server.py --baseline none      # this tree only

Each tree runs the same scripted session under Streamlit's AppTest, in its own process (the
other commit is checked out into a temporary git worktree and imported from there): the bias
explorer's cache-miss rerun at 128 x 65,536 and 8 x 512 (a new maximum bias each time, so
nothing is cached), the Model heads page's head switch, layer switch and new text, and a
switch between the two pages. For each it reports the median over the repeats of the rerun's
wall time and of the process's CPU time (script thread and AppTest together; AppTest's own
share is the same in both trees). No browser: what a rerun costs the server, not the student.
Run it on an idle machine; the README in this folder says what else was running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "3648743"  # main before issue 28 (server time per interaction, round two)

SESSION = r'''
import json, os, statistics, sys, time
try:  # the package layout, or an older tree's tests/apptest_utils.py (on PYTHONPATH)
    from alibi_viz_app.testing import run_app
except ImportError:
    from apptest_utils import run_app

REPEATS = int(sys.argv[1])
out = {}

def timed(kind, change, at):
    change()
    wall, cpu = time.perf_counter(), time.process_time()
    at.run()
    out.setdefault(kind, []).append((time.perf_counter() - wall, time.process_time() - cpu))
    assert not at.exception, [e.value for e in at.exception]

for heads, length in ((128, 65536), (8, 512)):
    at = run_app("", {"heads": str(heads), "len": str(length)})
    for k in range(REPEATS):
        timed(f"bias explorer, cache miss, {heads} x {length:,}",
              lambda k=k: at.number_input(key="be_max_bias").set_value(6.0 + k / 8), at)

at = run_app("model_heads")
heads = len(at.selectbox(key="mh_head").options)
layers = len(at.selectbox(key="mh_layer").options)
for k in range(REPEATS):
    timed("model heads: another head",
          lambda k=k: at.selectbox(key="mh_head").set_value(1 + (k + 1) % heads), at)
for k in range(REPEATS):
    timed("model heads: another layer",
          lambda k=k: at.selectbox(key="mh_layer").set_value(1 + (k + 1) % layers), at)
for k in range(REPEATS):
    timed("model heads: new text",
          lambda k=k: at.text_area(key="mh_text").set_value(f"def f{k}(x):\n    return x * {k}\n"), at)
for k in range(REPEATS):  # both pages were seen: what a return visit costs
    timed("page switch (back to a page seen before)", lambda: at.switch_page("app_pages/bias_explorer.py"), at)
    timed("page switch (back to a page seen before)", lambda: at.switch_page("app_pages/model_heads.py"), at)
print("RESULT " + json.dumps(out))
'''


def run_tree(tree: Path, repeats: int) -> dict:
    """The scripted session in `tree`, in a fresh process importing that tree's code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "tests")]),
           "ALIBI_VIZ_TORCH_THREADS": "1"}
    env.pop("ALIBI_VIZ_TIMING_LOG", None)
    done = subprocess.run([sys.executable, "-c", SESSION, str(repeats)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"session failed in {tree}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def run_at_commit(commit: str, run):
    """run(tree) in a temporary git worktree of `commit` (removed afterwards): the other side
    of a side-by-side benchmark (bench_interactions.py uses it too)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), commit],
                       cwd=ROOT, check=True)
        try:
            return run(tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def medians(samples: list) -> tuple[float, float]:
    return (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare with, or 'none'")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    start = time.time()
    load = os.getloadavg()[0]
    after = run_tree(ROOT, args.repeats)
    before = (None if args.baseline == "none"
              else run_at_commit(args.baseline, lambda tree: run_tree(tree, args.repeats)))
    print(f"\n## Server time per interaction (AppTest, median of {args.repeats}; load average "
          f"{load:.2f} at the start, {time.time() - start:.0f} s in all)")
    if before is None:
        print("| interaction | wall (s) | CPU (s) |\n|---|---|---|")
        for kind, samples in after.items():
            wall, cpu = medians(samples)
            print(f"| {kind} | {wall:.3f} | {cpu:.3f} |")
        return
    print(f"| interaction | {args.baseline}: wall (s) | CPU (s) | this tree: wall (s) | CPU (s) "
          "| CPU before / after |")
    print("|---|---|---|---|---|---|")
    for kind, samples in after.items():
        wall, cpu = medians(samples)
        old_wall, old_cpu = medians(before[kind]) if kind in before else (float("nan"),) * 2
        print(f"| {kind} | {old_wall:.3f} | {old_cpu:.3f} | {wall:.3f} | {cpu:.3f} "
              f"| {old_cpu / cpu:.1f}x |")


if __name__ == "__main__":
    main()
