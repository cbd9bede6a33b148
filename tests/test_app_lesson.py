"""The Lesson page under Streamlit's AppTest: six steps, navigation, presentation mode, URL."""

import pytest
from apptest_utils import figure_titles, figures, run_app, warnings

from alibi_viz import assets

STEP_TITLES = ["Where position enters attention", "The bias matrix", "Slopes",
               "Decay and half-life", "A real head of the shipped model", "Train short, test long"]
needs_model = pytest.mark.skipif("alibi" not in assets.shipped_models(),
                                 reason="the shipped ALiBi model is not in assets/models yet")


def step_header(at) -> str:
    return next(h.value for h in at.header if h.value[:1].isdigit())


def test_first_step_renders_one_figure():
    """The lesson opens on step 1 with its text and exactly one figure."""
    at = run_app("lesson")
    assert not at.exception
    assert step_header(at) == "1. Where position enters attention"
    assert len(figures(at)) == 1
    assert at.button(key="ls_prev").disabled


def test_next_and_previous_walk_all_six_steps():
    """Next goes through steps 1..6 (each with one figure or a message), Previous comes back."""
    at = run_app("lesson")
    for step in range(2, 7):
        at.button(key="ls_next").click().run()
        assert not at.exception
        assert step_header(at) == f"{step}. {STEP_TITLES[step - 1]}"
        assert at.query_params["step"] == str(step)
        assert len(figures(at)) + len(at.info) == 1
    assert at.button(key="ls_next").disabled
    for step in range(5, 0, -1):
        at.button(key="ls_prev").click().run()
        assert step_header(at) == f"{step}. {STEP_TITLES[step - 1]}"


def test_step_list_jumps_to_a_step():
    """Choosing step 4 in the sidebar list shows the decay step."""
    at = run_app("lesson")
    at.radio(key="ls_step").set_value(4).run()
    assert step_header(at) == "4. Decay and half-life"


def test_presentation_mode_enlarges_text_and_figures():
    """The toggle injects larger CSS fonts, enlarges the figure and writes present=1."""
    at = run_app("lesson", {"step": "3"})
    normal = figures(at)[0]["layout"]
    at.toggle(key="ls_present").set_value(True).run()
    big = figures(at)[0]["layout"]
    assert big["font"]["size"] > normal.get("font", {}).get("size", 12)
    assert big["height"] > normal["height"]
    assert any("font-size" in h.proto.body for h in at.get("html"))
    assert at.query_params["present"] == "1"


def test_url_restores_step_and_presentation():
    """?step=4&present=1 opens step 4 in presentation mode."""
    at = run_app("lesson", {"step": "4", "present": "1"})
    assert step_header(at) == "4. Decay and half-life"
    assert at.toggle(key="ls_present").value is True
    assert not warnings(at)


def test_bad_url_values_warn_and_fall_back():
    """step=9 and present=yes warn; the lesson opens on step 1, not presenting."""
    at = run_app("lesson", {"step": "9", "present": "yes"})
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


def test_missing_model_and_results_give_messages(monkeypatch, tmp_path):
    """Without shipped files, steps 5 and 6 say what to run instead of failing."""
    monkeypatch.setattr(assets, "MODELS_DIR", tmp_path / "models")
    monkeypatch.setattr(assets, "RESULTS_PATH", tmp_path / "results.json")
    at = run_app("lesson", {"step": "5"})
    assert "python -m alibi_viz.train" in at.info[0].value
    at.button(key="ls_next").click().run()
    assert "python -m alibi_viz.evaluate" in at.info[0].value
    assert not at.exception
