"""The Lesson's class session (issue 42): students' screens follow the teacher's step, and the
projector shows what the whole class predicted before the answer is revealed.

Who is who is in the URL, read once when a session first opens the Lesson:
- `/lesson?class=new` (or the sidebar's "Start a class"): the teacher creates a room; the page's
  URL becomes `?class=CODE`, the very link the students open. The teacher key is in the
  teacher's session and in a session cookie of the teacher's browser (`TEACHER_COOKIE`), never
  in the address bar (what a teacher copies to share, and what the room reads on the
  projector) and never drawn: a reload or another tab of that browser is the teacher again,
  any other browser with the same URL is a student.
- `/lesson?class=CODE&key=KEY`: the teacher on another browser (the key is dropped from the
  address bar at once); a wrong key is told so, and the page joins as a student.
- `/lesson?class=CODE`: a student. The page follows the teacher's step, myth and figure controls
  (`follow`: the server reruns it when the room's version changes, `class_watch`); a student
  who moves elsewhere looks around until "Back to the class". A student who moves a control of
  the step keeps following: the question stays the class's (asked with the class's values,
  `class_value`), and only the student's own figure changes, which the page says.

Each question of the lesson (`question`, called by the page's `ask`) takes one answer per
browser session (a random id in a cookie that ends with the browser's session, so a reload or a
failover keeps it; the store keeps only its HMAC) while the
teacher has not revealed it. The projector shows the live count; on reveal, the class's answers
beside the computed one. Everything stored is in `alibi_viz_app.class_store` (what, and for how long);
every refusal is a `ClassError` whose message is shown as it is, in the page's language.

Only the teacher's session moves the class: every teacher operation of the store checks the key.
"""

from __future__ import annotations

import functools
import html
import io
import json
import os
import re
import secrets
import time
import zlib
from urllib.parse import urlsplit

import segno
import streamlit as st

from alibi_viz import i18n
from alibi_viz.figures.render import figure_spec
from alibi_viz.i18n import N_, _, ngettext
from alibi_viz_app import class_watch, ui
from alibi_viz_app.class_chart import answer_distribution_figure
from alibi_viz_app.class_store import SETTING, ClassError, ClassNotFound, ClassState, open_store
from alibi_viz_app.lesson_cursor import split_answer

