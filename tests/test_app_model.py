"""The Model heads page under Streamlit's AppTest, with the shipped ALiBi model: maps, layer and
head selection, URL state, bad parameters, a 1 MB paste, and a model folder that breaks."""

import shutil

import pytest

from alibi_viz import assets, data
from alibi_viz_app.testing import (
    MODEL_HEADS_FIGURES,
    figure_keys,
    figure_titles,
    figures,
    run_app,
    warnings,
)

SHIPPED = assets.MODELS_DIR / "alibi"
SHORT = "def add(a, b):\n    return a + b\n"  # 32 byte tokens: labelled heatmaps, fast
LONG = "x = 1\n" * 40  # 240 tokens: past the training length (128)



def grid_title(at) -> str:
    return figure_titles(at)[0]


def row_title(at) -> str:
    return figures(at)[1]["layout"]["title"]["text"]


def test_page_renders_the_shipped_model():
    """Default view: the ALiBi model on the sentence example, grid, head row and statistics."""
    at = run_app("model_heads")
    assert not at.exception and not at.error
    assert figure_keys(at) == MODEL_HEADS_FIGURES
    assert grid_title(at).startswith("Layer 1:")
    assert at.text_area(key="mh_text").value == data.sentence_example("en")
    assert at.query_params["model"] == "alibi" and at.query_params["example"] == "sentence"


def test_url_sets_layer_head_and_text():
    """?layer=2&head=3&text=... opens exactly that view, with token labels for a short text."""
    at = run_app("model_heads", {"layer": "2", "head": "3", "text": SHORT})
    assert at.selectbox(key="mh_layer").value == 2 and at.selectbox(key="mh_head").value == 3
    assert grid_title(at).startswith("Layer 2:")
    assert row_title(at).startswith("Layer 2, head 3 (m=0.125)")
    xaxis = figures(at)[0]["layout"]["xaxis"]  # the text's own bytes under their positions
    assert xaxis["ticktext"] == [{" ": "␣", "\n": "⏎"}.get(SHORT[i], SHORT[i])
                                 for i in xaxis["tickvals"]]
    assert at.query_params["text"] == SHORT


def test_selecting_a_head_updates_the_decomposition():
    """Choosing head 5 redraws the row for head 5 and puts head=5 in the URL."""
    at = run_app("model_heads", {"text": SHORT})
    at.selectbox(key="mh_head").set_value(5).run()
    assert row_title(at).startswith("Layer 1, head 5")
    assert at.query_params["head"] == "5"


def test_selecting_a_layer_redraws_the_grid():
    """Choosing layer 4 draws layer 4's heads."""
    at = run_app("model_heads", {"text": SHORT})
    at.selectbox(key="mh_layer").set_value(4).run()
    assert grid_title(at).startswith("Layer 4:")
    assert at.query_params["layer"] == "4"


def test_bad_url_values_warn_and_fall_back():
    """layer=99, head=-1, model=nonexistent and tokens=99999 each warn; the page shows layer
    1, head 1, the default token cap."""
    at = run_app("model_heads", {"layer": "99", "head": "-1", "model": "nonexistent",
                                 "tokens": "99999", "text": SHORT})
    assert not at.exception
    shown = " ".join(warnings(at))
    assert "'model' must be one of" in shown and "'head' must be in" in shown
    assert "'tokens' must be in [8, 2048]" in shown and "Layer 99 is out of range" in shown
    assert at.selectbox(key="mh_layer").value == 1 and at.selectbox(key="mh_head").value == 1
    assert figure_keys(at) == MODEL_HEADS_FIGURES


def test_blank_text_asks_for_text():
    """A text of spaces: a message asking for text, no maps, no traceback; only the figures
    that do not read the text (which heads matter, the training snapshots) stay."""
    at = run_app("model_heads", {"text": "   "})
    assert not at.exception
    assert any("The text is empty" in w for w in warnings(at))
    assert figure_keys(at) == ["mh_fig_ablation", "mh_fig_training"]


def test_training_sentence_says_sparse_snapshots_cannot_show_a_phase_change():
    """When most of the copying head's rise falls between two snapshots, the page gives their
    gap and says it cannot tell a phase change from a steady rise (not "a jump like the phase
    change Olsson et al. saw")."""
    from alibi_viz.results.snapshots import shipped_curves

    curves = shipped_curves()
    if curves is None:
        pytest.skip("no shipped snapshots")
    before, after, share = curves.phase_change()
    at = run_app("model_heads", {"text": "   "})
    text = next(m.value for m in at.markdown if m.value.startswith("The strongest copying head"))
    assert "a jump like the phase change" not in text
    sparse = (f"between two snapshots {after - before:,} steps apart, and snapshots this sparse "
              "cannot tell a sudden jump")
    assert (sparse in text) == (share >= 0.5)


