"""The drawing kit: display positions, pooling, colours, one image-plus-hover panel."""

import math

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
import pytest
import torch
from figure_colours import assert_pixel_reads_like_the_bar, colour_scales
from plotly.subplots import make_subplots

from alibi_viz.display import display_positions, pool_max, stack_view
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.compare import MATRIX_COLORSCALE
from alibi_viz.figures.heads import CONTENT_COLORSCALE, SCORE_COLORSCALE
from alibi_viz.figures.render import (
    ATTENTION_COLORSCALE,
    BIAS_COLORSCALE,
    MASK_COLOR,
    MASK_RGB,
    colorize,
    explicit_colorscale,
    image_panel,
)


def random_attention(T: int, seed: int = 0) -> np.ndarray:
    """A causal attention map: softmax of random scores over j <= i, float32 (T, T)."""
    scores = torch.randn(T, T, generator=torch.Generator().manual_seed(seed))
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1).numpy()


def test_display_positions_cover_the_range():
    """Display positions are all indices when they fit, else evenly spread within [0, L)."""
    assert list(display_positions(5, 10)) == [0, 1, 2, 3, 4]
    pos = display_positions(65_536, 256)
    assert pos.size == 256 and pos[0] >= 0 and pos[-1] < 65_536 and np.all(np.diff(pos) > 0)


def test_colorize_greys_out_masked_cells():
    """-inf (masked) cells get the mask colour, finite cells a colour from the scale."""
    rgb = colorize(np.array([[0.0, -np.inf]]), -1.0, 0.0, "Viridis")
    assert tuple(rgb[0, 1]) == (215, 215, 215) and tuple(rgb[0, 0]) != (215, 215, 215)


@pytest.mark.parametrize("name", [BIAS_COLORSCALE, ATTENTION_COLORSCALE, MATRIX_COLORSCALE,
                                  CONTENT_COLORSCALE, SCORE_COLORSCALE])  # every image's scale
def test_colorize_colours_a_value_as_the_written_out_scale_gives_it(name):
    """A figure's colour scale written out has plotly.py's own stops, and colorize colours
    every value (each 1/50 of the range) as those stops interpolated at it, as a bar does."""
    scale = explicit_colorscale(name)
    reference = pc.get_colorscale(name)
    assert [p for p, _c in scale] == [p for p, _c in reference]
    assert [pc.unlabel_rgb(c) for _p, c in scale] == [
        pc.unlabel_rgb(pc.convert_colors_to_same_type(c, "rgb")[0][0]) for _p, c in reference]
    values = np.linspace(-3.0, 5.0, 51)
    for value, pixel in zip(values, colorize(values, -3.0, 5.0, name), strict=True):
        assert_pixel_reads_like_the_bar(pixel, {"colorscale": scale, "cmin": -3.0, "cmax": 5.0},
                                        value)


def test_pool_max_matches_a_loop_over_adaptive_blocks():
    """Pixel k covers positions floor(k T / side) .. ceil((k + 1) T / side) - 1 (torch's adaptive
    pooling rule) and holds their maximum."""
    attention = random_attention(10)
    image = pool_max(attention, 4)
    assert image.shape == (4, 4)
    for r in range(4):
        for c in range(4):
            rows = slice(math.floor(r * 10 / 4), math.ceil((r + 1) * 10 / 4))
            cols = slice(math.floor(c * 10 / 4), math.ceil((c + 1) * 10 / 4))
            assert image[r, c] == attention[rows, cols].max()


def test_pool_max_keeps_a_single_hot_key():
    """One large entry survives any downsampling (max, not mean)."""
    attention = np.zeros((1000, 1000), dtype=np.float32)
    attention[777, 3] = 1.0
    assert pool_max(attention, 37).max() == 1.0


def test_pool_max_refuses_non_square_maps():
    """A non-square map raises AlibiVizError."""
    with pytest.raises(AlibiVizError, match="T, T"):
        pool_max(np.zeros((3, 4)), 2)


