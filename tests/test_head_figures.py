"""Figures of a real model's heads: display arrays, payload bounds, and values checked against
transformers' own attention output and brute-force sums."""

import json

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from figure_colours import (
    assert_pixel_reads_like_the_bar,
    bar_color,
    colour_scales,
    image_pixels,
    mosaic_panels,
)
from plotly.colors import unlabel_rgb

from alibi_viz.alibi import alibi_slopes, bias_only_mean_distance
from alibi_viz.display import masked_pixels, stack_view
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.heads import (
    LABEL_MAX_TOKENS,
    attention_colors,
    attention_grid_figure,
    decomposition_figure,
    head_statistics_figure,
    model_slopes_figure,
)
from alibi_viz.figures.render import PAGE_WIDTH_PX
from alibi_viz.models.attention import (
    Decomposition,
    HeadStatistics,
    analyze_heads,
    decomposition_view,
    score_decomposition,
)
from alibi_viz.models.loading import describe_model, model_info_rows, train_seq_len
from alibi_viz.tiny_models import byte_tokenizer, tiny_model

TEXT = "def f(x):\n    return x + 1\n"  # 28 bytes: labelled heatmaps
MB = 2**20


@pytest.fixture(scope="module")
def bloom():
    return tiny_model("bloom"), byte_tokenizer()


def payload(fig) -> int:
    return len(fig.to_json())


def random_attention(heads: int, T: int, seed: int = 0) -> np.ndarray:
    """Causal attention maps (heads, T, T) with random scores: rows sum to 1, zeros above."""
    scores = torch.randn(heads, T, T, generator=torch.Generator().manual_seed(seed))
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(scores, -1).numpy()


def fake_decomposition(heads: int, T: int) -> Decomposition:
    """A BLOOM-like decomposition (+m*j bias) with random content, for drawing tests."""
    probs = random_attention(heads, T)
    content = np.random.default_rng(0).normal(size=(heads, T, T)).astype(np.float32)
    bias = (alibi_slopes(heads)[:, None, None] * np.arange(T)[None, None, :]).astype(np.float32)
    bias = np.broadcast_to(bias, (heads, T, T)).copy()
    total = np.where(np.tril(np.ones((T, T), bool)), content + bias, -np.inf).astype(np.float32)
    return Decomposition(content=content, bias=bias, total=total, probs=probs,
                         tokens=[chr(97 + i % 26) for i in range(T)], layer=0,
                         bias_form="+m*j", max_abs_error=0.0)


# ----------------------------------------------------------------------------- display arrays

def test_block_max_keeps_a_single_hot_key():
    """A lone large entry survives 20x downsampling (max pooling, not sampling)."""
    stack = np.zeros((1, 1000, 1000), dtype=np.float32)
    stack[0, 701, 3] = 1.0
    view = stack_view(stack, side=50)
    assert view.images.shape == (1, 50, 50)
    assert view.images.max() == 1.0 and view.images[0, 35, 0] == 1.0
    assert view.reduced == "block max"


def test_full_resolution_is_unchanged_and_hover_exact():
    """At full resolution the images are the input, and hover holds exact entries."""
    stack = random_attention(2, 40)
    view = stack_view(stack)
    np.testing.assert_array_equal(view.images, stack)
    np.testing.assert_array_equal(view.hover, stack[:, view.hover_rows][:, :, view.hover_cols])
    assert view.reduced is None


def test_sampling_takes_the_position_under_each_pixel():
    """reduce='sample' keeps exact entries on an even grid of positions."""
    stack = np.arange(100 * 100, dtype=np.float32).reshape(1, 100, 100)
    view = stack_view(stack, side=10, reduce="sample")
    assert view.images[0, 0, 0] == stack[0, 5, 5] and view.images[0, 9, 9] == stack[0, 95, 95]


def test_masked_pixels_are_the_blocks_wholly_after_the_query():
    """Only pixels whose first key follows their last query are masked."""
    exact = masked_pixels(5, 5, 5)
    np.testing.assert_array_equal(exact, np.triu(np.ones((5, 5), bool), 1))
    coarse = masked_pixels(10, 2, 2)  # blocks 0-4 and 5-9: only (row 0, col 1) is masked
    np.testing.assert_array_equal(coarse, [[False, True], [False, False]])


