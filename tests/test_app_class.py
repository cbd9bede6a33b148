"""The Lesson's class session under AppTest (issues 42 and 59, alibi_viz_app/class_view.py): the teacher
starts a class, students follow its step and answer, the teacher reveals and asks again; a
student's URL cannot move the class; bad codes and keys get a message in the page's language,
never a traceback; a class of students who do what students do counts each answer once. Each
test has a SQLite class store of its own in tmp_path (ALIBI_VIZ_CLASS_STORE)."""

from __future__ import annotations

import pytest

from alibi_viz_app.class_store import CODE_ALPHABET, CODE_LENGTH, SETTING, open_store
from alibi_viz_app.testing import figure_keys, figures, run_app


@pytest.fixture
def class_store(tmp_path, monkeypatch):
    """The store the app uses in this test (the same SQLite file, opened here too)."""
    setting = f"sqlite:///{tmp_path / 'class.sqlite3'}"
    monkeypatch.setenv(SETTING, setting)
    store = open_store(setting)
    yield store
    store.close()


def step_header(at) -> str:
    return next(h.value for h in at.header if h.value[:1].isdigit())


def texts(at) -> str:
    """Every text the page drew (markdown, html, captions, messages), one string."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for e in at.error] + [i.value for i in at.info]
    parts += [h.proto.body for h in at.get("html")]
    return "\n".join(parts)


def answer_radio(at):
    return next(r for r in at.radio if r.key and r.key.startswith("cls_answer_"))


def teacher(class_store, step: int = 1, present: bool = True):
    """A teacher's page that started a class with ?class=new: (AppTest, code, key)."""
    params = {"class": "new", "step": str(step)} | ({"present": "1"} if present else {})
    at = run_app("lesson", params)
    assert not at.exception
    return at, at.query_params["class"], at.session_state["cls_key"]


def test_class_new_creates_a_room_and_shows_the_join_panel_without_the_key(class_store):
    """?class=new makes a room: the URL holds its code and never the teacher key (the session
    holds it), the page shows the code, the join link /lesson?class=CODE and a QR code, and
    never the key."""
    at, code, key = teacher(class_store)
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET)
    assert class_store.is_teacher(code, key)
    assert "key" not in at.query_params
    shown = texts(at)
    assert code in shown and f"/lesson?class={code}" in shown
    # The key reaches the browser only in the script that writes the teacher's cookie.
    cookie = f"<script>document.cookie = 'alibi_viz_teacher={code}.{key}; path=/; "
    assert key not in shown.replace(cookie, "")
    assert not any(key in str(w.value) for w in at.get("image"))
    assert at.get("imgs") or at.get("image")  # the QR code
    assert class_store.state(code).step == 1  # the teacher's page said where it is


def test_start_a_class_from_the_sidebar(class_store):
    """The sidebar's "Start a class" button makes this session the teacher of a new room."""
    at = run_app("lesson")
    at.button(key="cls_start").click().run()
    assert not at.exception
    code, key = at.query_params["class"], at.session_state["cls_key"]
    assert class_store.is_teacher(code, key) and "key" not in at.query_params


def test_student_follows_the_teachers_step_and_controls(class_store):
    """A student's page opens at the teacher's step and moves when the teacher moves, with the
    teacher's slope on step 1."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=3, controls={"ls_s3_heads": 12})
    at = run_app("lesson", {"class": room.code})
    assert not at.exception and step_header(at).startswith("3.")
    assert at.number_input(key="ls_s3_heads").value == 12
    class_store.set_state(room.code, room.key, step=1, controls={"ls_s1_slope": 0.5})
    at.run()
    assert step_header(at).startswith("1.")
    assert at.select_slider(key="ls_s1_slope").value == 0.5


def test_student_looks_around_and_comes_back(class_store):
    """A student who moves elsewhere stays there when the teacher moves, and "Back to the
    class" returns to the teacher's step."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=2)
    at = run_app("lesson", {"class": room.code})
    assert not [b for b in at.button if b.key in ("ls_next", "ls_prev")]  # following: no nav
    at.radio(key="ls_step_at_2").set_value(3).run()
    assert step_header(at).startswith("3.")
    assert at.button(key="ls_next")  # looking around: the page's own navigation
    class_store.set_state(room.code, room.key, step=4)
    at.run()
    assert step_header(at).startswith("3.")
    assert "The class is on step 4." in texts(at)
    at.button(key="cls_back").click().run()
    assert step_header(at).startswith("4.")


