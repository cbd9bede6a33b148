"""The bias explorer's figures: bounded payloads, images instead of float arrays, honest labels."""

import json

import numpy as np
import pytest
from figure_colours import assert_pixel_reads_like_the_bar, colour_scales, mosaic_panels

from alibi_viz import AlibiVizError, alibi_bias, alibi_slopes
from alibi_viz.alibi import head_summary
from alibi_viz.figures.bias import (
    bias_display_values,
    bias_grid_figure,
    decay_figure,
    slope_schedule_figure,
)
from alibi_viz_app.export import matrices_to_csv, to_npy_bytes

MB = 1_000_000


@pytest.mark.parametrize("heads,length", [(8, 512), (64, 16_384), (128, 65_536)])
def test_bias_grid_payload_is_bounded(heads, length):
    """The grid's JSON stays under 2 MB whatever the size."""
    assert len(bias_grid_figure(alibi_slopes(heads), length).to_json()) < 2 * MB


def test_bias_grid_is_an_image_with_a_colour_bar():
    """The matrices travel as one PNG image; a shared colour bar spans [-m_max (L-1), 0]."""
    fig = bias_grid_figure(alibi_slopes(8), 100, scale="shared")
    images = [t for t in fig.data if t.type == "image"]
    assert len(images) == 1 and images[0].source.startswith("data:image/png;base64,")
    assert fig.layout.coloraxis.cmax == 0
    assert fig.layout.coloraxis.cmin == pytest.approx(-0.5 * 99)


def test_per_head_scale_divides_each_panel_by_its_own_largest_penalty():
    """Per head, head h's panel is the bias divided by m_h (L - 1): every head spans [-1, 0],
    so the gentlest head's gradient is as visible as the steepest one's."""
    slopes = alibi_slopes(8)
    values, _, _, _ = bias_display_values(slopes, 100)
    fig = bias_grid_figure(slopes, 100, scale="per_head")
    assert fig.layout.coloraxis.cmin == -1.0
    scaled = values / (slopes[:, None, None] * 99)
    assert np.nanmin(np.where(np.isfinite(scaled), scaled, np.nan), axis=(1, 2)) == pytest.approx(
        np.full(8, -1.0))


def test_bias_grid_hover_values_are_the_bias():
    """Hover cells carry the bias at their (i, j), with the head and distance in customdata."""
    fig = bias_grid_figure(alibi_slopes(4), 20, mode="symmetric")
    heat = next(t for t in fig.data if t.type == "heatmap")
    z = np.asarray(heat.z, dtype=float)
    custom = np.asarray(heat.customdata)
    slopes = alibi_slopes(4)
    finite = np.isfinite(z)
    head, i, j = custom[..., 0][finite], custom[..., 1][finite], custom[..., 2][finite]
    np.testing.assert_allclose(z[finite], -slopes[head - 1] * np.abs(i - j), rtol=1e-6)


def test_bias_grid_says_when_downsampled():
    """The title names the drawn and the original size when downsampled, and not otherwise."""
    assert "downsampled from 65,536x65,536" in bias_grid_figure(alibi_slopes(8), 65_536).layout.title.text
    assert "downsampled" not in bias_grid_figure(alibi_slopes(8), 64).layout.title.text


def test_display_values_match_full_matrix():
    """The drawn values are exact entries of the full bias matrix."""
    slopes = alibi_slopes(8)
    values, rows, cols, _ = bias_display_values(slopes, 1000, "causal", [0, 5], budget=20_000)
    full = alibi_bias(slopes, 1000)
    np.testing.assert_array_equal(values, full[[0, 5]][:, rows][:, :, cols])


def test_slope_figure_one_trace_per_schedule_on_log_axis():
    """The slope chart plots each schedule's slopes on a log axis."""
    fig = slope_schedule_figure(12)
    assert [t.name for t in fig.data] == ["official", "geometric", "MPT (same as official)"]
    assert fig.layout.yaxis.type == "log"
    np.testing.assert_allclose(fig.data[0].y, alibi_slopes(12))


def test_decay_figure_attention_is_normalised():
    """The no-content attention curves of a short sequence sum to 1 over distances."""
    fig = decay_figure(alibi_slopes(4), 50)
    attention = [t for t in fig.data if t.type == "scatter" and t.xaxis == "x2"]
    for trace in attention:
        assert np.sum(trace.y) == pytest.approx(1.0)


def test_decay_figure_caps_curves_for_many_heads():
    """128 heads draw 16 curves per panel but a bar for every head, and say so."""
    fig = decay_figure(alibi_slopes(128), 1000)
    assert sum(t.xaxis == "x" for t in fig.data) == 16
    assert len(fig.data[-1].x) == 128
    assert "16 of 128" in fig.layout.title.text


def test_head_summary_rows():
    """One row per head with slope, half-life and span."""
    rows = head_summary(alibi_slopes(8), 512)
    assert len(rows) == 8 and rows[0]["slope m"] == 0.5


def test_bad_heads_selection_raises():
    """Out-of-range head indices are refused with an AlibiVizError."""
    with pytest.raises(AlibiVizError):
        bias_grid_figure(alibi_slopes(4), 10, head_ids=[4])