def test_log_colours_floor_zero_probabilities():
    """log10 colours clip zeros at two decades below uniform attention and keep NaN."""
    values, cmin, cmax, _ = attention_colors(np.array([0.0, 1.0, np.nan]), 100, "log")
    assert (cmin, cmax) == (-4.0, 0.0)
    assert values[0] == -4.0 and values[1] == 0.0 and np.isnan(values[2])


def test_unknown_colour_scale_is_refused():
    """A colour scale other than log/linear raises AlibiVizError."""
    with pytest.raises(AlibiVizError):
        attention_colors(np.zeros(3), 10, "sqrt")


# ----------------------------------------------------------------------------- against transformers

def test_analysis_matches_transformers_attentions(bloom):
    """The grid's hover values are transformers' own output_attentions at those positions."""
    model, tokenizer = bloom
    analysis = analyze_heads(model, tokenizer, TEXT, slopes=describe_model(model).slopes)
    ids = tokenizer(TEXT, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        reference = model(input_ids=ids, output_attentions=True).attentions
    assert analysis.seq_len == ids.shape[1] and len(analysis.layers) == 2
    for view, attn in zip(analysis.layers, reference, strict=True):
        expected = attn[0].numpy()[:, view.hover_rows][:, :, view.hover_cols]
        np.testing.assert_allclose(view.hover, expected, atol=1e-6)
    assert analysis.stats.mean_distance.shape == (2, 4)


def test_decomposition_view_keeps_the_models_numbers(bloom):
    """Hover values of each part are the decomposition's own entries; ranges span them."""
    model, tokenizer = bloom
    dec = score_decomposition(model, tokenizer, TEXT, layer=1)
    view = decomposition_view(dec, bias_shown="as_added")
    for part in ("content", "bias", "total", "probs"):
        sv = view.parts[part]
        np.testing.assert_array_equal(sv.hover, getattr(dec, part)[:, sv.hover_rows][:, :, sv.hover_cols])
    low, high = view.ranges["bias"][2]
    assert low == dec.bias[2].min() and high == dec.bias[2].max()
    assert np.isfinite(view.ranges["total"]).all()


def test_bias_only_mean_distance_matches_brute_force():
    """The bias-only reference equals softmax(-m(i-j)) distances averaged over all queries."""
    slopes, T = alibi_slopes(4), 50
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    expected = []
    for m in slopes:
        logits = np.where(j <= i, -m * (i - j), -np.inf)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        expected.append((p * np.abs(i - j)).sum(1).mean())
    np.testing.assert_allclose(bias_only_mean_distance(slopes, T), expected, rtol=1e-9)


# ----------------------------------------------------------------------------- figures

def test_short_grid_labels_every_token(bloom):
    """Up to LABEL_MAX_TOKENS tokens each head is a heatmap with the tokens on its axes (every
    k-th one where a label each would not fit the panel) and a hover on every cell (even when
    the sampled hover grid is coarser)."""
    model, tokenizer = bloom
    analysis = analyze_heads(model, tokenizer, TEXT, hover_cells=64)
    fig = attention_grid_figure(analysis.layers[0], analysis.tokens, 0, selected=1)
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heatmaps) == 4
    assert heatmaps[0].customdata.shape == (analysis.seq_len, analysis.seq_len, 4)
    shown = list(fig.layout.xaxis.tickvals)
    step = shown[1] - shown[0]
    assert shown == list(range(0, analysis.seq_len, step))
    assert list(fig.layout.xaxis.ticktext) == analysis.tokens[::step]
    panel_px = (PAGE_WIDTH_PX - 150) / 4  # four heads a row on a page
    assert len(shown) * fig.layout.xaxis.tickfont.size * 1.2 <= panel_px
    assert tuple(heatmaps[0].customdata[3, 0][:3]) == ("␣", "d", 3)  # "def f": query 3, key 0
    assert "▶ head 2" in fig.layout.annotations[1].text


def test_long_grid_is_one_image_with_bounded_payload():
    """Past LABEL_MAX_TOKENS the grid is one PNG; 1,500 tokens still send under 2 MB."""
    view = stack_view(random_attention(4, 1500))
    fig = attention_grid_figure(view, ["a"] * 1500, 0, train_seq_len=128)
    assert sum(isinstance(t, go.Image) for t in fig.data) == 1
    assert payload(fig) < 2 * MB
    assert "training length 128" in fig.layout.title.text


