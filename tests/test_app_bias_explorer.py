"""The bias explorer page under Streamlit's AppTest: controls, URL state, bad parameters."""

import pytest

from alibi_viz_app.testing import figure_keys, figure_titles, figures, run_app, warnings


def grid(at) -> dict:
    return figures(at)[1]


def panel_titles(at) -> list[str]:
    return next(t for t in grid(at)["data"] if t.get("mode") == "text")["text"]


def test_page_loads_without_exception():
    """The landing page runs and shows the slope, grid and decay charts."""
    at = run_app()
    assert not at.exception
    assert figure_keys(at) == ["be_fig_slopes", "be_fig_grid", "be_fig_decay"]
    assert len(panel_titles(at)) == 8


def test_landing_page_says_where_to_start():
    """Above the first chart a newcomer reads what ALiBi is and what the page draws, and finds
    the Lesson, and a teacher the Lesson in presentation mode (?present=1)."""
    at = run_app()
    text = " ".join(m.value for m in at.markdown)
    assert "Attention with Linear Biases" in text and "sidebar" in text
    links = [(link.proto.page, link.proto.query_string) for link in at.get("page_link")]
    assert links == [("lesson", ""), ("lesson", "present=1")]


def test_head_count_changes_the_grid():
    """Setting 12 heads draws 12 panels and puts heads=12 in the URL."""
    at = run_app()
    at.number_input(key="be_heads").set_value(12).run()
    assert len(panel_titles(at)) == 12
    assert at.query_params["heads"] == "12"


def test_non_power_of_two_explains_zigzag():
    """12 heads under the official schedule explain the non-monotonic order."""
    at = run_app(params={"heads": "12"})
    assert any("not monotonic" in w for w in warnings(at))


def test_sequence_length_changes_the_matrices():
    """A longer sequence is drawn downsampled and says so."""
    at = run_app()
    at.number_input(key="be_len").set_value(65_536).run()
    assert "downsampled from 65,536x65,536" in figure_titles(at)[1]


def test_mode_changes_the_matrices():
    """Switching to symmetric mode retitles the grid and drops the mask note."""
    at = run_app()
    at.radio(key="be_mode").set_value("symmetric").run()
    assert "symmetric" in figure_titles(at)[1] and "masked" not in figure_titles(at)[1]


def test_schedule_changes_the_highlighted_line():
    """Choosing the geometric schedule makes its line the thick one."""
    at = run_app()
    at.selectbox(key="be_schedule").set_value("geometric").run()
    # with 8 heads geometric coincides with official, and its legend says so
    lines = {t["name"].split(" (")[0]: t["line"]["width"] for t in figures(at)[0]["data"]}
    assert lines["geometric"] > lines["official"]


def test_max_bias_changes_the_slopes():
    """max_bias 4 makes the first of 8 heads' slope 2^-0.5."""
    at = run_app()
    at.number_input(key="be_max_bias").set_value(4.0).run()
    assert "m=0.707" in panel_titles(at)[0]


def test_head_selection_limits_panels():
    """Showing heads 1-3 draws three panels."""
    at = run_app()
    at.text_input(key="be_show").set_value("1-3").run()
    assert len(panel_titles(at)) == 3
    assert at.query_params["show"] == "1-3"


def test_url_restores_state():
    """?heads=12&len=512&mode=symmetric restores exactly those controls."""
    at = run_app(params={"heads": "12", "len": "512", "mode": "symmetric"})
    assert at.number_input(key="be_heads").value == 12
    assert at.number_input(key="be_len").value == 512
    assert at.radio(key="be_mode").value == "symmetric"
    assert len(panel_titles(at)) == 12


def test_bad_parameters_warn_and_fall_back():
    """heads=-3, len=10**12 and max_bias=abc give warnings and defaults, no exception."""
    at = run_app(params={"heads": "-3", "len": str(10**12), "max_bias": "abc", "mode": "sideways"})
    assert not at.exception
    assert len([w for w in warnings(at) if w.startswith("URL parameter ignored")]) == 4
    assert at.number_input(key="be_heads").value == 8
    assert at.number_input(key="be_len").value == 64