def test_a_slow_browsers_old_value_does_not_undo_the_teachers(class_store):
    """A browser that has not drawn the teacher's new slope yet sends back the slope it shows
    (a poll's request, on a busy server): the student keeps the teacher's. Once the page has
    drawn it, the same choice is the student's own."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=1, controls={"ls_s1_slope": 0.5})
    at = run_app("lesson", {"class": room.code})
    at.run()  # the browser has drawn the slope 0.5
    class_store.set_state(room.code, room.key, step=1, controls={"ls_s1_slope": 0.125})
    at.run()
    assert at.select_slider(key="ls_s1_slope").value == 0.125
    at.select_slider(key="ls_s1_slope").set_value(0.5).run()  # sent before 0.125 was drawn
    assert at.select_slider(key="ls_s1_slope").value == 0.125
    assert "The class is on step" not in texts(at)
    at.run()  # drawn
    at.select_slider(key="ls_s1_slope").set_value(0.5).run()  # the student's own choice
    assert at.select_slider(key="ls_s1_slope").value == 0.5


def test_the_step_list_takes_a_student_elsewhere_only_by_their_own_choice(class_store):
    """The sidebar's list of steps is drawn anew at each step (its key holds the step), so
    the choice a browser sent before it drew the teacher's move does not count; a choice in
    the list drawn at the teacher's step is the student's own: they look around."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=3)
    at = run_app("lesson", {"class": room.code})
    class_store.set_state(room.code, room.key, step=4)
    at.run()
    assert step_header(at).startswith("4.")
    assert [r.key for r in at.radio if r.key and r.key.startswith("ls_step_at_")] == \
        ["ls_step_at_4"]
    at.radio(key="ls_step_at_4").set_value(2).run()
    assert step_header(at).startswith("2.")
    assert "The class is on step 4." in texts(at)


def test_answers_counted_once_per_session_and_changeable(class_store):
    """A student's answer is stored once, and a changed answer replaces it."""
    at_t, code, key = teacher(class_store, step=1)
    student = run_app("lesson", {"class": code})
    answer_radio(student).set_value("more").run()
    assert not student.exception
    qid = answer_radio(student).key.split("_")[2]
    assert class_store.counts(code, qid).by_choice == {"more": 1}
    answer_radio(student).set_value("less").run()
    assert class_store.counts(code, qid).by_choice == {"less": 1}
    other = run_app("lesson", {"class": code})
    answer_radio(other).set_value("less").run()
    assert class_store.counts(code, qid).total == 2
    at_t.run()
    assert "2 answered" in texts(at_t)


def test_reveal_shows_the_distribution_to_teacher_and_student(class_store):
    """After the teacher's reveal the projector shows the class's answers beside the computed
    answer (its bar marked), and the student sees the answer, their own and the chart; a late
    answer is refused with a message."""
    at_t, code, _key = teacher(class_store, step=1)
    student = run_app("lesson", {"class": code})
    answer_radio(student).set_value("more").run()
    assert not figures(student)  # the figure waits for the reveal
    at_t.button(key="cls_reveal_1").click().run()
    assert not at_t.exception
    assert any(k.startswith("cls_fig_") for k in figure_keys(at_t))
    assert "ls_fig_position" in figure_keys(at_t)
    chart = next(f for f in figures(at_t) if "The class" in f["layout"]["title"]["text"])
    assert list(chart["data"][0]["x"]) == [1, 0, 0]
    assert any(label.startswith("✓ ") for label in chart["data"][0]["y"])  # computed answer
    student.run()
    shown = texts(student)
    assert "**Your answer:** More" in shown and "**Answer:**" in shown
    assert "ls_fig_position" in figure_keys(student)


def test_clicker_reveal_reveals_to_the_class(class_store):
    """The teacher's next (the clicker) on an open question reveals it to the class too."""
    at_t, code, _key = teacher(class_store, step=3)
    at_t.button(key="ls_next").click().run()
    assert not at_t.exception and step_header(at_t).startswith("3.")
    assert any(q.startswith("s3") for q in class_store.state(code).revealed)


