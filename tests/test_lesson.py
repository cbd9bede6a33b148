"""The lesson's library (alibi_viz_app.lesson_cursor): the cursor (LessonCursor), what the clicker's next
and back do, step by step and myth by myth, outside and inside presentation mode; and the small
computations the steps show (labels, verdicts, the myths' table and sentence)."""

import numpy as np
import pytest

from alibi_viz_app.lesson_cursor import LessonCursor

STEPS, MYTHS = 9, 6


def walk_forward(present: bool) -> list[tuple[int, int, bool, bool]]:
    """Every state from step 1 on, pressing next until nothing is left: (step, myth, shown,
    arrived at a step)."""
    cursor, states = LessonCursor(STEPS, MYTHS), []
    while not cursor.at_the_end(present):
        arrived = cursor.forward(present)
        states.append((cursor.step, cursor.myth, cursor.myth_shown, arrived))
        assert len(states) <= STEPS + 2 * MYTHS  # every press moves it on
    return states


def test_next_outside_presentation_goes_step_by_step():
    """Off the projector next walks steps 2..9, each an arrival, and the last step is the end
    (its myths are all on the page at once)."""
    assert walk_forward(False) == [(s, 0, False, True) for s in range(2, STEPS + 1)]


def test_next_on_a_projector_shows_each_myth_then_its_fact():
    """On a projector next walks to step 9, then shows myth 1's fact, moves to myth 2, shows
    its fact, ... until the last myth's fact: 8 arrivals, then 2 presses a myth but the first
    myth's one."""
    states = walk_forward(True)
    assert states[:STEPS - 1] == [(s, 0, False, True) for s in range(2, STEPS + 1)]
    myths = states[STEPS - 1:]
    expected = [(STEPS, 0, True, False)]
    for myth in range(1, MYTHS):
        expected += [(STEPS, myth, False, False), (STEPS, myth, True, False)]
    assert myths == expected


@pytest.mark.parametrize("present", [False, True])
def test_back_returns_through_the_myths_then_the_steps(present):
    """Back from the last myth goes to each earlier myth (on a projector), then to the steps
    before, stopping at step 1; going to a step starts its myths from the first."""
    cursor = LessonCursor(STEPS, MYTHS, step=STEPS, myth=MYTHS - 1, myth_shown=True)
    seen = []
    while (cursor.step, cursor.myth) != (1, 0):
        arrived = cursor.backward(present)
        seen.append((cursor.step, cursor.myth, arrived))
    myths = [(STEPS, m, False) for m in range(MYTHS - 2, -1, -1)] if present else []
    assert seen == myths + [(s, 0, True) for s in range(STEPS - 1, 0, -1)]
    assert cursor.backward(present) and cursor.step == 1  # clamped at the first step


def test_go_to_clamps_and_starts_the_myths_again():
    cursor = LessonCursor(STEPS, MYTHS, step=STEPS, myth=3, myth_shown=True)
    cursor.go_to(42)
    assert (cursor.step, cursor.myth, cursor.myth_shown) == (STEPS, 0, False)
    cursor.go_to(-1)
    assert cursor.step == 1


def test_on_a_projector_next_reveals_a_steps_answer_before_moving_on():
    """Presentation mode: on a step whose question waits, next reveals the answer (no
    arrival, still the same step), and the press after it goes to the next step; off the
    projector, where the figure is already drawn, next goes straight on."""
    cursor = LessonCursor(STEPS, MYTHS, step=3, question_open=True)
    assert not cursor.at_the_end(True)
    assert cursor.forward(True) is False
    assert (cursor.step, cursor.question_open) == (3, False)
    assert cursor.forward(True) is True and cursor.step == 4
    cursor = LessonCursor(STEPS, MYTHS, step=3, question_open=True)
    assert cursor.forward(False) is True and cursor.step == 4


def test_a_clicker_alone_reveals_every_question_then_every_myth():
    """Pressing only next from step 1 on a projector, with the page saying each of steps 1-8
    asks a question when it arrives: each step is revealed before it is left, then the myths
    come as before; 8 reveals, 8 arrivals, 11 myth presses."""
    cursor, moves = LessonCursor(STEPS, MYTHS), []
    cursor.question_open = True
    while not cursor.at_the_end(True):
        before = (cursor.step, cursor.question_open)
        arrived = cursor.forward(True)
        moves.append("arrive" if arrived else "reveal" if before[1] else "myth")
        if arrived and cursor.step < STEPS:
            assert not cursor.question_open  # go_to leaves it to the page
            cursor.question_open = True      # the page draws the new step's question
        assert len(moves) <= 2 * STEPS + 2 * MYTHS
    assert moves[:2 * (STEPS - 1)] == ["reveal", "arrive"] * (STEPS - 1)
    assert moves[2 * (STEPS - 1):] == ["myth"] * (2 * MYTHS - 1)