def test_downloads_offered():
    """Small matrices offer both .npy and CSV downloads."""
    at = run_app()
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download .npy", "Download CSV"]


def test_controls_survive_a_visit_to_another_page():
    """Explorer -> compare -> explorer keeps the head count and length the user set."""
    at = run_app(params={"heads": "12", "len": "512"})
    at.switch_page("app_pages/compare.py").run()
    at.switch_page("app_pages/bias_explorer.py").run()
    assert at.number_input(key="be_heads").value == 12
    assert at.number_input(key="be_len").value == 512
    assert len(panel_titles(at)) == 12


@pytest.mark.parametrize("heads", [8, 64])
def test_the_head_table_shows_every_head(heads):
    """The slope table holds one row per head; beyond TABLE_ROWS_SHOWN heads it is folded in
    an expander whose title gives the count. (That no row hides in a box of fixed height, as
    heads 7-8 of 8 did, is checked in the browser: axe-core's scrollable-region rule in
    test_browser_phone.test_a_laptop_sees_every_title_whole.)"""
    from alibi_viz_app.app_pages.bias_explorer import TABLE_ROWS_SHOWN

    at = run_app(params={"heads": str(heads)})
    table = at.table[0]
    assert [row["head"] for row in table.value.to_dict("records")] == [
        str(h) for h in range(1, heads + 1)]
    folded = [e.label for e in at.expander if str(heads) in e.label and "head" in e.label]
    assert bool(folded) == (heads > TABLE_ROWS_SHOWN)


def span_of_gentlest(at) -> int:
    rows = at.table[0].value.to_dict("records")
    return int(rows[-1]["90% span (tokens)"])


def test_symmetric_span_describes_the_middle_query():
    """?heads=8&len=64&mode=symmetric: the gentlest head's 90% span is at most 32 tokens (the
    middle query's, 29), not the 56 of a query with 63 keys on each side; causal: at most 60."""
    at = run_app(params={"heads": "8", "len": "64", "mode": "symmetric"})
    assert span_of_gentlest(at) <= 32
    assert "query i = 31 of 64" in figure_titles(at)[2]
    at = run_app(params={"heads": "8", "len": "64", "mode": "causal"})
    assert span_of_gentlest(at) <= 60


def test_heads_share_one_clipped_colour_scale_by_default():
    """By default every head is on one scale clipped at -CLIP_LOGITS; 'each head its own'
    spans [-1, 0] of each panel's largest penalty; 'one for all heads' puts the bias itself on
    one scale, down to -m_max (L - 1)."""
    from alibi_viz.figures.bias import CLIP_LOGITS

    at = run_app(params={"heads": "8", "len": "64"})
    assert grid(at)["layout"]["coloraxis"]["cmin"] == -CLIP_LOGITS
    at.radio(key="be_scale").set_value("per_head").run()
    assert grid(at)["layout"]["coloraxis"]["cmin"] == -1.0
    assert "darkest" in panel_titles(at)[7]
    at.radio(key="be_scale").set_value("shared").run()
    assert grid(at)["layout"]["coloraxis"]["cmin"] == -0.5 * 63
    assert at.query_params["scale"] == "shared"


def test_decoding_step_draws_the_newest_queries_against_every_key():
    """The decoding toggle draws the last 16 queries against all 512 cached keys."""
    at = run_app(params={"len": "512", "decode": "1"})
    assert at.toggle(key="be_decode").value is True
    assert "Last 16 queries against 512 cached keys" in figure_titles(at)[1]