def test_ask_again_opens_the_question_afresh(class_store):
    """"Ask again" deletes the answers and the student can answer again."""
    at_t, code, _key = teacher(class_store, step=3)
    student = run_app("lesson", {"class": code})
    answer_radio(student).set_value("yes").run()
    at_t.button(key="cls_reveal_3").click().run()
    at_t.button(key="cls_again_3").click().run()
    assert not at_t.exception and "0 answered" in texts(at_t)
    student.run()
    radio = answer_radio(student)
    assert radio.value is None and radio.key.endswith("_2")  # round 2
    radio.set_value("no").run()
    assert not student.exception


def test_guessed_key_cannot_move_the_class(class_store):
    """A URL with a wrong teacher key says so and follows as a student: its moves stay on its
    own page; the class stays where the teacher put it, and its answers stay hidden."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=2)
    at = run_app("lesson", {"class": room.code, "key": "guessed-" + "x" * 24})
    assert not at.exception
    assert any("no valid teacher key" in e.value for e in at.error)
    assert "key" not in at.query_params
    at.radio(key="ls_step_at_2").set_value(3).run()
    at.button(key="ls_next").click().run()
    assert class_store.state(room.code).step == 2
    assert not class_store.state(room.code).revealed
    assert not [b for b in at.button if b.key and b.key.startswith(("cls_reveal", "cls_again"))]


def test_missing_key_has_no_teacher_controls(class_store):
    """A student's page has no reveal, ask-again or end button."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=1)
    at = run_app("lesson", {"class": room.code})
    keys = {b.key for b in at.button}
    assert not keys & {"cls_reveal_1", "cls_again_1", "cls_end"}
    assert "cls_leave" in keys


@pytest.mark.parametrize("code", ["<script>", "ABC", "00000", "x" * 500])
def test_malformed_code_is_a_message(class_store, code):
    """A malformed class code gets the store's message, never a traceback."""
    at = run_app("lesson", {"class": code})
    assert not at.exception
    assert any("is not a class code" in e.value for e in at.error)
    assert step_header(at).startswith("1.")


def test_unknown_code_is_a_message_in_the_pages_language(class_store):
    """An unknown code is told in the student's language (Spanish here)."""
    at = run_app("lesson", {"class": "ZZZZZ", "lang": "es"})
    assert not at.exception
    message = at.error[0].value
    assert "ZZZZZ" in message and "There is no class" not in message


def test_ended_class_tells_its_students(class_store):
    """"End the class" deletes the room; a student's next run says that the teacher ended it
    (not that the code is wrong)."""
    at_t, code, _key = teacher(class_store, step=1)
    student = run_app("lesson", {"class": code})
    at_t.button(key="cls_end").click().run()
    assert not at_t.exception and "class" not in at_t.query_params
    student.run()
    assert [e.value for e in student.error] == ["The teacher ended the class."]


def test_students_page_follows_its_own_language(class_store):
    """A Spanish student of an English teacher reads the question in Spanish."""
    _at, code, _key = teacher(class_store, step=1)
    student = run_app("lesson", {"class": code, "lang": "es"})
    assert not student.exception
    assert "Predecir" in texts(student) or "Predice" in texts(student)


def test_student_follows_the_myth_on_the_last_step(class_store):
    """On the last step a student's page shows the teacher's myth, and its fact once the
    teacher showed it."""
    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=9, myth=2, controls={"myth_shown": False})
    at = run_app("lesson", {"class": room.code})
    assert not at.exception and step_header(at).startswith("9.")
    assert any(m.value.startswith("**Myth 3 of 6:**") for m in at.markdown)
    assert not any(m.value.startswith("**Fact:**") for m in at.markdown)
    class_store.set_state(room.code, room.key, step=9, myth=2, controls={"myth_shown": True})
    at.run()
    assert any(m.value.startswith("**Fact:**") for m in at.markdown)


def test_full_server_is_a_message(class_store):
    """With every class of the server taken, ?class=new says so, in words."""
    for _k in range(class_store.max_rooms):
        class_store.create_room()
    at = run_app("lesson", {"class": "new"})
    assert not at.exception
    assert any("classes are full" in e.value for e in at.error)
    assert "class" not in at.query_params


