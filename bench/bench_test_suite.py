"""Where `make test`'s time goes: the CPU of every process its test phase starts, by kind and
by test module, against what the machine's cores give in a time budget.

    .venv/bin/python bench/bench_test_suite.py                 # both parts, budget 6 min
    .venv/bin/python bench/bench_test_suite.py --part parallel # the xdist part only
    .venv/bin/python bench/bench_test_suite.py --budget-s 360 --workers 3

It runs the two pytest commands of `make test` (the parallel part with pytest-xdist, then the
`solo` tests alone), unchanged but for a plugin that records each test's CPU, and meanwhile
reads every process of the machine twice a second (psutil). A process counts once it has
appeared after the start; the CPU of one that ends between two readings is lost for that half
second. It prints, per part:

  by kind     chromium (renderers, browser, GPU, other), playwright's node, the pytest workers
              (their own Python: AppTest runs, models, imports), the controller, Streamlit
              servers, nginx and redis, other processes; the machine's busy CPU (/proc/stat)
  by module   each test module's CPU: its worker's own and its worker's child processes'
              (chromium, servers it started), summed over its tests; the shared Streamlit
              server's is not in it (the controller started it)

and the budget: the busy CPU of both parts against cores x budget, the CPU the cores can give
in that time. A test phase fits the budget only when the ratio is under 1, and only if the
cores are kept busy all the time (the parallel part keeps them about 97% busy).

Run it on an idle machine, nothing else running: every other process's CPU is counted too.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_S = 0.5
OUT_ENV = "ALIBI_VIZ_BENCH_TEST_CPU_DIR"


# ----------------------------------------------------------------------------- the plugin

# Loaded into every pytest process with `-p bench_test_suite` (PYTHONPATH=bench): each test's
# CPU, its process's own (time.process_time) and its child processes' (sampled in a thread, a
# process's largest reading kept, so one that ended inside the test still counts up to its
# last reading), written to OUT_ENV/<worker>.json at the end.

_rows: list = []
_kids: dict = {}
_lock = threading.Lock()


def _read_children() -> None:
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    readings = {}
    for child in children:
        try:
            times = child.cpu_times()
            readings[(child.pid, child.create_time())] = times.user + times.system
        except psutil.Error:
            pass
    with _lock:
        for key, value in readings.items():
            _kids[key] = max(_kids.get(key, 0.0), value)


def _sample_children() -> None:
    while True:
        _read_children()
        time.sleep(0.2)


def pytest_configure(config):
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if os.environ.get(OUT_ENV) and not controller:  # the controller runs no test
        threading.Thread(target=_sample_children, daemon=True).start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get(OUT_ENV):
        yield
        return
    _read_children()
    with _lock:
        before = dict(_kids)
    own = time.process_time()
    yield
    own = time.process_time() - own
    _read_children()
    with _lock:
        kids = sum(value - before.get(key, 0.0) for key, value in _kids.items())
    _rows.append((item.nodeid, own, kids))


def pytest_unconfigure(config):
    out = os.environ.get(OUT_ENV)
    if out and _rows:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(out, f"{name}-{os.getpid()}.json").write_text(json.dumps(_rows))


# ----------------------------------------------------------------------------- the benchmark

def kind(process: psutil.Process) -> str:
    """What a process is, from its name and command line."""
    try:
        name, cmdline = process.name(), " ".join(process.cmdline())
    except psutil.Error:
        return "ended before it was read"
    if "chrom" in name or "/chromium" in cmdline[:60]:
        for part in ("renderer", "gpu-process", "utility", "zygote"):
            if f"--type={part}" in cmdline:
                return f"chromium {part.replace('-process', '')}"
        return "chromium browser"
    if name == "node" or "playwright" in cmdline and "driver" in cmdline:
        return "playwright's node"
    if "streamlit" in cmdline:
        return "Streamlit servers"
    if "nginx" in name:
        return "nginx"
    if "redis" in name:
        return "redis"
    if "python" in name and "pytest" in cmdline:
        return "pytest controller"
    if "python" in name and "exec(eval(sys.stdin" in cmdline:  # execnet's bootstrap
        return "pytest workers"
    if "python" in name:
        return "other Python"
    return "other: " + name


def busy_cpu() -> float:
    """CPU-s the machine has been busy since boot: /proc/stat's user, nice, system, irq,
    softirq and steal (not idle, not iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def run_part(name: str, command: list[str]) -> dict:
    """Run one pytest command, reading every process meanwhile; CPU by kind and module."""
    started = time.time()
    seen: dict[tuple[int, float], tuple[str, float]] = {}
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            for process in psutil.process_iter():
                try:
                    created = process.create_time()
                    if created < started - 1 or process.pid == os.getpid():
                        continue
                    key = (process.pid, created)
                    label = seen[key][0] if key in seen else kind(process)
                    times = process.cpu_times()
                    seen[key] = (label, times.user + times.system)
                except psutil.Error:
                    pass
            done.wait(SAMPLE_S)

    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, OUT_ENV: out,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench"),
                                                           os.environ.get("PYTHONPATH")]))}
        reader = threading.Thread(target=read)
        busy = busy_cpu()
        reader.start()
        result = subprocess.run(command + ["-p", "bench_test_suite"], cwd=ROOT, env=env,
                                capture_output=True, text=True)
        done.set()
        reader.join()
        busy = busy_cpu() - busy
        wall = time.time() - started
        rows = [row for path in Path(out).glob("*.json") for row in json.loads(path.read_text())]
    by_kind = collections.Counter()
    for label, cpu in seen.values():
        by_kind[label] += cpu
    by_module = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, own, kids in rows:
        entry = by_module[nodeid.split("::")[0].removeprefix("tests/")]
        entry[0] += own
        entry[1] += max(kids, 0.0)
        entry[2] += 1
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    return {"name": name, "rc": result.returncode, "summary": summary, "wall": wall,
            "busy": busy, "by_kind": by_kind, "by_module": by_module,
            "tail": (result.stdout + result.stderr)[-3000:] if result.returncode else ""}


