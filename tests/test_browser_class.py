"""A class in real browsers (issue 42): one teacher and several students, each in a browser
context of its own, on a Streamlit server of this module's own with a SQLite class store in a
temporary folder. Students follow three step changes within 2 s of the projector each,
each answers, and the projector's count equals the answers given; then ten students on the
class deployment (two replicas behind nginx), one replica killed mid-question. Screenshots of
the projector go to test-artifacts/. Each lag is measured in the pages themselves
(STEP_SEEN_JS): behind the projector (what the class sees: held to 2 s for every student), and
from the teacher's press (printed)."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import urllib.request
import warnings
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers import PAGE_LIST, page_list_positions, screenshot, wait_for_app, wait_for_apps

from alibi_viz_app.class_store import SETTING, open_store
from alibi_viz_app.testing import PHONE_UA, free_port, start_streamlit, stop_streamlit

# Every student's follow lag is held to 2 s: with other tests' browsers and servers on the
# same 2 cores (make test's parallel part), a loaded run measured up to 4.2 s, so these run
# after them, alone (the `solo` mark).
pytestmark = [pytest.mark.browser, pytest.mark.solo]

STUDENTS = 4       # each a chromium context and a Streamlit session: 2 cores serve them all
FOLLOW_S = 2.0     # the bound on a student's lag behind the projector
FIRST_LOAD_MS = 180_000
HEADER_JS = """(step) => [...document.querySelectorAll('h2')]
  .some(h => h.innerText.trim().startsWith(step + '.'))"""
# Each page notes, by its own clock (one browser: one clock for all), when each step's heading
# first appears on it, so every student's lag is measured from the moment the projector
# showed the step (or the teacher pressed), whatever order the test looks at the pages in.
STEP_SEEN_JS = """(() => {
  window.__stepSeen = {};
  const look = () => {
    for (const h of document.querySelectorAll('h2')) {
      const m = (h.textContent || '').trim().match(/^(\\d+)\\./);
      if (m && !(m[1] in window.__stepSeen)) window.__stepSeen[m[1]] = Date.now();
    }
  };
  new MutationObserver(look).observe(document, {childList: true, subtree: true});
})()"""


@pytest.fixture(scope="module")
def class_server(tmp_path_factory):
    """(base url, the store the server uses): a server with a class store of its own."""
    setting = f"sqlite:///{tmp_path_factory.mktemp('class') / 'class.sqlite3'}"
    proc, url = start_streamlit(free_port(), env={SETTING: setting}, log_name="class.log")
    store = open_store(setting)
    yield url, store
    store.close()
    stop_streamlit(proc)


def new_page(browser, width: int = 1024, height: int = 768, phone: bool = False):
    """A browser of its own, its page not yet opened: (context, page); with `phone`, a touch
    screen whose user agent says it is a phone, as a real one's does."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  **({"is_mobile": True, "has_touch": True,
                                      "user_agent": PHONE_UA} if phone else {}))
    context.add_init_script(STEP_SEEN_JS)
    page = context.new_page()
    page.set_default_timeout(60_000)
    return context, page


def open_page(browser, url: str, width: int = 1024, height: int = 768, wait: bool = True):
    """A browser of its own on `url` (`new_page`); with wait=False the page is still loading
    (the caller waits for it, so several pages load at once, as a class's do)."""
    context, page = new_page(browser, width, height)
    page.goto(url, wait_until="commit")
    if wait:
        wait_for_app(page, timeout_ms=FIRST_LOAD_MS)
    return context, page


def seen(page) -> dict[int, float]:
    """Step -> when (s, the browser's clock) its heading first appeared on the page."""
    return {int(k): v / 1000 for k, v in page.evaluate("() => window.__stepSeen").items()}