def test_class_votes_on_a_myth(class_store):
    """On the last step a student votes true or false on the teacher's myth (the fact's own
    reveal button is hidden on a student's page); the teacher's page counts the vote, and
    showing the fact draws the class's votes, false marked, on both pages."""
    at_t, code, _key = teacher(class_store, step=9)
    student = run_app("lesson", {"class": code})
    assert any(".st-key-ls_myth_reveal { display: none; }" in h.proto.body
               for h in student.get("html"))
    answer_radio(student).set_value("false").run()
    assert class_store.counts(code, "m1").by_choice == {"false": 1}
    at_t.run()
    assert "1 answered" in texts(at_t)
    at_t.button(key="ls_myth_reveal").click().run()
    assert not at_t.exception and "m1" in class_store.state(code).revealed
    chart = next(f for f in figures(at_t) if "The class" in f["layout"]["title"]["text"])
    assert list(chart["data"][0]["x"]) == [0, 1] and chart["data"][0]["y"][1] == "✓ False"
    student.run()
    assert "**Your answer:** False" in texts(student) and "cls_fig_m1" in figure_keys(student)
    assert any(m.value.startswith("**Fact:**") for m in student.markdown)


# ---------------------------------------------------------------- students who explore

def class_chart(at) -> dict:
    return next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(
        ("The class", "La clase", "Класс")))


@pytest.mark.parametrize(("step", "control", "own", "choice"), [
    (1, "ls_s1_slope", 0.5, "more"), (3, "ls_s3_heads", 12, "no"), (5, "ls_head", 1, "nearer")])
def test_a_student_who_moves_a_control_still_answers_the_class_question(
        class_store, step, control, own, choice):
    """A following student who moves the step's control before answering answers the class's
    question (asked with the teacher's value), and is counted on the projector; the page says
    the figure is the student's own; after the reveal the student's own value stays and their
    answer is shown."""
    at_t, code, _key = teacher(class_store, step=step)
    student = run_app("lesson", {"class": code})
    question_before = next(m.value for m in student.markdown if m.value.startswith("**Predict:**"))
    widget = next(w for w in (*student.select_slider, *student.number_input, *student.selectbox)
                  if w.key == control)
    widget.set_value(own).run()
    assert not student.exception
    assert next(m.value for m in student.markdown
                if m.value.startswith("**Predict:**")) == question_before
    assert any("the question is the class's" in i.value for i in student.info)
    answer_radio(student).set_value(choice).run()
    assert not student.exception and not student.error
    at_t.run()
    assert "1 answered" in texts(at_t)
    at_t.button(key=f"cls_reveal_{step}").click().run()
    assert sum(class_chart(at_t)["data"][0]["x"]) == 1
    student.run()
    assert any(m.value.startswith("**Your answer:**") for m in student.markdown)
    assert next(w for w in (*student.select_slider, *student.number_input, *student.selectbox)
                if w.key == control).value == own


@pytest.mark.parametrize("step", range(1, 9))
def test_every_question_with_a_right_choice_marks_it_on_the_reveal(class_store, step):
    """Steps 1-8 each take a vote, and the reveal's chart marks exactly one choice ✓ (the
    computed answer's), on the projector and the student's page; the answer is one line on
    the projector, its details in a closed box."""
    at_t, code, _key = teacher(class_store, step=step)
    student = run_app("lesson", {"class": code})
    assert answer_radio(student).options
    at_t.button(key=f"cls_reveal_{step}").click().run()
    assert not at_t.exception
    marked = [y for y in class_chart(at_t)["data"][0]["y"] if y.startswith("✓ ")]
    assert len(marked) == 1
    answer = next(m.value for m in at_t.markdown if m.value.startswith("**Answer:**"))
    assert "\n" not in answer
    student.run()
    assert [y for y in class_chart(student)["data"][0]["y"] if y.startswith("✓ ")] == marked


