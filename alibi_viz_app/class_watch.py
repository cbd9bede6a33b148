"""A class's students see the teacher's move as soon as the store has it (issue 42).

A student's page used to learn of a move only when a timed fragment in its browser asked the
store (every `class_view.POLL_S`): on average half a period late, a whole period at worst, and
every ask cost a round trip and a fragment run. Here one thread per server process (`Watcher`)
reads the version of every room this process's students follow, every `WATCH_S` seconds, and
reruns the page of each student whose room moved on; a teacher's move on the same server reruns
them at once. The versions are read from the store, not from this process's memory, so a
teacher on another replica moves these students too.

A page that has drawn the move says so (`Watcher.follow`, from the page's run); one that has not
after `RETRY_S` is asked again, `RETRIES` times at most. A page whose script is running is not
stopped (`rerun`: that run may be taking in the student's click); it is asked when it is done.
The timed fragment stays for a server that cannot rerun a page itself (`can_rerun`). The two do not mix: a page rerun by the server
while its browser's fragment run was on its way was seen to keep the old step's content under
the new step's URL (1 run in 7 of the class tests, never in 6 runs without the fragment).

A server-side rerun is Streamlit's own "run on save" path: `AppSession.request_rerun` with the
session's last client state (its page and URL), on the session's event loop. Those are
Streamlit's internals (Streamlit is pinned in pyproject.toml), so each is looked up with a
default and `can_rerun` is False where one is missing.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from alibi_viz_app.class_store import ClassError

LOG = logging.getLogger(__name__)
WATCH_S = 0.2   # the watcher reads the followed rooms' versions this often
RETRY_S = 2.0   # a page asked to rerun that has not drawn the move by then is asked again
RETRIES = 3     # ... at most this many times for one move
BUSY_S = 0.05   # a page running its script is asked again this much later
# The pages behind one move are asked this far apart: asked at once, their runs share the
# server's one interpreter lock and all end late (bench_class.py, 60 students on one server:
# follow lag p50 1.07 s, p95 1.51 s asked at once; 0.83 s and 1.27 s 20 ms apart; 0.95 s and
# 1.31 s when the pages polled every second, which spread their runs).
STAGGER_S = 0.02


def current_session() -> str | None:
    """The id of the Streamlit session whose script run this is (None outside one)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


def _app_session(session_id: str | None):
    """Streamlit's AppSession of `session_id` (None outside a server, or once it has closed)."""
    from streamlit import runtime

    if session_id is None or not runtime.exists():
        return None
    return runtime.get_instance().get_app_session(session_id)


def _reruns(session) -> bool:
    return all(hasattr(session, name) for name in ("_event_loop", "_client_state",
                                                   "request_rerun"))


def can_rerun(session_id: str | None) -> bool:
    """Whether the server can rerun this session's page itself (`rerun`)."""
    session = _app_session(session_id)
    return session is not None and _reruns(session)


def rerun(session_id: str, delay: float = 0.0) -> bool:
    """Ask Streamlit to rerun a session's page as its browser would (from any thread), `delay`
    seconds from now. False when the session has closed (or cannot be asked).

    A session with a run in progress or about to start (a click's) is asked when that run is
    over: asked now, Streamlit would stop that run, and with it the click it was taking in
    (an answer lost)."""
    session = _app_session(session_id)
    if session is None or not _reruns(session):
        return False
    loop = session._event_loop
    until = time.monotonic() + delay + RETRY_S

    def ask() -> None:  # on the session's event loop: its page and URL, a full run
        if getattr(session, "_scriptrunner", None) is not None and time.monotonic() < until:
            loop.call_later(BUSY_S, ask)
            return
        state = type(session._client_state)()
        state.CopyFrom(session._client_state)
        state.ClearField("fragment_id")
        session.request_rerun(state)

    try:
        loop.call_soon_threadsafe(loop.call_later, delay, ask)
    except RuntimeError:  # its event loop is closed: the session is gone
        return False
    return True


@dataclass
class Page:
    """A student's page: its room, the room's version it drew, and the version it was last
    asked to draw (when, and how many times)."""
    room: str
    drawn: int
    asked: int | None = None
    asked_at: float = 0.0
    times: int = 0


class Watcher:
    """The students' pages of this process; a thread reruns those whose room moved on."""

    def __init__(self, store, period: float = WATCH_S, rerun=rerun):
        self._store = store
        self._period = period
        self._rerun = rerun
        self._lock = threading.Lock()
        self._pages: dict[str, Page] = {}  # by session id
        self._thread: threading.Thread | None = None

    def follow(self, room: str, version: int, session_id: str | None = None) -> None:
        """This run's session (or `session_id`) has drawn `room` at `version`."""
        session_id = session_id or current_session()
        if session_id is None:
            return
        with self._lock:
            page = self._pages.get(session_id)
            if page is None or page.room != room:
                self._pages[session_id] = Page(room, version)
            else:
                page.drawn = version
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="class-watcher",
                                                daemon=True)
                self._thread.start()

    def forget(self, session_id: str | None = None) -> None:
        """This run's session (or `session_id`) follows no class here."""
        with self._lock:
            self._pages.pop(session_id or current_session(), None)

    def moved(self, room: str, version: int) -> None:
        """The teacher moved `room` to `version` (-1: ended) on this server: rerun its pages."""
        self.rerun_behind(room, version)

    def pages(self) -> dict[str, Page]:
        with self._lock:
            return {sid: Page(**vars(page)) for sid, page in self._pages.items()}

    def rerun_behind(self, room: str, version: int, now: float | None = None) -> list[str]:
        """Ask every page of `room` that has not drawn `version` to rerun (a page asked for it
        less than RETRY_S ago is left to finish). Returns the sessions asked."""
        now = time.monotonic() if now is None else now
        with self._lock:
            behind = [sid for sid, page in self._pages.items()
                      if page.room == room and page.drawn != version
                      and (page.asked != version
                           or (page.times <= RETRIES and now - page.asked_at >= RETRY_S))]
        asked = {sid: self._rerun(sid, k * STAGGER_S) for k, sid in enumerate(behind)}
        with self._lock:
            for sid, ok in asked.items():
                page = self._pages.get(sid)
                if not ok:
                    self._pages.pop(sid, None)
                elif page is not None:
                    page.times = page.times + 1 if page.asked == version else 1
                    page.asked, page.asked_at = version, now
        return [sid for sid, ok in asked.items() if ok]

    def look(self) -> None:
        """Read the version of every followed room once, and rerun the pages behind it."""
        for room in {page.room for page in self.pages().values()}:
            try:
                version = self._store.state(room).version
            except ClassError:  # ended or expired (the page then says so), or store trouble
                version = -1
            self.rerun_behind(room, version)

    def _watch(self) -> None:
        while True:
            time.sleep(self._period)
            try:
                self.look()
            except Exception:  # the thread must outlive any one failure
                LOG.exception("the class watcher failed; it goes on")