COOKIE = "alibi_viz_class"  # the browser's class id (`session_id`); nothing else is in it
TEACHER_COOKIE = "alibi_viz_teacher"  # "CODE.KEY" in the teacher's browser only, for a reload
POLL_S = 1.0        # where the server cannot rerun a student's page, the page asks this often
COUNT_POLL_S = 1.5  # the projector's "N answered" is read this often
TOUCH_S = 60.0      # ... and an open projector keeps a room nobody joined yet this often
# The Lesson page's own keys (app_pages/lesson.py): the question a step asked and the one whose
# answer is shown. The teacher's reveal sets both, so the clicker's next moves on after it.
ASKED, REVEALED = "ls_asked_", "ls_revealed_"
# The teacher's controls that shape a step's figure, sent to the students with the step.
CONTROLS = ("ls_s1_slope", "ls_s2_len", "ls_s3_heads", "ls_s4_len", "ls_layer", "ls_head")
# The controls a step's question depends on: another value asks another question.
QUESTION_CONTROLS = {1: ("ls_s1_slope",), 3: ("ls_s3_heads",), 5: ("ls_layer", "ls_head")}
# A step's choices: (stored value, label); the step names the right one (`question`'s `right`).
# Steps 4 and 8 pass choices computed from their data (`question`'s `options`). Step 7's
# stored values are results.reach.PAST_VERDICTS' keys, which its right choice is computed as.
CHOICES = {
    1: (("more", N_("More")), ("less", N_("Less")), ("same", N_("The same"))),
    2: (("0,-5", ("0", "−5")), ("0,-10", ("0", "−10")), ("-5,0", ("−5", "0")),
        ("1,-5", ("1", "−5"))),
    3: (("yes", N_("Yes")), ("no", N_("No"))),
    5: (("further", N_("Further")), ("same", N_("About as far")), ("nearer", N_("Nearer"))),
    6: (("down,up", N_("ALiBi down, sinusoidal up")), ("down,down", N_("Both down")),
        ("up,up", N_("Both up")), ("up,down", N_("ALiBi up, sinusoidal down"))),
    7: (("lowers", N_("Lowers it, detectably")), ("same", N_("No change the tests can detect")),
        ("raises", N_("Raises it, detectably"))),
}
HEADS = 8  # step 4 asks which of the 8 heads looks furthest back
COOKIE_JS = "<script>document.cookie = '%s=%s; path=/; SameSite=Strict';</script>"
# On a projector, a reveal scrolls the page once (per question and round) so that the question,
# its answer, the class's chart and the step's figure under them fill the screen: the step's
# text and controls above them go out of sight, and the teacher never needs the mouse. It
# waits for the step's figure, since until it is drawn the page may be too short to scroll.
SCROLL_JS = """<script>(() => {
  const id = %s, seen = (window.__clsScrolled = window.__clsScrolled || {});
  if (seen[id]) return;
  seen[id] = true;
  let tries = 0;
  const go = () => {
    const box = document.querySelector('.st-key-cls_revealed');
    const fig = document.querySelector('[class*="st-key-ls_fig_"] .main-svg');
    if ((!box || !fig) && tries++ < 100) { setTimeout(go, 100); return; }
    if (box) box.scrollIntoView({block: 'start'});
  };
  go();
})();</script>"""
FORGET_COOKIE_JS = "<script>document.cookie = '%s=; path=/; max-age=0; SameSite=Strict';</script>"
CSS = """<style>
.cls-code { font-size: 64px; font-weight: 700; letter-spacing: 0.12em; line-height: 1.1; }
.cls-link { font-size: 22px; word-break: break-all; }
.cls-count { font-size: 30px; font-weight: 700; }
.cls-line { font-size: 18px; color: #444; }
.st-key-cls_revealed { scroll-margin-top: 60px; }  /* below Streamlit's header */
</style>"""


# ----------------------------------------------------------------------------- the store

@st.cache_resource(show_spinner=False)
def _open(setting: str):
    return open_store(setting)


def store():
    """The class store this server uses (ALIBI_VIZ_CLASS_STORE; one per setting and process)."""
    return _open(os.environ.get(SETTING, ""))


@st.cache_resource(show_spinner=False)
def _watch(setting: str) -> class_watch.Watcher:
    return class_watch.Watcher(_open(setting))


def watcher() -> class_watch.Watcher:
    """This process's students' pages, rerun when their class moves (class_watch)."""
    return _watch(os.environ.get(SETTING, ""))


def session_id() -> str:
    """This browser's random id for the class: its answers count once per question. Kept in a
    cookie for the browser's session (`COOKIE`, no expiry date: gone when the browser closes),
    so a reload, or a replica's failover to another, is the same student with the same
    answers; the store keeps only its HMAC."""
    ss = st.session_state
    if "cls_session" not in ss:
        given = cookies().get(COOKIE, "")
        if re.fullmatch(r"[A-Za-z0-9_-]{24,64}", given):
            ss["cls_session"] = given
        else:
            ss["cls_session"] = secrets.token_urlsafe(18)
            ss["cls_set_cookie"] = True  # written by the next `panel`
    return ss["cls_session"]


def code() -> str | None:
    return st.session_state.get("cls_code")


def teacher_key() -> str | None:
    """The teacher key, in the teacher's session only (checked against the store on entry)."""
    return st.session_state.get("cls_key")


def say(message: str) -> None:
    """Keep a message for this run's class panel (a callback cannot draw)."""
    st.session_state["cls_message"] = message


def in_page_language(callback):
    """A widget's callback runs before main.py sets the run's language: this sets it first,
    so that what the callback says (`say`) is in the page's language."""
    @functools.wraps(callback)
    def run(*args, **kwargs):
        i18n.set_language(st.session_state.get(ui.LANG_KEY, i18n.DEFAULT_LANGUAGE))
        return callback(*args, **kwargs)
    return run


