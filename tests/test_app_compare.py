"""The compare page under Streamlit's AppTest: controls, URL state, bad parameters.

`run_app(path, params)` sets query parameters before the landing page runs, and the landing page
rewrites the URL with its own controls, so it cannot open another page with parameters. Here the
landing page runs first, then the query parameters are replaced and the test switches to
compare.py, which is what opening /compare?... does in a browser.
"""

from alibi_viz_app.testing import figure_keys, figure_titles, figures, run_app, warnings

DEFAULT_LINES = 6


def curves(at) -> dict:
    """{method: (x, y)} of the score-vs-distance chart."""
    return {t["legendgroup"]: (t["x"], t["y"]) for t in figures(at)[0]["data"]}


def panel_titles(at) -> list[str]:
    return next(t for t in figures(at)[1]["data"] if t.get("mode") == "text")["text"]


def decode(array) -> list:
    """A plotly JSON array (a list, or base64 typed-array dict) as a list of floats."""
    import base64

    import numpy as np

    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def test_page_loads_without_exception():
    """The compare page runs and shows both charts with the six default methods."""
    at = run_app("compare")
    assert not at.exception
    assert figure_keys(at) == ["cmp_fig_curves", "cmp_fig_matrices"]
    assert len(curves(at)) == DEFAULT_LINES and len(panel_titles(at)) == DEFAULT_LINES
    assert at.query_params["methods"] == "alibi,t5,sinusoidal,rope_bound,kerple_log,sandwich"


def test_methods_choose_what_is_drawn():
    """Choosing ALiBi and KERPLE (power) draws two lines and two panels, and goes in the URL."""
    at = run_app("compare")
    at.multiselect(key="cmp_methods").set_value(["alibi", "kerple_power"]).run()
    assert list(curves(at)) == ["alibi", "kerple_power"]
    assert len(panel_titles(at)) == 2
    assert at.query_params["methods"] == "alibi,kerple_power"


def test_sequence_length_changes_the_matrices():
    """A long sequence is drawn downsampled and says so."""
    at = run_app("compare")
    at.number_input(key="cmp_len").set_value(65_536).run()
    assert "downsampled from 65,536x65,536" in figure_titles(at)[1]
    assert at.query_params["len"] == "65536"


def test_mode_changes_the_curves():
    """Symmetric mode plots negative distances too and retitles both charts."""
    at = run_app("compare")
    at.radio(key="cmp_mode").set_value("symmetric").run()
    x, _ = curves(at)["alibi"]
    assert min(decode(x)) == -511
    assert all("symmetric" in title for title in figure_titles(at))


def test_log_axis_control():
    """The distance-axis control switches the curves to a log axis."""
    at = run_app("compare")
    at.radio(key="cmp_xscale").set_value("log").run()
    assert figures(at)[0]["layout"]["xaxis"]["type"] == "log"
    assert at.query_params["xscale"] == "log"


def test_method_parameter_changes_its_curve():
    """ALiBi's slope input changes its line to -m d and is written to the URL."""
    at = run_app("compare")
    at.number_input(key="cmp_alibi.slope").set_value(0.5).run()
    x, y = curves(at)["alibi"]
    assert decode(y)[10] == -0.5 * decode(x)[10]
    assert at.query_params["alibi.slope"] == "0.5"


def test_boolean_parameter_goes_in_the_url():
    """Unticking sinusoidal normalisation draws raw dot products and writes normalize=false."""
    at = run_app("compare")
    at.checkbox(key="cmp_sinusoidal.normalize").uncheck().run()
    assert decode(curves(at)["sinusoidal"][1])[0] == 256  # d_model / 2 at distance 0
    assert at.query_params["sinusoidal.normalize"] == "false"


