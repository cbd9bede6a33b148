"""The class store (alibi_viz_app.class_store, issue 42): rooms, the teacher key, answers counted once
per session, expiry and the room limit, against a real SQLite file and a real Redis.

Each test that takes `make_store` runs twice: on SQLite in tmp_path (with a fake clock) and on
Debian's redis-server, started here on a free loopback port (skipped, with the reason, where it
is not installed: `make test` installs it as root).
"""

from __future__ import annotations

import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib

from alibi_viz import i18n
from alibi_viz.errors import AlibiVizError
from alibi_viz_app.class_store import (
    CODE_ALPHABET,
    AnswerRefused,
    AnswersClosed,
    BadClassCode,
    ClassError,
    ClassesFull,
    ClassNotFound,
    ClassStoreError,
    NotTheTeacher,
    RedisStore,
    SQLiteStore,
    TooManyClasses,
    normalise_code,
    open_store,
)

ROOT = Path(__file__).resolve().parents[1]
CHOICES = ("steeper", "gentler", "same")
PREFIX = "alibi-viz-test:"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeClock:
    """The SQLite store's clock, moved by hand."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def redis_url():
    """A redis-server of this module's own, on a free loopback port, persisting nothing."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (make test installs it as root: "
                    "apt-get install redis-server)")
    import redis

    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + 15
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server on port {port} did not answer PING")
            time.sleep(0.05)
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(params=["sqlite", "redis"])
def make_store(request, tmp_path):
    """make_store(**options) -> a store of the parameter's kind; make_store.kind, .clock
    (SQLite's fake clock), .raw() (every stored key, row and value, as text)."""
    kind, clock, stores = request.param, FakeClock(), []
    path = tmp_path / "class.sqlite3"
    if kind == "redis":
        import redis

        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url, decode_responses=True)
        client.flushdb()

    def make(**options):
        if kind == "sqlite":
            store = SQLiteStore(path, clock=clock, **options)
        else:
            store = RedisStore(url, prefix=PREFIX, **options)
        stores.append(store)
        return store

    make.kind, make.clock = kind, clock
    make.raw = (lambda: sqlite_raw(path)) if kind == "sqlite" else (lambda: redis_raw(client))
    yield make
    for store in stores:
        store.close()
    if kind == "redis":
        client.close()


def sqlite_raw(path: Path) -> str:
    """Every row of every table, and the bytes of the file and its WAL, as text."""
    conn = sqlite3.connect(path)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = [f"{t}: {row!r}" for t in tables for row in conn.execute(f"SELECT * FROM {t}")]
    finally:
        conn.close()
    files = [p.read_bytes().decode("latin-1") for p in (path, Path(f"{path}-wal")) if p.exists()]
    return "\n".join(rows + files)


def redis_raw(client) -> str:
    """Every key under the test prefix with its whole value, as text. A key that expires
    between the scan and its read (type "none") is gone, and left out."""
    lines = []
    for key in client.scan_iter(match=PREFIX + "*"):
        kind = client.type(key)
        if kind == "none":
            continue
        value = {"hash": client.hgetall, "set": client.smembers, "string": client.get,
                 "zset": lambda k: client.zrange(k, 0, -1, withscores=True)}[kind](key)
        lines.append(f"{key} {kind}: {value!r}")
    return "\n".join(lines)