def test_train_seq_len_marked_only_when_exceeded():
    """The red dashed marker appears when T > training length and not otherwise."""
    view = stack_view(random_attention(2, LABEL_MAX_TOKENS))
    tokens = ["a"] * LABEL_MAX_TOKENS

    def dashed(fig):
        return [t for t in fig.data if isinstance(t, go.Scatter) and t.line.dash == "dash"]

    assert dashed(attention_grid_figure(view, tokens, 0, train_seq_len=16))
    assert not dashed(attention_grid_figure(view, tokens, 0, train_seq_len=64))


def test_decomposition_row_has_four_panels_with_their_own_colour_bars():
    """content | bias | masked total | attention, each with its own colour axis."""
    fig = decomposition_figure(decomposition_view(fake_decomposition(2, 20)), head=1, slope=0.25)
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:4] == ["content q·k/√d", "position bias −m(i−j)",
                          "masked total = softmax input", "attention"]
    axes = {t.coloraxis for t in fig.data if isinstance(t, go.Heatmap)}
    assert axes == {"coloraxis", "coloraxis2", "coloraxis3", "coloraxis4"}
    assert "head 2" in fig.layout.title.text


def test_long_decomposition_payload_is_bounded():
    """At 1,200 tokens the row is four images plus sampled hover, under 2 MB."""
    fig = decomposition_figure(decomposition_view(fake_decomposition(1, 1200)), head=0,
                               train_seq_len=128)
    assert sum(isinstance(t, go.Image) for t in fig.data) == 4
    assert payload(fig) < 2 * MB
    assert "Drawn at 300 px" in fig.layout.title.subtitle.text


def test_decomposition_rejects_a_head_out_of_range():
    """Asking for head 5 of 2 raises AlibiVizError."""
    with pytest.raises(AlibiVizError):
        decomposition_figure(decomposition_view(fake_decomposition(2, 10)), head=5)


def stats(fitted, config) -> HeadStatistics:
    fitted = np.asarray(fitted, dtype=float)
    zeros = np.zeros_like(fitted)
    return HeadStatistics(mean_distance=zeros + 3, entropy=zeros, local_share=zeros,
                          fitted_slope=fitted, slope_fit_r2=zeros + 1,
                          config_slope=None if config is None else np.asarray(config, float),
                          k=8, max_distance=10)


def test_statistics_plot_fitted_against_config_slopes_with_identity_line():
    """ALiBi: log-log scatter of the fitted slope vs the slope from the config with y = x;
    non-positive fits are counted in the title instead of drawn."""
    fig = head_statistics_figure(stats([[0.5, -0.1]], [[0.5, 0.25]]), 20, selected=(0, 0))
    scatter = next(t for t in fig.data if t.name == "layer 1")
    assert list(scatter.x) == [0.5] and list(scatter.y) == [0.5]
    assert any(t.name == "y = x" for t in fig.data)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "1 not positive" in fig.layout.title.text


def test_statistics_without_slopes_plot_per_head():
    """Without slopes from the config (not ALiBi) the fitted slope is drawn per head, linear."""
    fig = head_statistics_figure(stats([[0.1, 0.2, -0.3]], None), 20)
    assert list(fig.data[0].x) == [1, 2, 3]
    assert fig.layout.yaxis.type != "log"
    assert not any(t.name == "bias alone" for t in fig.data)


def test_slopes_figure_shows_config_slopes_only_when_different():
    """Falcon-like per-token slopes from the config get their own trace; equal ones do not."""
    slopes = alibi_slopes(8)
    same = model_slopes_figure(slopes, slopes)
    falcon = model_slopes_figure(slopes, 2 * slopes / 4)
    assert len(falcon.data) == len(same.data) + 1
    assert json.loads(falcon.to_json())["layout"]["yaxis"]["type"] == "log"


def test_train_seq_len_prefers_training_json():
    """train_seq_len from training.json wins over the config's length."""
    info = describe_model(tiny_model("gpt2"))
    assert info.declared_context == 128
    assert train_seq_len(info, {"train_seq_len": 64}) == 64
    assert train_seq_len(info, {}) == 128


def test_train_seq_len_reads_the_folders_training_json(tmp_path):
    """Without a training dict train_seq_len reads info.path's training.json (the one place
    that does: the pages, the notebook and the report call it so); a damaged or missing one
    falls back to the config's length."""
    info = describe_model(tiny_model("gpt2"), path=str(tmp_path))
    assert train_seq_len(info) == 128  # no training.json
    (tmp_path / "training.json").write_text('{"train_seq_len": 64}')
    assert train_seq_len(info) == 64
    (tmp_path / "training.json").write_text("{not json")
    assert train_seq_len(info) == 128


