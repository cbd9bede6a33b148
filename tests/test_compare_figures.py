"""Comparison figures: bounded payloads, exact values, bias and similarity kept apart."""

import numpy as np
import pytest
from figure_colours import (
    assert_pixel_reads_like_the_bar,
    bar_color,
    colour_scales,
    mosaic_panels,
)

from alibi_viz import AlibiVizError
from alibi_viz.figures.compare import (
    MAX_CURVE_POINTS,
    METHOD_COLORS,
    check_selection,
    compare_distances,
    panel_scales,
    score_display_values,
    score_matrices_figure,
    score_vs_distance_figure,
)
from alibi_viz.positional import METHODS, score_matrix_sampled, score_vs_distance

MB = 1_000_000
ALL = {name: {} for name in METHODS}


def lines(fig) -> dict:
    """{method name: (x, y)} of a score-vs-distance figure (each line's legendgroup is its method)."""
    return {t.legendgroup: (np.asarray(t.x), np.asarray(t.y)) for t in fig.data}


def hover_trace(fig):
    return next(t for t in fig.data if t.type == "heatmap")


@pytest.mark.parametrize("length", [512, 16_384, 65_536])
def test_payload_is_bounded(length):
    """Both figures for all eight methods stay under 2 MB of JSON at any length, both modes."""
    for mode in ("causal", "symmetric"):
        assert len(score_vs_distance_figure(ALL, length, mode).to_json()) < 2 * MB
        assert len(score_matrices_figure(ALL, length, mode).to_json()) < 2 * MB


def test_curve_values_are_score_vs_distance():
    """Every plotted point is the library's score_vs_distance at that distance."""
    selection = {"alibi": {"slope": 0.25}, "t5": {}, "rope_bound": {"head_dim": 64},
                 "sandwich": {"scale": 2.0}}
    fig = score_vs_distance_figure(selection, 3000, "symmetric")
    for trace, (name, params) in zip(fig.data, selection.items(), strict=True):
        x = np.asarray(trace.x)
        np.testing.assert_array_equal(trace.y, score_vs_distance(name, x, "symmetric", **params))


def test_alibi_curve_is_the_straight_line():
    """The ALiBi line is -m |d| for a slope m, checked against the formula itself."""
    x, y = lines(score_vs_distance_figure({"alibi": {"slope": 0.125}}, 100, "symmetric"))["alibi"]
    np.testing.assert_allclose(y, -0.125 * np.abs(x))


def test_bias_and_similarity_get_separate_panels():
    """Methods added to the score and methods that only shape q.k are drawn on different axes."""
    fig = score_vs_distance_figure({"alibi": {}, "sinusoidal": {}, "kerple_log": {}}, 64)
    axes = {t.legendgroup: t.yaxis for t in fig.data}
    assert axes["alibi"] == axes["kerple_log"] != axes["sinusoidal"]
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0].startswith("Bias: added to the score")
    assert titles[1].startswith("Similarity: positional part of q·k (not added")


def test_one_kind_gives_one_panel():
    """With only bias methods there is a single panel, titled as bias."""
    fig = score_vs_distance_figure({"alibi": {}, "t5": {}}, 64)
    assert {t.yaxis for t in fig.data} == {"y"}
    assert [a.text for a in fig.layout.annotations] == ["Bias: added to the score (bias, logits)"]


def test_causal_plots_keys_before_the_query_only():
    """Causal curves run over d = 0 .. L-1: no masked (negative) distance is drawn."""
    x, y = lines(score_vs_distance_figure({"alibi": {}}, 50, "causal"))["alibi"]
    np.testing.assert_array_equal(x, np.arange(50))
    assert np.all(np.isfinite(y))


def test_symmetric_plots_signed_distances():
    """Symmetric curves run over -(L-1) .. L-1."""
    x, _ = lines(score_vs_distance_figure({"alibi": {}}, 50, "symmetric"))["alibi"]
    np.testing.assert_array_equal(x, np.arange(-49, 50))


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
def test_long_curves_are_sampled_and_say_so(mode):
    """At 65,536 tokens a curve holds at most MAX_CURVE_POINTS distances, ends included."""
    fig = score_vs_distance_figure({"alibi": {}}, 65_536, mode)
    x = np.asarray(fig.data[0].x)
    assert x.size <= MAX_CURVE_POINTS and x[-1] == 65_535
    assert x[0] == (0 if mode == "causal" else -65_535)
    assert "evaluated at" in fig.layout.title.text


def test_log_axis_starts_at_one():
    """A log distance axis plots d >= 1 geometrically spaced, on a log-type axis."""
    fig = score_vs_distance_figure({"alibi": {}, "rope_cos": {}}, 65_536, "symmetric",
                                   log_distance=True)
    x = np.asarray(fig.data[0].x)
    assert x[0] == 1 and x[-1] == 65_535 and x.size <= MAX_CURVE_POINTS
    assert fig.layout.xaxis.type == fig.layout.xaxis2.type == "log"
    assert "|d|" in fig.layout.xaxis2.title.text


def test_every_method_has_its_own_colour():
    """Each method keeps one distinct line colour, whatever else is selected."""
    assert set(METHOD_COLORS) == set(METHODS)
    assert len(set(METHOD_COLORS.values())) == len(METHODS)


def test_compare_distances_are_every_distance_when_short():
    """Short sequences plot every distance, no sampling."""
    np.testing.assert_array_equal(compare_distances(10, "symmetric"), np.arange(-9, 10))