def follow_lags(teacher, students, presses: dict[int, float]) -> list[float]:
    """Every student's lag (s) behind the projector on each step of `presses` (step -> when the
    teacher pressed, the browser's clock), once all are there; printed with the lags behind the
    press. A student's page can be ahead of the projector (a negative lag): the server moves
    the students as soon as the teacher's page has told the store, before it draws itself."""
    shown = seen(teacher)
    lags = [seen(s)[step] - shown[step] for step in presses for s in students]
    print(f"{len(students)} students, lags behind the projector (s): "
          f"{sorted(round(lag, 2) for lag in lags)}; behind the teacher's press: "
          f"{sorted(round(seen(s)[step] - at, 2) for step, at in presses.items() for s in students)}"
          f"; the projector's own: {[round(shown[step] - at, 2) for step, at in presses.items()]}")
    return lags


# For a button that is there but not shown: each of its ancestors up to the page's main block
# whose box is empty or hidden (data-testid or class, display, height), and whether Streamlit
# keeps the element from an earlier run ("data-retained": hidden unless focused).
HIDDEN_JS = """bs => bs.map(b => {
  const chain = [];
  for (let e = b; e && e.dataset?.testid !== 'stMain'; e = e.parentElement) {
    const style = getComputedStyle(e), height = e.getBoundingClientRect().height;
    if (style.display === 'none' || height === 0)
      chain.push(`${e.dataset?.testid || e.className.toString().slice(0, 60)}`
                 + `:${style.display}:${height}`);
  }
  const box = b.closest('[data-testid="stElementContainer"]');
  return {text: b.innerText, height: b.getBoundingClientRect().height,
          stale: box?.dataset.stale, retained: box?.dataset.retained ?? null, hidden: chain};
})"""


def click(page, selector: str, timeout_ms: float = 60_000) -> None:
    """Click the visible button under `selector`. A page that has just rerun may still hold a
    copy of the element from the run before, hidden, ahead of the live one in the document;
    when no visible copy comes, the page's screenshot and every copy's state are kept."""
    buttons = page.locator(f"{selector} button")
    try:
        buttons.filter(visible=True).first.click(timeout=timeout_ms)
    except Exception:
        screenshot(page, "class_click_failed")
        raise AssertionError(f"no visible {selector} button: "
                             f"{buttons.evaluate_all(HIDDEN_JS)}") from None


# A teacher's page holds its class's code in the URL once it has made the room.
CLASS_IN_URL_JS = "() => /[?&]class=(?!new)[^&]{5}/.test(location.search)"