def test_baseline_model_shows_no_added_bias():
    """The RoPE baseline draws its heads; its caption says position is inside q·k."""
    at = run_app("model_heads", {"model": "rope", "text": SHORT})
    # no training snapshots for the baselines: those are the ALiBi model's
    assert not at.exception and figure_keys(at) == [k for k in MODEL_HEADS_FIGURES
                                                    if k != "mh_fig_training"]
    assert any("rotary embeddings rotate q and k" in c.value for c in at.caption)


def test_input_longer_than_training_length_is_marked():
    """240 tokens on a model trained at 128: a note, and red dashes in the grid and row."""
    at = run_app("model_heads", {"text": LONG})
    assert any("longer than the training length (128)" in i.value for i in at.info)
    for fig in figures(at)[:2]:
        assert any(t.get("line", {}).get("dash") == "dash" for t in fig["data"])


def test_example_picker_fills_the_text():
    """Picking the code example puts it in the text area and example=code in the URL; the
    paragraph is still offered, as example=prose."""
    at = run_app("model_heads", {"text": SHORT})
    at.selectbox(key="mh_example").set_value("code").run()
    assert at.text_area(key="mh_text").value == data.code_example()
    assert at.query_params["example"] == "code" and "text" not in at.query_params
    at.selectbox(key="mh_example").set_value("prose").run()
    assert at.text_area(key="mh_text").value == data.prose_example("en")


def test_long_custom_text_is_left_out_of_the_url():
    """A typed text over 500 characters is not put in the URL."""
    at = run_app("model_heads", {"text": SHORT})
    at.text_area(key="mh_text").set_value("y = 2\n" * 100).run()
    assert "text" not in at.query_params and "example" not in at.query_params


def test_megabyte_paste_is_capped_with_a_message():
    """A 1 MB paste is cut to 20,000 characters with a warning; the maps still draw."""
    at = run_app("model_heads", {"text": SHORT, "tokens": "64"})
    at.text_area(key="mh_text").set_value("a" * 1_000_000).run()
    assert not at.exception
    assert any("1,000,000 characters" in w for w in warnings(at))
    assert len(at.text_area(key="mh_text").value) == 20_000
    assert figure_keys(at) == MODEL_HEADS_FIGURES
    assert any("Kept the first 64" in i.value for i in at.info)


def test_choices_survive_a_visit_to_another_page():
    """Streamlit forgets widgets not drawn; head and text come back after another page."""
    at = run_app("model_heads", {"text": SHORT, "head": "4"})
    at.switch_page("app_pages/bias_explorer.py").run()
    at.switch_page("app_pages/model_heads.py").run()
    assert at.selectbox(key="mh_head").value == 4
    assert at.text_area(key="mh_text").value == SHORT


@pytest.fixture
def own_models(tmp_path, monkeypatch):
    """A copy of the shipped ALiBi model as the only model the page offers."""
    folder = tmp_path / "models" / "alibi"
    shutil.copytree(SHIPPED, folder)
    monkeypatch.setattr(assets, "MODELS_DIR", tmp_path / "models")
    monkeypatch.setenv("ALIBI_VIZ_ALLOW_CUSTOM_PATHS", "1")  # the copy lies outside assets/
    return folder