def cookies() -> dict:
    """The cookies the browser sent when this session opened."""
    return dict(getattr(st.context, "cookies", None) or {})


def following() -> bool:
    """Whether this session is a student who follows the class's step now."""
    return bool(code()) and not teacher_key() and st.session_state.get("cls_follow", True)


def class_value(key: str, local):
    """The class's value of figure control `key` on a student's page (what the class's
    question is asked with), else `local`, this page's own. A control the teacher's page has
    not sent is the page's own too."""
    state = st.session_state.get("cls_state")
    if not code() or teacher_key() or state is None:
        return local
    value = state.controls.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else local


def own_figure_note(step: int) -> None:
    """On a student's page whose step controls differ from the class's: say that the figure is
    the student's own and the question the class's."""
    keys = QUESTION_CONTROLS.get(step, ())
    if any(class_value(key, st.session_state.get(key)) != st.session_state.get(key)
           for key in keys):
        st.info(_("Your figure uses your own values; the question is the class's, asked with "
                  "the teacher's values."), icon=":material/tune:")


def leave() -> None:
    for key in ("cls_code", "cls_key", "cls_state", "cls_version", "cls_at", "cls_follow",
                "cls_published", "cls_join", "cls_sent", "cls_join_small", "cls_join_step"):
        st.session_state.pop(key, None)


# ----------------------------------------------------------------------------- entering

@in_page_language
def start() -> None:
    """Create a room; this session is its teacher (the sidebar's button, or ?class=new). A
    browser session holds a few live rooms at most (the store's `max_rooms_per_creator`)."""
    try:
        room = store().create_room(creator=session_id())
    except ClassError as exc:
        say(str(exc))
        return
    leave()
    st.session_state.update(cls_code=room.code, cls_key=room.key, cls_join=True,
                            cls_teacher_cookie=f"{room.code}.{room.key}")


def cookie_key(room: str) -> str | None:
    """The teacher key that this browser's teacher cookie holds for `room`, if any."""
    held = cookies().get(TEACHER_COOKIE, "")
    given, _dot, key = held.partition(".")
    return key if given == room and key else None


def enter_from_url() -> None:
    """On the session's first visit of the Lesson: ?class=new, ?class=CODE&key=KEY (teacher),
    ?class=CODE (student). A student's first visit opens at the teacher's step, as a projector
    (present=1) unless the URL says otherwise."""
    if st.session_state.get("cls_entered"):
        return
    st.session_state["cls_entered"] = True
    raw = st.query_params.get("class")
    if raw is None:
        return
    if raw.strip().lower() == "new":
        start()
        return
    try:
        room = store().look_up(raw)
        key = st.query_params.get("key")
        if key is not None and store().is_teacher(room, key):
            st.session_state.update(cls_code=room, cls_key=key,
                                    cls_teacher_cookie=f"{room}.{key}")
            return
        if key is None and (held := cookie_key(room)) and store().is_teacher(room, held):
            st.session_state.update(cls_code=room, cls_key=held)  # the teacher's reload
            return
        if key is not None:
            say(_("Only the teacher can do that: this page's link has no valid teacher key for "
                  "class {code}.").format(code=room) + " " + _("You follow the class as a student."))
        store().join(room)
        state = store().state(room)
    except ClassError as exc:
        say(str(exc))
        return
    st.session_state.update(cls_code=room, cls_follow=True)
    if "present" not in st.query_params:
        st.query_params["present"] = "1"
    if state.step >= 1:  # the page's controls are seeded from the URL after this
        st.query_params["step"] = str(state.step)


# ----------------------------------------------------------------------------- following