def teacher_code_and_key(context, teacher) -> tuple[str, str]:
    """The class's code (from the page's URL, which never holds the key) and the teacher key
    (from the teacher's cookie, which only the teacher's browser has)."""
    teacher.wait_for_function(CLASS_IN_URL_JS)
    assert "key=" not in teacher.url
    code = parse_qs(urlsplit(teacher.url).query)["class"][0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        held = {c["name"]: c["value"] for c in context.cookies()}.get("alibi_viz_teacher", "")
        if held.startswith(code + "."):
            return code, held.split(".", 1)[1]
        teacher.wait_for_timeout(100)
    raise AssertionError(f"the teacher's browser has no teacher cookie for class {code}")


# The number of the step whose heading the page shows (None before any).
SHOWN_STEP_JS = """() => { const h = [...document.querySelectorAll('h2')].map(h => h.innerText.trim())
  .find(t => /^\\d+\\./.test(t)); return h ? parseInt(h) : null; }"""


def teacher_moves(teacher, button: str, step: int) -> float:
    """The teacher presses `button` (".st-key-ls_next" or "_prev") and the projector shows step
    `step`; returns when the teacher pressed (s, the browser's clock). A press that moved
    nothing in 20 s is pressed again, as a teacher would, with a
    warning that says what the page showed (seen once, in a fresh clone's solo run, on the
    deployment; the cause is not known); a second press that moves nothing fails the test. A
    press that moved the projector past `step` fails at once, saying where it went (seen once
    on the deployment, 2026-12-05: one press, and 20 s later the projector on step 4 instead of
    2; five runs with the Next callback logged then showed one call per press)."""
    before = teacher.evaluate(SHOWN_STEP_JS)
    pressed = teacher.evaluate("() => Date.now()") / 1000
    click(teacher, button)
    try:
        on_step(teacher, step, 20_000)
    except AssertionError as exc:
        now = teacher.evaluate(SHOWN_STEP_JS)
        if None not in (now, before) and now != before:
            raise AssertionError(f"one press moved the projector from step {before} to step "
                                 f"{now}, not to {step}: {exc}") from None
        warnings.warn(f"the teacher's press moved nothing, pressed again: {exc}", stacklevel=2)
        pressed = teacher.evaluate("() => Date.now()") / 1000
        click(teacher, button)
        on_step(teacher, step, 30_000)
    return pressed


def on_step(page, step: int, timeout_ms: float) -> None:
    """Wait for step `step`'s heading; when it does not come, the page's screenshot is kept and
    the failure says which headings, URL and messages the page showed instead."""
    try:
        page.wait_for_function(HEADER_JS, arg=step, timeout=timeout_ms, polling=100)
    except Exception:
        name = f"class_not_on_step_{step}"
        screenshot(page, name)
        shown = page.evaluate("() => [...document.querySelectorAll('h2, [data-testid=stAlert],"
                              " [data-testid=stException]')].map(e => e.innerText.slice(0, 80))")
        raise AssertionError(f"not on step {step} after {timeout_ms / 1000:.0f} s: {page.url} "
                             f"shows {shown} (test-artifacts/{name}.png)") from None


def test_students_follow_answer_and_are_counted(class_server, browser):
    """Students follow three step changes within 2 s each; each answers step 3's question;
    a reloaded page still holds its student's answer; the projector counts every answer once
    and shows the distribution after the reveal."""
    url, store = class_server
    contexts = []
    try:
        context, teacher = open_page(browser, f"{url}/lesson?class=new")
        contexts.append(context)
        code, key = teacher_code_and_key(context, teacher)
        assert store.is_teacher(code, key)
        assert key not in teacher.locator("[data-testid='stMain']").inner_text()
        students = []
        for _k in range(STUDENTS):  # the class arrives at once
            context, student = open_page(browser, f"{url}/lesson?class={code}", 400, 800,
                                         wait=False)
            contexts.append(context)
            students.append(student)
        wait_for_apps(students, timeout_ms=FIRST_LOAD_MS)
        for student in students:
            on_step(student, 1, 10_000)
        presses = {}
        for step in (2, 3, 4):
            presses[step] = teacher_moves(teacher, ".st-key-ls_next", step)
            for student in students:
                on_step(student, step, FOLLOW_S * 1000 + 5_000)
        lags = follow_lags(teacher, students, presses)
        assert max(lags) <= FOLLOW_S, lags
        teacher_moves(teacher, ".st-key-ls_prev", 3)  # back to step 3: heads question
        for k, student in enumerate(students):
            on_step(student, 3, FOLLOW_S * 1000 + 5_000)
            choice = "Yes" if k % 2 == 0 else "No"
            radio = student.locator("[class*='st-key-cls_answer_']")
            radio.locator("label").filter(has_text=re.compile(f"^{choice}$")).click()
        wait_for_apps(students)
        teacher.get_by_text(f"{STUDENTS} answered").wait_for(timeout=10_000)
        students[0].reload()  # the same browser: its answer is still its own, counted once
        wait_for_app(students[0], timeout_ms=FIRST_LOAD_MS)
        on_step(students[0], 3, 10_000)
        mine = students[0].locator("[class*='st-key-cls_answer_'] label:has(input:checked)")
        assert mine.inner_text().strip() == "Yes"
        click(teacher, "[class*='st-key-cls_reveal_3']")
        wait_for_app(teacher)
        chart = teacher.locator("[class*='st-key-cls_fig_'] .js-plotly-plot, "
                                "[class*='cls_fig_'] .main-svg").first
        chart.wait_for()
        screenshot(teacher, "class_projector_revealed")
        for student in students:
            student.get_by_text("Your answer:").wait_for(timeout=FOLLOW_S * 1000 + 5_000)
        revealed = [q for q in store.state(code).revealed if q.startswith("s3")]
        assert len(revealed) == 1
        counts = store.counts(code, revealed[0], ("yes", "no"))
        assert counts.total == STUDENTS
        assert counts.by_choice == {"yes": (STUDENTS + 1) // 2, "no": STUDENTS // 2}
    finally:
        for context in contexts:
            context.close()


# After a reveal: the boxes (top, bottom, in viewport pixels) of the revealed question and its
# answer, the class's chart and the step's figure, once both figures are drawn; else null.
REVEALED_BOXES_JS = """() => {
  const box = s => { const e = document.querySelector(s);
    if (!e) return null; const b = e.getBoundingClientRect(); return [b.top, b.bottom]; };
  const chart = box('[class*="st-key-cls_fig_"] .main-svg');
  const figure = box('[class*="st-key-ls_fig_"] .main-svg');
  const answer = [...document.querySelectorAll('.st-key-cls_revealed p')]
    .find(p => /^(Respuesta|Answer|Ответ):/.test(p.innerText));
  if (!chart || !figure || !answer) return null;
  const a = answer.getBoundingClientRect();
  return {revealed: box('.st-key-cls_revealed'), answer: [a.top, a.bottom], chart, figure,
          height: window.innerHeight};
}"""
INSIDE_JS = ("() => { const b = (" + REVEALED_BOXES_JS + ")(); return !!b && "
             "[b.revealed, b.answer, b.chart, b.figure].every(([t, u]) => t >= 0 && "
             "u <= b.height); }")


def test_projector_shows_each_reveal_whole_and_its_url_makes_a_student(class_server, browser):
    """A Spanish teacher at a 1024x768 projector in presentation mode: the address bar never
    holds the teacher key, and a second browser that opens it is a student (a question to
    answer, no reveal and no navigation). After each reveal of steps 1-8 the question, its
    answer, the class's chart and the step's figure are all inside the screen (the reveal
    scrolls to them; the clicker alone moves the lesson), and past step 1 the join panel is
    one line. A reload of the teacher's browser is the teacher again. When the class ends, the
    student's page, still open, says that the teacher ended it, in its language."""
    url, store = class_server
    contexts = []
    try:
        context, teacher = open_page(browser, f"{url}/lesson?class=new&present=1&lang=es")
        contexts.append(context)
        code, key = teacher_code_and_key(context, teacher)
        assert store.is_teacher(code, key)
        context, other = open_page(browser, teacher.url, 390, 844)
        contexts.append(context)
        other.locator("[class*='st-key-cls_answer_'] label:has(input)").first.wait_for()
        assert not other.locator("[class*='st-key-cls_reveal_'], .st-key-ls_next").count()
        other.locator("[class*='st-key-cls_answer_'] label:has(input)").first.click()
        wait_for_app(other)
        for step in range(1, 9):
            on_step(teacher, step, 60_000)
            wait_for_app(teacher)
            if step > 1:
                assert not teacher.locator(".st-key-cls_join_panel").count()
                assert code in teacher.locator(".cls-line").inner_text()
            click(teacher, f"[class*='st-key-cls_reveal_{step}']")
            try:
                teacher.wait_for_function(INSIDE_JS, timeout=60_000, polling=100)
            except Exception:
                screenshot(teacher, f"class_projector_step{step}_not_inside")
                raise AssertionError(f"step {step}: not all inside the 768 px screen: "
                                     f"{teacher.evaluate(REVEALED_BOXES_JS)}") from None
            screenshot(teacher, f"class_projector_es_step{step}")
            teacher.keyboard.press("PageDown")  # the clicker: the next step
        assert "key=" not in teacher.url
        teacher.reload()  # the teacher's cookie: the same browser is the teacher again
        wait_for_app(teacher, timeout_ms=FIRST_LOAD_MS)
        teacher.locator(".st-key-cls_end").wait_for(state="attached")
        store.end(code, key)  # as a teacher on another replica would: the store alone tells
        other.get_by_text("El profesor ha terminado la clase.").first.wait_for(timeout=30_000)
    finally:
        for context in contexts:
            context.close()


def test_a_student_on_a_phone_answers_follows_and_has_the_page_list(class_server, browser):
    """A student whose browser says it is a phone (390x844, a phone's user agent) joins with
    the class's code: a phone's first run hides the page list, and the student's run, which
    is not split at its first figure, reruns at once with it, so the page list is there; the
    student answers step 1's question and follows the teacher to step 2."""
    url, _store = class_server
    contexts = []
    try:
        context, teacher = open_page(browser, f"{url}/lesson?class=new")
        contexts.append(context)
        code, _key = teacher_code_and_key(context, teacher)
        context, student = new_page(browser, 390, 844, phone=True)
        contexts.append(context)
        answer = student.locator("[class*='st-key-cls_answer_'] label:has(input)")
        with page_list_positions(student) as positions:
            student.goto(f"{url}/lesson?class={code}")
            answer.first.wait_for()
            wait_for_app(student)
        # the first run's hidden list may never be sent (a rerun drops what its run has not
        # sent), and the class may rerun the page again: the list ends in the sidebar
        assert positions[-1] == "SIDEBAR", positions
        assert student.locator(PAGE_LIST).count() == 6
        answer.first.click()
        wait_for_app(student)
        teacher.get_by_text("1 answered").wait_for(timeout=30_000)
        teacher_moves(teacher, ".st-key-ls_next", 2)
        on_step(student, 2, FOLLOW_S * 1000 + 5_000)
    finally:
        for context in contexts:
            context.close()


# ----------------------------------------------------------------------------- the deployment

FAILOVER_S = 10  # test_deploy's bound: a killed replica's student is back on their view


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """deploy/run.sh: nginx and two replicas sharing one SQLite class store in the run folder
    (ALIBI_VIZ_DATA_DIR, set by run.sh)."""
    from alibi_viz_app.testing import NGINX, start_class_stack, stop_class_stack

    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (make test installs it as root)")
    run_dir = tmp_path_factory.mktemp("classdeploy")
    env = {k: v for k, v in os.environ.items() if k not in (SETTING, "ALIBI_VIZ_DATA_DIR")}
    stack = start_class_stack(run_dir, replicas=2, env={**env, "ALIBI_VIZ_WARM_UP": "0"})
    yield stack
    stop_class_stack(stack)


def replica_cookie(stack, replica: str) -> str:
    """A value of nginx's alibi_replica cookie that routes to `replica` (r1, r2)."""
    for _ in range(200):
        cookie = secrets.token_hex(16)
        request = urllib.request.Request(stack.url + "/healthz",
                                         headers={"Cookie": f"alibi_replica={cookie}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.headers["X-Alibi-Replica"] == replica:
                return cookie
    raise AssertionError(f"no cookie routes to {replica}")


def open_on(browser, stack, cookie: str, path: str, width=1024, height=768, wait=True):
    """A browser whose alibi_replica cookie is `cookie` (replica_cookie: routed by nginx to
    one replica); with wait=False the page is still loading (the caller waits for it, so
    several pages load at once, as a class's do)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([{"name": "alibi_replica", "value": cookie, "url": stack.url}])
    context.add_init_script(STEP_SEEN_JS)
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(stack.url + path, wait_until="commit")
    if wait:
        wait_for_app(page, timeout_ms=FIRST_LOAD_MS)
    return context, page


CLASS = 10  # the class on the deployment: 1 teacher and 10 students


def test_class_on_two_replicas_survives_a_killed_replica(stack, browser):
    """Ten students spread over both replicas follow three step changes (each within 2 s of the
    projector) and answer; SIGKILL the replica of half of them mid-question: every answer
    is still counted once, and its students are back on the teacher's step on the live
    replica, their answers still theirs."""
    from alibi_viz_app.class_store import SQLiteStore

    contexts = []
    try:
        # each browser's cookie, found before any page loads (asked of a busy nginx, one
        # took 4.5 s)
        cookies = [replica_cookie(stack, ("r1", "r2")[k % 2]) for k in range(CLASS + 1)]
        context, teacher = open_on(browser, stack, cookies[CLASS], "/lesson?class=new")
        contexts.append(context)
        code, key = teacher_code_and_key(context, teacher)
        store = SQLiteStore(stack.run_dir / "data" / "class.sqlite3")
        students = []
        for k in range(CLASS):
            context, student = open_on(browser, stack, cookies[k],
                                       f"/lesson?class={code}", 400, 800, wait=False)
            contexts.append(context)
            students.append(student)
        wait_for_apps(students, timeout_ms=FIRST_LOAD_MS)
        for student in students:
            on_step(student, 1, 30_000)
        presses = {}
        for step in (2, 3, 4):
            presses[step] = teacher_moves(teacher, ".st-key-ls_next", step)
            for student in students:
                on_step(student, step, FOLLOW_S * 1000 + 10_000)
        lags = follow_lags(teacher, students, presses)
        assert max(lags) <= FOLLOW_S, lags
        teacher_moves(teacher, ".st-key-ls_prev", 3)  # back to step 3: its question
        for student in students:
            on_step(student, 3, FOLLOW_S * 1000 + 10_000)
            radio = student.locator("[class*='st-key-cls_answer_']")
            radio.locator("label").filter(has_text=re.compile("^Yes$")).click()
        wait_for_apps(students)
        teacher.get_by_text(f"{CLASS} answered").wait_for(timeout=15_000)
        moved = students[1::2]  # on r2: reloaded by nginx's failover script onto r1
        reloads = {id(page): [] for page in moved}
        for page in moved:
            page.on("framenavigated", lambda frame, page=page: frame == page.main_frame
                    and reloads[id(page)].append(1))
        stack.run("kill-replica", "2")
        killed = time.monotonic()
        for page in moved:
            while not reloads[id(page)]:
                assert time.monotonic() - killed < FAILOVER_S + 20, "no failover reload"
                page.wait_for_timeout(100)
            wait_for_app(page, timeout_ms=FIRST_LOAD_MS)
            on_step(page, 3, 10_000)
            mine = page.locator("[class*='st-key-cls_answer_'] label:has(input:checked)")
            assert mine.inner_text().strip() == "Yes"  # the same student (its cookie)
        back = time.monotonic() - killed
        print(f"failover: the killed replica's students back on step 3 after {back:.1f} s")
        teacher.get_by_text(f"{CLASS} answered").wait_for(timeout=15_000)
        heads_8 = f"s3-{zlib.crc32(json.dumps([8]).encode()):08x}"  # step 3's question, 8 heads
        counts = store.counts(code, heads_8, ("yes", "no"))
        assert counts.total == CLASS and counts.by_choice == {"yes": CLASS, "no": 0}
        assert back < FAILOVER_S + 10
        log = (stack.run_dir / "logs" / "access.log").read_text()
        assert "/lesson" in log and key not in log and code not in log  # nothing of the class
        assert "127.0.0.1" not in log  # nor the students' addresses
        # nor the error log, which at nginx's default level named both for every request
        # that met the killed replica
        errors = (stack.run_dir / "logs" / "error.log").read_text()
        assert key not in errors and code not in errors and "127.0.0.1" not in errors, errors
    finally:
        for context in contexts:
            context.close()