def test_matrices_are_one_image_scaled_per_panel():
    """The matrices travel as one PNG with a [-1, 1] colour bar; each title names its divisor."""
    fig = score_matrices_figure({"alibi": {"slope": 0.5}, "sinusoidal": {}}, 100, "symmetric")
    images = [t for t in fig.data if t.type == "image"]
    assert len(images) == 1 and images[0].source.startswith("data:image/png;base64,")
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-1.0, 1.0)
    titles = next(t for t in fig.data if t.type == "scatter" and t.mode == "text").text
    assert titles == ("1. ALiBi (÷49.5)", "2. Sinusoidal (÷1)")  # 0.5 x 99; cos sums peak at 1


def test_matrix_hover_shows_unscaled_values():
    """Hover cells carry the unscaled score at (i, j), matched to their panel's method."""
    selection = {"kerple_power": {"r2": 0.7}, "rope_cos": {}}
    fig = score_matrices_figure(selection, 700, "causal")
    heat = hover_trace(fig)
    z = np.asarray(heat.z, dtype=float)
    custom = np.asarray(heat.customdata)
    names = list(selection)
    for panel, name in enumerate(names, start=1):
        cells = np.isfinite(z) & (custom[..., 0] == panel)
        d = custom[..., 3][cells]
        expected = score_vs_distance(name, d, "causal", **selection[name])
        np.testing.assert_allclose(z[cells], expected, rtol=1e-6, atol=1e-6)


def test_matrices_say_when_downsampled():
    """The title names the drawn and the original size when downsampled, and not otherwise."""
    assert "downsampled from 65,536x65,536" in score_matrices_figure(ALL, 65_536).layout.title.text
    assert "downsampled" not in score_matrices_figure({"alibi": {}}, 64).layout.title.text


def test_display_values_are_exact_entries():
    """The drawn values are score_matrix_sampled at the displayed positions."""
    values, rows, cols = score_display_values({"t5": {}, "sandwich": {}}, 5000, "symmetric",
                                              budget=20_000)
    np.testing.assert_array_equal(values[1], score_matrix_sampled("sandwich", rows, cols,
                                                                  "symmetric"))
    assert values.shape == (2, rows.size, cols.size) and rows[-1] < 5000


def test_panel_scales_ignore_masked_cells():
    """A panel's divisor is its largest finite |value|; an all-zero panel divides by 1."""
    values = np.array([[[0.0, -np.inf], [-3.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]])
    np.testing.assert_array_equal(panel_scales(values), [3.0, 1.0])


def test_selection_errors_are_typed():
    """No method, an unknown method or a bad parameter raise AlibiVizError."""
    with pytest.raises(AlibiVizError, match="at least one method"):
        score_matrices_figure({}, 64)
    with pytest.raises(AlibiVizError, match="Unknown method"):
        check_selection(["alibi", "nope"])
    with pytest.raises(AlibiVizError, match="d_model"):
        score_vs_distance_figure({"sinusoidal": {"d_model": 7}}, 64)




def test_legends_name_parameters_by_their_labels():
    """A legend reads "slope m = 0.0625", not the code's "slope=0.0625"; a yes/no parameter
    shows only when it is off its default."""
    from alibi_viz.figures.compare import format_params

    assert format_params("alibi", {"slope": 0.0625}) == "slope m = 0.0625"
    assert "normalise" not in format_params("rope_bound", {})
    assert "off: normalise to 1 at distance 0" in format_params("rope_bound", {"normalize": False})


def test_symmetric_title_says_even_in_d_only_of_these_curves():
    """Symmetric mode on a log axis shows one side because every method drawn here is even in
    d (checked), and says real T5 learns separate buckets per side, as its encoder does."""
    selection = {"alibi": {"slope": 0.25}, "t5": {}, "rope_bound": {"head_dim": 64},
                 "sandwich": {"scale": 2.0}}
    d = np.arange(1, 200)
    for name, params in selection.items():
        np.testing.assert_array_equal(score_vs_distance(name, d, "symmetric", **params),
                                      score_vs_distance(name, -d, "symmetric", **params))
    fig = score_vs_distance_figure(selection, 3000, "symmetric", log_distance=True)
    assert "real T5 learns separate buckets for each side" in fig.layout.title.text.replace(
        "<br>", " ")


def test_matrix_panels_have_the_colours_their_bar_shows():
    """The bar's colour scale is the one the panels are coloured from, written out and centred
    on 0; ALiBi's panel at (i, j) has the bar's colour at -|i - j| / 99 (its far keys the red
    end, the bar's -1), and sinusoidal's diagonal, at +1, the blue end."""
    from alibi_viz.figures.compare import MATRIX_COLORSCALE
    from alibi_viz.figures.render import explicit_colorscale

    fig = score_matrices_figure({"alibi": {"slope": 0.5}, "sinusoidal": {}}, 100, "symmetric")
    assert colour_scales(fig.to_dict()) == [explicit_colorscale(MATRIX_COLORSCALE)]
    axis = fig.layout.coloraxis
    assert axis.cmin == -axis.cmax
    red, blue = bar_color(axis, -1.0), bar_color(axis, 1.0)
    assert red[0] > red[2] and blue[2] > blue[0]
    alibi, sinusoidal = mosaic_panels(fig, 2)
    assert alibi.shape[:2] == (100, 100)  # one pixel a position
    for i, j in [(0, 0), (99, 0), (0, 99), (60, 40), (30, 80)]:
        assert_pixel_reads_like_the_bar(alibi[i, j], axis, -abs(i - j) / 99)
    for i in (0, 50, 99):
        assert_pixel_reads_like_the_bar(sinusoidal[i, i], axis, 1.0)