def apply(state: ClassState, before: ClassState | None = None) -> None:
    """Put this session where the teacher is: step, myth and the figure controls. With
    `before`, the class's state this page was last put in, on the same step: only the
    controls the teacher changed since, so a student's own value (a slider moved to explore)
    stays until the teacher moves that control (a reveal changes none)."""
    if state.step < 1:  # the teacher's page has not said where it is yet
        return
    values = {"ls_step": state.step, "ls_myth": state.myth or 0,
              "ls_myth_shown": bool(state.controls.get("myth_shown"))}
    same_step = before is not None and before.step == state.step
    for key in CONTROLS:
        value = state.controls.get(key)
        if same_step and before.controls.get(key) == value:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            values[key] = value
    ss = st.session_state
    # Until the browser has drawn this run, its next request (a click, or a poll's) may
    # still carry what its widgets showed before: (before, now) for each control changed
    # here, so that `settle` tells such a stale value from the student's own change. The
    # step, the myth and its reveal are no widgets' values (the step list's key holds its
    # step), so no stale request can change them.
    ss["cls_sent"] = {key: (ss.get(key), value) for key, value in values.items()
                      if key in CONTROLS and ss.get(key) != value}
    ss.update(values)
    ss["cls_at"] = state.step


def settle() -> bool:
    """Whether the student still follows the class (is on the step the class was last put
    on). A control whose value is the one from before the last `apply` came back from a
    browser that had not drawn that run yet (a slow page, a busy server): it is set back to
    the teacher's, not taken as the student's own change."""
    ss = st.session_state
    sent = ss.get("cls_sent") or {}
    for key, (before, now) in list(sent.items()):
        if ss.get(key) == before:
            ss[key] = now  # sent back by a browser still showing the value before
        else:
            del sent[key]  # drawn (or changed by the student): from now on a change is theirs
    at = ss.get("cls_at")
    return at is None or ss.get("ls_step", at) == at


@in_page_language
def back_to_class() -> None:
    st.session_state["cls_follow"] = True
    # the next run applies the teacher's whole state
    for key in ("cls_version", "cls_at", "cls_sent", "cls_state"):
        st.session_state.pop(key, None)


def follow() -> None:
    """First thing on the Lesson page, before its controls are drawn: enter a class from the
    URL, and on a student's page follow the teacher (step, myth, figure controls) unless the
    student moved elsewhere. The server reruns a student's page when the teacher changed
    something (class_watch); where it cannot, a fragment polls the room's version every
    POLL_S seconds."""
    enter_from_url()
    room = code()
    if not room or teacher_key():
        away()
        return
    try:
        state = store().state(room)
    except ClassNotFound as exc:  # a class this page was following: ended, or expired
        seen = st.session_state.get("cls_state")
        # a class that had more than a minute to live when last read was ended by its teacher
        left = (seen.expires_in - (time.time() - st.session_state.get("cls_state_at", 0.0))
                if seen is not None else 0.0)
        say(_("The teacher ended the class.") if left > 60 else str(exc))
        st.session_state["cls_ended"] = True
        leave()
        away()
        return
    except ClassError as exc:
        say(str(exc))
        leave()
        away()
        return
    following = st.session_state.get("cls_follow", True)
    if following and not settle():
        following = False  # the student moved: looking around until "Back to the class"
    if following and state.version != st.session_state.get("cls_version"):
        apply(state, st.session_state.get("cls_state"))
    st.session_state.update(cls_follow=following, cls_version=state.version, cls_state=state,
                            cls_state_at=time.time(), cls_watched=True)
    session_id()  # read from the browser's cookie, or made now (and written by `panel`)
    if class_watch.can_rerun(class_watch.current_session()):
        watcher().follow(room, state.version)  # the server reruns this page when the class moves
    else:
        with st.sidebar:  # a server that cannot: the browser asks (class_watch says why)
            poll(room, state.version)


def away() -> None:
    """This session follows no class on this page (another page than the Lesson, a teacher, a
    class left): the server stops rerunning it when the class moves."""
    if st.session_state.pop("cls_watched", False):
        watcher().forget()


@st.fragment(run_every=POLL_S)
def poll(room: str, version: int) -> None:
    """Rerun the page when the teacher changed something (or the class is gone: the page then
    says why). Costs one read of the store's room row per student per POLL_S."""
    try:
        changed = store().state(room).version != version
    except ClassError:
        changed = True
    if changed:
        st.rerun()


