"""How a kind of held-out text is named inside a sentence, in each language."""

import pytest

from alibi_viz import assets, i18n


@pytest.mark.parametrize(("code", "expected"), [
    ("en", {"python": "Python code", "en": "English prose", "ru": "Russian prose"}),
    ("es", {"python": "código Python", "en": "prosa en inglés", "ru": "prosa en ruso"}),
    ("ru", {"python": "код на Python", "en": "английская проза", "ru": "русская проза"}),
])
def test_text_kind_in_sentence_keeps_english_capitals_only(code, expected):
    """English keeps the capital of a language's name ("English prose", never "english prose");
    Spanish and Russian write the common noun in lower case inside a sentence."""
    i18n.set_language(code)
    try:
        named = {kind: assets.text_kind_in_sentence(kind) for kind in expected}
    finally:
        i18n.set_language("en")
    assert named == expected


def test_learnable_figure_title_writes_english_with_a_capital():
    """The learnable-slopes chart's title names the text as a sentence would: "English prose"."""
    from alibi_viz import assets
    from alibi_viz.figures.extrapolation import learnable_perplexity_figure

    results = assets.load_learnable_slopes_results()
    if not results:
        pytest.skip("no shipped learnable-slopes results")
    fig = learnable_perplexity_figure(results, "en")
    assert "English prose" in fig.layout.title.text and "english" not in fig.layout.title.text


@pytest.mark.parametrize(("code", "named"), [("en", "on English prose by"),
                                             ("es", "en prosa en inglés"),
                                             ("ru", "(текст: английская проза)")])
def test_interpolation_note_names_the_text_as_a_sentence_does(code, named):
    """The rescaled-slopes note on /extrapolation names the sweep's text inside its sentence:
    "English prose" in English, lower case in Spanish and Russian (it wrote "Английская проза"
    mid-sentence)."""
    from alibi_viz import assets
    from alibi_viz.results.rescale import interpolation_note

    results = assets.load_rescale_results()
    if not results or results.get("kind") != "en":
        pytest.skip("no shipped rescale sweep on English prose")
    i18n.set_language(code)
    try:
        note = interpolation_note(results, 1_829_952)
    finally:
        i18n.set_language("en")
    assert note is not None and named in note, note