def test_stack_view_uses_the_same_pooling():
    """stack_view's 'max' images are pool_max of the stack."""
    stack = np.stack([random_attention(50, seed=s) for s in range(3)])
    view = stack_view(stack, side=16)
    np.testing.assert_array_equal(view.images, pool_max(stack, 16))
    assert view.reduced == "block max"


def test_mask_colour_is_one_grey():
    """The plotly colour string and the RGB triple are the same grey."""
    assert MASK_COLOR == "rgb({},{},{})".format(*MASK_RGB)


def test_image_panel_places_pixels_over_their_positions():
    """A panel of 8 pixels over 32 positions starts at x = 32/8/2 - 0.5 with steps of 4, and its
    hover layer carries the exact values at the hover positions."""
    fig = make_subplots(rows=1, cols=1)
    fig.update_layout(coloraxis=dict(colorscale="Blues"))
    hover = np.arange(9.0).reshape(3, 3)
    image_panel(fig, 1, 1, np.zeros((8, 8)), 32, hover=hover, hover_rows=[0, 10, 20],
                hover_cols=[0, 10, 20], hovertemplate="%{z}", coloraxis="coloraxis",
                cmin=0.0, cmax=1.0, colorscale="Blues")
    image, heat, carrier = fig.data
    assert isinstance(image, go.Image) and image.x0 == 1.5 and image.dx == 4
    np.testing.assert_array_equal(np.asarray(heat.z, dtype=float), hover)
    assert carrier.marker.coloraxis == "coloraxis"


# ----------------------------------------------------------------------------- unvalidated figures

def kit_figures():
    from alibi_viz import alibi_slopes
    from alibi_viz.figures.bias import bias_grid_figure, decay_figure, slope_schedule_figure

    slopes = alibi_slopes(12)
    return [slope_schedule_figure(12), bias_grid_figure(slopes, 300, "causal"),
            bias_grid_figure(slopes, 16, "symmetric", key_len=4096, scale="shared"),
            decay_figure(slopes, 5000, "causal"), decay_figure(slopes, 64, "symmetric")]


def test_figures_built_without_validation_pass_full_validation():
    """The kit writes figures as plain dicts and skips plotly's validators; plotly's full
    validation (go.Figure of the same dict, which raises on any unknown property or bad value)
    accepts every one of them."""
    for fig in kit_figures():
        spec = fig.to_dict()
        checked = go.Figure(spec)  # raises ValueError on anything plotly.js would not read
        assert len(checked.data) == len(spec["data"])


def test_figures_write_their_colour_scales_out():
    """Every colour scale in a kit figure is a written-out list, never a name that plotly.js
    reads its own way (its "Blues" runs the other way; it has no "RdYlBu")."""
    for fig in kit_figures():
        assert all(isinstance(scale, list) for scale in colour_scales(fig.to_dict()))


def test_figures_survive_a_cache_copy():
    """st.cache_data pickles what it returns: a kit figure comes back as the same figure."""
    import pickle

    from alibi_viz.figures.render import Figure

    for fig in kit_figures():
        copy = pickle.loads(pickle.dumps(fig))
        assert isinstance(copy, Figure) and copy.to_dict() == fig.to_dict()


def test_png_is_encoded_once_per_distinct_image():
    """The PNG cache is keyed by the pixels: equal pixels give the very same URI object,
    one changed pixel a new one."""
    from alibi_viz.figures.render import png_data_uri

    rgb = np.random.default_rng(0).integers(0, 255, (40, 30, 3), dtype=np.uint8)
    first = png_data_uri(rgb)
    assert png_data_uri(rgb.copy()) is first
    rgb[7, 7] ^= 1
    assert png_data_uri(rgb) != first


def test_per_head_colours_do_not_depend_on_the_slopes():
    """On its own scale every head's panel is -(i - j) / (L - 1): the same picture whatever the
    slopes (which is why changing the maximum bias redraws no pixels)."""
    from alibi_viz import alibi_slopes
    from alibi_viz.figures.bias import bias_grid_figure

    def image(max_bias):
        fig = bias_grid_figure(alibi_slopes(8, "official", max_bias), 2048, scale="per_head")
        return next(t.source for t in fig.data if t.type == "image")

    assert image(8.0) == image(4.0)


