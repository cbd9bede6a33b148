"""Where the Lesson page is: its steps, and what its navigation buttons and the clicker's keys
do to the session (a step, a myth on the last step, a question waiting for its reveal).

A press acts on the screen it was drawn on (`screen`: the step, and how many times the lesson
has moved). Streamlit runs a button's callback once for every message that carries the
button's trigger, and a press has been seen to move a class's projector from step 1 to step 4
on a busy server (test_browser_class); a busy browser's timed fragment rerun (the class's live
count) may carry a trigger that its click sends again. Whatever the cause, once the session has
moved off the screen a press was drawn on, the press does nothing: one press moves the lesson
once. A second press that comes before the page is redrawn is dropped the same way: the
teacher sees one move and presses again.
"""

import streamlit as st

from alibi_viz.i18n import N_
from alibi_viz_app.lesson_cursor import LessonCursor
from alibi_viz_app.lesson_steps import MYTHS, forget_questions, question_open, reveal

STEPS = (  # translated where shown: _(STEPS[k])
    N_("Where position enters attention"),
    N_("The bias matrix"),
    N_("Slopes"),
    N_("Decay and half-life"),
    N_("A real head of the shipped model"),
    N_("Train short, test long"),
    N_("How far back does it look?"),
    N_("Watch a copying head form"),
    N_("Common misconceptions"),
)
MOVES = "ls_moves"  # how many times this session's lesson moved, or revealed by a press


def cursor(step: int, present: bool) -> LessonCursor:
    """The lesson's cursor at `step`, its myth and its question as this session left them."""
    return LessonCursor(len(STEPS), MYTHS, step, st.session_state.get("ls_myth", 0),
                        bool(st.session_state.get("ls_myth_shown")),
                        question_open=present and question_open(step))


def screen(step: int) -> tuple[int, int]:
    """What a navigation button drawn now is pressed on: the step, and how many times this
    session's lesson has moved (or revealed by a press) so far."""
    return step, int(st.session_state.get(MOVES, 0))


def keep(moved: LessonCursor, arrived: bool) -> None:
    """Store the cursor for the next run: on arriving at a step every question is asked
    afresh; a question the cursor closed without moving is revealed."""
    st.session_state[MOVES] = int(st.session_state.get(MOVES, 0)) + 1
    st.session_state["ls_step"] = moved.step
    st.session_state["ls_myth"], st.session_state["ls_myth_shown"] = moved.myth, moved.myth_shown
    if arrived:
        forget_questions()
    elif not moved.question_open and question_open(moved.step):
        reveal(moved.step)


def on_screen(drawn: tuple[int, int]) -> bool:
    """Whether the session is still on the screen a press was drawn on."""
    return screen(int(st.session_state.get("ls_step", drawn[0]))) == drawn


def go_to(step: int) -> None:
    moved = cursor(step, False)
    moved.go_to(step)
    keep(moved, arrived=True)


def forward(drawn: tuple[int, int], present: bool) -> None:
    """Next (the button, PageDown, → or Space) pressed on screen `drawn`: on a projector a
    step's waiting question is revealed first, then the press after it moves on
    (`LessonCursor.forward`)."""
    if on_screen(drawn):
        moved = cursor(drawn[0], present)
        keep(moved, arrived=moved.forward(present))


def backward(drawn: tuple[int, int], present: bool) -> None:
    if on_screen(drawn):
        moved = cursor(drawn[0], present)
        keep(moved, arrived=moved.backward(present))


def at_the_end(step: int, present: bool) -> bool:
    return cursor(step, present).at_the_end(present)
