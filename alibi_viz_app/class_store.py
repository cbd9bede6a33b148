"""Where a class session lives: the teacher's step, the revealed questions and the class's answers,
in a store that every replica of the app shares (issue 42).

What is stored, and for how long:
- a room: its code (5 characters, e.g. "K7QXM"), a SHA-256 hash of the teacher key (the key
  itself is never stored), a random salt, when it expires, the teacher's step, myth and figure
  controls (a small JSON dict: a slider's value, a length), a version counter, and per question
  whether its answers are revealed and how often it was asked;
- per question, one answer per browser session: the choice, under an HMAC-SHA256 of the
  session's random id keyed by the room's salt. No raw session id, no name, no IP address, no
  cookie and no time of an answer is stored, so an answer cannot be traced to a student.

A room and everything in it is deleted when the teacher ends the class, and at the latest
`ttl` after it was created (12 hours by default). A room that no student has joined lives only
`empty_ttl` (20 minutes) after its creation or the teacher's last change (or `touch`, the
teacher's page that waits for the class), so rooms opened and
left (a student who opens `?class=new`) free their place within minutes; and a browser session
holds at most `max_rooms_per_creator` live rooms (`create_room(creator=...)`, its id stored
only as a SHA-256 hash). Redis expires every key of the room itself;
the SQLite store makes an expired room unreachable at once and deletes its rows at the next
write to the store (or the next read a minute later), overwriting them on disk (secure_delete,
then a WAL checkpoint).

Two stores, one interface (`ClassStore`), chosen by one setting, `ALIBI_VIZ_CLASS_STORE`
(`open_store`):
- unset: `SQLiteStore` on `class.sqlite3` in the data folder, `$ALIBI_VIZ_DATA_DIR`, by
  default `$XDG_STATE_HOME/alibi-viz` (`~/.local/state/alibi-viz`); a folder it creates is
  private (0700), the file too (0600).
  One file in WAL mode, shared by every replica on one machine;
- `sqlite:///absolute/path.sqlite3`: `SQLiteStore` on that file;
- `redis://host:port/db` (or `rediss://`): `RedisStore`, for replicas on several machines.

    store = open_store()
    room = store.create_room(creator=session_id)  # room.code for the projector, room.key
    store.join(room.code)             # a student came: the room lives its full ttl
    store.set_state(room.code, room.key, step=2, controls={"length": 64})
    store.answer(room.code, session_id, "step1", "steeper", choices=("steeper", "gentler"))
    store.counts(room.code, "step1")              # Counts(by_choice={'steeper': 1}, total=1)
    store.reveal(room.code, room.key, "step1")    # answers to step1 are closed from now on

A student's answer is changeable until the teacher reveals the question; after that it is
refused with `AnswersClosed` (the app shows that message) until the teacher asks the question
again, which deletes its answers and starts a new round. Every error is a `ClassError` whose
message is written for the person at the screen, in the page's language.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import queue
import re
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, ngettext

# ----------------------------------------------------------------------------- errors

class ClassError(AlibiVizError):
    """A class session refused an operation; the message says why."""


class BadClassCode(ClassError):
    """A class code that cannot be one: not 5 characters of the code alphabet."""


class ClassNotFound(ClassError):
    """No live class has this code: it never existed, was ended, or expired (and was deleted)."""


class NotTheTeacher(ClassError):
    """A teacher-only operation (move the class, reveal, ask again, end) without the room's key."""


class ClassesFull(ClassError):
    """The store already holds as many live classes as it allows."""


class TooManyClasses(ClassError):
    """This browser session already runs as many live classes as one session may."""


class AnswerRefused(ClassError):
    """An answer that cannot be counted: not one of the question's choices."""


class AnswersClosed(AnswerRefused):
    """An answer to a question whose answers are revealed (until the teacher asks it again)."""


class ClassStoreError(ClassError):
    """The class store is misconfigured or cannot be reached."""

# Uppercase letters and digits that cannot be mistaken for one another when read off a
# projector or typed on a phone: no 0/O, no 1/I/L, no U (read as V). 30 characters, so
# 30**5 = 24 million codes, drawn with `secrets`.
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 5
KEY_BYTES = 24                    # teacher key: secrets.token_urlsafe(24), 32 characters
DEFAULT_TTL = 12 * 3600.0         # seconds a room lives after it is created
DEFAULT_MAX_ROOMS = 200           # live rooms per store
DEFAULT_EMPTY_TTL = 20 * 60.0     # seconds a room no student joined lives after the teacher's
                                  # last change: a teacher setting up waits this long for them
DEFAULT_ROOMS_PER_CREATOR = 3     # live rooms one browser session may hold
MAX_CONTROLS_BYTES = 2048         # the figure controls, as JSON
MAX_STEP = 999                    # step and myth numbers are small whole numbers
MAX_CHOICES = 50                  # choices of one question
MAX_CHOICE_CHARS = 200
SETTING = "ALIBI_VIZ_CLASS_STORE"
DATA_DIR = "ALIBI_VIZ_DATA_DIR"
QUESTION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
SESSION_ID = re.compile(r"[\x21-\x7e]{8,200}")  # printable ASCII, no spaces