def test_info_rows_list_slopes_for_alibi_only():
    """The info table has slopes for BLOOM and none for GPT-2."""
    bloom_rows = {r["property"]: r["value"] for r in model_info_rows(describe_model(tiny_model("bloom")))}
    gpt2_rows = {r["property"]: r["value"] for r in model_info_rows(describe_model(tiny_model("gpt2")))}
    assert bloom_rows["slopes m"].startswith("0.25") and bloom_rows["position"] == "alibi"
    assert "slopes m" not in gpt2_rows and gpt2_rows["position"] == "learned"


def test_textbook_bias_panel_is_minus_m_distance_under_the_mask(bloom):
    """By default the bias panel shows -m (i - j) for j <= i (BLOOM adds +m j: the row
    constant m i is taken out) and masks the rest; the attention is the model's own."""
    model, tokenizer = bloom
    dec = score_decomposition(model, tokenizer, TEXT, layer=0)
    view = decomposition_view(dec, hover_side=1000)
    T = dec.probs.shape[-1]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    slopes = describe_model(model).slopes
    for h, m in enumerate(slopes):
        expected = np.where(j <= i, -m * (i - j), -np.inf)
        np.testing.assert_allclose(view.parts["bias"].hover[h], expected, atol=1e-5)
    np.testing.assert_array_equal(view.parts["probs"].hover, dec.probs)


@pytest.mark.parametrize("text", [TEXT[:40], TEXT * 3])  # labelled heatmaps; kit images
def test_decomposition_figure_passes_full_validation(bloom, text):
    """The row of four panels is written as plain dicts (no make_subplots); plotly's full
    validation accepts it, with four panels on four axis pairs and four colour bars."""
    model, tokenizer = bloom
    view = decomposition_view(score_decomposition(model, tokenizer, text, layer=1))
    fig = decomposition_figure(view, 0, slope=0.5, train_seq_len=64)
    checked = go.Figure(fig.to_dict())  # raises on anything plotly.js would not read
    assert {t.xaxis for t in checked.data} == {"x", "x2", "x3", "x4"}
    assert all(checked.layout[f"coloraxis{k}"].colorbar.len for k in ("", "2", "3", "4"))


def test_r2_labels_are_drawn_for_one_layer_on_sides_that_do_not_collide():
    """Only the labelled layer's points carry their R² (every layer's is in the hover); with
    the paper's 8 slopes on y = x, consecutive labels alternate sides or are left out rather
    than lie on each other or on the tick labels, and every head that keeps a label shows
    its own R²."""
    from alibi_viz.figures.heads import _label_sides

    slopes = np.tile(alibi_slopes(8), (4, 1))
    fig = head_statistics_figure(stats(slopes, slopes), 64, labelled_layer=2)
    points = {t.name: t for t in fig.data
              if t.name and t.name.startswith("layer ") and t.xaxis in (None, "x")}
    assert all(t.text is None for t in points.values())
    (labels,) = [t for t in fig.data if t.mode == "text"]
    assert list(labels.text) == ["1.00"] * 8 and list(labels.x) == list(points["layer 3"].x)
    assert labels.textfont.color == points["layer 3"].marker.color
    unlabelled = head_statistics_figure(stats(slopes, slopes), 64, labelled_layer=None)
    assert not [t for t in unlabelled.data if t.mode == "text"]
    sides = _label_sides(slopes[2], slopes[2], ["0.93"] * 8, (slopes.min() / 1.5, 0.75))
    assert None not in sides  # 8 heads on y = x all keep a label in a page-wide figure
    assert sides[0] == "middle left"  # the steepest, at the panel's right edge


