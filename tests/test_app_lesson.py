"""The Lesson page under Streamlit's AppTest: nine steps, navigation, presentation mode with
predict-then-reveal, misconceptions, URL."""

import ast
import json
import re
from pathlib import Path

import pytest

from alibi_viz import alibi_slopes, assets
from alibi_viz_app.testing import figure_keys, figure_titles, figures, run_app, warnings

STEP_TITLES = ["Where position enters attention", "The bias matrix", "Slopes",
               "Decay and half-life", "A real head of the shipped model", "Train short, test long",
               "How far back does it look?", "Watch a copying head form", "Common misconceptions"]
LAST = len(STEP_TITLES)
needs_model = pytest.mark.skipif("alibi" not in assets.shipped_models(),
                                 reason="the shipped ALiBi model is not in assets/models yet")


def step_header(at) -> str:
    return next(h.value for h in at.header if h.value[:1].isdigit())


def test_first_step_renders_one_figure():
    """The lesson opens on step 1 with its text and exactly one figure."""
    at = run_app("lesson")
    assert not at.exception
    assert step_header(at) == "1. Where position enters attention"
    assert figure_keys(at) == ["ls_fig_position"]
    assert at.button(key="ls_prev").disabled


def test_next_and_previous_walk_every_step():
    """Next goes through steps 1..8 (each with one figure or a message, the misconceptions
    with none until asked), Previous comes back."""
    at = run_app("lesson")
    for step in range(2, LAST + 1):
        at.button(key="ls_next").click().run()
        assert not at.exception
        assert step_header(at) == f"{step}. {STEP_TITLES[step - 1]}"
        assert at.query_params["step"] == str(step)
        assert len(figures(at)) + len(at.info) == (0 if step == LAST else 1)
    assert at.button(key="ls_next").disabled
    for step in range(LAST - 1, 0, -1):
        at.button(key="ls_prev").click().run()
        assert step_header(at) == f"{step}. {STEP_TITLES[step - 1]}"


def test_step_list_jumps_to_a_step():
    """Choosing step 4 in the sidebar list shows the decay step."""
    at = run_app("lesson")
    at.radio(key="ls_step_at_1").set_value(4).run()
    assert at.radio(key="ls_step_at_4").value == 4  # the list drawn anew at step 4
    assert step_header(at) == "4. Decay and half-life"


def test_presentation_mode_asks_first_then_reveals_a_larger_figure():
    """The toggle writes present=1 and injects larger CSS fonts; the step asks its question
    with no figure, and "Reveal the answer" shows the enlarged figure and the answer."""
    at = run_app("lesson", {"step": "3"})
    normal = figures(at)[0]["layout"]
    at.toggle(key="ls_present").set_value(True).run()
    assert not figures(at) and any(m.value.startswith("**Predict:**") for m in at.markdown)
    at.button(key="ls_reveal_button_3").click().run()
    big = figures(at)[0]["layout"]
    assert big["font"]["size"] > normal.get("font", {}).get("size", 12)
    assert any("font-size" in h.proto.body for h in at.get("html"))
    assert at.query_params["present"] == "1"
    answer = next(m.value for m in at.markdown if "**Answer:**" in m.value)
    assert "Yes" in answer  # 8 heads: the slopes fall steadily


def test_revealed_answer_is_computed_from_the_figure():
    """Step 3 with 12 heads: the answer names head 9 as steeper than head 8, the values the
    slope figure draws."""
    at = run_app("lesson", {"step": "3", "present": "1"})
    at.number_input(key="ls_s3_heads").set_value(12).run()
    at.button(key="ls_reveal_button_3").click().run()
    slopes = alibi_slopes(12)  # what the figure draws (its arrays travel as base64)
    answer = next(m.value for m in at.markdown if "**Answer:**" in m.value)
    assert "head 9" in answer and f"{slopes[8]:.3g}" in answer and f"{slopes[7]:.3g}" in answer


def test_misconception_demonstrations_are_computed():
    """The slopes myth's "Show me" lists 1/2 .. 1/256; the linear-attention one counts the
    scores a causal layer computes at 1,024 tokens."""
    at = run_app("lesson", {"step": str(LAST)})
    at.button(key="ls_myth_slopes").click().run()
    table = at.table[0].value
    assert list(table["slope m"]) == [f"1/{2 ** k}" for k in range(1, 9)]
    at.button(key="ls_myth_linear").click().run()
    assert any("524,800 scores" in m.value for m in at.markdown)