class Room(NamedTuple):
    code: str  # what students type or scan: 5 characters of CODE_ALPHABET
    key: str   # the teacher key: stays in the teacher's URL, never on the projector


class Counts(NamedTuple):
    by_choice: dict[str, int]  # choice -> sessions whose answer it is (asked choices: 0 too)
    total: int                 # sessions that answered


@dataclass(frozen=True)
class ClassState:
    """What a follower's page polls: where the teacher is and what is revealed."""

    code: str
    step: int                       # the teacher's lesson step
    myth: int | None                # the myth on screen on the last step (None: not set)
    controls: dict                  # the teacher's figure controls, e.g. {"slope": 0.5}
    revealed: frozenset[str]        # questions whose answers are shown
    rounds: dict[str, int] = field(default_factory=dict)  # question -> round, if asked again
    version: int = 1                # grows with every teacher change: a poller compares it
    expires_in: float = 0.0         # seconds until the room is deleted

    def round(self, question: str) -> int:
        """The question's round: 1, then one more each time the teacher asks it again."""
        return self.rounds.get(question, 1)


# ---------------------------------------------------------------- validation


def normalise_code(code: object) -> str:
    """`code` as stored: spaces and dashes dropped, uppercase. BadClassCode unless it is then
    CODE_LENGTH characters of CODE_ALPHABET."""
    text = re.sub(r"[\s-]+", "", code).upper() if isinstance(code, str) else ""
    if len(text) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in text):
        shown = "".join(c for c in str(code if code is not None else "") if c.isprintable())
        shown = shown if len(shown) <= 12 else shown[:11] + "…"
        raise BadClassCode(_("“{code}” is not a class code: a class code is 5 letters and "
                             "digits, as shown on the projector.").format(code=shown))
    return text


def _question(question: object) -> str:
    if not isinstance(question, str) or not QUESTION_ID.fullmatch(question):
        raise ClassError(_("This page asked about an unknown question; reload the page."))
    return question


def _session(session_id: object) -> str:
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise ClassError(_("This browser session has no valid id; reload the page."))
    return session_id


def _choice(choice: object, choices: Sequence[str]) -> str:
    if (not choices or len(choices) > MAX_CHOICES
            or any(not isinstance(c, str) or not 0 < len(c) <= MAX_CHOICE_CHARS for c in choices)):
        raise ClassError(_("This page asked about an unknown question; reload the page."))
    if not isinstance(choice, str) or choice not in choices:
        shown = str(choice)[:40]
        raise AnswerRefused(_("“{choice}” is not an answer to this question; choose one of: "
                              "{choices}.").format(choice=shown, choices=", ".join(choices)))
    return choice


def _whole(value: object, allow_none: bool) -> bool:
    if value is None:
        return allow_none
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP


def _state_values(step: object, myth: object, controls: object) -> tuple[int, int | None, str]:
    """(step, myth, controls as JSON), or ClassError when they are not small values."""
    text = None
    if isinstance(controls, dict) and all(isinstance(k, str) for k in controls):
        try:
            text = json.dumps(controls, sort_keys=True, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            text = None
    if (not _whole(step, False) or not _whole(myth, True) or text is None
            or len(text.encode()) > MAX_CONTROLS_BYTES):
        raise ClassError(_("The class's step and myth must be whole numbers from 0 to {high}, and "
                           "its figure controls a dict of at most {size} bytes as JSON.").format(
                               high=MAX_STEP, size=MAX_CONTROLS_BYTES))
    return step, myth, text


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def session_hash(salt: bytes, session_id: str) -> str:
    """What stands for a session in the store: HMAC-SHA256 of its id, keyed by the room's salt
    (so the same browser has unrelated hashes in two rooms)."""
    return hmac.new(salt, session_id.encode(), hashlib.sha256).hexdigest()


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _i in range(CODE_LENGTH))


# ---------------------------------------------------------------- the interface