def room_rows(path: Path, code: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return sum(conn.execute(f"SELECT count(*) FROM {t} WHERE code = ?", (code,)).fetchone()[0]
                   for t in ("rooms", "questions", "answers"))
    finally:
        conn.close()


def session() -> str:
    return "sess-" + secrets.token_hex(12)


# ---------------------------------------------------------------- codes


def test_codes_are_five_unambiguous_characters(make_store):
    """A code is 5 characters of an alphabet without look-alikes; codes differ; the teacher key
    is long and unguessable."""
    assert not set("01OIL") & set(CODE_ALPHABET) and CODE_ALPHABET.isupper()
    store = make_store()
    rooms = [store.create_room() for _i in range(30)]
    for room in rooms:
        assert len(room.code) == 5 and set(room.code) <= set(CODE_ALPHABET), room.code
        assert len(room.key) >= 22 and room.key not in {r.key for r in rooms if r is not room}
    assert len({room.code for room in rooms}) == len(rooms)


def test_look_up_normalises_case_and_spaces(make_store):
    store = make_store()
    code = store.create_room().code
    typed = f" {code[:2].lower()} {code[2:].lower()}\n"
    assert store.look_up(typed) == code and normalise_code(f"{code[:3]}-{code[3:]}") == code


@pytest.mark.parametrize("typed", ["", "ABCD", "ABCDEF", "AB0DE", "ABIDE", "A?<b>", None, 12345])
def test_a_malformed_code_gets_a_message(make_store, typed):
    """Not 5 characters of the alphabet: BadClassCode, which says what a code looks like."""
    store = make_store()
    with pytest.raises(BadClassCode, match="is not a class code: a class code is 5") as caught:
        store.look_up(typed)
    assert isinstance(caught.value, AlibiVizError)


def test_an_unknown_code_gets_a_message_in_the_pages_language(make_store):
    store = make_store()
    code = "ABCDE" if store.create_room().code != "ABCDE" else "XYZ23"
    with pytest.raises(ClassNotFound, match=f"There is no class with the code {code}.*12 hours"):
        store.look_up(code)
    i18n.set_language("es")
    try:
        with pytest.raises(ClassNotFound) as caught:
            store.state(code)
    finally:
        i18n.set_language("en")
    assert code in str(caught.value) and "There is no class" not in str(caught.value)


# ---------------------------------------------------------------- the teacher key


def test_only_the_teacher_key_moves_the_class(make_store):
    """A wrong, empty, missing or other room's key cannot set the state, reveal, ask again or
    end; nothing changes."""
    store = make_store()
    room, other = store.create_room(), store.create_room()
    store.answer(room.code, "student-0001", "q", "same", choices=CHOICES)
    before = store.state(room.code)
    for key in [room.key[:-1] + ("A" if room.key[-1] != "A" else "B"), "", None, other.key,
                room.key.upper() if room.key.upper() != room.key else room.key + "x"]:
        assert not store.is_teacher(room.code, key)
        attempts = [lambda k=key: store.set_state(room.code, k, step=5),
                    lambda k=key: store.reveal(room.code, k, "q"),
                    lambda k=key: store.ask_again(room.code, k, "q"),
                    lambda k=key: store.end(room.code, k)]
        for attempt in attempts:
            with pytest.raises(NotTheTeacher, match="Only the teacher can do that"):
                attempt()
    assert replace(store.state(room.code), expires_in=0) == replace(before, expires_in=0)
    assert store.counts(room.code, "q").total == 1
    assert store.is_teacher(room.code.lower(), room.key)


def test_the_state_follows_the_teacher(make_store):
    """set_state is what state() reads; each change of the teacher's grows the version."""
    store = make_store()
    room = store.create_room()
    first = store.state(room.code)
    assert (first.step, first.myth, first.controls, first.revealed) == (0, None, {}, frozenset())
    version = store.set_state(room.code, room.key, step=9, myth=2,
                              controls={"slope": 0.25, "length": 64, "log": True})
    now = store.state(room.code)
    assert (now.step, now.myth, now.controls) == (9, 2, {"slope": 0.25, "length": 64, "log": True})
    assert now.version == version > first.version
    assert 0 < now.expires_in <= 12 * 3600
    assert store.reveal(room.code, room.key, "q") > version
    assert store.state(room.code).revealed == {"q"}


@pytest.mark.parametrize("step,myth,controls", [(-1, None, {}), (1.5, None, {}), (True, None, {}),
                                                (1, "2", {}), (1, None, {"x": "y" * 5000}),
                                                (1, None, {"x": float("nan")}), (1, None, [1])])
def test_the_state_must_be_small(make_store, step, myth, controls):
    store = make_store()
    room = store.create_room()
    with pytest.raises(ClassError, match="whole numbers"):
        store.set_state(room.code, room.key, step=step, myth=myth, controls=controls)


# ---------------------------------------------------------------- answers


def test_fifty_concurrent_sessions_are_counted_once_each(make_store):
    """50 threads answer at once, each its own session; some flood the same answer, some change
    it: every session counts once, with its last answer."""
    store = make_store()
    room = store.create_room()
    start = threading.Barrier(50)

    def student(i: int) -> str:
        me = f"student-{i:03d}-{secrets.token_hex(4)}"
        start.wait(timeout=30)
        choice = CHOICES[i % 3]
        for _repeat in range(4 if i % 5 == 0 else 1):  # a script sending its answer again
            store.answer(room.code, me, "q", choice, choices=CHOICES)
        if i % 7 == 0:  # a change of mind
            choice = CHOICES[(i + 1) % 3]
            store.answer(room.code, me, "q", choice, choices=CHOICES)
        assert store.my_answer(room.code, me, "q") == choice
        return choice

    with ThreadPoolExecutor(50) as pool:
        finals = list(pool.map(student, range(50)))
    counts = store.counts(room.code, "q", CHOICES)
    assert counts.total == 50
    assert counts.by_choice == {c: Counter(finals)[c] for c in CHOICES}


def test_one_session_flooding_from_many_threads_counts_once(make_store):
    store = make_store()
    room = store.create_room()
    me = session()
    with ThreadPoolExecutor(20) as pool:
        list(pool.map(lambda i: store.answer(room.code, me, "q", CHOICES[i % 2], choices=CHOICES),
                      range(60)))
    assert store.counts(room.code, "q").total == 1


def test_a_changed_answer_moves_its_count(make_store):
    store = make_store()
    room = store.create_room()
    me, other = session(), session()
    store.answer(room.code, me, "q", "steeper", choices=CHOICES)
    store.answer(room.code, other, "q", "steeper", choices=CHOICES)
    assert store.counts(room.code, "q", CHOICES) == ({"steeper": 2, "gentler": 0, "same": 0}, 2)
    store.answer(room.code, me, "q", "gentler", choices=CHOICES)
    assert store.counts(room.code, "q", CHOICES) == ({"steeper": 1, "gentler": 1, "same": 0}, 2)
    assert store.my_answer(room.code, me, "q") == "gentler"
    assert store.counts(room.code, "other-question").total == 0


def test_answers_after_the_reveal_are_refused(make_store):
    """After reveal, an answer (new or changed) raises AnswersClosed and changes nothing;
    other questions still take answers."""
    store = make_store()
    room = store.create_room()
    me = session()
    store.answer(room.code, me, "q", "steeper", choices=CHOICES)
    store.reveal(room.code, room.key, "q")
    for who, choice in [(me, "gentler"), (session(), "same")]:
        with pytest.raises(AnswersClosed, match="answers to this question are shown"):
            store.answer(room.code, who, "q", choice, choices=CHOICES)
    assert store.counts(room.code, "q") == ({"steeper": 1}, 1)
    assert store.my_answer(room.code, me, "q") == "steeper"
    store.answer(room.code, me, "q2", "same", choices=CHOICES)


@pytest.mark.parametrize("choice", ["steep", "", "STEEPER", None, 1, "steeper " * 30])
def test_a_choice_not_offered_is_refused(make_store, choice):
    store = make_store()
    room = store.create_room()
    with pytest.raises(AnswerRefused, match="is not an answer to this question"):
        store.answer(room.code, session(), "q", choice, choices=CHOICES)
    assert store.counts(room.code, "q").total == 0


def test_asking_again_clears_the_answers_and_starts_a_round(make_store):
    store = make_store()
    room = store.create_room()
    me = session()
    store.answer(room.code, me, "q", "steeper", choices=CHOICES)
    store.answer(room.code, session(), "q", "same", choices=CHOICES)
    store.answer(room.code, me, "q2", "same", choices=CHOICES)
    store.reveal(room.code, room.key, "q")
    version = store.state(room.code).version
    assert store.ask_again(room.code, room.key, "q") == 2
    state = store.state(room.code)
    assert state.round("q") == 2 and state.round("q2") == 1 and "q" not in state.revealed
    assert state.version > version
    assert store.counts(room.code, "q").total == 0 and store.my_answer(room.code, me, "q") is None
    assert store.counts(room.code, "q2").total == 1
    store.answer(room.code, me, "q", "gentler", choices=CHOICES)
    assert store.counts(room.code, "q") == ({"gentler": 1}, 1)
    assert store.ask_again(room.code, room.key, "q") == 3


def test_bad_session_or_question_ids_are_typed_errors(make_store):
    store = make_store()
    room = store.create_room()
    for who, question in [("", "q"), ("short", "q"), ("has a space", "q"), (None, "q"),
                          (session(), ""), (session(), "q" * 65), (session(), "q/../x")]:
        with pytest.raises(ClassError, match="reload the page"):
            store.answer(room.code, who, question, "same", choices=CHOICES)


# ---------------------------------------------------------------- lifetime, limit, privacy


def test_expired_rooms_are_deleted(make_store):
    """After the TTL a room is unknown, and its data are gone from the store."""
    store = make_store(ttl=1)
    room = store.create_room()
    store.answer(room.code, session(), "q", "same", choices=CHOICES)
    store.reveal(room.code, room.key, "q")
    store.ask_again(room.code, room.key, "q2")
    assert room.code in make_store.raw()
    if make_store.kind == "sqlite":
        make_store.clock.advance(1.5)
    else:  # Redis expires every key of the room itself, on its own clock
        deadline = time.monotonic() + 15
        while f"{PREFIX}{room.code} hash" in make_store.raw() and time.monotonic() < deadline:
            time.sleep(0.1)
    with pytest.raises(ClassNotFound):
        store.state(room.code)
    # The next room created purges the rest (SQLite's rows, the code in Redis's room limit).
    store.create_room()
    assert room.code not in make_store.raw()
    if make_store.kind == "sqlite":
        assert room_rows(store.path, room.code) == 0
    for call in (lambda: store.look_up(room.code), lambda: store.counts(room.code, "q"),
                 lambda: store.answer(room.code, session(), "q", "same", choices=CHOICES),
                 lambda: store.reveal(room.code, room.key, "q")):
        with pytest.raises(ClassNotFound, match="There is no class with the code"):
            call()


def test_the_number_of_rooms_is_bounded(make_store):
    store = make_store(max_rooms=3)
    rooms = [store.create_room() for _i in range(3)]
    with pytest.raises(ClassesFull, match="classes are full: 3 classes are running"):
        store.create_room()
    store.end(rooms[0].code, rooms[0].key)
    store.create_room()
    with pytest.raises(ClassesFull):
        store.create_room()


def test_a_room_nobody_joined_closes_in_minutes_and_a_joined_one_lives_its_ttl(make_store):
    """A room no student joined lives empty_ttl after its creation or the teacher's last
    change; once a student joins, it lives its full ttl from its creation."""
    store = make_store(ttl=3600, empty_ttl=600)
    empty, joined = store.create_room(), store.create_room()
    store.join(joined.code)
    assert 590 < store.state(empty.code).expires_in <= 600
    assert 3590 < store.state(joined.code).expires_in <= 3600
    if make_store.kind == "sqlite":  # the fake clock: the teacher's change keeps it open
        make_store.clock.advance(500)
        store.set_state(empty.code, empty.key, step=2)
        assert 590 < store.state(empty.code).expires_in <= 600
        make_store.clock.advance(500)
        store.touch(empty.code, empty.key)  # the teacher's page is open
        assert 590 < store.state(empty.code).expires_in <= 600
        with pytest.raises(NotTheTeacher):
            store.touch(empty.code, "not-the-key")
        make_store.clock.advance(601)
        with pytest.raises(ClassNotFound):
            store.state(empty.code)
        assert 3590 - 1601 < store.state(joined.code).expires_in <= 3600 - 1601
    with pytest.raises(ClassNotFound):
        store.join("ZZZZZ")


def test_an_empty_room_expires_on_redis_too(redis_url):
    """On Redis (its own clock, which the SQLite test above fakes) every key of a room nobody
    joined expires after empty_ttl, answers and reveals included."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    store = RedisStore(redis_url, prefix=PREFIX, empty_ttl=1)
    try:
        room = store.create_room()
        store.answer(room.code, session(), "q", "same", choices=CHOICES)
        store.reveal(room.code, room.key, "q")
        assert room.code in redis_raw(client)
        deadline = time.monotonic() + 15
        while f"{PREFIX}{room.code} hash" in redis_raw(client) and time.monotonic() < deadline:
            time.sleep(0.1)
        store.create_room()  # which purges the code from the room limit too
        assert room.code not in redis_raw(client)
    finally:
        store.close()
        client.close()


def test_one_browser_session_holds_a_few_rooms(make_store):
    """A browser session (its id) may hold max_rooms_per_creator live rooms; the next is
    refused with a sentence, and ending one frees its place. Another session is not held."""
    store = make_store(max_rooms_per_creator=2)
    me = session()
    rooms = [store.create_room(creator=me) for _i in range(2)]
    with pytest.raises(TooManyClasses, match="This browser already runs 2 classes"):
        store.create_room(creator=me)
    store.create_room(creator=session())
    store.create_room()  # no creator: not counted
    store.end(rooms[0].code, rooms[0].key)
    store.create_room(creator=me)
    assert me not in make_store.raw()  # only its hash is stored


def test_expired_rooms_free_their_places(tmp_path):
    """(SQLite, fake clock) a full store takes a new room once the old ones expire."""
    clock = FakeClock()
    store = SQLiteStore(tmp_path / "full.sqlite3", max_rooms=2, ttl=60, clock=clock)
    store.create_room(), store.create_room()
    with pytest.raises(ClassesFull):
        store.create_room()
    clock.advance(61)
    store.create_room(), store.create_room()


def test_ending_the_class_deletes_everything_of_the_room(make_store):
    store = make_store()
    room, other = store.create_room(), store.create_room()
    for code in (room.code, other.code):
        store.answer(code, session(), "q", "same", choices=CHOICES)
    store.set_state(room.code, room.key, step=3, controls={"slope": 0.5})
    store.reveal(room.code, room.key, "q")
    store.ask_again(room.code, room.key, "q2")
    store.answer(room.code, session(), "q2", "same", choices=CHOICES)
    store.end(room.code, room.key)
    if make_store.kind == "sqlite":
        assert room_rows(store.path, room.code) == 0 and room_rows(store.path, other.code) > 0
    assert room.code not in make_store.raw() and other.code in make_store.raw()
    with pytest.raises(ClassNotFound):
        store.state(room.code)
    with pytest.raises(ClassNotFound):
        store.end(room.code, room.key)
    assert store.counts(other.code, "q").total == 1


def test_no_raw_session_id_or_teacher_key_is_stored(make_store):
    """Sessions are stored as salted hashes, the teacher key as a hash: neither appears in any
    key, row or value (nor, for SQLite, anywhere in the file or its WAL)."""
    store = make_store()
    room = store.create_room()
    me = "sid-" + secrets.token_hex(16)
    store.answer(room.code, me, "q", "same", choices=CHOICES)
    store.answer(room.code, me, "q2", "steeper", choices=CHOICES)
    store.reveal(room.code, room.key, "q")
    raw = make_store.raw()
    assert "same" in raw and room.code in raw
    assert me not in raw and me[4:] not in raw and room.key not in raw


def test_two_sqlite_stores_on_one_file_share_the_class(tmp_path):
    """Two replicas (two SQLiteStore objects, and another process) on one file see each
    other's rooms, states and answers."""
    path = tmp_path / "shared.sqlite3"
    first, second = SQLiteStore(path), SQLiteStore(path)
    room = first.create_room()
    second.set_state(room.code, room.key, step=4)
    assert first.state(room.code).step == 4
    first.answer(room.code, "student-a-000", "q", "same", choices=CHOICES)
    second.answer(room.code, "student-b-000", "q", "steeper", choices=CHOICES)
    script = ("import sys; from alibi_viz_app.class_store import SQLiteStore\n"
              "s = SQLiteStore(sys.argv[1])\n"
              "for i in range(20): s.answer(sys.argv[2], f'student-p-{i:03d}', 'q', 'gentler',"
              " choices=('steeper', 'gentler', 'same'))\n")
    other = subprocess.Popen([sys.executable, "-c", script, str(path), room.code])
    for i in range(20):
        second.answer(room.code, f"student-t-{i:03d}", "q", "same", choices=CHOICES)
    assert other.wait(60) == 0
    assert first.counts(room.code, "q", CHOICES) == ({"steeper": 1, "gentler": 20, "same": 21}, 42)
    assert second.counts(room.code, "q") == first.counts(room.code, "q")


def test_the_data_folder_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIBI_VIZ_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ALIBI_VIZ_CLASS_STORE", raising=False)
    store = open_store()
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "data" / "class.sqlite3"
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
    assert store.path.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ---------------------------------------------------------------- choosing the store


def test_a_sqlite_url_names_the_file(tmp_path):
    path = tmp_path / "x" / "c.sqlite3"
    store = open_store(f"sqlite://{path}", max_rooms=5)
    assert isinstance(store, SQLiteStore) and store.path == path and store.max_rooms == 5


def test_a_redis_url_opens_redis(monkeypatch, redis_url):
    monkeypatch.setenv("ALIBI_VIZ_CLASS_STORE", redis_url)
    store = open_store()
    assert isinstance(store, RedisStore)
    store.look_up(store.create_room().code)
    store.close()


@pytest.mark.parametrize("setting", ["mysql://db", "sqlite://relative.db", "sqlite:///", "redis",
                                     "/tmp/class.sqlite3", "redis://h:notaport/0"])
def test_a_bad_setting_is_a_typed_error(setting):
    with pytest.raises(ClassStoreError, match="is not a class store|cannot be used"):
        store = open_store(setting)
        store.create_room()


def test_an_unreachable_redis_is_a_typed_error():
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ClassStoreError, match="cannot be used"):
        store.create_room()


def test_the_module_sits_in_the_apps_base_layer():
    """pyproject's layers contract for the app lists alibi_viz_app.class_store in its base
    layer, which imports nothing of the app (make lint runs lint-imports on the contract)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["name"].startswith("alibi_viz_app layers")]
    base = [name.strip() for name in contract["layers"][-1].split(":")]
    assert "alibi_viz_app.class_store" in base