def test_url_restores_step_and_presentation():
    """?step=4&present=1 opens step 4 in presentation mode."""
    at = run_app("lesson", {"step": "4", "present": "1"})
    assert step_header(at) == "4. Decay and half-life"
    assert at.toggle(key="ls_present").value is True
    assert not warnings(at)


def test_bad_url_values_warn_and_fall_back():
    """step=9 and present=yes warn; the lesson opens on step 1, not presenting."""
    at = run_app("lesson", {"step": "99", "present": "yes"})
    assert not at.exception
    assert len([w for w in warnings(at) if w.startswith("URL parameter ignored")]) == 2
    assert step_header(at) == "1. Where position enters attention"
    assert at.toggle(key="ls_present").value is False


def test_slope_control_changes_the_first_figure():
    """Setting the slope to 0 makes both attention rows of step 1 identical."""
    at = run_app("lesson")
    at.select_slider(key="ls_s1_slope").set_value(0.0).run()
    bars = {t["name"]: t["y"] for t in figures(at)[0]["data"] if t["type"] == "bar"}
    assert bars["attention with ALiBi"] == bars["attention without position"]


def test_real_head_step_follows_layer_and_head():
    """Step 5 draws the chosen head of the shipped model beside its bias-only map."""
    at = run_app("lesson", {"step": "5"})
    at.selectbox(key="ls_layer").set_value(2)
    at.selectbox(key="ls_head").set_value(1).run()
    assert not at.exception and not at.error
    assert figure_titles(at)[0].startswith("Real attention vs the bias alone (m=0.5,")
    assert any("Layer 2, head 1" in t for fig in figures(at)
               for t in [a["text"] for a in fig["layout"]["annotations"]])


def test_distance_verdict_has_a_margin():
    """28.2 against 28.2 tokens is no verdict; 5% of the bias's distance is the margin."""
    from alibi_viz_app.lesson_steps import distance_verdict

    assert distance_verdict(28.2, 28.2) == "same"
    assert distance_verdict(29.5, 28.2) == "same" and distance_verdict(27.0, 28.2) == "same"
    assert distance_verdict(30.0, 28.2) == "further" and distance_verdict(26.5, 28.2) == "nearer"


@pytest.mark.parametrize("head", [1, 8])
def test_real_head_verdict_keeps_its_margin(head):
    """Step 5 says "Further" or "Nearer" only when the head's mean distance differs from the
    bias alone's by 5% of it or more, and "About as far" inside that margin (which its question
    states), by the distances it prints (to their one decimal)."""
    at = run_app("lesson", {"step": "5"})
    at.selectbox(key="ls_head").set_value(head).run()
    assert any("as far (±5%) or nearer?" in m.value for m in at.markdown)
    answer = next(m.value for m in at.markdown if "for the bias alone" in m.value)
    found = re.match(r"(Further|About as far|Nearer): on average ([\d.]+) tokens back, against "
                     r"([\d.]+) for", answer)
    assert found, answer
    verdict, measured, prior = found[1], float(found[2]), float(found[3])
    if abs(measured - prior) < 0.05 * prior - 0.1:
        assert verdict == "About as far"
    elif abs(measured - prior) > 0.05 * prior + 0.1:
        assert verdict == ("Further" if measured > prior else "Nearer")


def test_missing_model_and_results_give_messages(monkeypatch, tmp_path):
    """Without shipped files, steps 5 and 6 say what to run instead of failing."""
    monkeypatch.setattr(assets, "MODELS_DIR", tmp_path / "models")
    monkeypatch.setattr(assets, "RESULTS_DIR", tmp_path)
    at = run_app("lesson", {"step": "5"})
    assert "python -m experiments.train" in at.info[0].value
    at.button(key="ls_next").click().run()
    assert "python -m experiments.evaluate" in at.info[0].value
    assert not at.exception


def test_outside_presentation_the_answer_waits_in_a_closed_box():
    """A student following on a laptop sees the question and the figure; the answer is in an
    'Answer' box that starts closed, not in the text under the question."""
    at = run_app("lesson", {"step": "3"})
    assert any(m.value.startswith("**Question.**") and "Yes" not in m.value for m in at.markdown)
    (box,) = [e for e in at.expander if e.label == "Answer"]
    assert not box.proto.expanded
    assert any("Yes" in m.value for m in box.markdown)  # 8 heads: the slopes fall steadily