def url_values() -> dict:
    """What the class adds to the page's URL: the code (never the teacher key: the address
    bar is what a teacher shares and what the room reads on the projector)."""
    return {"class": code()}


# ----------------------------------------------------------------------------- the panel

def join_link(room: str) -> str:
    """The link students open: this server's Lesson page with the class code, absolute as the
    teacher's browser sees the server when Streamlit knows it, else relative."""
    url = getattr(st.context, "url", None) or ""
    parts = urlsplit(url)
    path = parts.path if parts.path.rstrip("/").endswith("lesson") else "/lesson"
    base = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    return f"{base}{path}?class={room}"


def qr_png(link: str) -> bytes:
    """The join link as a QR code (segno, drawn here: no service is asked), a PNG."""
    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=8, border=2)
    return out.getvalue()


def join_line(room: str) -> None:
    """After the first step: the code and the link on one line, for latecomers."""
    label = html.escape(_("Join the class"))
    st.html(f'<div class="cls-line">{label}: <b>{room}</b> · '
            f'{html.escape(join_link(room))}</div>')


def join_panel(room: str) -> None:
    """For the projector: the code in large letters, the link and its QR code (never the key)."""
    link = join_link(room)
    with st.container(border=True, key="cls_join_panel"):
        left, right = st.columns([3, 2], vertical_alignment="center")
        left.markdown(_("**Join the class:** scan the code, or open the link."))
        left.html(f'<div class="cls-code">{room}</div><div class="cls-link">{link}</div>')
        left.button(_("Hide the join link"), key="cls_hide_join",
                    on_click=lambda: st.session_state.__setitem__("cls_join", False))
        right.image(qr_png(link), width=230)


@in_page_language
def end_class() -> None:
    try:
        store().end(code(), teacher_key())
    except ClassError as exc:
        say(str(exc))
        return
    watcher().moved(code(), -1)  # its students' pages say that it ended
    leave()
    st.session_state["cls_forget_teacher"] = True  # the teacher cookie goes with the class
    say(_("The class has ended: its answers are deleted."))


def publish(step: int) -> None:
    """The teacher's page tells the store where it is, when that changed."""
    ss = st.session_state
    controls = {key: ss[key] for key in CONTROLS
                if isinstance(ss.get(key), int | float) and not isinstance(ss.get(key), bool)}
    controls["myth_shown"] = bool(ss.get("ls_myth_shown"))
    myth = int(ss.get("ls_myth", 0))
    wanted = json.dumps([step, myth, controls], sort_keys=True)
    if wanted != ss.get("cls_published"):
        version = store().set_state(code(), teacher_key(), step=step, myth=myth,
                                    controls=controls)
        watcher().moved(code(), version)  # this server's students now; the others' watchers
        ss["cls_published"] = wanted        # within class_watch.WATCH_S


