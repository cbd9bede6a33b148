"""The class's answer distribution (alibi_viz_app.class_chart, issue 42): one bar per choice in
the question's order, the computed answer marked, texts large enough for a projector."""

import pytest

from alibi_viz import i18n
from alibi_viz.errors import AlibiVizError
from alibi_viz_app.class_chart import FONT_PX, RIGHT_COLOR, answer_distribution_figure


def test_bars_counts_shares_and_the_computed_answer():
    """Counts and shares are written on the bars; only the computed answer's bar is green and
    ticked; the title gives the number of answers."""
    fig = answer_distribution_figure(["More", "Less", "The same"], [12, 5, 0], right=0)
    bar = fig.data[0]
    assert list(bar.x) == [12, 5, 0] and list(bar.y) == ["✓ More", "Less", "The same"]
    assert bar.text[0] == "12 (71%)" and bar.text[2] == "0 (0%)"
    assert list(bar.textposition) == ["inside", "inside", "outside"]  # 0: beside, readable
    assert [c == RIGHT_COLOR for c in bar.marker.color] == [True, False, False]
    assert fig.layout.title.text == "The class: 17 answers"
    assert fig.layout.font.size >= FONT_PX >= 14


def test_no_answers_and_no_computed_choice():
    """With no answers the bars read 0 and nothing is ticked when no choice is the answer."""
    fig = answer_distribution_figure(["Yes", "No"], [0, 0])
    assert list(fig.data[0].text) == ["0", "0"] and not any("✓" in y for y in fig.data[0].y)
    assert fig.layout.title.text == "The class: 0 answers"


def test_titles_follow_the_language():
    """Spanish and Russian plural forms of the title."""
    for lang, two, five in (("es", "2 respuestas", "5 respuestas"),
                            ("ru", "2 ответа", "5 ответов")):
        with Language(lang):
            assert two in answer_distribution_figure(["a"], [2]).layout.title.text
            assert five in answer_distribution_figure(["a"], [5]).layout.title.text


class Language:
    """The current language set for a block."""

    def __init__(self, lang):
        self.lang = lang

    def __enter__(self):
        self.old = i18n.get_language()
        i18n.set_language(self.lang)

    def __exit__(self, *exc):
        i18n.set_language(self.old)


@pytest.mark.parametrize("labels,counts,right", [([], [], None), (["a"], [1, 2], None),
                                                 (["a"], [-1], None), (["a"], [1], 3)])
def test_bad_input_is_refused(labels, counts, right):
    """Mismatched or negative counts and a right index out of range raise AlibiVizError."""
    with pytest.raises(AlibiVizError):
        answer_distribution_figure(labels, counts, right)


def test_choices_that_read_as_numbers_stay_categories():
    """Labels such as "0", "30", "2,000" (a vote on training steps) are drawn one bar each, in
    the order given, not placed on a numeric axis at their values."""
    fig = answer_distribution_figure(["0", "30", "2,000"], [1, 0, 2], right=2)
    assert fig.layout.yaxis.type == "category"
    assert list(fig.data[0].y) == ["0", "30", "✓ 2,000"]