def test_on_a_projector_the_myths_come_one_at_a_time_claim_before_fact():
    """Presentation mode, last step: myth 1's claim without its fact; Next reveals the fact
    (with its demonstration), Next again moves to myth 2, and so on; after the sixth fact Next
    is disabled; Back returns to the previous myth."""
    at = run_app("lesson", {"step": str(LAST), "present": "1"})

    def text():
        return " ".join(m.value for m in at.markdown)

    assert "**Myth 1 of 6:**" in text() and "**Fact:**" not in text()
    at.button(key="ls_next").click().run()
    assert "**Fact:** They are 1/2" in text()
    assert list(at.table[0].value["slope m"]) == [f"1/{2 ** k}" for k in range(1, 9)]
    at.button(key="ls_next").click().run()
    assert "**Myth 2 of 6:**" in text() and "**Fact:**" not in text()
    for _ in range(9):
        at.button(key="ls_next").click().run()
    assert "**Myth 6 of 6:**" in text() and "**Fact:** The paper says 2,048." in text()
    assert at.button(key="ls_next").disabled
    at.button(key="ls_prev").click().run()
    assert "**Myth 5 of 6:**" in text()
    assert not at.exception


def test_falcon_myth_is_false_and_its_fact_names_the_falcon_models_that_use_alibi():
    """A class votes every claim false, so the Falcon claim is about every Falcon model (false:
    transformers' FalconConfig defaults to rotary), not "Falcon uses ALiBi" (true of Falcon-RW);
    the fact names the Falcon-RW models, which do use ALiBi."""
    from transformers import FalconConfig

    from alibi_viz_app.lesson_steps import myths

    claim, fact = {key: (claim, fact) for key, claim, fact in myths()}["falcon"]
    assert claim == "All Falcon models use ALiBi."
    assert FalconConfig().alibi is False
    assert "Falcon-RW-1B and Falcon-RW-7B" in fact and "rotary" in fact


def test_context_myth_gives_the_early_token_curse_as_the_papers_hypothesis():
    """The paper offers the early token curse as a hypothesis (appendix B: "leading us to
    hypothesize"), so the context myth's fact attributes it to the authors, not states it."""
    from alibi_viz_app.lesson_steps import myths

    fact = {key: fact for key, _claim, fact in myths()}["context"]
    assert "The authors hypothesize that the gain comes from this early token curse" in fact
    assert "the gain is the early token curse shrinking" not in fact


def test_context_myth_quotes_the_papers_tables():
    """The context myth says what learners believe (the model *uses* 10K tokens) and answers in
    a few sentences, its demonstration the paper's Table 3 and Table 15 numbers (as
    alibi_viz.paper transcribes them) in one table by evaluation length."""
    from alibi_viz import paper

    at = run_app("lesson", {"step": str(LAST)})
    text = " ".join(m.value for m in at.markdown)
    assert "makes use of all 10K tokens" in text
    assert "a full window of the evaluation length" in text and "exactly L tokens" not in text
    at.button(key="ls_myth_context").click().run()
    (table,) = [t.value for t in at.table if "evaluation length (tokens)" in t.value.columns]
    rows = {row["evaluation length (tokens)"]: row for _, row in table.iterrows()}
    for n, value in paper.TABLE3_ALIBI.items():
        assert rows[f"{n:,}"]["non-overlapping windows (Table 3)"] == f"{value:.4g}"
    for n, value in paper.TABLE15_ALIBI_L1024.items():
        assert rows[f"{n:,}"]["sliding window, stride 1 (Table 15)"] == f"{value:.4g}"
    assert f"{paper.TABLE15_ALIBI_L512[512]:.4g}" not in table.to_string()  # not L = 512's row


@needs_model
def test_parameters_myth_says_why_alibis_model_has_more_parameters():
    """The parameters myth's table shows ALiBi's model with more parameters than RoPE's; the
    sentence under it names the difference (the table's own numbers) and its cause, BLOOM's
    embedding LayerNorm of 2 x hidden size."""
    at = run_app("lesson", {"step": str(LAST)})
    at.button(key="ls_myth_parameters").click().run()
    (table,) = [t.value for t in at.table if "all parameters" in t.value.columns]
    counts = [int(v.replace(",", "")) for v in table["all parameters"]]
    extra = counts[0] - counts[1]
    config = Path(assets.shipped_models()["alibi"]) / "config.json"
    hidden = json.loads(config.read_text())["hidden_size"]
    assert extra == 2 * hidden
    (sentence,) = [m.value for m in at.markdown if "LayerNorm" in m.value]
    assert f"{extra:,} more parameters" in sentence and f"2 × {hidden} = {extra}" in sentence
    assert list(table["position parameters"]) == ["0", "0"]