def test_the_last_step_is_not_the_end_while_its_question_waits():
    """A lesson whose last step asked a question: next is not disabled until it is revealed."""
    cursor = LessonCursor(STEPS, MYTHS, step=STEPS, myth=MYTHS - 1, myth_shown=True,
                          question_open=True)
    assert not cursor.at_the_end(True)
    cursor.forward(True)
    assert cursor.at_the_end(True)


def test_the_shipped_models_differ_in_parameters_only_by_blooms_embedding_layernorm():
    """The parameters myth's surprise, checked: the shipped ALiBi model (BLOOM) has exactly
    2 x hidden_size more parameters than the RoPE one (GPT-NeoX), the weight and bias of the
    LayerNorm BLOOM puts on the token embeddings; GPT-NeoX has none."""
    from transformers import AutoModelForCausalLM

    from alibi_viz import assets
    from alibi_viz_app.lesson_cursor import embedding_norm_parameters

    paths = assets.shipped_models()
    if not {"alibi", "rope"} <= set(paths):
        pytest.skip("the shipped ALiBi and RoPE models are not in assets/models")
    alibi, rope = (AutoModelForCausalLM.from_pretrained(paths[n]) for n in ("alibi", "rope"))
    extra = sum(p.numel() for p in alibi.parameters()) - sum(p.numel() for p in rope.parameters())
    assert extra == embedding_norm_parameters(alibi) == 2 * alibi.config.hidden_size
    assert embedding_norm_parameters(rope) == 0


def test_slope_labels_write_no_bias_fractions_and_one():
    """The slope control's labels: 0 is "no position", a slope below 1 its fraction, 1 itself."""
    from alibi_viz_app.lesson_cursor import slope_label

    assert [slope_label(m) for m in (0.0, 1 / 256, 0.25, 1.0)] == [
        "0 (no position)", "1/256", "1/4", "1"]


def test_share_verdict_compares_with_and_without_the_bias():
    """Step 1's verdict: more or less of the attention with the bias, "The same" within
    rounding (m = 0 gives the same share by two computations)."""
    from alibi_viz_app.lesson_cursor import share_verdict

    assert share_verdict(0.61, 0.2) == "More"
    assert share_verdict(0.1, 0.2) == "Less"
    assert share_verdict(0.3, 0.3 * (1 + 1e-12)) == "The same"


def test_split_answer_keeps_the_first_sentence_of_a_long_answer():
    """A projector shows the first sentence of an answer of 3+ sentences and folds the rest;
    a sentence starting with a Spanish "¿" or a Russian capital counts, "m = 0.5" does not
    split; an answer of up to 2 sentences stays whole."""
    from alibi_viz_app.lesson_cursor import split_answer

    assert split_answer("One. Two.") == ("One. Two.", "")
    assert split_answer("One m = 0.5 here. Two! ¿Tres? Четыре.") == (
        "One m = 0.5 here.", "Two! ¿Tres? Четыре.")
    assert split_answer("Uno. Dos. Tres.", sentences=3) == ("Uno. Dos. Tres.", "")


def test_half_formed_is_the_first_snapshot_at_half_the_final_score():
    """Step 8's answer: the first saved score reaching half the last one, even if a later one
    dips below it again."""
    from alibi_viz_app.lesson_cursor import half_formed

    assert half_formed([0.0, 0.1, 0.5, 0.3, 0.8, 1.0]) == 2
    assert half_formed(np.array([0.7, 0.2, 1.0])) == 0


def test_paper_context_rows_hold_both_tables_by_length():
    """The context myth's table: one row per evaluation length of Table 3 or Table 15 (L =
    1,024), in order, each table's number where it has that length, "—" where not."""
    from alibi_viz import paper
    from alibi_viz_app.lesson_cursor import paper_context_rows

    rows = paper_context_rows()
    lengths = [row["evaluation length (tokens)"] for row in rows]
    assert lengths == sorted(set(paper.TABLE3_ALIBI) | set(paper.TABLE15_ALIBI_L1024))
    for row, n in zip(rows, lengths, strict=True):
        assert row["non-overlapping windows (Table 3)"] == paper.TABLE3_ALIBI.get(n, "—")
        assert row["sliding window, stride 1 (Table 15)"] == paper.TABLE15_ALIBI_L1024.get(n, "—")
    assert "—" in {v for row in rows for v in row.values()}  # the tables' lengths differ


def test_parameters_sentence_names_the_layernorm_only_when_it_is_the_whole_difference():
    """The parameters myth: 2h extra parameters that are BLOOM's embedding LayerNorm are named
    as such (2 × h = 2h); any other difference is said to lie in other layers; none, no
    sentence."""
    from alibi_viz_app.lesson_cursor import parameters_sentence

    named = parameters_sentence(1024, 1024)
    assert "1,024 more parameters" in named and "2 × 512 = 1,024" in named
    other = parameters_sentence(-300, 1024)
    assert "LayerNorm" not in other and "the 300 parameters between them" in other
    assert parameters_sentence(0, 1024) is None
