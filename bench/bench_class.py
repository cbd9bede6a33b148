"""A class following a lesson (issue 42): what the students' polling costs the server, and how
far behind the teacher their pages are.

One `streamlit run alibi_viz_app/main.py` with a SQLite class store of its own (in bench/out/), then for
each class size in --students (20 and 60 by default):
  * a room is made in the store, and every simulated student opens /lesson?class=CODE over
    Streamlit's websocket (alibi_viz_app/warm_up.py's messages: a session, one run with its page and
    query string) and then does what the page's browser does: it reads every run the server
    sends (the server reruns a student's page when the room moves: alibi_viz_app/class_watch.py), and
    where the server sent a timed fragment instead (an `auto_rerun` message: a server that
    cannot rerun a page itself, or this bench run on a commit before class_watch) it asks
    for the fragment's rerun at its interval, as a browser does;
  * idle: for --idle seconds the teacher stays on one step. The server process's CPU time
    over that window (psutil, user + system), per student per minute, is the cost of
    following: what a class costs while the teacher talks;
  * moving: the teacher (this script, with the room's key) moves to the next step --moves
    times, every --every seconds; a student's follow lag is the time from the store's write to
    the moment its websocket delivers the step's heading ("3. Slopes"). p50, p95 and max over
    all students and moves, and the server's CPU over the moving window.

With --replicas N, N servers share the store (as `make serve-class` runs them) and the
students are dealt out among them in turn, as nginx's cookies spread browsers.

usage: .venv/bin/python bench/bench_class.py [--students 20 60] [--idle 60] [--moves 5]
                                             [--replicas 1] [--phones]
Websocket clients rather than browsers, as bench_soak.py: 60 chromium pages cannot run on 2
cores beside the server, and the server sees the same messages. The clients run on the same
cores as the server: say what else ran on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
from alibi_viz_app.class_store import SETTING, open_store  # noqa: E402
from alibi_viz_app.testing import PHONE_UA, free_port, start_streamlit, stop_streamlit  # noqa: E402


class Student:
    """One session following the class over its websocket; `user_agent`: the browser it says it
    is (--phones: a phone's, so the pages draw their figures still, as for a phone)."""

    user_agent: str | None = None

    def __init__(self, port: int, code: str):
        self.port, self.code = port, code
        self.steps: dict[int, float] = {}  # step -> when its heading first arrived
        self.fragment: tuple[str, float] | None = None  # (fragment id, interval s)
        self.page_hash = ""
        self.runs = 0
        self.errors: list[str] = []
        self.ws = None  # the websocket, once open

    async def run(self, stop: asyncio.Event) -> None:
        import websockets
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        async with websockets.connect(f"ws://127.0.0.1:{self.port}/_stcore/stream",
                                      subprotocols=["streamlit"], max_size=None,
                                      open_timeout=120,
                                      **({"user_agent_header": self.user_agent}
                                         if self.user_agent else {})) as ws:
            self.ws = ws
            first = BackMsg()
            first.rerun_script.page_name = "lesson"
            first.rerun_script.query_string = f"class={self.code}"
            await ws.send(first.SerializeToString())
            poller = asyncio.create_task(self.poll(ws, stop))
            try:
                while not stop.is_set():
                    try:
                        frame = await asyncio.wait_for(ws.recv(), 0.5)
                    except TimeoutError:
                        continue
                    msg = ForwardMsg()
                    msg.ParseFromString(frame)
                    self.read(msg)
            finally:
                poller.cancel()

    async def poll(self, ws, stop: asyncio.Event) -> None:
        """The poll fragment's timer, as the browser runs it."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        phase = True  # browsers start their timers at unrelated moments
        while not stop.is_set():
            if self.fragment is None:
                await asyncio.sleep(0.1)
                continue
            fragment, interval = self.fragment
            await asyncio.sleep(random.uniform(0, interval) if phase else interval)
            phase = False
            msg = BackMsg()
            msg.rerun_script.page_name = "lesson"
            msg.rerun_script.page_script_hash = self.page_hash
            msg.rerun_script.query_string = f"class={self.code}"
            msg.rerun_script.fragment_id = fragment
            msg.rerun_script.is_auto_rerun = True
            await ws.send(msg.SerializeToString())

    def read(self, msg) -> None:
        """One message the server sent, as the page reads it."""
        kind = msg.WhichOneof("type")
        if kind == "navigation":  # the page that ran: a browser sends it back
            self.page_hash = msg.navigation.page_script_hash
        elif kind == "auto_rerun":
            self.fragment = (msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
        elif kind == "script_finished":
            self.runs += 1
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "heading":
                head = element.heading.body.split(".", 1)[0]
                if head.isdigit():
                    self.steps.setdefault(int(head), time.time())
            elif which == "exception":
                self.errors.append(element.exception.type)


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile of `values` (the nearest rank below), to the millisecond."""
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3) if values else None