def test_dilution_number_is_the_closed_form():
    """The 'why quality degrades gradually' number equals alibi.last_query_mass_beyond."""
    from alibi_viz import alibi_slopes
    from alibi_viz.alibi import last_query_mass_beyond

    at = run_app(params={"heads": "8", "len": "1024"})
    share = last_query_mass_beyond(alibi_slopes(8)[[-1]], 1024, 128)[0]
    assert any(f"**{share:.0%}**" in m.value for m in at.markdown)


def test_bf16_table_matches_the_library():
    """The bfloat16 table on the page is precision.row_constant_error_table's (shown to 4
    significant digits)."""
    from alibi_viz.precision import row_constant_error_table

    at = run_app()
    table = at.table[1].value.to_dict("records")
    expected = row_constant_error_table((8, 112), 2048, "bfloat16")
    assert [float(r["largest error (logits)"]) for r in table] == pytest.approx(
        [r["largest error (logits)"] for r in expected], rel=5e-4)


def markdown_with(at, words: str) -> str:
    found = [m.value for m in at.markdown if words in m.value]
    assert len(found) == 1, words
    return found[0]


def test_gentle_heads_reach_is_the_computed_90_percent_span():
    """The decay text gives the gentlest paper slope's 90% span and half-life as computed
    from the bias alone (m = 1/256: 589 and 177 tokens), not "the whole context"."""
    import math

    import numpy as np

    at = run_app()
    text = markdown_with(at, "half-life** ln 2 / m")
    r = math.exp(-1 / 256)
    span = next(d for d in range(10_000) if 1 - r ** (d + 1) >= 0.9)  # mass within d: 1 - r^(d+1)
    assert f"within {span:,} tokens" in text and f"half-life {round(math.log(2) * 256)}" in text
    assert "whole context" not in text and np.isclose(span, 589)


def test_bf16_gaps_are_the_ones_torch_rounds_to():
    """The row-constant paragraph's bf16 gaps are what torch's bfloat16 represents: every
    integer of [512, 1024) that survives a round trip is a multiple of 4, of [1024, 2048) of 8."""
    import torch

    def gap(lo: int) -> int:
        ints = torch.arange(lo, 2 * lo, dtype=torch.float32)
        kept = ints[ints.bfloat16().float() == ints].long()
        return int(torch.diff(kept).unique().item())

    text = markdown_with(run_app(), "**Row-constant form.**")
    assert f"gap between neighbouring numbers is {gap(512)} on [512, 1,024) and {gap(1024)} on " \
           "[1,024, 2,048)" in text


def test_symmetric_mode_says_the_bias_has_no_direction():
    """In symmetric mode the page says a key d to the left and one d to the right get the same
    bias, which the matrices it draws show: each is its own transpose."""
    import numpy as np

    from alibi_viz.alibi import alibi_bias, alibi_slopes

    at = run_app(params={"mode": "symmetric"})
    assert "no direction" in markdown_with(at, "Symmetric ALiBi has no direction")
    bias = alibi_bias(alibi_slopes(8), 16, mode="symmetric")
    assert np.array_equal(bias, np.swapaxes(bias, -1, -2))
    assert not [m for m in run_app().markdown if "Symmetric ALiBi has no direction" in m.value]


def test_long_symmetric_grid_says_why_its_panels_are_dark():
    """?mode=symmetric&len=4096&heads=64: under the clipped grid a caption says how many panels
    are dark but for a band, and names the colour scale that shows their gradient; the
    default page (8 heads, 64 tokens) has no such caption, nor has the per-head scale."""
    at = run_app("", {"mode": "symmetric", "len": "4096", "heads": "64"})
    assert not at.exception
    notes = [c.value for c in at.caption if "dark but for a thin band" in c.value]
    assert len(notes) == 1 and notes[0].startswith("34 of these 64 panels")
    assert "“each head its own”" in notes[0]
    at = run_app("", {"mode": "symmetric", "len": "4096", "heads": "64", "scale": "per_head"})
    assert not [c for c in at.caption if "dark but for a thin band" in c.value]
    at = run_app()
    assert not [c for c in at.caption if "dark but for a thin band" in c.value]