class ClassStore(ABC):
    """The interface of a class store. Public methods validate their inputs and check the
    teacher key; subclasses implement the `_` methods on normalised, valid values, and raise
    ClassNotFound for a room that is not live."""

    def __init__(self, ttl: float = DEFAULT_TTL, max_rooms: int = DEFAULT_MAX_ROOMS,
                 empty_ttl: float = DEFAULT_EMPTY_TTL,
                 max_rooms_per_creator: int = DEFAULT_ROOMS_PER_CREATOR):
        if not all(isinstance(t, int | float) and math.isfinite(t) and t > 0
                   for t in (ttl, empty_ttl)):
            raise ClassStoreError(_("A class's lifetime must be a positive number of seconds."))
        if not all(isinstance(n, int) and n >= 1 for n in (max_rooms, max_rooms_per_creator)):
            raise ClassStoreError(_("The number of classes must be a positive whole number."))
        self.ttl = float(ttl)
        self.empty_ttl = min(float(empty_ttl), self.ttl)
        self.max_rooms = max_rooms
        self.max_rooms_per_creator = max_rooms_per_creator

    # ---- rooms

    def create_room(self, creator: str | None = None) -> Room:
        """A new room (code, teacher key); ClassesFull when max_rooms rooms are live,
        TooManyClasses when `creator` (a browser session's id) already holds
        max_rooms_per_creator of them. It lives `empty_ttl` until a student joins (`join`)."""
        key = secrets.token_urlsafe(KEY_BYTES)
        salt = secrets.token_bytes(16)
        made_by = ("" if creator is None
                   else hashlib.sha256(b"creator:" + _session(creator).encode()).hexdigest())
        for _attempt in range(20):  # a taken code is redrawn (1 in 120,000 when full)
            code = new_code()
            if self._create(code, _key_hash(key), salt, made_by):
                return Room(code, key)
        raise ClassesFull(self._full_message())

    def join(self, code: object) -> None:
        """A student came to the room: from now on it lives its full ttl from its creation."""
        self._join(normalise_code(code))

    def look_up(self, code: object) -> str:
        """`code` normalised, if it names a live room (BadClassCode, ClassNotFound otherwise)."""
        code = normalise_code(code)
        self._salt(code)
        return code

    def state(self, code: object) -> ClassState:
        return self._state(normalise_code(code))

    def is_teacher(self, code: object, key: object) -> bool:
        """Whether `key` is the room's teacher key (compared in constant time); ClassNotFound
        when there is no such room."""
        code = normalise_code(code)
        stored = self._stored_key_hash(code)
        given = _key_hash(key) if isinstance(key, str) else ""
        return hmac.compare_digest(stored, given)

    def _teacher(self, code: object, key: object) -> str:
        code = normalise_code(code)
        if not self.is_teacher(code, key):
            raise NotTheTeacher(_("Only the teacher can do that: this page's link has no valid "
                                  "teacher key for class {code}.").format(code=code))
        return code

    # ---- the teacher

    def set_state(self, code: object, key: object, *, step: int, myth: int | None = None,
                  controls: dict | None = None) -> int:
        """Move the class to `step` (and `myth`), with the figure controls. Returns the new
        version."""
        code = self._teacher(code, key)
        version = self._set_state(code, *_state_values(step, myth, controls or {}))
        self._keep_alive(code)
        return version

    def reveal(self, code: object, key: object, question: str) -> int:
        """Show the question's answers; from now on its answers are closed. Returns the version."""
        code = self._teacher(code, key)
        version = self._reveal(code, _question(question))
        self._keep_alive(code)
        return version

    def ask_again(self, code: object, key: object, question: str) -> int:
        """Delete the question's answers, un-reveal it and start its next round. Returns the
        new round number (2 after the first time)."""
        code = self._teacher(code, key)
        round_ = self._ask_again(code, _question(question))
        self._keep_alive(code)
        return round_

    def touch(self, code: object, key: object) -> None:
        """The teacher's page is open: a room nobody joined yet lives empty_ttl from now (a
        teacher who sets up before the class keeps the room; an abandoned one closes)."""
        self._keep_alive(self._teacher(code, key))

    def end(self, code: object, key: object) -> None:
        """End the class: the room and all its answers are deleted."""
        self._end(self._teacher(code, key))

    # ---- the students

    def answer(self, code: object, session_id: str, question: str, choice: str, *,
               choices: Sequence[str]) -> None:
        """Record the session's answer to the question (replacing its earlier one).

        `choices` are the question's answers (from the lesson); a choice not among them is
        refused with AnswerRefused. After the question is revealed, AnswersClosed is raised and
        nothing changes, until the teacher asks it again."""
        code = normalise_code(code)
        session, question = _session(session_id), _question(question)
        choice = _choice(choice, choices)
        if not self._answer(code, session, question, choice):
            raise AnswersClosed(_("The answers to this question are shown, so it takes no more "
                                  "answers until the teacher asks it again."))

    def my_answer(self, code: object, session_id: str, question: str) -> str | None:
        """The session's current answer to the question, or None."""
        return self._my_answer(normalise_code(code), _session(session_id), _question(question))

    def counts(self, code: object, question: str, choices: Sequence[str] = ()) -> Counts:
        """How many sessions gave each answer to the question (in this round), and in all.
        Each of `choices` is listed, with 0 when nobody chose it."""
        answers = self._answers(normalise_code(code), _question(question))
        tally = Counter(answers)
        by_choice = {c: tally.get(c, 0) for c in choices}
        by_choice.update(tally)
        return Counts(by_choice, len(answers))

    def close(self) -> None:  # noqa: B027 (a store without resources to free needs nothing)
        """Free the store's connections."""

    # ---- messages shared by the stores

    def _not_found(self, code: str) -> ClassNotFound:
        hours = max(1, round(self.ttl / 3600))
        return ClassNotFound(ngettext(
            "There is no class with the code {code}. Check the code on the projector: a class "
            "closes when the teacher ends it, or {n} hour after it started.",
            "There is no class with the code {code}. Check the code on the projector: a class "
            "closes when the teacher ends it, or {n} hours after it started.",
            hours).format(code=code, n=hours))

    def _full_message(self) -> str:
        return ngettext(
            "The server's classes are full: {n} class is running. Try again later, or end a "
            "class that is over.",
            "The server's classes are full: {n} classes are running. Try again later, or end a "
            "class that is over.", self.max_rooms).format(n=self.max_rooms)

    def _busy_message(self) -> str:
        minutes = max(1, round(self.empty_ttl / 60))
        wait = ngettext("{n} minute", "{n} minutes", minutes).format(n=minutes)
        return ngettext(
            "This browser already runs {n} class. End a class (or wait {wait}: a class that no "
            "student joined closes by itself), then start a new one.",
            "This browser already runs {n} classes. End a class (or wait {wait}: a class that "
            "no student joined closes by itself), then start a new one.",
            self.max_rooms_per_creator).format(n=self.max_rooms_per_creator, wait=wait)

    # ---- what a store implements

    @abstractmethod
    def _create(self, code: str, key_hash: str, salt: bytes, creator: str) -> bool:
        """Insert the room, living empty_ttl; False if the code is taken; ClassesFull when
        full; TooManyClasses when `creator` (a hash, "" for none) holds too many."""

    @abstractmethod
    def _join(self, code: str) -> None:
        """Mark the room joined: it expires ttl after its creation (ClassNotFound if gone)."""

    @abstractmethod
    def _keep_alive(self, code: str) -> None:
        """The teacher changed something: a room nobody joined lives empty_ttl from now (never
        past ttl after its creation)."""

    @abstractmethod
    def _salt(self, code: str) -> bytes: ...

    @abstractmethod
    def _stored_key_hash(self, code: str) -> str: ...

    @abstractmethod
    def _state(self, code: str) -> ClassState: ...

    @abstractmethod
    def _set_state(self, code: str, step: int, myth: int | None, controls: str) -> int: ...

    @abstractmethod
    def _reveal(self, code: str, question: str) -> int: ...

    @abstractmethod
    def _ask_again(self, code: str, question: str) -> int: ...

    @abstractmethod
    def _end(self, code: str) -> None: ...

    @abstractmethod
    def _answer(self, code: str, session_id: str, question: str, choice: str) -> bool:
        """Upsert the answer; False (and nothing written) when the question is revealed."""

    @abstractmethod
    def _my_answer(self, code: str, session_id: str, question: str) -> str | None: ...

    @abstractmethod
    def _answers(self, code: str, question: str) -> list[str]:
        """Every session's answer to the question: a list of choices."""