def panel(step: int, present: bool) -> None:
    """The class in the sidebar (start, join link, end; or the class a student follows), the
    teacher's state sent to the store, the join panel on the teacher's page, and on a student's
    page that looks around the way back to the class."""
    st.html(CSS)
    if message := st.session_state.pop("cls_message", None):
        if st.session_state.pop("cls_ended", False):
            st.toast(message, icon=":material/door_open:")  # seen wherever the page is scrolled
        st.error(message)
    room = code()
    if room and teacher_key() and not st.session_state.get("cls_join_small"):
        # Once the teacher moves on from the step the class started on, the join panel
        # shrinks to one line (set before its toggle is drawn), once: the toggle brings it
        # back whole.
        if st.session_state.setdefault("cls_join_step", step) != step:
            st.session_state.update(cls_join=False, cls_join_small=True)
    with st.sidebar:  # always drawn: a phone's settings popover runs no script until opened
        if room and st.session_state.pop("cls_set_cookie", False):
            st.html(COOKIE_JS % (COOKIE, session_id()), unsafe_allow_javascript=True)
        if held := st.session_state.pop("cls_teacher_cookie", None):
            st.html(COOKIE_JS % (TEACHER_COOKIE, held), unsafe_allow_javascript=True)
        if st.session_state.pop("cls_forget_teacher", False):
            st.html(FORGET_COOKIE_JS % TEACHER_COOKIE, unsafe_allow_javascript=True)
    with ui.settings():
        st.subheader(_("Class"))
        if not room:
            st.button(_("Start a class"), key="cls_start", on_click=start, icon=":material/groups:",
                      help=_("Students open a link (or scan a QR code) and their screens follow "
                             "your steps; each question collects their answers, shown when you "
                             "reveal it. Nothing personal is stored."))
        elif teacher_key():
            st.markdown(_("You teach class **{code}**.").format(code=room))
            st.toggle(_("Show the join link"), key="cls_join")
            st.button(_("End the class"), key="cls_end", on_click=end_class,
                      help=_("Deletes the class and all its answers."))
        else:
            st.markdown(_("You follow class **{code}**.").format(code=room))
            st.button(_("Leave the class"), key="cls_leave", on_click=in_page_language(leave))
    if not room:
        return
    if teacher_key():
        try:
            publish(step)
        except ClassError as exc:
            st.error(str(exc))
            return
        if st.session_state.get("cls_join"):
            join_panel(room)
        else:
            join_line(room)
        return
    state = st.session_state.get("cls_state")
    if state is not None and not st.session_state.get("cls_follow", True) and state.step >= 1:
        info, back = st.columns([3, 1], vertical_alignment="center")
        info.info(_("The class is on step {step}.").format(step=state.step))
        back.button(_("Back to the class"), key="cls_back", on_click=back_to_class,
                    type="primary", width="stretch")


# ----------------------------------------------------------------------------- questions

def choices(step: int) -> list[tuple[str, str]]:
    """The step's choices as (stored value, label in the page's language); [] when its question
    takes no vote (a discussion: the teacher reveals)."""
    if step == 4:
        return [(f"h{h}", _("Head {head}").format(head=h)) for h in range(1, HEADS + 1)]
    out = []
    for value, label in CHOICES.get(step, ()):
        if isinstance(label, tuple):  # two numbers: the diagonal's bias and 10 tokens back
            label = _("{diagonal} and {back}").format(diagonal=label[0], back=label[1])
        else:
            label = _(label)
        out.append((value, label))
    return out


def question_id(step: int) -> str:
    """The question's name in the store: its step, and the class's values of the controls it
    depends on (another slope asks another question), the same in every language. A student
    who moved a control still answers the class's question."""
    values = [class_value(key, st.session_state.get(key))
              for key in QUESTION_CONTROLS.get(step, ())]
    if not values:
        return f"s{step}"
    return f"s{step}-{zlib.crc32(json.dumps(values).encode()):08x}"


@in_page_language
def teacher_reveal(step: int, qid: str) -> None:
    try:
        watcher().moved(code(), store().reveal(code(), teacher_key(), qid))
    except ClassError as exc:
        say(str(exc))
        return
    st.session_state[f"{REVEALED}{step}"] = st.session_state.get(f"{ASKED}{step}")


@in_page_language
def teacher_ask_again(step: int, qid: str) -> None:
    try:
        watcher().moved(code(), store().ask_again(code(), teacher_key(), qid))
    except ClassError as exc:
        say(str(exc))
        return
    st.session_state.pop(f"{REVEALED}{step}", None)


@in_page_language
def give_answer(qid: str, widget: str, values: list[str]) -> None:
    value = st.session_state.get(widget)
    if value is None:
        return
    try:
        store().answer(code(), session_id(), qid, value, choices=values)
    except ClassError as exc:
        say(str(exc))


def answered_text(n: int) -> str:
    return ngettext("{n} answered", "{n} answered", n).format(n=n)