def test_step_6_answer_names_the_right_choice(class_store):
    """Step 6's revealed answer starts with the choice it marks."""
    at_t, _code, _key = teacher(class_store, step=6)
    at_t.button(key="cls_reveal_6").click().run()
    marked = next(y for y in class_chart(at_t)["data"][0]["y"] if y.startswith("✓ "))
    answer = next(m.value for m in at_t.markdown if m.value.startswith("**Answer:**"))
    assert answer.startswith(f"**Answer:** {marked[2:]}.")


def test_a_second_browser_with_the_visible_url_is_a_follower(class_store):
    """The teacher's address bar never holds the key: a second browser that opens it follows
    as a student (no reveal, ask-again or end), and the class stays where the teacher put it."""
    at_t, code, _key = teacher(class_store, step=2)
    visible = {k: at_t.query_params[k] for k in at_t.query_params}
    assert visible["class"] == code and "key" not in visible
    other = run_app("lesson", visible)
    assert not other.exception
    keys = {b.key for b in other.button}
    assert not keys & {"cls_reveal_2", "cls_again_2", "cls_end"} and "cls_leave" in keys
    assert "You follow class" in texts(other)


def test_the_teacher_is_back_after_a_reload(class_store, monkeypatch):
    """A reload of the teacher's browser (the visible URL, and the teacher cookie the page
    wrote) is the teacher again; a cookie for another class, or with a wrong key, is not."""
    from alibi_viz_app import class_view

    at_t, code, key = teacher(class_store, step=2)
    visible = {k: at_t.query_params[k] for k in at_t.query_params}
    for held, is_teacher in ((f"{code}.{key}", True), (f"{code}.x{key}", False),
                             (f"ZZZZZ.{key}", False)):
        monkeypatch.setattr(class_view, "cookies", lambda held=held: {
            class_view.TEACHER_COOKIE: held})
        again = run_app("lesson", visible)
        assert not again.exception
        assert bool([b for b in again.button if b.key == "cls_reveal_2"]) == is_teacher
        assert "key" not in again.query_params


def test_a_browser_opens_only_a_few_classes(class_store, monkeypatch):
    """One browser session (its class cookie) that opens ?class=new again and again gets a
    few rooms, then a sentence; the rooms no student joined close within minutes, and one
    that a student joined lives its full lifetime."""
    from alibi_viz_app import class_view

    me = "s" * 24
    monkeypatch.setattr(class_view, "cookies", lambda: {class_view.COOKIE: me})
    for _k in range(class_store.max_rooms_per_creator):
        at = run_app("lesson", {"class": "new"})
        assert "class" in at.query_params
        assert class_store.state(at.query_params["class"]).expires_in <= class_store.empty_ttl
    last = at.query_params["class"]
    at = run_app("lesson", {"class": "new", "lang": "es"})
    assert not at.exception and "class" not in at.query_params
    assert any("Este navegador" in e.value for e in at.error), [e.value for e in at.error]
    monkeypatch.setattr(class_view, "cookies", lambda: {})
    run_app("lesson", {"class": last})  # a student joins: the room lives its full lifetime
    assert class_store.state(last).expires_in > class_store.empty_ttl


def in_language(lang: str, message: str, **values) -> str:
    """`message` as the `lang` catalog has it (an English message is its own id)."""
    from alibi_viz.i18n import translations

    return translations(lang).gettext(message).format(**values)


@pytest.mark.parametrize("lang", ["es", "ru"])
def test_every_class_message_is_in_the_pages_language(class_store, monkeypatch, lang):
    """What the class says, on the teacher's and the students' pages, is in the page's
    language, also where a button's callback says it (a late answer, the end of the class)
    and for a browser that opens too many classes."""
    from alibi_viz_app import class_view

    at_t = run_app("lesson", {"class": "new", "step": "3", "present": "1", "lang": lang})
    code = at_t.query_params["class"]
    student = run_app("lesson", {"class": code, "lang": lang})
    late = run_app("lesson", {"class": code, "lang": lang})
    assert in_language(lang, "Choose an answer: only how many chose each is shown.") \
        in texts(student)
    answer_radio(student).set_value("yes").run()
    at_t.button(key="cls_reveal_3").click().run()
    answer_radio(late).set_value("no").run()  # drawn before the reveal, clicked after it
    closed = in_language(lang, "The answers to this question are shown, so it takes no more "
                               "answers until the teacher asks it again.")
    assert closed in [e.value for e in late.error]
    at_t.button(key="cls_end").click().run()
    assert in_language(lang, "The class has ended: its answers are deleted.") in \
        [e.value for e in at_t.error]
    student.run()
    assert [e.value for e in student.error] == [in_language(lang, "The teacher ended the class.")]
    gone = run_app("lesson", {"class": code, "lang": lang})
    assert code in gone.error[0].value and "There is no class" not in gone.error[0].value
    me = "m" * 24
    monkeypatch.setattr(class_view, "cookies", lambda: {class_view.COOKIE: me})
    for _k in range(class_store.max_rooms_per_creator + 1):
        opened = run_app("lesson", {"class": "new", "lang": lang})
    assert opened.error[0].value.startswith(
        {"es": "Este navegador ya tiene", "ru": "В этом браузере уже идут"}[lang])