@pytest.mark.parametrize("lang", ["en", "es", "ru"])
@pytest.mark.parametrize("T", [24, 700])
def test_a_heads_row_on_the_layers_fitted_layout_is_its_own_fitting(lang, T):
    """Every head's decomposition row laid out as the first head's fitted row
    (`with_fitted_layout`, what a head switch draws) is the row fitting that head's own
    figure gives: same layout, same traces, in every language, labelled (24 tokens) or drawn
    as images (700)."""
    from alibi_viz import i18n
    from alibi_viz.figures.render import figure_spec, with_fitted_layout

    view = decomposition_view(fake_decomposition(4, T))
    slopes = alibi_slopes(4)
    i18n.set_language(lang)
    try:
        first = figure_spec(decomposition_figure(view, 0, slope=slopes[0], train_seq_len=16))
        for head in range(1, 4):
            own = figure_spec(decomposition_figure(view, head, slope=slopes[head],
                                                   train_seq_len=16))
            laid = with_fitted_layout(decomposition_figure(view, head, slope=slopes[head],
                                                           train_seq_len=16), first)
            assert json.dumps(laid["layout"], sort_keys=True, default=str) == json.dumps(
                own["layout"], sort_keys=True, default=str)
            assert json.dumps(laid["data"], default=str) == json.dumps(own["data"], default=str)
    finally:
        i18n.set_language("en")


def test_every_verdict_of_the_check_has_a_colour_in_the_grid():
    """Each verdict the conformance check can give (its VERDICT_TITLES) is drawn in the verdict
    grid: a verdict with no colour left its cells out of the grid ('inconclusive' did)."""
    from alibi_viz.figures.heads import VERDICT_COLORS
    from alibi_viz.models.conformance import VERDICT_TITLES

    assert set(VERDICT_COLORS) == set(VERDICT_TITLES)
    assert len(set(VERDICT_COLORS.values())) == len(VERDICT_COLORS)


# ----------------------------------------------------------------------------- colours vs bars

def darkest_of(axis) -> np.ndarray:
    """The darkest colour of a colour axis's scale (least r + g + b of its stops)."""
    return min((np.array(unlabel_rgb(c), dtype=float) for _p, c in axis.colorscale), key=sum)


@pytest.mark.parametrize("scale", ["log", "linear"])
def test_long_grid_draws_most_attention_in_its_bars_darkest_blue(scale):
    """Each query attending only to itself: the diagonal (attention 1, the top of the bar, on
    either scale) has the bar's colour there, which is its darkest blue, and a key given
    nothing has the bar's colour at its bottom; the bar's scale is the panels' one, written
    out."""
    from alibi_viz.figures.render import ATTENTION_COLORSCALE, explicit_colorscale

    T = LABEL_MAX_TOKENS + 12
    view = stack_view(np.repeat(np.eye(T, dtype=np.float32)[None], 2, axis=0))
    fig = attention_grid_figure(view, ["a"] * T, 0, scale=scale)
    assert colour_scales(fig.to_dict()) == [explicit_colorscale(ATTENTION_COLORSCALE)]
    axis = fig.layout.coloraxis
    assert np.array_equal(bar_color(axis, axis.cmax), darkest_of(axis))
    for panel in mosaic_panels(fig, 2):
        assert panel.shape[:2] == (T, T)  # one pixel a position
        for i in (0, 30, T - 1):
            assert_pixel_reads_like_the_bar(panel[i, i], axis, axis.cmax)
        assert_pixel_reads_like_the_bar(panel[T - 1, 0], axis, axis.cmin)


def test_short_grid_names_its_scale_written_out():
    """The labelled grid's heatmaps, coloured by plotly.js from the bar's own scale, carry
    the attention scale written out, as the image grids do."""
    from alibi_viz.figures.render import ATTENTION_COLORSCALE, explicit_colorscale

    view = stack_view(random_attention(2, 12))
    fig = attention_grid_figure(view, ["a"] * 12, 0)
    assert not any(isinstance(t, go.Image) for t in fig.data)
    assert colour_scales(fig.to_dict()) == [explicit_colorscale(ATTENTION_COLORSCALE)]


def test_long_decomposition_panels_have_the_colours_their_bars_show():
    """Each of the four image panels has, at (i, j), its own bar's colour at the value it
    draws there: the content score, the textbook bias -m (i - j), their sum, and log10 of
    the attention (floored two decades below uniform); every bar's scale is written out."""
    from alibi_viz.figures.heads import log_floor

    T, head = LABEL_MAX_TOKENS + 12, 1
    dec = fake_decomposition(2, T)
    view = decomposition_view(dec)
    assert view.bias_shown == "textbook"
    fig = decomposition_figure(view, head)
    spec = fig.to_dict()
    assert all(isinstance(s, list) for s in colour_scales(spec))
    m = alibi_slopes(2)[head]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    bias = -m * (i - j)
    probs = np.log10(np.maximum(dec.probs[head], 10.0 ** log_floor(T)))
    values = {"": dec.content[head], "2": bias, "3": dec.content[head] + bias, "4": probs}
    images = [t for t in fig.data if isinstance(t, go.Image)]
    assert len(images) == 4
    for image in images:
        suffix = image.xaxis[1:]
        pixels = image_pixels(image.source)
        assert pixels.shape[:2] == (T, T)  # one pixel a position
        axis = fig.layout[f"coloraxis{suffix}"]
        for r, c in [(0, 0), (T - 1, 0), (T - 1, T - 1), (40, 17)]:
            assert_pixel_reads_like_the_bar(pixels[r, c], axis, float(values[suffix][r, c]))


