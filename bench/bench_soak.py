"""Soak: a class on one server for half an hour. Does anything leak, error or slow down?

One `streamlit run alibi_viz_app/main.py` (as `make run` starts it, with ALIBI_VIZ_TIMING_LOG set), then
for --minutes minutes:
  * --students simulated students, each a loop of page visits over Streamlit's websocket (what
    a browser sends: a session, one rerun with its page and query string, read to the end):
    every page, in English, Spanish and Russian, with the controls in the URL drawn at random
    (head counts up to 128, lengths up to 65,536, causal or symmetric, a layer, a head, a
    token cap, a lesson step, a shipped model);
  * and one other visitor, in turn: a long text (2,000 characters) and a 20,000-character
    paste on Model heads, bad URLs (unknown values, a huge head count, a missing model, a
    lesson step that does not exist), and model switches on /inspect (other shipped models,
    a folder that is not a model, a repo id that is not cached).
Every session is closed after its run, so sessions come and go as in a class whose students
reload pages. The server's RSS is sampled every 10 s; each run's server time comes from the
timing log. At the end one more visit measures that the server still answers.

Reports errors (exception elements or a run that did not finish; must be 0), the RSS curve
(bench/out/soak_rss.png and the numbers), p50/p95 server wall and CPU time per run, and the
last visit's server time.

usage: .venv/bin/python bench/bench_soak.py [--minutes 30] [--students 20]
Websocket clients rather than browsers: 20 chromium pages cannot hold 30 minutes on 2 cores
beside the server, and the server sees the same messages. Say what else ran on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
from alibi_viz_app.testing import free_port, start_streamlit, stop_streamlit  # noqa: E402
from alibi_viz_app.warm_up import run_page  # noqa: E402

LANGS = ("", "es", "ru")


def student_visit(rng: random.Random) -> tuple[str, dict]:
    """A page and URL controls a student might have: every page, the controls at random."""
    page = rng.choice(["", "compare", "model", "inspect", "extrapolation", "lesson"])
    query = {}
    if page == "":
        query = {"heads": rng.choice([4, 8, 12, 16, 32, 64, 128]),
                 "len": rng.choice([16, 128, 512, 2048, 16384, 65536]),
                 "mode": rng.choice(["causal", "symmetric"]),
                 "scale": rng.choice(["clipped", "per_head", "shared"])}
    elif page == "compare":
        query = {"len": rng.choice([64, 512, 4096]), "mode": rng.choice(["causal", "symmetric"])}
    elif page == "model":
        query = {"model": rng.choice(["alibi", "sinusoidal", "rope", "learned", "nope"]),
                 "layer": rng.randint(1, 4), "head": rng.randint(1, 8),
                 "tokens": rng.choice([64, 128, 512]),
                 "example": rng.choice(["prose", "code", "long"])}
    elif page == "extrapolation":
        query = {"layer": rng.randint(1, 4), "head": rng.randint(1, 8)}
    elif page == "lesson":
        query = {"step": rng.randint(1, 8), "present": rng.choice([0, 1])}
    if lang := rng.choice(LANGS):
        query["lang"] = lang
    return page, query


def other_visit(k: int) -> tuple[str, dict]:
    """The visitors who do what a class is not told to: long texts, pastes, bad URLs, model
    switches on /inspect."""
    visits = [
        ("model", {"text": ("def f(x):\n    return x * 2\n" * 80)[:2000]}),
        ("model", {"text": ("Атеншн с линейными смещениями. " * 700)[:20000], "lang": "ru"}),
        ("", {"heads": "100000", "len": "-3", "mode": "sideways", "show": "1-4,zz"}),
        ("model", {"model": "no-such-model", "layer": "99", "head": "0"}),
        ("inspect", {"source": "shipped", "model": "rope"}),
        ("inspect", {"source": "shipped", "model": "sinusoidal", "lang": "es"}),
        ("inspect", {"source": "folder", "path": "/etc"}),
        ("inspect", {"source": "cache", "repo": "bigscience/bloom-560m"}),
        ("lesson", {"step": "42", "present": "maybe"}),
    ]
    return visits[k % len(visits)]


async def visit(port: int, page: str, query: dict) -> dict:
    """One session: connect, one run of `page` with `query`, read it to the end, close."""
    return await run_page(port, page, urllib.parse.urlencode(query), open_timeout=120)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def soak(port: int, pid: int, seconds: float, students: int, log: list, rss: list):
    end = time.monotonic() + seconds
    start = time.monotonic()

    async def student(k: int):
        rng = random.Random(k)
        while time.monotonic() < end:
            page, query = student_visit(rng)
            try:
                log.append({**await asyncio.wait_for(visit(port, page, query), 300),
                            "query": query, "who": "student"})
            except Exception as exc:  # noqa: BLE001 (counted as an error, reported by name)
                log.append({"page": page, "query": query, "who": "student",
                            "exceptions": [type(exc).__name__], "status": None})
            await asyncio.sleep(rng.uniform(0.5, 3.0))  # a student reads before clicking

    async def other():
        k = 0
        while time.monotonic() < end:
            page, query = other_visit(k)
            try:
                log.append({**await asyncio.wait_for(visit(port, page, query), 300),
                            "query": {q: str(v)[:40] for q, v in query.items()}, "who": "other"})
            except Exception as exc:  # noqa: BLE001
                log.append({"page": page, "who": "other", "exceptions": [type(exc).__name__],
                            "status": None})
            k += 1
            await asyncio.sleep(5.0)

    async def sampler():
        while time.monotonic() < end:
            rss.append((round(time.monotonic() - start, 1), rss_mb(pid)))
            await asyncio.sleep(10.0)

    await asyncio.gather(sampler(), other(), *(student(k) for k in range(students)))


def draw_rss(rss: list, path: Path) -> None:
    """The RSS curve as a small PNG (PIL only: the bench needs no plotting backend)."""
    from PIL import Image, ImageDraw

    w, h, pad = 720, 300, 50
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    ts, ms = [t for t, _m in rss], [m for _t, m in rss]
    top = max(ms) * 1.1
    x = lambda t: pad + (w - 2 * pad) * t / max(ts[-1], 1)  # noqa: E731
    y = lambda m: h - pad - (h - 2 * pad) * m / top  # noqa: E731
    d.line([(pad, h - pad), (w - pad, h - pad)], fill="black")
    d.line([(pad, pad), (pad, h - pad)], fill="black")
    d.line([(x(t), y(m)) for t, m in rss], fill=(31, 119, 180), width=2)
    for frac in (0, 0.5, 1):
        m = top * frac
        d.text((4, y(m) - 6), f"{m:.0f}", fill="black")
    d.text((pad, h - pad + 8), "0 min", fill="black")
    d.text((w - pad - 40, h - pad + 8), f"{ts[-1] / 60:.0f} min", fill="black")
    d.text((pad + 8, 8), "server RSS (MB), sampled every 10 s", fill="black")
    img.save(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--students", type=int, default=20)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    port, timing = free_port(), OUT / "soak_timing.jsonl"
    timing.unlink(missing_ok=True)
    env = {**os.environ, "ALIBI_VIZ_TIMING_LOG": str(timing)}
    server, _url = start_streamlit(port, env=env, log_name="soak_server.log")  # test-artifacts/
    try:
        log, rss = [], []
        asyncio.run(soak(port, server.pid, args.minutes * 60, args.students, log, rss))
        before = sum(1 for _ in open(timing)) if timing.exists() else 0
        last = asyncio.run(visit(port, "model", {"tokens": 512}))
        runs = [json.loads(line) for line in open(timing)]
        final = runs[before:] if len(runs) > before else []
    finally:
        stop_streamlit(server)
    errors = [r for r in log if r["exceptions"] or r["status"] != "FINISHED_SUCCESSFULLY"]
    walls = sorted(r["wall_s"] for r in runs)
    cpus = sorted(r["cpu_s"] for r in runs)

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    draw_rss(rss, OUT / "soak_rss.png")
    thirds = [rss[len(rss) * k // 3:len(rss) * (k + 1) // 3] for k in range(3)]
    summary = {
        "minutes": args.minutes, "students": args.students, "visits": len(log),
        "errors": len(errors), "error_examples": errors[:5],
        "server_runs": len(runs),
        "wall_s": {"p50": pct(walls, 0.5), "p95": pct(walls, 0.95)},
        "cpu_s": {"p50": pct(cpus, 0.5), "p95": pct(cpus, 0.95)},
        "rss_mb": {"start": rss[0][1], "peak": max(m for _t, m in rss), "end": rss[-1][1],
                   "peak_per_third": [round(max(m for _t, m in part), 1) for part in thirds if part]},
        "last_visit": {"status": last["status"], "exceptions": last["exceptions"],
                       "server_wall_s": sum(r["wall_s"] for r in final),
                       "server_cpu_s": sum(r["cpu_s"] for r in final)},
        "rss_samples": rss,
    }
    (OUT / "soak.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "rss_samples"}, indent=1))


if __name__ == "__main__":
    main()