def test_a_class_of_students_who_do_what_students_do(class_store, monkeypatch):
    """A Spanish teacher and seven students, each a browser of their own (their class cookie):
    one moves the slope before answering, one leaves the class and comes back by the link,
    one reloads, one answers in two tabs, one presses the clicker's keys, one opens
    ?class=new first, one answers after the reveal. On two questions every answer is counted
    exactly once (each browser's last one) or refused with a sentence; then the teacher ends
    the class and every page still open says so."""
    from collections import Counter

    from alibi_viz_app import class_view

    browser = {"id": ""}
    monkeypatch.setattr(class_view, "cookies", lambda: {class_view.COOKIE: browser["id"]})

    def open_as(who: str, params: dict):
        browser["id"] = f"{who:x<24}"
        at = run_app("lesson", params)
        assert not at.exception
        return at

    given, finals, refused = [], {}, []

    def answer(at, who: str, choice: str) -> None:
        answer_radio(at).set_value(choice).run()
        assert not at.exception
        given.append(who)
        if at.error:
            refused.append(at.error[0].value)
        else:
            finals[who] = choice

    t = open_as("teacher", {"class": "new", "step": "1", "present": "1", "lang": "es"})
    code = t.query_params["class"]
    link = {"class": code}

    ana = open_as("ana", link)
    ana.select_slider(key="ls_s1_slope").set_value(0.5).run()  # explores before answering
    answer(ana, "ana", "less")
    boris = open_as("boris", link | {"lang": "ru"})
    answer(boris, "boris", "less")
    boris.button(key="cls_leave").click().run()
    boris = open_as("boris", link | {"lang": "ru"})  # back by the link: his answer is there
    assert answer_radio(boris).value == "less"
    answer(boris, "boris", "more")
    carla = open_as("carla", link)
    answer(carla, "carla", "same")
    carla = open_as("carla", link)  # a reload
    assert answer_radio(carla).value == "same"
    dima_1, dima_2 = open_as("dima", link), open_as("dima", link)  # two tabs
    answer(dima_1, "dima", "less")
    answer(dima_2, "dima", "more")
    eva = open_as("eva", link)
    # a follower's page has no clicker: its keys move nothing
    assert not [b for b in eva.button if b.key and b.key.startswith(("ls_key_", "ls_next"))]
    assert not [h for h in eva.get("html") if "ls_key_next" in h.proto.body]
    answer(eva, "eva", "more")
    felix = open_as("felix", {"class": "new"})  # a new room of his own, then the class
    assert felix.query_params["class"] != code
    felix = open_as("felix", link)
    answer(felix, "felix", "more")
    gina = open_as("gina", link)  # reads the question, answers too late

    t.run()
    from alibi_viz.i18n import translations

    live = translations("es").ngettext("{n} answered", "{n} answered", 6).format(n=6)
    assert f'<div class="cls-count">{live}</div>' in texts(t)
    t.button(key="cls_reveal_1").click().run()
    answer(gina, "gina", "more")  # drawn before the reveal, clicked after it
    chart = class_chart(t)
    labels = dict(class_view.CHOICES[1])
    expected = Counter(finals.values())
    assert dict(zip(chart["data"][0]["y"], chart["data"][0]["x"], strict=True)) == {
        ("✓ " if v == "more" else "") + in_language("es", label): expected.get(v, 0)
        for v, label in labels.items()}
    (first,) = class_store.state(code).revealed
    counted = class_store.counts(code, first).total
    assert counted == len(finals) == 6
    assert refused == [in_language("en", "The answers to this question are shown, so it takes "
                                         "no more answers until the teacher asks it again.")]
    for who, page in (("ana", ana), ("carla", carla), ("eva", eva), ("felix", felix)):
        page.run()
        assert f"**Your answer:** {labels[finals[who]]}" in texts(page), who
    assert ana.select_slider(key="ls_s1_slope").value == 0.5  # her own figure stays hers

    t.radio(key="ls_step_at_1").set_value(3).run()
    second = {}
    for who, page in (("ana", ana), ("boris", boris), ("carla", carla), ("eva", eva),
                      ("felix", felix), ("gina", gina)):
        page.run()
        assert step_header(page).startswith("3."), who
        if who == "felix":
            page.number_input(key="ls_s3_heads").set_value(12).run()
        answer(page, who, "yes")
        second[who] = "yes"
    dima_2.run()
    answer(dima_2, "dima", "no")
    second["dima"] = "no"
    qid = answer_radio(ana).key.split("_")[2]
    assert class_store.counts(code, qid).by_choice == dict(Counter(second.values()))
    counted += class_store.counts(code, qid).total
    print(f"class scenario: 7 students, {len(given)} answers given (changes included), "
          f"{counted} counted (each browser's last answer to each question), "
          f"{len(refused)} refused with a sentence")

    t.button(key="cls_end").click().run()
    for who, page in (("ana", ana), ("boris", boris), ("dima", dima_1), ("gina", gina)):
        page.run()
        assert [e.value for e in page.error] == [in_language(
            "ru" if who == "boris" else "en", "The teacher ended the class.")], who