# A number of 4 digits or more as each language writes it: grouped by 3 with "," (en), "."
# (es) or a no-break space (ru); a run of 4 digits unseparated is another language's format.
GROUPED = {"en": ",", "es": ".", "ru": "\xa0"}


@pytest.mark.parametrize("lang", ["en", "es", "ru"])
def test_the_myths_write_every_number_in_the_languages_one_format(lang):
    """The handout's myths (claims, facts, demonstrations and their tables) write 1,024,
    2,048, 3,072 and 10,024 one way per language: never "1024" beside "1.024" or "10 024"
    (fractions such as 1/1024, the citation and the paper's quoted words aside)."""
    at = run_app("lesson", {"print": "1", "lang": lang})
    start = next(i for i, m in enumerate(at.markdown) if "**" in m.value and (
        "Myth" in m.value or "Mito" in m.value or "Миф" in m.value))
    texts = [m.value for m in at.markdown[start:]]
    texts += [" ".join(map(str, t.value.to_numpy().ravel())) for t in at.table]
    from alibi_viz import paper

    text = " ".join(texts).replace(paper.CITATION, "")  # its year and arXiv number aside
    text = re.sub(r"[\"“«„][^\"”»“]*[\"”»“]", "", text)  # and quotations
    bare = re.findall(r"(?<![/\d.,\xa0])\d{4,}(?![\d])", text)
    assert bare == [], bare
    grouped = set(re.findall(r"\d{1,3}([,.\xa0 ])\d{3}(?!\d)", text))
    assert grouped <= {GROUPED[lang]} | ({"."} if lang == "en" else {",", "."}) - {" "}, grouped
    sep = re.escape(GROUPED[lang])
    for n in ("1", "10"):
        assert re.search(rf"(?<![\d]){n}{sep}024(?!\d)", text), n


def test_handout_shows_every_step_with_its_answer():
    """?print=1 draws all nine steps one after another, each on its own sheet when printed,
    with the nine figures and without the step navigation."""
    at = run_app("lesson", {"print": "1"})
    assert not at.exception
    assert [h.value for h in at.header if h.value[:1].isdigit()] == [
        f"{k}. {title}" for k, title in enumerate(STEP_TITLES, 1)]
    assert figure_keys(at) == ["ls_fig_position", "ls_fig_bias", "ls_fig_slopes", "ls_fig_decay",
                               "ls_fig_real_head", "ls_fig_extrapolation", "ls_fig_reach",
                               "ls_fig_training"]
    keys = {b.key for b in at.button}
    assert not keys & {"ls_next", "ls_prev", "ls_key_next"}


LESSON_STEPS = Path(__file__).resolve().parents[1] / "alibi_viz_app" / "lesson_steps.py"


def lesson_defines() -> tuple[int, int]:
    """(questions, myths) as the lesson's code defines them: the calls of `ask` in its steps'
    module (one predict-then-reveal question each) and its myths' demonstrations."""
    from alibi_viz_app.lesson_steps import MYTHS

    tree = ast.parse(LESSON_STEPS.read_text())
    questions = sum(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ask"
                    for node in ast.walk(tree))
    return questions, MYTHS


def test_every_myth_has_its_demonstration():
    """The last step's myths and their demonstrations are one list: a key each, in order."""
    from alibi_viz_app.lesson_steps import DEMOS, MYTHS, myths

    assert [key for key, _claim, _fact in myths()] == list(DEMOS)
    assert MYTHS == len(DEMOS)


def test_handout_states_the_answers_and_the_myths_facts():
    """On paper nothing waits behind a click: each question's answer follows it (no closed
    Answer box, no Reveal button) and every myth is printed with its fact and its
    demonstration."""
    at = run_app("lesson", {"print": "1"})
    texts = [m.value for m in at.markdown]
    answers = [t for t in texts if "**Answer:**" in t]
    questions, myths = lesson_defines()
    assert len(answers) == questions
    assert answers[1].endswith("**Answer:** 0 on the diagonal and −5 ten tokens back.")
    assert all(e.label != "Answer" for e in at.expander)
    assert not [b for b in at.button if b.label in ("Reveal the answer", "Show me")]
    assert sum("**Fact:**" in t for t in texts) == myths
    assert any("position parameters" in t.value.columns for t in at.table)