@st.fragment(run_every=COUNT_POLL_S)
def live_count(room: str, qid: str, lang: str) -> None:
    """The projector's "17 answered", read from the store every COUNT_POLL_S seconds."""
    i18n.set_language(lang)  # a fragment's rerun does not pass through main.py
    try:
        total = store().counts(room, qid).total
        if teacher_key() and time.time() - st.session_state.get("cls_touched", 0.0) > TOUCH_S:
            store().touch(room, teacher_key())  # waiting for the class to join
            st.session_state["cls_touched"] = time.time()
    except ClassError as exc:
        st.error(str(exc))
        return
    st.html(f'<div class="cls-count">{answered_text(total)}</div>')


def show_answers(fig, filename: str, qid: str) -> None:
    """The class's answers as drawn (its texts are sized for a projector already), as wide as
    its column: also on a phone, where a figure fitted to a page's width would scroll sideways
    and hide the counts (ui.PHONE_WIDTH_PX)."""
    spec = figure_spec(fig, fit=False)
    spec["layout"]["meta"] = {"fitted_width": ui.PHONE_WIDTH_PX}
    ui.show_figure(spec, filename, key=f"cls_fig_{qid}")


def distribution(room: str, qid: str, options: list[tuple[str, str]], right: str | None) -> None:
    """The class's answers beside the computed one (after the reveal), the right choice
    marked ✓."""
    values = [v for v, _label in options]
    counts = store().counts(room, qid, values)
    fig = answer_distribution_figure([label for _v, label in options],
                                     [counts.by_choice.get(v, 0) for v in values],
                                     values.index(right) if right in values else None)
    show_answers(fig, "class_answers", qid)


def answer_lines(answer: str) -> None:
    """A revealed answer in one line, its details one click away (the handout has them all)."""
    first, rest = split_answer(answer, sentences=1)
    st.markdown(_("**Answer:** {answer}").format(answer=first))
    if rest:
        with st.expander(_("The rest of the answer")):
            st.markdown(rest)


def question(step: int, text: str, answer: str, present: bool, right: str | None = None,
             options: list[tuple[str, str]] | None = None) -> bool | None:
    """A step's question when this session is in a class, in place of the page's own predict
    and reveal: returns whether the page draws the step's figure now (after the teacher's
    reveal), or None outside a class (and in the handout), where the page asks as usual.
    `right` is the stored value of the computed answer's choice (marked ✓ on the reveal);
    `options` the choices as (stored value, label), by default the step's own (`choices`)."""
    room = code()
    if not room or st.session_state.get("ls_print"):
        return None
    options = choices(step) if options is None else options
    try:
        if teacher_key():
            publish(step)  # the step's controls are drawn now: the class asks with them
            qid = question_id(step)
            return teacher_question(step, text, answer, present, room, qid, options, right)
        own_figure_note(step)
        qid = question_id(step)
        return student_question(text, answer, room, qid, options, right)
    except ClassError as exc:
        st.error(str(exc))
        return True


def teacher_question(step, text, answer, present, room, qid, options, right) -> bool:
    ss = st.session_state
    revealed = qid in store().state(room).revealed
    if present:  # the clicker's next reveals first (the page's question_open), then moves on
        ss[f"{ASKED}{step}"] = text
        if ss.get(f"{REVEALED}{step}") == text and not revealed:
            store().reveal(room, teacher_key(), qid)  # the clicker revealed it
            revealed = True
        if revealed:
            ss[f"{REVEALED}{step}"] = text
    if not revealed:
        st.markdown(_("**Predict:** {question}").format(question=text))
        if options:  # in a box of its own: see `live_count`
            with st.container(key=f"cls_count_{step}"):
                live_count(room, qid, i18n.get_language())
        st.button(_("Reveal the answer"), key=f"cls_reveal_{step}", type="primary",
                  on_click=teacher_reveal, args=(step, qid))
        return False
    with st.container(key="cls_revealed"):
        left, chart = st.columns([1, 1]) if options else (st.container(), None)
        with left:
            st.markdown(_("**Predict:** {question}").format(question=text))
            answer_lines(answer)
            st.button(_("Ask again"), key=f"cls_again_{step}", on_click=teacher_ask_again,
                      args=(step, qid),
                      help=_("Deletes this question's answers and opens it again."))
        if chart is not None:
            with chart:
                distribution(room, qid, options, right)
    if present:
        round_ = store().state(room).round(qid)
        st.html(SCROLL_JS % json.dumps(f"{room}-{qid}-{round_}"), unsafe_allow_javascript=True)
    return True