def test_the_join_panel_shrinks_to_one_line_once_the_class_moves_on(class_store):
    """The projector shows the code, link and QR code on the step the class started on (any
    step); once the teacher moves on, one line with the code and link, until the sidebar's
    switch brings the panel back."""
    at_t, code, _key = teacher(class_store, step=3)
    html_of = lambda: "\n".join(h.proto.body for h in at_t.get("html"))  # noqa: E731
    assert 'class="cls-code"' in html_of() and 'class="cls-line"' not in html_of()
    at_t.button(key="cls_reveal_3").click().run()
    at_t.button(key="ls_next").click().run()
    assert step_header(at_t).startswith("4.")
    assert 'class="cls-code"' not in html_of()
    assert f'class="cls-line">Join the class: <b>{code}</b>' in html_of()
    at_t.toggle(key="cls_join").set_value(True).run()
    assert 'class="cls-code"' in html_of()


def test_a_class_that_expires_is_not_said_to_be_ended_by_the_teacher(class_store):
    """A class that reaches the end of its lifetime while a student follows it is told as a
    class that closed, not as one the teacher ended."""
    import sqlite3
    import time

    room = class_store.create_room()
    class_store.set_state(room.code, room.key, step=2)
    student = run_app("lesson", {"class": room.code})

    def expire_in(seconds: float) -> None:
        with sqlite3.connect(class_store.path) as conn:
            conn.execute("UPDATE rooms SET expires = ? WHERE code = ?",
                         (time.time() + seconds, room.code))

    expire_in(30)
    student.run()
    assert not student.error
    expire_in(-1)
    student.run()
    (message,) = [e.value for e in student.error]
    assert message.startswith(f"There is no class with the code {room.code}.")


def test_an_open_projector_keeps_a_room_nobody_joined_yet(class_store):
    """A teacher's projector waiting for the class (step 1's question open) keeps its room,
    which would otherwise close minutes after the teacher's last move."""
    import sqlite3
    import time

    at_t, code, _key = teacher(class_store, step=1)
    with sqlite3.connect(class_store.path) as conn:
        conn.execute("UPDATE rooms SET expires = ? WHERE code = ?", (time.time() + 5, code))
    at_t.session_state["cls_touched"] = 0.0  # its last keep-alive a while ago
    at_t.run()
    assert class_store.state(code).expires_in > class_store.empty_ttl - 60