# ---------------------------------------------------------------- SQLite


def data_dir() -> Path:
    """The folder of the default SQLite store: $ALIBI_VIZ_DATA_DIR, else
    $XDG_STATE_HOME/alibi-viz (~/.local/state/alibi-viz)."""
    if os.environ.get(DATA_DIR):
        return Path(os.environ[DATA_DIR])
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "alibi-viz"


SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    code     TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,               -- sha256 of the teacher key
    salt     BLOB NOT NULL,               -- keys the sessions' HMAC
    expires  REAL NOT NULL,               -- clock() seconds
    step     INTEGER NOT NULL DEFAULT 0,
    myth     INTEGER,
    controls TEXT NOT NULL DEFAULT '{}',
    version  INTEGER NOT NULL DEFAULT 1,
    created  REAL NOT NULL DEFAULT 0,     -- clock() seconds
    joined   INTEGER NOT NULL DEFAULT 1,  -- 0 until a student joins (then it lives its ttl)
    creator  TEXT NOT NULL DEFAULT ''     -- sha256 of the creating session's id, or ''
);
CREATE INDEX IF NOT EXISTS rooms_expires ON rooms (expires);
CREATE TABLE IF NOT EXISTS questions (    -- only questions revealed or asked again
    code     TEXT NOT NULL,
    question TEXT NOT NULL,
    round    INTEGER NOT NULL DEFAULT 1,
    revealed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, question)
);
CREATE TABLE IF NOT EXISTS answers (
    code     TEXT NOT NULL,
    question TEXT NOT NULL,
    session  TEXT NOT NULL,               -- session_hash(salt, session id)
    choice   TEXT NOT NULL,
    PRIMARY KEY (code, question, session)
);
"""


class SQLiteStore(ClassStore):
    """The store in one SQLite file (stdlib sqlite3), shared by threads and processes.

    Each operation takes a connection of its own (from a small pool, so no two threads share
    one at a time) and runs in one transaction: writes take the write lock first (BEGIN
    IMMEDIATE), so concurrent answers queue on the busy timeout instead of failing, and each
    is counted once. WAL mode lets readers (the pollers) read while an answer is written.
    `clock` gives the time in seconds (tests pass a fake one)."""

    PURGE_EVERY = 60.0  # seconds between the purges that reads trigger
    POOL_SIZE = 8       # idle connections kept open

    def __init__(self, path: str | os.PathLike | None = None, *, ttl: float = DEFAULT_TTL,
                 max_rooms: int = DEFAULT_MAX_ROOMS, clock: Callable[[], float] = time.time,
                 busy_timeout: float = 10.0, empty_ttl: float = DEFAULT_EMPTY_TTL,
                 max_rooms_per_creator: int = DEFAULT_ROOMS_PER_CREATOR):
        super().__init__(ttl, max_rooms, empty_ttl, max_rooms_per_creator)
        self.path = Path(path) if path is not None else data_dir() / "class.sqlite3"
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._next_purge = -math.inf
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        try:
            if not self.path.parent.exists():
                self.path.parent.mkdir(mode=0o700, parents=True)
            # The file (and SQLite's -wal and -shm beside it, which copy its mode) is private.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            with self._connection() as conn:
                conn.execute("PRAGMA journal_mode=WAL")  # kept in the file
                conn.executescript(SCHEMA)
                self._add_columns(conn)
        except OSError as error:
            raise self._unavailable(error) from error

    @staticmethod
    def _add_columns(conn: sqlite3.Connection) -> None:
        """A file written before the rooms had these columns gets them (its rooms count as
        joined: they keep the expiry they were given)."""
        have = {row[1] for row in conn.execute("PRAGMA table_info(rooms)")}
        for column in ("created REAL NOT NULL DEFAULT 0", "joined INTEGER NOT NULL DEFAULT 1",
                       "creator TEXT NOT NULL DEFAULT ''"):
            if column.split()[0] not in have:
                with suppress(sqlite3.OperationalError):  # another process added it first
                    conn.execute(f"ALTER TABLE rooms ADD COLUMN {column}")

    def _unavailable(self, error: Exception) -> ClassStoreError:
        return ClassStoreError(_("The class store {where} cannot be used: {error}").format(
            where=self.path, error=error))

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread=False: a pooled connection serves one thread at a time, not always
        # the thread that opened it.
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                               check_same_thread=False)
        # NORMAL is safe with WAL: a killed process loses nothing; a power cut may lose the
        # last transactions, never the file.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA secure_delete=ON")  # a deleted answer is zeroed on disk too
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own for one operation, from the pool of idle ones. (Opening one
        per operation costs a checkpoint whenever no other connection is open: 5-10 ms.)"""
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            try:
                conn = self._connect()
            except sqlite3.Error as error:
                raise self._unavailable(error) from error
        try:
            yield conn
        except sqlite3.OperationalError as error:  # locked past the timeout, disk full, ...
            raise self._unavailable(error) from error
        finally:
            if conn.in_transaction or self._idle.qsize() >= self.POOL_SIZE:
                conn.close()
            else:
                self._idle.put(conn)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one snapshot of the file. Then, once a minute, a purge."""
        try:
            with self._connection() as conn:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
        finally:
            if self._clock() >= self._next_purge:
                with self._write():
                    pass

    @contextmanager
    def _write(self) -> Iterator[tuple[sqlite3.Connection, float]]:
        """A write transaction that first deletes the expired rooms; yields (connection, now).
        A ClassError raised inside commits what was written before it (the purge)."""
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            purged = 0
            try:
                now = self._clock()
                purged = self._purge(conn, now)
                yield conn, now
            except ClassError:
                conn.execute("COMMIT")
                raise
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                if purged and not conn.in_transaction:
                    self._erase_old_pages(conn)

    def _purge(self, conn: sqlite3.Connection, now: float) -> int:
        """Delete the expired rooms; returns how many."""
        expired = "SELECT code FROM rooms WHERE expires <= ?"
        conn.execute(f"DELETE FROM answers WHERE code IN ({expired})", (now,))
        conn.execute(f"DELETE FROM questions WHERE code IN ({expired})", (now,))
        deleted = conn.execute("DELETE FROM rooms WHERE expires <= ?", (now,)).rowcount
        self._next_purge = now + self.PURGE_EVERY
        return deleted

    def _erase_old_pages(self, conn: sqlite3.Connection) -> None:
        """After deleting a room: copy the WAL into the file and empty it, so that no old page
        keeps the room's rows (secure_delete zeroes them in the file). Best effort: a reader
        of another process may keep the WAL a moment longer, until the next checkpoint."""
        with suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _room(self, conn: sqlite3.Connection, code: str, columns: str) -> tuple:
        """The live room's columns, or ClassNotFound."""
        now = self._clock()
        row = conn.execute(f"SELECT {columns} FROM rooms WHERE code = ? AND expires > ?",
                           (code, now)).fetchone()
        if row is None:
            raise self._not_found(code)
        return row

    def _read_room(self, code: str, columns: str) -> tuple:
        with self._read() as conn:
            return self._room(conn, code, columns)

    def _create(self, code: str, key_hash: str, salt: bytes, creator: str) -> bool:
        with self._write() as (conn, now):
            if conn.execute("SELECT count(*) FROM rooms").fetchone()[0] >= self.max_rooms:
                raise ClassesFull(self._full_message())
            if creator and conn.execute("SELECT count(*) FROM rooms WHERE creator = ?",
                                        (creator,)).fetchone()[0] >= self.max_rooms_per_creator:
                raise TooManyClasses(self._busy_message())
            try:
                conn.execute("INSERT INTO rooms (code, key_hash, salt, expires, created, joined, "
                             "creator) VALUES (?, ?, ?, ?, ?, 0, ?)",
                             (code, key_hash, salt, now + self.empty_ttl, now, creator))
            except sqlite3.IntegrityError:
                return False
        return True

    def _join(self, code: str) -> None:
        with self._write() as (conn, _now):
            self._room(conn, code, "1")
            conn.execute("UPDATE rooms SET joined = 1, expires = created + ? "
                         "WHERE code = ? AND joined = 0", (self.ttl, code))

    def _keep_alive(self, code: str) -> None:
        with self._write() as (conn, now):
            conn.execute("UPDATE rooms SET expires = min(created + ?, max(expires, ?)) "
                         "WHERE code = ? AND joined = 0 AND expires > ?",
                         (self.ttl, now + self.empty_ttl, code, now))

    def _salt(self, code: str) -> bytes:
        return self._read_room(code, "salt")[0]

    def _stored_key_hash(self, code: str) -> str:
        return self._read_room(code, "key_hash")[0]

    def _state(self, code: str) -> ClassState:
        with self._read() as conn:
            step, myth, controls, version, expires = self._room(
                conn, code, "step, myth, controls, version, expires")
            questions = conn.execute("SELECT question, round, revealed FROM questions "
                                     "WHERE code = ?", (code,)).fetchall()
        return ClassState(code, step, myth, json.loads(controls),
                          frozenset(q for q, _r, shown in questions if shown),
                          {q: r for q, r, _s in questions if r > 1}, version,
                          max(0.0, expires - self._clock()))

    def _bump(self, conn: sqlite3.Connection, code: str) -> int:
        return conn.execute("UPDATE rooms SET version = version + 1 WHERE code = ? "
                            "RETURNING version", (code,)).fetchone()[0]

    def _set_state(self, code: str, step: int, myth: int | None, controls: str) -> int:
        with self._write() as (conn, _now):
            self._room(conn, code, "1")
            conn.execute("UPDATE rooms SET step = ?, myth = ?, controls = ? WHERE code = ?",
                         (step, myth, controls, code))
            return self._bump(conn, code)

    def _reveal(self, code: str, question: str) -> int:
        with self._write() as (conn, _now):
            self._room(conn, code, "1")
            conn.execute("INSERT INTO questions (code, question, revealed) VALUES (?, ?, 1) "
                         "ON CONFLICT DO UPDATE SET revealed = 1", (code, question))
            return self._bump(conn, code)

    def _ask_again(self, code: str, question: str) -> int:
        with self._write() as (conn, _now):
            self._room(conn, code, "1")
            conn.execute("DELETE FROM answers WHERE code = ? AND question = ?", (code, question))
            (round_,) = conn.execute(
                "INSERT INTO questions (code, question, round) VALUES (?, ?, 2) "
                "ON CONFLICT DO UPDATE SET round = round + 1, revealed = 0 RETURNING round",
                (code, question)).fetchone()
            self._bump(conn, code)
            return round_

    def _end(self, code: str) -> None:
        with self._write() as (conn, _now):
            self._room(conn, code, "1")
            for table in ("answers", "questions", "rooms"):
                conn.execute(f"DELETE FROM {table} WHERE code = ?", (code,))
        with self._connection() as conn:
            self._erase_old_pages(conn)

    def _answer(self, code: str, session_id: str, question: str, choice: str) -> bool:
        with self._write() as (conn, _now):
            (salt,) = self._room(conn, code, "salt")
            shown = conn.execute("SELECT revealed FROM questions WHERE code = ? AND question = ?",
                                 (code, question)).fetchone()
            if shown and shown[0]:
                return False
            conn.execute("INSERT INTO answers (code, question, session, choice) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET choice = excluded.choice",
                         (code, question, session_hash(salt, session_id), choice))
        return True

    def _my_answer(self, code: str, session_id: str, question: str) -> str | None:
        with self._read() as conn:
            (salt,) = self._room(conn, code, "salt")
            row = conn.execute("SELECT choice FROM answers WHERE code = ? AND question = ? "
                               "AND session = ?",
                               (code, question, session_hash(salt, session_id))).fetchone()
        return row[0] if row else None

    def _answers(self, code: str, question: str) -> list[str]:
        with self._read() as conn:
            self._room(conn, code, "1")
            return [c for (c,) in conn.execute(
                "SELECT choice FROM answers WHERE code = ? AND question = ?", (code, question))]


