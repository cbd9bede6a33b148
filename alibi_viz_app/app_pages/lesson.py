"""Lesson: a guided tour of ALiBi for a class, with a presentation mode for a projector.

Presentation mode (URL present=1) is built for a 1024x768 projector: the sidebar starts
collapsed, each step shows a short text and one figure sized to fit the screen, and the step
poses its question first and reveals the answer (computed from the step's own figure) on a
click. A presenter's clicker moves the lesson (PageDown/PageUp, the arrow keys, Space, Home,
End: lesson_clicker.js), whatever control has the focus, except while typing in a text box; its
next key reveals a step's answer first, then moves on, so a clicker alone shows every figure.

The handout (URL print=1) is every step on one page, each question with its answer and every
myth with its fact and demonstration, for the browser's Print (paper, or a PDF file): the
print style sheet (lesson_handout.css) hides the sidebar and the buttons and starts each step on
a new sheet.

The steps themselves are drawn by alibi_viz_app/lesson_steps.py, and where the lesson is and what its
buttons do is alibi_viz_app/lesson_nav.py; this page lays them out.
"""

import html
import json
from pathlib import Path

import streamlit as st

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _
from alibi_viz_app import class_view, ui
from alibi_viz_app.glossary import glossary_rows
from alibi_viz_app.lesson_nav import STEPS, at_the_end, backward, forward, go_to, screen
from alibi_viz_app.lesson_steps import (
    step_bias,
    step_copying,
    step_decay,
    step_extrapolation,
    step_misconceptions,
    step_position,
    step_reach,
    step_real_head,
    step_slopes,
)
from alibi_viz_app.query_params import UrlParam

PREFIX = "ls"
# Each step's view (alibi_viz_app/lesson_steps.py): its text, controls, question and figure.
STEP_VIEWS = (step_position, step_bias, step_slopes, step_decay, step_real_head,
              step_extrapolation, step_reach, step_copying, step_misconceptions)


@st.cache_resource(show_spinner=False)
def page_file(path: str) -> str:
    """A file kept beside this page (its style sheets, the clicker's script), read once a
    server: the page's script itself runs again on every rerun."""
    return Path(path).read_text(encoding="utf-8")


HERE = Path(__file__).parent
# Presentation mode's larger fonts and narrower margins, for a 1024x768 projector.
PRESENT_CSS = "\n<style>\n" + page_file(str(HERE / "lesson_present.css")) + "</style>\n"
# The handout is a column as wide as a sheet's text (A4 or Letter at the browser's default
# margins: about 720 px), on screen too: a chart keeps the width it was drawn at when printed,
# so one drawn across a laptop's page was cut at the sheet's edge. Printed, it keeps only the
# lesson (no sidebar, header, buttons, links or chart toolbars), never splits a chart, and
# starts every step after the first on a new sheet.
HANDOUT_CSS = "\n<style>\n" + page_file(str(HERE / "lesson_handout.css")) + "</style>\n"
PRINT_BUTTON = '<button class="ls-print" onclick="window.print()">%s</button>'
# The clicker's keys (a presenter's clicker sends PageDown/PageUp, some send the arrows), each
# with a hidden companion button that the script below clicks.
NEXT_KEYS = ("PageDown", "ArrowRight", " ")
PREV_KEYS = ("PageUp", "ArrowLeft")
# A capture-phase key listener on the page, installed once per browser tab: the clicker's keys
# move the steps whatever has focus (a slider just dragged, a dropdown just picked, a number just
# typed), except while typing in a text box; in a number box and on a slider only
# PageDown/PageUp move (the arrows move the caret, or the slider: a teacher who presses → on the
# slider just dragged means the slider, and moving the step instead lost the reveal). A clicker
# sends PageDown/PageUp, so it always pages. Streamlit's own button shortcuts stop when a widget
# has focus, so a teacher who touched a control lost the clicker without seeing why.
CLICKER_JS = "<script>\n" + page_file(str(HERE / "lesson_clicker.js")) + "</script>"


# ----------------------------------------------------------------------------- controls

def controls_ui():
    """Step, presentation mode and handout, seeded from the URL (step 1..9, present=1,
    print=1). Returns them."""
    first_run = ui.seed_from_url(PREFIX, [UrlParam("step", "int", 1, 1, len(STEPS)),
                                          UrlParam("present", "choice", "0", choices=("0", "1")),
                                          UrlParam("print", "choice", "0", choices=("0", "1"))])
    if first_run:  # the URL holds "0"/"1"; the toggles want a bool
        for key in ("ls_present", "ls_print"):
            st.session_state[key] = st.session_state[key] == "1"
    with ui.settings():
        st.header(_("Lesson"))
        present = st.toggle(_("Presentation mode"), key="ls_present",
                            help=_("For a projector: short text, one figure sized to the screen, "
                                   "the question first and the answer on a click. A clicker "
                                   "(PageDown/PageUp) or the arrow keys move through the "
                                   "lesson: next shows a step's answer, then the next step "
                                   "(URL: present=1)."))
        handout = st.toggle(_("Handout"), key="ls_print",
                            help=_("Every step on one page, each question with its answer, for "
                                   "printing on paper or saving as a PDF file with the "
                                   "browser's Print (Ctrl+P). URL: print=1."))
        # The list's key holds the step it was drawn at, and the list has no callback. A
        # browser that has not drawn a move yet (the buttons', or a class's teacher's) may
        # still send the old list's choice with its next request: under an old key it is
        # ignored, where under one fixed key it moved the page back (and took a student out
        # of the class), and a callback would still run for it.
        step = int(st.session_state["ls_step"])
        choice = st.radio(_("Steps"), list(range(1, len(STEPS) + 1)), index=step - 1,
                          key=f"ls_step_at_{step}",
                          format_func=ui.labels(range(1, len(STEPS) + 1),
                                             lambda k: f"{k}. {_(STEPS[k - 1])}"))
        if choice != step:  # chosen in the list drawn at this step
            go_to(choice)
            st.rerun()
        with st.expander(_("Glossary"), icon=":material/menu_book:"):
            for row in glossary_rows():
                st.markdown(f"**{row['term']}**: {row['meaning']}")
    return int(step), bool(present) and not handout, bool(handout)