def test_handout_is_in_the_page_language():
    at = run_app("lesson", {"print": "1", "lang": "ru"})
    assert not at.exception
    assert sum("**Ответ:**" in m.value for m in at.markdown) == lesson_defines()[0]


def test_where_no_longer_context_helps_the_lesson_does_not_count_from_l_to_l():
    """On the Russian held-out text no sliding-window length makes ALiBi significantly better
    than a shorter one: the lesson's handout says so with the change from 128 to 4,096, instead
    of "a gain of +0.0% from 128 to 128 tokens"."""
    from alibi_viz.i18n import set_language
    from alibi_viz.results.evaluation import describe_ratio, useful_context

    use = useful_context(assets.load_extrapolation_results("ru"), "alibi")
    assert use.last_gain is None
    at = run_app("lesson", {"print": "1", "lang": "ru"})
    texts = " ".join(m.value for m in at.markdown)
    set_language("ru")
    try:
        assert describe_ratio(use.whole) in texts
    finally:
        set_language("en")
    assert "128 до 128" not in texts and "128 до 128 токенов" not in texts


def test_reach_step_answers_with_the_computed_reach_sentence():
    """Step 7 asks what more context does past the training length and answers with
    reach.reach_answer's sentences, from the shipped reach curves' tests: no lowest context,
    no limit."""
    from alibi_viz.results.reach import reach_answer

    reach = assets.load_reach_results()
    at = run_app("lesson", {"print": "1"})
    answer = next(m.value for m in at.markdown if "**Answer:**" in m.value
                  and "what does more context do to the ALiBi model's loss?" in m.value)
    assert "Past 128 tokens, what does more context do" in answer
    assert answer.endswith(reach_answer(reach, 128, alibi_slopes(8)))
    assert "lowest" not in answer and "limit" not in answer


@needs_model
def test_reach_step_says_the_shipped_models_predict_bytes():
    """Step 7 says a model predicts tokens, one byte each for the shipped models (not "each
    word it predicts"): their vocabulary is the 256 bytes plus pad, eos and unk."""
    config = json.loads((assets.shipped_models()["alibi"] / "config.json").read_text())
    assert config["vocab_size"] == 256 + 3
    at = run_app("lesson", {"step": "7"})
    texts = " ".join(m.value for m in at.markdown)
    assert "before each token it predicts (a token is one byte for the shipped models)" in texts
    assert "each word it predicts" not in texts


def test_bias_step_says_the_gentle_head_reaches_the_clip_far_beyond_the_drawn_length():
    """Step 2's caption: head 8 does not reach −10 until 2,560 tokens back, beyond the 16
    drawn (not "only 2,560 tokens back")."""
    at = run_app("lesson", {"step": "2"})
    text = " ".join(c.value for c in at.caption)
    assert "does not reach it until 2,560 tokens back, far beyond the 16 drawn" in text
    assert "only 2,560" not in text


def answers(at) -> list[str]:
    return [m.value for m in at.markdown if "**Answer:**" in m.value]


@pytest.mark.parametrize("key", ["ls_next", "ls_key_next"])
def test_on_a_projector_next_reveals_the_answer_then_moves_on(key):
    """Presentation mode, step 3: Next (the button, or the hidden one the clicker's keys press)
    first shows the answer and the figure on the same step, and only the press after it goes
    to step 4, whose question is asked afresh."""
    at = run_app("lesson", {"step": "3", "present": "1"})
    assert not answers(at) and not figures(at)
    at.button(key=key).click().run()
    assert step_header(at) == "3. Slopes"
    assert figure_keys(at) == ["ls_fig_slopes"] and "Yes" in answers(at)[0]
    at.button(key=key).click().run()
    assert step_header(at) == "4. Decay and half-life"
    assert not answers(at) and not figures(at)
    assert not at.exception