def test_wrap_text_breaks_only_what_would_not_fit():
    """A title too wide for the projector is broken at spaces into lines that fit (at the
    assumed 0.55 em a character); one that fits is left alone."""
    from alibi_viz.figures.render import CHAR_EM, wrap_text

    short = "Slopes"
    assert wrap_text(short, 20, 400) == (short, 1)
    long = "Обучаем на коротком, проверяем на длинном: перплексия от длины оценки"
    text, lines = wrap_text(long, 20, 400)
    assert lines == 2 and text.replace("<br>", " ") == long
    assert all(len(line) * CHAR_EM * 20 <= 400 for line in text.split("<br>"))


def test_a_page_figure_title_too_wide_is_broken_and_given_room():
    """figure_spec (what every page caches and shows) breaks a title wider than a 1024-pixel
    screen's figure over lines and grows the top margin by a line; a short one is untouched."""
    from alibi_viz.figures.render import figure_spec

    long = "Capa 1: log10 de la atención, 335 tokens, máximo por bloques a 273 px; trazos rojos: longitud de entrenamiento 128. Gris: enmascarado"
    from alibi_viz.figures.render import CHAR_EM, PAGE_WIDTH_PX

    spec = figure_spec(go.Figure(layout={"title": {"text": long}, "margin": {"t": 60}}))
    lines = spec["layout"]["title"]["text"].split("<br>")
    assert " ".join(lines) == long and len(lines) > 1
    assert all(len(line) * CHAR_EM * 17 <= PAGE_WIDTH_PX - 20 for line in lines)
    assert spec["layout"]["margin"]["t"] == 60 + round(1.2 * 17) * (len(lines) - 1)
    short = figure_spec(go.Figure(layout={"title": {"text": "Slopes"}, "margin": {"t": 60}}))
    assert short["layout"]["title"]["text"] == "Slopes" and short["layout"]["margin"]["t"] == 60


def test_fitting_a_fitted_figure_again_changes_nothing():
    """A figure fitted to a page and fitted again (a cached figure enlarged for a projector,
    or copied) keeps its title and its top margin: room is made once per added line."""
    from alibi_viz.figures.render import figure_spec, fit_texts

    long = "Capa 1: log10 de la atención, 335 tokens, máximo por bloques a 273 px; trazos rojos: longitud de entrenamiento 128. Gris: enmascarado"
    fig = go.Figure(layout={"title": {"text": long}, "margin": {"t": 60}})
    spec = figure_spec(fig)
    again = go.Figure(spec)
    fit_texts(again, 620)
    assert again.layout.title.text == spec["layout"]["title"]["text"]
    assert again.layout.margin.t == spec["layout"]["margin"]["t"]


def test_a_page_figure_gets_a_strip_for_the_toolbar_above_its_title():
    """with_toolbar_room makes a page's figure TOOLBAR_PX taller at its top, the plot's own
    height kept: a title in the middle of the top margin (plotly's "auto") or placed in the
    figure's coordinates, and a legend pinned to the bottom edge, keep their distance from the
    plot, the title TOOLBAR_PX further from the top edge; the cached spec is left unchanged,
    room is made once, and a projector's figure (not fitted to a page) is left as it is."""
    from alibi_viz.figures.render import TOOLBAR_PX, figure_spec, with_toolbar_room

    spec = figure_spec(go.Figure(layout={"title": {"text": "Slopes"}, "height": 400,
                                         "margin": {"t": 60, "b": 40}}))
    before = _copy(spec)
    roomy = with_toolbar_room(spec)
    layout = roomy["layout"]
    assert spec == before
    assert layout["height"] == 400 + TOOLBAR_PX and layout["margin"]["t"] == 60 + TOOLBAR_PX
    assert layout["margin"]["b"] == 40  # the plot: 400 - 60 - 40 px tall, as before
    title = layout["title"]
    assert title["yanchor"] == "middle"
    assert (1 - title["y"]) * layout["height"] == pytest.approx(30 + TOOLBAR_PX)
    assert with_toolbar_room(roomy) is roomy
    placed = figure_spec(go.Figure(layout={
        "title": {"text": "Slopes", "yref": "container", "y": 0.9, "yanchor": "middle"},
        "legend": {"yref": "container", "y": 0.0, "yanchor": "bottom"}, "height": 500}))
    moved = with_toolbar_room(placed)["layout"]
    assert (1 - moved["title"]["y"]) * moved["height"] == pytest.approx(50 + TOOLBAR_PX)
    assert moved["legend"]["y"] == pytest.approx(0.0)
    projector = figure_spec(go.Figure(layout={"title": {"text": "Slopes"}}), fit=False)
    assert with_toolbar_room(projector) is projector