def student_question(text, answer, room, qid, options, right) -> bool:
    state = st.session_state.get("cls_state") or store().state(room)
    revealed = qid in state.revealed
    labels = dict(options)
    mine = store().my_answer(room, session_id(), qid)
    st.markdown(_("**Predict:** {question}").format(question=text))
    if not revealed:
        if options:
            widget = f"cls_answer_{qid}_{state.round(qid)}"
            if widget not in st.session_state and mine in labels:
                st.session_state[widget] = mine
            st.radio(_("Your answer"), list(labels), key=widget, index=None, horizontal=True,
                     format_func=labels.__getitem__, on_change=give_answer,
                     args=(qid, widget, list(labels)))
            st.caption(_("You can change your answer until the teacher reveals it.")
                       if mine else _("Choose an answer: only how many chose each is shown."))
        else:
            st.caption(_("Think it over: the teacher reveals the answer."))
        return False
    answer_lines(answer)
    if options:
        st.markdown(_("**Your answer:** {choice}").format(choice=labels[mine]) if mine in labels
                    else _("You did not answer this question."))
        distribution(room, qid, options, right)
    return True


# ----------------------------------------------------------------------------- myths

MYTH_CHOICES = (("true", N_("True")), ("false", N_("False")))  # every claim is a myth: false
HIDE_MYTH_REVEAL = "<style>.st-key-ls_myth_reveal { display: none; }</style>"


def myth(k: int) -> None:
    """The class's vote on myth `k` (0-based) of the last step on a projector, under its
    claim: true or false. The teacher's page counts the votes live and, once the teacher shows
    the fact, draws them (false is the computed answer: every claim is a myth); a student's page
    takes a vote instead of revealing the fact itself, and shows the class's votes after the
    teacher's reveal. Nothing outside a class."""
    room = code()
    if not room or st.session_state.get("ls_print"):
        return
    qid = f"m{k + 1}"
    options = [(value, _(label)) for value, label in MYTH_CHOICES]
    labels = dict(options)
    try:
        if teacher_key():
            revealed = qid in store().state(room).revealed
            if st.session_state.get("ls_myth_shown") and not revealed:
                store().reveal(room, teacher_key(), qid)
                revealed = True
            if revealed:
                myth_votes(room, qid, options)
            else:
                live_count(room, qid, i18n.get_language())
            return
        state = st.session_state.get("cls_state") or store().state(room)
        mine = store().my_answer(room, session_id(), qid)
        if qid in state.revealed:
            st.markdown(_("**Your answer:** {choice}").format(choice=labels[mine]) if mine in labels
                        else _("You did not answer this question."))
            myth_votes(room, qid, options)
            return
        st.html(HIDE_MYTH_REVEAL)  # the teacher reveals the fact, for everyone at once
        widget = f"cls_answer_{qid}_{state.round(qid)}"
        if widget not in st.session_state and mine in labels:
            st.session_state[widget] = mine
        st.radio(_("Your answer"), list(labels), key=widget, index=None, horizontal=True,
                 format_func=labels.__getitem__, on_change=give_myth_vote, args=(qid, widget))
    except ClassError as exc:
        st.error(str(exc))


@in_page_language
def give_myth_vote(qid: str, widget: str) -> None:
    value = st.session_state.get(widget)
    if value is None:
        return
    try:
        store().answer(code(), session_id(), qid, value,
                       choices=[v for v, _label in MYTH_CHOICES])
    except ClassError as exc:
        say(str(exc))


def myth_votes(room: str, qid: str, options: list[tuple[str, str]]) -> None:
    counts = store().counts(room, qid, [v for v, _label in options])
    fig = answer_distribution_figure([label for _v, label in options],
                                     [counts.by_choice.get(v, 0) for v, _l in options], right=1)
    show_answers(fig, "class_votes", qid)