@pytest.mark.parametrize(("step", "change"), [
    (3, lambda at: at.number_input(key="ls_s3_heads").set_value(12)),
    (1, lambda at: at.select_slider(key="ls_s1_slope").set_value(0.5)),
    pytest.param(5, lambda at: at.selectbox(key="ls_layer").set_value(2), marks=needs_model),
    pytest.param(5, lambda at: at.selectbox(key="ls_head").set_value(1), marks=needs_model),
])
def test_a_changed_question_hides_its_answer_until_revealed_again(step, change):
    """On a projector, after a reveal, a control that changes the question (head count, slope,
    layer, head) asks the new question with no answer and no figure: the answer appears only
    after its own reveal, and then it answers the new question."""
    at = run_app("lesson", {"step": str(step), "present": "1"})
    at.button(key=f"ls_reveal_button_{step}").click().run()
    (before,) = answers(at)
    change(at).run()
    assert not answers(at) and not figures(at)
    predict = [m.value for m in at.markdown if m.value.startswith("**Predict:**")]
    assert len(predict) == 1 and predict[0] not in before
    at.button(key=f"ls_reveal_button_{step}").click().run()
    (after,) = answers(at)
    assert after != before and figures(at)
    if step == 3:
        assert "head 9" in after  # 12 heads: head 9 is steeper than head 8


def test_an_unchanged_question_keeps_its_answer_when_only_the_figure_changes():
    """Step 2's question (head 1's bias on the diagonal and ten tokens back) does not depend on
    the drawn length: after a reveal, another length redraws the figure and keeps the answer."""
    at = run_app("lesson", {"step": "2", "present": "1"})
    at.button(key="ls_reveal_button_2").click().run()
    (before,) = answers(at)
    at.slider(key="ls_s2_len").set_value(32).run()
    assert answers(at) == [before] and figures(at)


@pytest.mark.parametrize(("lang", "score"), [("en", "score"), ("es", "puntuación"),
                                             ("ru", "оценка")])
def test_handout_writes_the_chosen_values_and_no_hover_hint(lang, score):
    """On paper: each control's value written out under it (the print style sheet hides the
    widgets), no "hover" hint anywhere (paper has no mouse), and the formula's score in the
    page's language. The lesson's page itself keeps its hover hints."""
    from alibi_viz.i18n import set_language, translations

    at = run_app("lesson", {"print": "1", "lang": lang})
    gettext = translations(lang).gettext
    texts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for label, value in (("Slope m", "1/4"), ("Sequence length", "16"), ("Heads", "8"),
                         ("Sequence length", "256"), ("Layer", "1"), ("Head", "8"),
                         ("Protocol", gettext("both"))):
        assert f"**{gettext(label)}:** {value}" in texts, label
    hover = gettext("Tap or hover for the values.")
    assert not [t for t in texts if hover in t or gettext(
        "Point at the first panel (tap or hover) to read them.") in t]
    assert not [t for t in texts if re.search("hover|ratón|наведите|toca|коснитесь", t, re.I)]
    (formula,) = [e.value for e in at.latex]
    assert rf"\text{{{score}}}_{{ij}}" in formula
    set_language("en")
    page = run_app("lesson", {"step": "2", "lang": lang})
    assert any(hover in c.value for c in page.caption)


def test_the_files_the_page_reads_beside_it_are_package_data():
    """The Lesson page's style sheets and clicker script (read beside the page at run time) are
    matched by pyproject's package data for alibi_viz_app/, so a wheel ships them with the page."""
    import fnmatch

    import tomllib

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["alibi_viz_app"]
    page = (root / "alibi_viz_app" / "app_pages" / "lesson.py").read_text()
    read = re.findall(r'page_file\(str\(HERE / "([\w.]+)"\)\)', page)
    assert read, "the page reads no file beside it"
    for name in read:
        assert (root / "alibi_viz_app" / "app_pages" / name).is_file(), name
        assert any(fnmatch.fnmatch(f"app_pages/{name}", p) for p in patterns), name


def test_one_press_moves_the_lesson_once_however_often_it_arrives():
    """A press's callback that runs twice for one press (its trigger delivered twice) moves the
    lesson once: Next and Back act on the screen they were drawn on (alibi_viz_app.lesson_nav.screen).
    Presses drawn on the screen as it is move every time."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from alibi_viz_app.lesson_nav import backward, forward, screen

        st.session_state.setdefault("ls_step", 3)
        drawn = screen(st.session_state["ls_step"])
        for key, press in (("next", forward), ("back", backward)):
            if st.button(key, key=key):
                press(drawn, False)  # the press
                press(drawn, False)  # the same press, delivered again
        st.write(f"step {st.session_state['ls_step']}")

    at = AppTest.from_function(script, default_timeout=60).run()
    assert at.markdown[0].value == "step 3"
    for expected in (4, 5, 6):
        at.button(key="next").click().run()
        assert at.markdown[0].value == f"step {expected}"
    at.button(key="back").click().run()
    assert at.markdown[0].value == "step 5"
