"""Capacity (issue 43): how many students a replica holds before a class feels slow.

For each replica count in --replicas (1, 2 and 4 by default), that many `streamlit run
alibi_viz_app/main.py` servers share one SQLite class store (as `make serve-class`'s replicas do; the
students are dealt out among them in turn, as nginx's cookies spread browsers, without nginx
itself). Then classes of growing size (--students, 10 20 40 ... by default), each:
  * every simulated student opens /lesson?class=CODE over Streamlit's websocket and does what
    its browser does (bench_class.py's Student: it reads every run, the ones the server
    pushes when the class moves included, and polls only where the server sent a timed
    fragment);
  * changing controls: for --changes seconds the teacher stays on step 2 ("The bias matrix"),
    its question revealed (a class's figure waits for the reveal), and each student moves the
    step's length slider (the widget state a browser sends) to a random length at random
    moments, on average every --change-every seconds. A change's latency is the time from
    sending it to the arrival of the step's redrawn chart (plotly's figure, the step's work:
    the bias matrices at that length); the run's end is reported beside it.
  * following: the teacher (this script, with the room's key) moves on --moves times, every
    --every seconds; a student's follow lag is the time from the store's write to its
    websocket's delivery of the step's heading (bench_class.py's measure).
A class size passes when the p95 change latency is at most 1 s and the p95 follow lag at most
2 s (issue 43's bounds), and no student saw an error or missed a step. The ramp stops at the
first size that fails; a replica count's capacity is the largest size that passed.

usage: .venv/bin/python bench/bench_capacity.py [--replicas 1 2 4] [--students 10 20 40 60 80]
Websocket clients rather than browsers, on the same cores as the servers: on 2 cores the
clients' own work is part of what is measured, so these are lower bounds of what a replica on
a core of its own holds. Say what else ran on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
from bench_class import Student, follow_lags, pct, teacher_moves  # noqa: E402

from alibi_viz.figures.still import STILL_CLASS as STILL  # noqa: E402
from alibi_viz_app.class_store import SETTING, open_store  # noqa: E402
from alibi_viz_app.testing import PHONE_UA, free_port, start_streamlit, stop_streamlit  # noqa: E402

STEP = 2                # the class's step while students change controls
LENGTH = "ls_s2_len"    # its length slider: the control every student moves
CHANGE_P95_S = 1.0      # issue 43's bound on a control change
FOLLOW_P95_S = 2.0      # and on a student's lag behind the teacher


class ChangingStudent(Student):
    """A student who also moves step 2's length while the teacher stays there."""

    def __init__(self, port: int, code: str):
        super().__init__(port, code)
        self.slider: tuple[str, int, int] | None = None  # (widget id, its min and max)
        self.sent: float | None = None  # when the change now running was sent
        self.charted = False  # whether that change's chart has come
        self.latencies: list[float] = []  # sent -> the chart
        self.finished: list[float] = []   # sent -> the run's end

    async def change(self) -> None:
        """Send one change of the length (another value), as its browser would."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        widget, low, high = self.slider
        msg = BackMsg()
        msg.rerun_script.page_name = "lesson"
        msg.rerun_script.page_script_hash = self.page_hash
        msg.rerun_script.query_string = f"class={self.code}"
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = widget
        state.double_array_value.data.append(random.randint(low, high))
        self.sent, self.charted = time.time(), False
        await self.ws.send(msg.SerializeToString())

    def read(self, msg) -> None:
        """bench_class.Student's reading, and each change's chart and end."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        super().read(msg)
        kind = msg.WhichOneof("type")
        if kind == "script_finished":
            # a whole run's end (a fragment's run ends with FINISHED_FRAGMENT_RUN_SUCCESSFULLY)
            if self.sent is not None and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                self.finished.append(time.time() - self.sent)
                if not self.charted:
                    self.errors.append("a change's run drew no chart")
                self.sent = None
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "slider" and element.slider.id.endswith(LENGTH):
                self.slider = (element.slider.id, int(element.slider.min),
                               int(element.slider.max))
            elif (which == "plotly_chart" or (which == "html" and STILL in element.html.body)) \
                    and self.sent is not None and not self.charted:  # a chart, or a still one
                self.latencies.append(time.time() - self.sent)
                self.charted = True