def test_corrupted_weights_while_running_give_a_message(own_models):
    """model.safetensors overwritten while the app runs: a loading error, no traceback."""
    at = run_app("model_heads", {"text": SHORT})
    assert figure_keys(at) == MODEL_HEADS_FIGURES
    (own_models / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    at.run()
    assert not at.exception
    assert any("not a valid safetensors file" in e.value for e in at.error)
    assert not figures(at)


def test_model_folder_removed_while_running_gives_a_message(own_models):
    """The only model's folder deleted while the app runs: a clear error, no traceback."""
    at = run_app("model_heads", {"text": SHORT})
    shutil.rmtree(own_models)
    at.run()
    assert not at.exception
    assert any("No shipped models were found" in e.value for e in at.error)



@pytest.mark.parametrize("lang", ["en", "es", "ru"])
def test_page_opens_on_a_sentence_in_its_language_with_no_note(lang):
    """?lang=es (ru) opens on a held-out sentence in Spanish (Russian), which the shipped models
    were trained to read, short enough in every language (a Russian letter is two byte tokens)
    to be read whole within the training length: no warning or note about the token limit or
    the training length above the maps (the Russian paragraph of 620 tokens opened with two)."""
    at = run_app("model_heads", {"lang": lang})
    assert not at.exception
    assert at.text_area(key="mh_text").value == data.sentence_example(lang)
    assert len(data.sentence_example(lang).encode("utf-8")) <= assets.SHIPPED_TRAIN_SEQ_LEN
    assert not at.warning
    notes = [i.value for i in at.info]
    assert not [n for n in notes if "512" in n or "128" in n], notes


def test_switching_language_switches_an_untouched_example():
    """An example the user did not edit follows the page's language."""
    at = run_app("model_heads")
    at.selectbox(key="app_lang").set_value("ru").run()
    assert at.text_area(key="mh_text").value == data.sentence_example("ru")


def test_training_step_from_the_url_shows_that_snapshot():
    """?step=30 loads the ALiBi model as it was at step 30: a note says so, the maps are of
    that model (they differ from the final model's), the URL keeps the step."""
    final = figures(run_app("model_heads", {"text": SHORT}))[0]
    at = run_app("model_heads", {"text": SHORT, "step": "30"})
    assert not at.exception and not at.error
    assert any("training step 30" in i.value for i in at.info)
    assert at.query_params["step"] == "30"
    assert figures(at)[0]["data"] != final["data"]
    # which heads matter is measured on the models as trained, so it is left out at step 30
    assert figure_keys(at) == [k for k in MODEL_HEADS_FIGURES if k != "mh_fig_ablation"]


def test_a_training_step_that_was_not_saved_warns():
    at = run_app("model_heads", {"step": "31"})
    assert not at.exception
    assert any(w.startswith("URL parameter ignored") for w in warnings(at))


def test_which_heads_matter_states_the_shipped_measurement():
    """The head-ablation paragraph states the shipped numbers: the costliest head and its cost,
    and the steep-vs-gentle comparison that answers the claim, from ablation.json."""
    from alibi_viz.i18n import number
    from alibi_viz.results.ablation import ablation_summary

    entry = assets.load_ablation_results()["models"]["alibi"]
    summary = ablation_summary(entry)
    at = run_app("model_heads", {"text": SHORT})
    text = next(m.value for m in at.markdown if m.value.startswith("Silencing layer"))
    layer, head, cost, _slope = summary["top"]
    assert f"layer {layer + 1}, head {head + 1} costs the most: +{number(cost, 3)}" in text
    assert f"costs {number(summary['steep'], 3)} on average" in text


def answer_box_texts(at) -> tuple[list[str], list[str]]:
    """(markdown inside the questions' closed "Answer" boxes, markdown anywhere else)."""
    inside = [m.value for box in at.expander if box.label == "Answer" for m in box.markdown]
    return inside, [m.value for m in at.markdown if m.value not in inside]


def test_which_heads_matter_answers_only_inside_its_answer_box():
    """The verdict ("Silencing layer 1, head 1 costs the most ... Here the steeper heads matter
    more") sits in the question's Answer box with the answer, not under the chart where a
    student reads it before predicting."""
    at = run_app("model_heads", {"text": SHORT})
    inside, outside = answer_box_texts(at)
    assert [t for t in inside if t.startswith("Silencing layer")]
    assert [t for t in inside if t.startswith(("Yes: the steepest", "No: the steepest"))]
    assert not [t for t in outside if t.startswith(("Silencing layer", "Yes: the steepest",
                                                    "No: the steepest"))
                or "steeper heads matter" in t]


def test_which_heads_matter_draws_the_steep_heads_first():
    """The ablation chart's slope axis runs from the steepest head at the left (a chart wider
    than a phone is cut on the right, where the steep heads, the ones that cost the most, sat
    off screen), and the costliest head has the largest slope drawn."""
    at = run_app("model_heads", {"text": SHORT})
    fig = figures(at)[figure_keys(at).index("mh_fig_ablation")]
    assert fig["layout"]["xaxis"]["autorange"] == "reversed"
    assert fig["layout"]["xaxis"]["type"] == "log"
    points = [(x, y) for trace in fig["data"] for x, y in zip(trace["x"], trace["y"], strict=True)]
    costliest = max(points, key=lambda p: p[1])
    assert costliest[0] == max(x for x, _y in points)  # drawn leftmost on the reversed axis


def test_every_section_opens_with_what_to_look_at():
    """Sections 1 to 5, the training snapshots and which heads matter each open with one
    sentence saying what they show and what to look at; the statistics' definitions fold
    under an expander, and no caption names a source file."""
    at = run_app("model_heads", {"text": SHORT})
    leads = [m.value for m in at.markdown if "look at" in m.value.lower()]
    assert len(leads) >= 7, leads
    box = next(b for b in at.expander if b.label.startswith("What the statistics mean"))
    assert any(m.value.startswith("**Fitted slope**") for m in box.markdown)
    assert not [c.value for c in at.caption if "alibi_viz/models/" in c.value]