def test_url_restores_state():
    """A shared URL restores the methods, length, mode, axis and a method parameter."""
    at = run_app("compare", {"methods": "alibi,kerple_power", "len": "4096", "mode": "symmetric",
                      "xscale": "log", "kerple_power.r2": "1.0", "sinusoidal.normalize": "false"})
    assert at.multiselect(key="cmp_methods").value == ["alibi", "kerple_power"]
    assert at.number_input(key="cmp_len").value == 4096
    assert at.radio(key="cmp_mode").value == "symmetric"
    assert at.radio(key="cmp_xscale").value == "log"
    assert at.number_input(key="cmp_kerple_power.r2").value == 1.0
    assert "4,096 tokens" in figure_titles(at)[0]
    assert not warnings(at)


def test_bad_parameters_warn_and_fall_back():
    """Bad values give one warning each and defaults, never an exception."""
    at = run_app("compare", {"methods": "bogus", "len": str(10**12), "mode": "sideways",
                      "alibi.slope": "abc", "sinusoidal.d_model": "513"})
    assert not at.exception
    assert len([w for w in warnings(at) if w.startswith("URL parameter ignored")]) == 5
    assert len(curves(at)) == DEFAULT_LINES
    assert at.number_input(key="cmp_len").value == 512
    assert at.number_input(key="cmp_alibi.slope").value == 0.0625
    assert at.number_input(key="cmp_sinusoidal.d_model").value == 512


def test_refused_combination_warns_and_draws_defaults():
    """T5 inputs the library refuses together give a warning, and the page still draws."""
    at = run_app("compare", {"methods": "t5"})
    at.number_input(key="cmp_t5.num_buckets").set_value(256)
    at.number_input(key="cmp_t5.max_distance").set_value(100).run()
    assert not at.exception
    assert any(w.startswith("T5 buckets: max_distance") for w in warnings(at))
    assert figure_keys(at) == ["cmp_fig_curves", "cmp_fig_matrices"]


def test_no_method_asks_for_one():
    """Clearing the selection shows a hint instead of charts."""
    at = run_app("compare", {"methods": ""})
    assert not at.exception and not figures(at)
    assert "at least one method" in at.info[0].value


def test_download_offered():
    """The displayed matrices can be downloaded as .npy."""
    at = run_app("compare")
    assert [b.proto.label for b in at.get("download_button")] == ["Download .npy"]


def test_controls_survive_a_visit_to_another_page():
    """Compare -> bias explorer -> compare keeps the methods and length the user chose."""
    at = run_app("compare", {"methods": "alibi,t5", "len": "4096"})
    at.switch_page("app_pages/bias_explorer.py").run()
    at.switch_page("app_pages/compare.py").run()
    assert at.multiselect(key="cmp_methods").value == ["alibi", "t5"]
    assert at.number_input(key="cmp_len").value == 4096


def test_reading_notes_quote_table_1_and_say_where_sinusoidal_positions_act():
    """The T5 note's numbers are paper.py's quotes of Tables 1 and 2 (each checked against
    the paper's CSVs in test_paper_tables), written in full (14,400 words per second, not
    14.4); the sinusoidal note says its positions reach the values, MLPs and residual stream
    (not "only shape q·k", which is RoPE's)."""
    from alibi_viz import paper

    at = run_app("compare")
    text = " ".join(m.value for m in at.markdown)
    t5 = next(m.value for m in at.markdown if "T5's bias costs training speed" in m.value)
    for quote in (paper.TRAIN_SPEED["T5 bias"], paper.TRAIN_SPEED["sinusoidal"],
                  paper.TRAIN_SPEED["ALiBi"]):
        assert f"{int(quote.value):,}" in t5
    assert f"({paper.TRAIN_MEMORY['ALiBi'].value:.1f} GB)" in t5
    assert f"lowest at {paper.T5_BEST.length:,} tokens ({paper.T5_BEST.value:.2f})" in t5
    assert f"from {paper.T5_OOM.length:,} tokens" in t5
    assert "RoPE acts only through q·k" in text
    assert "the MLPs and the residual stream" in text and "only shape q·k" not in text
