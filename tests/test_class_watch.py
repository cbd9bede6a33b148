"""The class watcher (alibi_viz_app/class_watch.py): which students' pages the server reruns when their
class moves, against a real SQLite class store; the reruns themselves are recorded here (a real
server's are in test_browser_class.py, where no student's browser polls)."""

from __future__ import annotations

import time

import pytest

from alibi_viz_app import class_watch
from alibi_viz_app.class_store import SQLiteStore
from alibi_viz_app.class_watch import RETRIES, RETRY_S, Watcher


class Reruns:
    """A stand-in for `class_watch.rerun`: records the sessions asked; those in `gone` have
    closed."""

    def __init__(self):
        self.asked: list[str] = []
        self.gone: set[str] = set()

    def __call__(self, session_id: str, delay: float = 0.0) -> bool:
        if session_id in self.gone:
            return False
        self.asked.append(session_id)
        return True


@pytest.fixture
def store(tmp_path):
    store = SQLiteStore(tmp_path / "class.sqlite3")
    yield store
    store.close()


def one_student(store, period: float = 0.2):
    """(room, the watcher, its recorded reruns): a class on step 1 whose one student's page,
    session "s1", has drawn it."""
    room = store.create_room()
    version = store.set_state(room.code, room.key, step=1)
    reruns = Reruns()
    watcher = Watcher(store, period=period, rerun=reruns)
    watcher.follow(room.code, version, "s1")
    return room, watcher, reruns


def test_a_move_reruns_the_pages_of_that_room_that_have_not_drawn_it(store):
    a, b = store.create_room(), store.create_room()
    va = store.set_state(a.code, a.key, step=1)
    vb = store.set_state(b.code, b.key, step=1)
    reruns = Reruns()
    watcher = Watcher(store, rerun=reruns)
    watcher.follow(a.code, va, "s1")
    watcher.follow(a.code, va, "s2")
    watcher.follow(b.code, vb, "s3")
    watcher.look()
    assert reruns.asked == []  # nothing moved
    moved = store.set_state(a.code, a.key, step=2)
    watcher.look()
    assert sorted(reruns.asked) == ["s1", "s2"]  # room b's page stays
    watcher.look()
    assert sorted(reruns.asked) == ["s1", "s2"]  # asked once: each page is running it
    watcher.follow(a.code, moved, "s1")  # s1 drew the move; s2 is slow
    assert watcher.pages()["s1"].drawn == moved and watcher.pages()["s2"].drawn == va


def test_a_page_that_does_not_draw_the_move_is_asked_again_a_few_times(store):
    room, watcher, reruns = one_student(store)
    moved = store.set_state(room.code, room.key, step=2)
    now = time.monotonic()
    assert watcher.rerun_behind(room.code, moved, now) == ["s1"]
    assert watcher.rerun_behind(room.code, moved, now + RETRY_S / 2) == []  # still running
    for k in range(1, RETRIES + 1):
        assert watcher.rerun_behind(room.code, moved, now + k * RETRY_S) == ["s1"]
    assert watcher.rerun_behind(room.code, moved, now + (RETRIES + 5) * RETRY_S) == []
    assert reruns.asked == ["s1"] * (1 + RETRIES)
    again = store.set_state(room.code, room.key, step=3)  # a new move: asked again
    assert watcher.rerun_behind(room.code, again, now + 100 * RETRY_S) == ["s1"]


def test_the_teacher_on_this_server_reruns_its_students_at_once(store):
    room, watcher, reruns = one_student(store)
    watcher.moved(room.code, store.set_state(room.code, room.key, step=2))
    assert reruns.asked == ["s1"]


def test_an_ended_class_reruns_its_pages_and_a_closed_session_is_forgotten(store):
    room = store.create_room()
    version = store.set_state(room.code, room.key, step=1)
    reruns = Reruns()
    reruns.gone.add("closed")
    watcher = Watcher(store, rerun=reruns)
    for sid in ("s1", "closed", "left"):
        watcher.follow(room.code, version, sid)
    watcher.forget("left")  # e.g. a student now on another page
    store.end(room.code, room.key)
    watcher.look()  # the store says the class is gone: each page reruns and says so
    assert reruns.asked == ["s1"]
    assert set(watcher.pages()) == {"s1"}


def test_the_watcher_thread_reruns_a_page_when_another_server_moves_its_class(store):
    """The teacher is on another replica: only the store says the class moved."""
    room, _watcher, reruns = one_student(store, period=0.02)  # following starts the thread
    store.set_state(room.code, room.key, step=2)
    deadline = time.monotonic() + 10
    while not reruns.asked:
        assert time.monotonic() < deadline, "the watcher never reran the page"
        time.sleep(0.02)
    assert reruns.asked == ["s1"]


def test_outside_a_streamlit_server_no_page_can_be_rerun():
    """AppTest and plain Python have no Streamlit runtime: the page polls instead."""
    assert class_watch.current_session() is None
    assert class_watch.can_rerun(None) is False
    assert class_watch.can_rerun("no-such-session") is False
    assert class_watch.rerun("no-such-session") is False


class FakeSession:
    """What `rerun` uses of Streamlit's AppSession: its event loop (a real one, in a thread),
    its last client state, its script runner (set while a run is on) and `request_rerun`."""

    def __init__(self, loop):
        from streamlit.proto.ClientState_pb2 import ClientState

        self._event_loop = loop
        self._client_state = ClientState(query_string="class=ABCDE", page_script_hash="lesson")
        self._scriptrunner = None
        self.requests = []

    def request_rerun(self, client_state):
        self.requests.append((time.monotonic(), client_state))


def test_a_page_running_its_script_is_asked_only_when_that_run_is_over(monkeypatch):
    """Asked at once, Streamlit would stop the run in progress, and with it the click it was
    taking in (an answer): the rerun waits for the run to end, and asks for the page's own
    page and URL as a full run."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        session = FakeSession(loop)
        monkeypatch.setattr(class_watch, "_app_session", lambda sid: session)
        session._scriptrunner = object()  # a student's click is being run
        assert class_watch.rerun("s1") is True
        time.sleep(0.3)
        assert session.requests == []
        ended = time.monotonic()
        session._scriptrunner = None
        deadline = time.monotonic() + 5
        while not session.requests:
            assert time.monotonic() < deadline, "never asked after the run ended"
            time.sleep(0.01)
        (at, state), = session.requests
        assert at >= ended
        assert (state.query_string, state.page_script_hash, state.fragment_id) == (
            "class=ABCDE", "lesson", "")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