def navigation_ui(step: int, present: bool) -> None:
    """First / Previous / step indicator / Next / Last. The clicker's keys are shortcuts of
    hidden companion buttons (one key per button in Streamlit), so the visible labels stay
    short enough for a 1024-pixel screen."""
    first, prev, middle, nxt, last = st.columns([1, 2, 3, 2, 1], vertical_alignment="center")
    first.button("", icon=":material/first_page:", key="ls_first", on_click=go_to, args=(1,),
                 disabled=step == 1, help=_("First step (Home)"), width="stretch")
    drawn = screen(step)  # what a press of Back or Next acts on (lesson_nav)
    prev.button(_("← Back"), key="ls_prev", on_click=backward, args=(drawn, present),
                disabled=step == 1, help=_("Previous step (PageUp, ←)"), width="stretch")
    middle.progress(step / len(STEPS),
                    text=_("Step {step} of {total}").format(step=step, total=len(STEPS)))
    nxt.button(_("Next →"), key="ls_next", on_click=forward, args=(drawn, present),
               disabled=at_the_end(step, present), type="primary",
               help=_("The answer, then the next step (PageDown, →, Space)") if present
               else _("Next step (PageDown, →, Space)"), width="stretch")
    last.button("", icon=":material/last_page:", key="ls_last", on_click=go_to,
                args=(len(STEPS),), disabled=step == len(STEPS), help=_("Last step (End)"),
                width="stretch")
    with st.container(key="ls_keys"):  # hidden by the CSS below, clicked by CLICKER_JS
        st.button(_("next"), key="ls_key_next", on_click=forward, args=(drawn, present),
                  disabled=at_the_end(step, present))
        st.button(_("back"), key="ls_key_back", on_click=backward, args=(drawn, present),
                  disabled=step == 1)
        st.button(_("first (Home)"), key="ls_key_home", on_click=go_to, args=(1,),
                  disabled=step == 1)
        st.button(_("last (End)"), key="ls_key_end", on_click=go_to, args=(len(STEPS),),
                  disabled=step == len(STEPS))
    companions = ({key: "ls_key_next" for key in NEXT_KEYS}
                  | {key: "ls_key_back" for key in PREV_KEYS}
                  | {"Home": "ls_key_home", "End": "ls_key_end"})
    # On a projector the keys stand in a corner, in plain sight but taking no room.
    keys_text = _("Keys: PageDown, → or Space: the answer, then next; PageUp or ← back; "
                  "Home, End.")
    keys_help = f'<div class="ls-keys-help">{html.escape(keys_text)}</div>' if present else ""
    st.html("<style>.st-key-ls_keys { display: none; } .ls-keys-help { position: fixed; "
            "right: 64px; top: 14px; font-size: 14px; color: #6b6b6b; z-index: 1000000; } "
            # a phone has no keys, and there the hint lay on the sidebar's button
            "@media (max-width: 640px) { .ls-keys-help { display: none; } }</style>"
            + keys_help + CLICKER_JS.replace("__COMPANIONS__", json.dumps(companions)),
            unsafe_allow_javascript=True)


# ----------------------------------------------------------------------------- page

def show_step(step: int, present: bool) -> None:
    st.header(f"{step}. {_(STEPS[step - 1])}")
    try:
        STEP_VIEWS[step - 1](step, present)
    except AlibiVizError as exc:  # the controls keep values valid; this guards the library's
        st.error(str(exc))        # checks


class_view.follow()  # a class's student follows the teacher's step (before the controls)
step, present, handout = controls_ui()
ui.write_url({"step": step, "present": 1 if present else None, "print": 1 if handout else None,
              **class_view.url_values()})
ui.show_url_warnings(PREFIX)
class_view.panel(step, present)
if handout:
    st.title(_("Lesson: ALiBi in nine steps"))
    st.html(HANDOUT_CSS + PRINT_BUTTON % html.escape(_("Print or save as PDF")),
            unsafe_allow_javascript=True)
    st.caption(_("Every step with its answer. Your browser's Print (Ctrl+P) puts each step on "
                 "its own sheet, without the sidebar and the buttons, on paper or in a PDF "
                 "file. The controls keep the values set on the lesson's pages."))
    for k in range(1, len(STEPS) + 1):
        with st.container(key=f"ls_handout_{k}"):
            show_step(k, False)
else:
    if present:
        st.html(PRESENT_CSS)
    else:  # on a projector the step's own heading is the title
        st.title(_("Lesson: ALiBi in nine steps"))
    # A following student's first screen is the question, with no buttons; on a phone the
    # buttons come after the step, which a reader scrolls through, so its figure comes first.
    buttons = not class_view.following()
    if buttons and not ui.on_phone():
        navigation_ui(step, present)
    show_step(step, present)
    if buttons and ui.on_phone():
        navigation_ui(step, present)