# ---------------------------------------------------------------- Redis

# Each script runs atomically in Redis. Every key of a room expires with the room: a key made
# later (an answers hash, the revealed set) gets the room's remaining time (PTTL).
# KEYS: rooms, room, the creator's set of room codes (or a dummy key for no creator);
# ARGV: code, empty ttl ms, max rooms, key hash, salt, ttl ms, max rooms per creator,
# the room key prefix, creator ('' for none).
_CREATE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('EXISTS', KEYS[2]) == 1 then return 'taken' end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
if ARGV[9] ~= '' then
  for _, code in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    if redis.call('EXISTS', ARGV[8] .. code) == 0 then redis.call('SREM', KEYS[3], code) end
  end
  if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[7]) then return 'busy' end
  redis.call('SADD', KEYS[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
redis.call('HSET', KEYS[2], 'key', ARGV[4], 'salt', ARGV[5], 'step', '0', 'myth', '',
           'controls', '{}', 'version', '1', 'created', now, 'joined', '0', 'creator', ARGV[9])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 'ok'
"""
# A room nobody joined: joining (ARGV[4] = 1) makes it live ttl from its creation; a teacher's
# change (0) makes it live empty ttl from now, never past that. Every key of the room follows.
# KEYS: room, revealed, rounds, questions, rooms; ARGV: code, ttl ms, empty ttl ms, joining,
# answers key prefix.
_KEEP = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('HGET', KEYS[1], 'joined') ~= '0' then return 'ok' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = tonumber(redis.call('HGET', KEYS[1], 'created')) + tonumber(ARGV[2]) - now
local left = last
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], 'joined', '1')
else
  left = math.min(last, math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[3])))
end
if left < 1 then left = 1 end
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}) do redis.call('PEXPIRE', key, left) end
for _, question in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  redis.call('PEXPIRE', ARGV[5] .. question, left)
end
redis.call('ZADD', KEYS[5], now + left, ARGV[1])
return 'ok'
"""
_SET_STATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'step', ARGV[1], 'myth', ARGV[2], 'controls', ARGV[3])
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
_REVEAL = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return false end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ttl)
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
# A question never asked again is in round 1 (no field): its first ask-again makes round 2.
_ASK_AGAIN = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return false end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[4])
local round = redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
if round == 1 then round = redis.call('HINCRBY', KEYS[3], ARGV[1], 1) end
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('HINCRBY', KEYS[1], 'version', 1)
return round
"""
_END = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for _, question in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  redis.call('DEL', ARGV[2] .. question)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
return 1
"""
_ANSWER = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return 'gone' end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 'closed' end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('PEXPIRE', KEYS[4], ttl)
return 'ok'
"""


class RedisStore(ClassStore):
    """The store in Redis, for replicas on several machines (the `redis` client).

    Keys, under `prefix`: `rooms` (a sorted set: code -> expiry in ms, the room limit) and, per
    room CODE, `CODE` (a hash: key hash, salt, step, myth, controls, version), `CODE:revealed`
    (a set of questions), `CODE:rounds` (a hash: question -> round), `CODE:questions` (the
    questions answered) and `CODE:answers:QUESTION` (a hash: session hash -> choice, so one
    session counts once). Every room key expires with the room (Redis's own clock)."""

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, ttl: float = DEFAULT_TTL,
                 max_rooms: int = DEFAULT_MAX_ROOMS, prefix: str = "alibi-viz:class:",
                 empty_ttl: float = DEFAULT_EMPTY_TTL,
                 max_rooms_per_creator: int = DEFAULT_ROOMS_PER_CREATOR):
        super().__init__(ttl, max_rooms, empty_ttl, max_rooms_per_creator)
        import redis  # only a Redis deployment pays for importing the client

        self._errors = redis.RedisError
        self.url, self.prefix = url, prefix
        try:
            self._redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10,
                                               socket_connect_timeout=5)
        except ValueError as error:
            raise bad_setting(url) from error
        scripts = {"create": _CREATE, "set_state": _SET_STATE, "reveal": _REVEAL,
                   "ask_again": _ASK_AGAIN, "end": _END, "answer": _ANSWER, "keep": _KEEP}
        self._scripts = {name: self._redis.register_script(text) for name, text in scripts.items()}

    def close(self) -> None:
        self._redis.close()

    def _keys(self, code: str) -> dict[str, str]:
        room = self.prefix + code
        return {"room": room, "revealed": room + ":revealed", "rounds": room + ":rounds",
                "questions": room + ":questions", "answers": room + ":answers:"}

    @contextmanager
    def _talking(self) -> Iterator[None]:
        try:
            yield
        except self._errors as error:
            where = re.sub(r"//[^@/]*@", "//", self.url)  # never show a password
            raise ClassStoreError(_("The class store {where} cannot be used: {error}").format(
                where=where, error=error)) from error

    def _run(self, name: str, keys: list[str], args: list) -> object:
        with self._talking():
            return self._scripts[name](keys=keys, args=args)

    def _field(self, code: str, name: str) -> str:
        with self._talking():
            value = self._redis.hget(self._keys(code)["room"], name)
        if value is None:
            raise self._not_found(code)
        return value

    def _ms(self, seconds: float) -> int:
        return max(1, round(seconds * 1000))

    def _create(self, code: str, key_hash: str, salt: bytes, creator: str) -> bool:
        made_by = self.prefix + "creator:" + (creator or "none")
        outcome = self._run("create", [self.prefix + "rooms", self._keys(code)["room"], made_by],
                            [code, self._ms(self.empty_ttl), self.max_rooms, key_hash,
                             salt.hex(), self._ms(self.ttl), self.max_rooms_per_creator,
                             self.prefix, creator])
        if outcome == "full":
            raise ClassesFull(self._full_message())
        if outcome == "busy":
            raise TooManyClasses(self._busy_message())
        return outcome == "ok"

    def _keep(self, code: str, joining: bool) -> None:
        keys = self._keys(code)
        outcome = self._run("keep", [keys["room"], keys["revealed"], keys["rounds"],
                                     keys["questions"], self.prefix + "rooms"],
                            [code, self._ms(self.ttl), self._ms(self.empty_ttl),
                             int(joining), keys["answers"]])
        if outcome == "gone":
            raise self._not_found(code)

    def _join(self, code: str) -> None:
        self._keep(code, True)

    def _keep_alive(self, code: str) -> None:
        self._keep(code, False)

    def _salt(self, code: str) -> bytes:
        return bytes.fromhex(self._field(code, "salt"))

    def _stored_key_hash(self, code: str) -> str:
        return self._field(code, "key")

    def _state(self, code: str) -> ClassState:
        keys = self._keys(code)
        with self._talking():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hgetall(keys["room"]).smembers(keys["revealed"]).hgetall(keys["rounds"])
            room, revealed, rounds, ttl = pipe.pttl(keys["room"]).execute()
        if not room:
            raise self._not_found(code)
        return ClassState(code, int(room["step"]), int(room["myth"]) if room["myth"] else None,
                          json.loads(room["controls"]), frozenset(revealed),
                          {q: int(r) for q, r in rounds.items()}, int(room["version"]),
                          max(0.0, ttl / 1000))

    def _checked(self, code: str, value: object) -> int:
        if value is None:
            raise self._not_found(code)
        return int(value)

    def _set_state(self, code: str, step: int, myth: int | None, controls: str) -> int:
        value = self._run("set_state", [self._keys(code)["room"]],
                          [step, "" if myth is None else myth, controls])
        return self._checked(code, value)

    def _reveal(self, code: str, question: str) -> int:
        keys = self._keys(code)
        value = self._run("reveal", [keys["room"], keys["revealed"]], [question])
        return self._checked(code, value)

    def _ask_again(self, code: str, question: str) -> int:
        keys = self._keys(code)
        value = self._run("ask_again", [keys["room"], keys["revealed"], keys["rounds"],
                                        keys["answers"] + question], [question])
        return self._checked(code, value)

    def _end(self, code: str) -> None:
        keys = self._keys(code)
        if not self._run("end", [keys["room"], keys["revealed"], keys["rounds"], keys["questions"],
                                 self.prefix + "rooms"], [code, keys["answers"]]):
            raise self._not_found(code)

    def _answer(self, code: str, session_id: str, question: str, choice: str) -> bool:
        keys = self._keys(code)
        outcome = self._run("answer", [keys["room"], keys["revealed"], keys["answers"] + question,
                                       keys["questions"]],
                            [question, session_hash(self._salt(code), session_id), choice])
        if outcome == "gone":
            raise self._not_found(code)
        return outcome == "ok"

    def _my_answer(self, code: str, session_id: str, question: str) -> str | None:
        hashed = session_hash(self._salt(code), session_id)
        with self._talking():
            return self._redis.hget(self._keys(code)["answers"] + question, hashed)

    def _answers(self, code: str, question: str) -> list[str]:
        keys = self._keys(code)
        with self._talking():
            pipe = self._redis.pipeline(transaction=True)
            live, answers = pipe.exists(keys["room"]).hvals(keys["answers"] + question).execute()
        if not live:
            raise self._not_found(code)
        return answers


# ---------------------------------------------------------------- choosing one


def bad_setting(setting: str) -> ClassStoreError:
    return ClassStoreError(_("{name}={setting} is not a class store: use "
                             "sqlite:///absolute/path/to/file.sqlite3 or redis://host:port/db, or "
                             "leave it unset for the SQLite file in the data folder.").format(
                                 name=SETTING, setting=re.sub(r"//[^@/]*@", "//", setting)))


def open_store(setting: str | None = None, **options) -> ClassStore:
    """The store `setting` names, by default the environment's ALIBI_VIZ_CLASS_STORE: unset or
    empty, the SQLite file in the data folder; `sqlite:///path`, that file; `redis://...` or
    `rediss://...`, Redis. `options` (ttl, max_rooms, ...) go to the store."""
    if setting is None:
        setting = os.environ.get(SETTING, "")
    setting = setting.strip()
    if not setting:
        return SQLiteStore(None, **options)
    if setting.startswith("sqlite:///") and len(setting) > len("sqlite:///"):
        return SQLiteStore(setting[len("sqlite://"):], **options)
    if setting.startswith(("redis://", "rediss://")):
        return RedisStore(setting, **options)
    raise bad_setting(setting)