def test_single_map_draws_most_attention_in_its_bars_darkest_blue():
    """One causal map of each query attending only to itself: its diagonal has the bar's top
    colour, the darkest blue, and a key given nothing the bar's bottom colour."""
    from alibi_viz.figures.heads import single_map_figure

    fig = single_map_figure(np.eye(10), "map")
    axis = fig.layout.coloraxis
    assert all(isinstance(s, list) for s in colour_scales(fig.to_dict()))
    pixels = image_pixels(next(t.source for t in fig.data if isinstance(t, go.Image)))
    assert pixels.shape[:2] == (10, 10)
    assert np.array_equal(bar_color(axis, axis.cmax), darkest_of(axis))
    assert_pixel_reads_like_the_bar(pixels[4, 4], axis, 1.0)
    assert_pixel_reads_like_the_bar(pixels[9, 0], axis, 0.0)


def test_verdict_grid_has_a_legend_naming_each_colours_verdict():
    """Every verdict drawn is named in a legend that is shown, in its grid colour, even when
    every head has the same verdict (plotly.js hides the legend of a single trace)."""
    from alibi_viz.figures.heads import VERDICT_COLORS, verdict_grid_figure
    from alibi_viz.i18n import _
    from alibi_viz.models.conformance import VERDICT_TITLES, AlibiCheck, HeadCheck

    def check(verdicts):
        heads = [[HeadCheck(layer=layer, head=h, ok=v == "conforms", verdict=v, expected_slope=0.5,
                            measured_slope=0.5, ratio=1.0, offset=0.0)
                  for h, v in enumerate(row)] for layer, row in enumerate(verdicts)]
        return AlibiCheck(heads=heads, decode=None, expected_form="+m*j", schedule=None,
                          probe_length=64)

    for verdicts in ([["conforms"] * 4] * 2, [["conforms", "scaled"], ["sign_flipped"] * 2]):
        fig = verdict_grid_figure(check(verdicts))
        assert fig.layout.showlegend is True
        drawn = {v for row in verdicts for v in row}
        assert {t.name: t.marker.color for t in fig.data} == {
            _(VERDICT_TITLES[v]): VERDICT_COLORS[v] for v in drawn}


RU_SENTENCE = "Суперпиксели — это небольшие кластеры пикселей, имеющих общие свойства."


def test_labels_note_explains_the_continuation_mark_once_with_its_count():
    """A Russian sentence of 71 characters is 133 byte tokens: its labels show each letter once,
    on its first byte, and "◦" on the second; the note beside the labels says so in the page's
    language, with how many tokens are the rest of a letter. An ASCII text gets no such
    sentence, only the whitespace marks."""
    from alibi_viz import i18n
    from alibi_viz.data import make_tokenizer
    from alibi_viz.figures.heads import labels_note
    from alibi_viz.models.attention import CONTINUATION, token_labels

    tokenizer = make_tokenizer()
    ids = tokenizer(RU_SENTENCE, add_special_tokens=False)["input_ids"]
    labels = token_labels(tokenizer, ids)
    letters = [label for label in labels if not label.startswith(CONTINUATION)]
    assert len(ids) == len(RU_SENTENCE.encode("utf-8")) == 133
    assert "".join(letters).replace("␣", " ") == RU_SENTENCE  # one label per letter, in order
    further = labels.count(CONTINUATION)
    assert further == 133 - len(RU_SENTENCE) == 62
    assert "◦" in labels_note(labels) and "62 of these 133 tokens are" in labels_note(labels)
    assert labels_note(token_labels(tokenizer, tokenizer("plain ascii")["input_ids"])) == (
        "Labels: ␣ space, ⏎ newline, ⇥ tab.")
    i18n.set_language("ru")
    try:
        note = labels_note(labels)
    finally:
        i18n.set_language("en")
    assert "◦" in note and "а 62 токена — остатки букв (всего токенов: 133)" in note, note