async def teacher_moves(store, room, steps, every: float) -> dict[int, float]:
    """The teacher moves to each of `steps` in turn, every `every` s (plus up to 1 s); returns
    step -> when the store was written."""
    written = {}
    for step in steps:
        written[step] = time.time()
        store.set_state(room.code, room.key, step=step)
        await asyncio.sleep(every + random.uniform(0, 1))
    return written


def follow_lags(clients, written: dict[int, float]) -> tuple[list[float], int]:
    """(every student's lag behind each write, how many steps never arrived)."""
    lags, missed = [], 0
    for c in clients:
        for step, at in written.items():
            if step in c.steps:
                lags.append(c.steps[step] - at)
            else:
                missed += 1
    return lags, missed


def server_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the servers have used so far, together."""
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


async def one_class(ports: list[int], pids: list[int], store, students: int, idle: float,
                    moves: int, every: float) -> dict:
    room = store.create_room()
    store.set_state(room.code, room.key, step=1)
    stop = asyncio.Event()
    clients = [Student(ports[k % len(ports)], room.code) for k in range(students)]
    tasks = [asyncio.create_task(c.run(stop)) for c in clients]
    deadline = time.time() + 300
    while not all(1 in c.steps for c in clients):  # every page is on step 1
        assert time.time() < deadline, "the students' first runs did not finish in 300 s"
        await asyncio.sleep(0.5)
    await asyncio.sleep(3)  # the last first runs settle
    runs0, cpu0, t0 = sum(c.runs for c in clients), server_cpu(pids), time.time()
    await asyncio.sleep(idle)
    idle_cpu, idle_s = server_cpu(pids) - cpu0, time.time() - t0
    idle_runs = sum(c.runs for c in clients) - runs0
    cpu1, t1 = server_cpu(pids), time.time()
    written = await teacher_moves(store, room, range(2, 2 + moves), every)
    moving_cpu, moving_s = server_cpu(pids) - cpu1, time.time() - t1
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    lags, missed = follow_lags(clients, written)
    store.end(room.code, room.key)

    return {
        "students": students, "replicas": len(ports),
        "idle_s": round(idle_s, 1),
        "idle_server_cpu_s": round(idle_cpu, 2),
        "cpu_s_per_student_minute_idle": round(idle_cpu / students / (idle_s / 60), 4),
        "server_cpu_share_idle": round(idle_cpu / idle_s, 3),
        "runs_per_student_s_idle": round(idle_runs / students / idle_s, 2),
        "polling": sum(c.fragment is not None for c in clients),  # students with a timed poll
        "moving_s": round(moving_s, 1),
        "cpu_s_per_student_minute_moving": round(moving_cpu / students / (moving_s / 60), 4),
        "lag_s": {"p50": pct(lags, 0.5), "p95": pct(lags, 0.95),
                  "max": round(max(lags), 3) if lags else None,
                  "n": len(lags), "missed": missed},
        "errors": sum(len(c.errors) for c in clients),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--students", type=int, nargs="+", default=[20, 60])
    ap.add_argument("--idle", type=float, default=60, help="seconds on one step")
    ap.add_argument("--moves", type=int, default=5)
    ap.add_argument("--every", type=float, default=8, help="seconds between the teacher's moves")
    ap.add_argument("--replicas", type=int, default=1,
                    help="servers sharing the store, students dealt out in turn (as nginx does)")
    ap.add_argument("--phones", action="store_true",
                    help="every student's browser says it is a phone (figures drawn still)")
    args = ap.parse_args()
    Student.user_agent = PHONE_UA if args.phones else None
    OUT.mkdir(parents=True, exist_ok=True)
    db = OUT / "bench_class.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    setting = f"sqlite:///{db}"
    # each replica's log in test-artifacts/ (conftest.start_streamlit waits for its health)
    servers = [start_streamlit(free_port(), env={SETTING: setting},
                               log_name=f"bench_class_server{k}.log")
               for k in range(args.replicas)]
    ports = [int(url.rsplit(":", 1)[1]) for _proc, url in servers]
    store = open_store(setting)
    results = []
    try:
        for students in args.students:
            pids = [proc.pid for proc, _url in servers]
            result = asyncio.run(one_class(ports, pids, store, students, args.idle, args.moves,
                                           args.every))
            print(json.dumps(result), flush=True)
            results.append(result)
    finally:
        for proc, _url in servers:
            stop_streamlit(proc)
        store.close()
    summary = {"cores": os.cpu_count(), "load_before": os.getloadavg(), "phones": args.phones,
               "classes": results}
    (OUT / f"bench_class_{args.replicas}{'_phones' if args.phones else ''}.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