def report(part: dict, cores: int, modules: int) -> None:
    print(f"\n### {part['name']}: {part['summary']}\n")
    print(f"wall {part['wall']:.0f} s; the machine busy {part['busy']:.0f} CPU-s, "
          f"{part['busy'] / (cores * part['wall']):.0%} of {cores} cores\n")
    print("| kind | CPU-s | share |\n|---|---:|---:|")
    total = sum(part["by_kind"].values())
    for label, cpu in part["by_kind"].most_common():
        if cpu >= 0.5:
            print(f"| {label} | {cpu:.0f} | {cpu / total:.0%} |")
    print(f"| all processes read | {total:.0f} | |")
    if not part["by_module"]:
        return
    print("\n| test module | tests | own CPU-s | child processes' CPU-s | both |"
          "\n|---|---:|---:|---:|---:|")
    ranked = sorted(part["by_module"].items(), key=lambda item: -(item[1][0] + item[1][1]))
    for module, (own, kids, count) in ranked[:modules]:
        print(f"| {module} | {count} | {own:.1f} | {kids:.1f} | {own + kids:.1f} |")
    rest = ranked[modules:]
    if rest:
        print(f"| {len(rest)} more modules | {sum(r[1][2] for r in rest)} | "
              f"{sum(r[1][0] for r in rest):.1f} | {sum(r[1][1] for r in rest):.1f} | "
              f"{sum(r[1][0] + r[1][1] for r in rest):.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["both", "parallel", "solo"], default="both")
    parser.add_argument("--workers", type=int, default=None,
                        help="xdist workers (default: make test's, cores + 1, at most 4)")
    parser.add_argument("--budget-s", type=float, default=360.0,
                        help="the test phase's time budget (default: 6 minutes)")
    parser.add_argument("--modules", type=int, default=20, help="modules listed per part")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    workers = args.workers or min(min(cores, 4) + 1, 4)
    python = str(ROOT / ".venv" / "bin" / "python")
    solo = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                  if "pytest.mark.solo" in p.read_text())
    commands = {
        "parallel": [python, "-m", "pytest", "-n", str(workers), "--dist", "loadgroup",
                     "--no-loadscope-reorder", "-q", "-m", "not solo"],
        "solo": [python, "-m", "pytest", "-q", "-m", "solo", *solo],
    }
    names = ["parallel", "solo"] if args.part == "both" else [args.part]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    print(f"# make test's test phase: {cores} cores, {workers} workers, commit {commit}")
    parts = []
    for name in names:
        part = run_part(name, commands[name])
        report(part, cores, args.modules)
        parts.append(part)
        if part["rc"] != 0:
            print(f"\n{name} failed (exit {part['rc']}):\n{part['tail']}")
    print(f"\n(This benchmark's own reading of the processes: {time.process_time():.0f} CPU-s, "
          "in the busy CPU above; each test process's own sampler is in its CPU.)")
    busy = sum(p["busy"] for p in parts)
    wall = sum(p["wall"] for p in parts)
    budget = cores * args.budget_s
    print(f"\n## The budget\n\n| | |\n|---|---:|\n| test phase, wall | {wall:.0f} s |"
          f"\n| its busy CPU | {busy:.0f} CPU-s |"
          f"\n| what {cores} cores give in {args.budget_s:.0f} s | {budget:.0f} CPU-s |"
          f"\n| busy CPU / that | {busy / budget:.2f} |")
    return 0 if all(p["rc"] == 0 for p in parts) else 1


if __name__ == "__main__":
    sys.exit(main())