async def drive_changes(client: ChangingStudent, until: float, every: float) -> None:
    """The student's changes until `until`: at random moments, on average every `every` s,
    never while the last one is still running (a browser waits for its page too)."""
    while True:
        await asyncio.sleep(random.expovariate(1 / every))
        if time.time() >= until:
            return
        if client.sent is None and client.slider is not None and client.ws is not None:
            await client.change()


async def one_class(ports: list[int], store, students: int, changes: float,
                    change_every: float, moves: int, every: float) -> dict:
    room = store.create_room()
    store.set_state(room.code, room.key, step=STEP)
    store.reveal(room.code, room.key, f"s{STEP}")  # the step's figure is shown
    stop = asyncio.Event()
    clients = [ChangingStudent(ports[k % len(ports)], room.code) for k in range(students)]
    tasks = [asyncio.create_task(c.run(stop)) for c in clients]
    deadline = time.time() + 600
    while not all(STEP in c.steps and c.slider for c in clients):
        if time.time() > deadline:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            return {"students": students, "replicas": len(ports), "passed": False,
                    "why": "the students' first runs did not finish in 600 s"}
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)  # the last first runs settle
    for c in clients:
        c.latencies.clear()
        c.finished.clear()
    until = time.time() + changes
    await asyncio.gather(*(drive_changes(c, until, change_every) for c in clients))
    await asyncio.sleep(3)  # the last changes finish
    written = await teacher_moves(store, room, range(STEP + 1, STEP + 1 + moves), every)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    lags, missed = follow_lags(clients, written)
    latencies = [x for c in clients for x in c.latencies]
    finished = [x for c in clients for x in c.finished]
    unfinished = sum(c.sent is not None for c in clients)
    store.end(room.code, room.key)
    result = {
        "students": students, "replicas": len(ports),
        "changes": len(latencies), "changes_unfinished": unfinished,
        "change_s": {"p50": pct(latencies, 0.5), "p95": pct(latencies, 0.95),
                     "max": round(max(latencies), 3) if latencies else None},
        "change_finished_s": {"p50": pct(finished, 0.5), "p95": pct(finished, 0.95)},
        "follow_s": {"p50": pct(lags, 0.5), "p95": pct(lags, 0.95),
                     "max": round(max(lags), 3) if lags else None, "missed": missed},
        "errors": sum(len(c.errors) for c in clients),
        "error_kinds": dict(Counter(e for c in clients for e in c.errors)),
    }
    result["passed"] = bool(latencies and lags and missed == 0 and unfinished == 0
                            and result["errors"] == 0
                            and result["change_s"]["p95"] <= CHANGE_P95_S
                            and result["follow_s"]["p95"] <= FOLLOW_P95_S)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--students", type=int, nargs="+", default=[10, 20, 40, 60, 80, 120])
    ap.add_argument("--changes", type=float, default=30, help="seconds of control changes")
    ap.add_argument("--change-every", type=float, default=10,
                    help="mean seconds between one student's changes")
    ap.add_argument("--moves", type=int, default=3)
    ap.add_argument("--every", type=float, default=6, help="seconds between the teacher's moves")
    ap.add_argument("--phones", action="store_true",
                    help="every student's browser says it is a phone (figures drawn still)")
    args = ap.parse_args()
    Student.user_agent = PHONE_UA if args.phones else None
    OUT.mkdir(parents=True, exist_ok=True)
    summary = {"cores": os.cpu_count(), "load_before": os.getloadavg(), "args": vars(args),
               "runs": []}
    for replicas in args.replicas:
        db = OUT / f"bench_capacity_{replicas}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        setting = f"sqlite:///{db}"
        servers = [start_streamlit(free_port(), env={SETTING: setting},
                                   log_name=f"bench_capacity_server{k}.log")
                   for k in range(replicas)]
        ports = [int(url.rsplit(":", 1)[1]) for _proc, url in servers]
        store = open_store(setting)
        capacity = 0
        try:
            for students in args.students:
                result = asyncio.run(one_class(ports, store, students, args.changes,
                                               args.change_every, args.moves, args.every))
                print(json.dumps(result), flush=True)
                summary["runs"].append(result)
                if not result["passed"]:
                    break
                capacity = students
        finally:
            for proc, _url in servers:
                stop_streamlit(proc)
            store.close()
        line = {"replicas": replicas, "students_held": capacity,
                "per_replica": round(capacity / replicas, 1)}
        print(json.dumps(line), flush=True)
        summary.setdefault("capacity", []).append(line)
    (OUT / f"bench_capacity{'_phones' if args.phones else ''}.json").write_text(
        json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