def _copy(spec: dict) -> dict:
    import copy

    return copy.deepcopy(spec)


def test_attention_pair_panels_have_the_colours_their_bar_shows():
    """The two causal maps of an attention pair (the lab's and the lesson's), each query
    attending to itself alone: the diagonal (attention 1, above the colour cap) has the bar's
    top colour, a key given nothing its bottom colour, on the attention scale written out."""
    from figure_colours import bar_color, image_pixels

    from alibi_viz.figures.extrapolation import attention_pair_figure

    fig = attention_pair_figure(np.eye(12), np.eye(30), "short", "long", cmax=0.5)
    spec = fig.to_dict()
    assert all(isinstance(scale, list) for scale in colour_scales(spec))
    assert spec["layout"]["coloraxis"]["colorscale"] == explicit_colorscale(ATTENTION_COLORSCALE)
    axis = fig.layout.coloraxis
    images = [image_pixels(t.source) for t in fig.data if isinstance(t, go.Image)]
    assert [pixels.shape[0] for pixels in images] == [12, 30]  # one pixel a position
    for pixels in images:
        assert_pixel_reads_like_the_bar(pixels[5, 5], axis, 1.0)
        assert_pixel_reads_like_the_bar(pixels[-1, 0], axis, 0.0)
    shades = [bar_color(axis, value) for value in np.linspace(0.0, 0.5, 11)]
    assert min(shades, key=sum) is shades[-1]  # most attention: the darkest blue


def test_sendable_encodes_arrays_as_plotly_itself_does():
    """`sendable` writes the typed-array spec plotly.js reads exactly as plotly's own encoder
    (_plotly_utils.utils.convert_to_base64, the reference here) does, for every dtype a figure
    can hold: 64-bit integers narrowed, floats kept, 2-D shapes, empty and other arrays left
    alone, and the keys plotly.js reads as lists (range) untouched."""
    import copy

    from _plotly_utils.utils import convert_to_base64  # plotly's private encoder: the reference
    from plotly.io.json import to_json_plotly

    from alibi_viz.figures.render import sendable

    rng = np.random.default_rng(0)
    arrays = {
        "f8": rng.normal(size=7), "f4": rng.normal(size=(3, 4)).astype(np.float32),
        "f2": np.ones(3, dtype=np.float16), "i8small": np.arange(-5, 5),
        "i8mid": np.arange(-300, 300, 7), "i8big": np.array([0, 2**40]),
        "i8wide": np.array([-2**20, 2**20]), "u8": np.array([1, 70000], dtype=np.uint64),
        "u1": np.arange(9, dtype=np.uint8), "empty": np.zeros(0), "bool": np.array([True, False]),
        "text": np.array(["a", "b"]), "range": np.array([0.0, 1.0]),
    }
    spec = {"data": [{"type": "heatmap", **arrays, "nested": {"z": arrays["f4"]}}],
            "layout": {"xaxis": {"range": np.array([0.0, 1.0])}}}
    reference = copy.deepcopy(spec)
    convert_to_base64(reference)
    ours = sendable(spec)

    # What reaches the browser: the same JSON (an array plotly's encoder leaves alone, such as
    # bool or text, becomes the same JSON list whatever its numpy dtype).
    assert to_json_plotly(ours) == to_json_plotly(reference)
    assert "bdata" in to_json_plotly(ours)
    assert isinstance(spec["data"][0]["f8"], np.ndarray)  # the spec given is not changed