def test_exports_round_trip():
    """.npy loads back without pickle and CSV has one line per cell, masked ones empty."""
    values, rows, cols, _ = bias_display_values(alibi_slopes(2), 3)
    loaded = np.load(__import__("io").BytesIO(to_npy_bytes(values)), allow_pickle=False)
    np.testing.assert_array_equal(loaded, values)
    csv = matrices_to_csv(values, rows, cols, [1, 2]).splitlines()
    assert csv[0] == "head,i,j,value" and len(csv) == 1 + 2 * 3 * 3
    assert "1,0,1," in csv  # a masked cell
    assert json.dumps(csv)  # plain text


def test_decay_figure_refuses_negative_heads():
    """A negative head index is refused rather than wrapping around to the last head."""
    with pytest.raises(AlibiVizError):
        decay_figure(alibi_slopes(4), 10, head_ids=[-1])


@pytest.mark.parametrize("heads,rows,keys", [(1, 1, 1), (8, 64, 64), (8, 16, 4096), (128, 65_536, 65_536)])
def test_display_size_is_the_size_of_the_display_values(heads, rows, keys):
    """bias_display_size predicts, without computing them, how many values are drawn (the page
    offers a CSV only below a size)."""
    from alibi_viz.figures.bias import bias_display_size

    values = bias_display_values(alibi_slopes(heads), rows, "causal", key_len=keys)[0]
    assert bias_display_size(rows, heads, keys) == values.size


@pytest.mark.parametrize("heads,length", [(8, 16), (8, 512), (12, 512), (32, 2048), (64, 4096)])
def test_by_default_a_steep_and_a_gentle_head_look_different(heads, length):
    """Drawn by default, the steepest and the gentlest head's panels differ clearly in the
    pixels a student sees (mean |RGB difference| over 20 of 255), at real head counts; each head
    on its own scale they are the same picture, which is why that is not the default."""
    slopes = alibi_slopes(heads)
    steep, gentle = int(np.argmax(slopes)), int(np.argmin(slopes))

    def difference(scale):
        panels = mosaic_panels(bias_grid_figure(slopes, length, scale=scale), heads)
        return np.abs(panels[steep].astype(int) - panels[gentle].astype(int)).mean()

    assert difference("clipped") > 20
    assert difference("per_head") == 0


def test_clipped_scale_stops_at_the_clip_and_keeps_the_mask():
    """One colour bar from -CLIP_LOGITS to 0 for every head; keys after the query stay masked."""
    from alibi_viz.figures.bias import CLIP_LOGITS

    fig = bias_grid_figure(alibi_slopes(8), 100)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-CLIP_LOGITS, 0)
    panel = mosaic_panels(fig, 8)[0]
    grey = np.all(panel == (215, 215, 215), axis=-1)  # MASK_RGB
    assert grey.any()


def test_a_schedule_that_coincides_with_another_says_so():
    """MPT's slopes are the official ones (8 and 12 heads), and with 8 heads so are the
    geometric ones: a line that would hide under another is dashed and its legend says which
    one it matches; one that differs (geometric, 12 heads) is not."""
    import numpy as np

    from alibi_viz import alibi_slopes
    from alibi_viz.figures.bias import slope_schedule_figure

    assert np.array_equal(alibi_slopes(8, "mpt"), alibi_slopes(8, "official"))
    traces = {t.name: t for t in slope_schedule_figure(8).data}
    assert traces["MPT (same as official)"].line.dash == "dash"
    assert traces["geometric (same as official)"].line.dash == "dash"
    assert not np.array_equal(alibi_slopes(12, "geometric"), alibi_slopes(12, "official"))
    traces = {t.name: t for t in slope_schedule_figure(12).data}
    assert traces["geometric"].line.dash is None


@pytest.mark.parametrize("scale", ["clipped", "per_head", "shared"])
def test_bias_panels_have_the_colours_their_bar_shows(scale):
    """The bar's colour scale is the one the panels are coloured from, written out, and a
    panel's pixel at (i, j) has the bar's colour at the bias -m (i - j) (clipped at
    -CLIP_LOGITS, or divided by m (L - 1), as the scale says), for the steepest and the
    gentlest head."""
    from alibi_viz.figures.bias import CLIP_LOGITS
    from alibi_viz.figures.render import BIAS_COLORSCALE, explicit_colorscale

    slopes, T = alibi_slopes(8), 100
    fig = bias_grid_figure(slopes, T, scale=scale)
    assert colour_scales(fig.to_dict()) == [explicit_colorscale(BIAS_COLORSCALE)]
    panels = mosaic_panels(fig, 8)
    for head in (0, 7):
        assert panels[head].shape[:2] == (T, T)  # one pixel a position
        for i, j in [(0, 0), (50, 45), (99, 90), (99, 0)]:
            bias = -slopes[head] * (i - j)
            value = {"clipped": max(bias, -CLIP_LOGITS), "per_head": bias / (slopes[head] * 99),
                     "shared": bias}[scale]
            assert_pixel_reads_like_the_bar(panels[head][i, j], fig.layout.coloraxis, value)
