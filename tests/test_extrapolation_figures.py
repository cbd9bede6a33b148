"""Extrapolation and lesson figures: numbers drawn as given, honest summaries, bounded payloads."""

import base64
import io
import math

import numpy as np
import pytest
import torch
from model_factory import tiny_model
from PIL import Image

from alibi_viz import assets, implied_attention, mean_distance
from alibi_viz.errors import AlibiVizError
from alibi_viz.evaluate import perplexity
from alibi_viz.extrapolation_plots import (
    LIVE_CELL_BUDGET,
    attention_pair_figure,
    enlarge_figure,
    extrapolation_attention_figure,
    extrapolation_summary,
    implied_attention_map,
    live_plan,
    live_token_cap,
    mass_beyond,
    mean_attention_distance,
    perplexity_figure,
    pool_max,
    results_table,
    score_pipeline_figure,
    toy_content_scores,
)
from alibi_viz.plots import decay_figure

LENGTHS = [128, 256, 512]


def fake_results(ppl: dict, lengths=LENGTHS) -> dict:
    """Results shaped like evaluate's: ppl = {model: {protocol: [one value per length]}}."""
    return {
        "lengths": lengths, "stride": 64,
        "models": {name: {"train_seq_len": 128, "perplexity": {
            protocol: {str(n): v for n, v in zip(lengths, values, strict=True)}
            for protocol, values in per_protocol.items()}}
            for name, per_protocol in ppl.items()},
    }


RESULTS = fake_results({
    "alibi": {"nonoverlapping": [3.2, 3.1, 3.05], "sliding": [3.0, 3.0, 3.01]},
    "learned": {"nonoverlapping": [3.3, 9.0, 40.0], "sliding": [3.2, 20.0, 60.0]},
    "rope": {"nonoverlapping": [3.1, 3.6, 6.0], "sliding": [2.9, 4.0, 8.0]},
})


def lines(fig, protocol_axis="x"):
    return {t.name: t for t in fig.data if t.mode == "lines+markers" and t.xaxis == protocol_axis}


def random_attention(T: int, seed: int = 0) -> np.ndarray:
    """A causal attention map: softmax of random scores over j <= i, float32 (T, T)."""
    scores = torch.randn(T, T, generator=torch.Generator().manual_seed(seed))
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1).numpy()


# ----------------------------------------------------------------------------- results figure

def test_figure_draws_every_model_at_the_given_numbers():
    """Each model's line in each protocol panel holds exactly the stored perplexities."""
    fig = perplexity_figure(RESULTS)
    for axis, protocol in (("x", "nonoverlapping"), ("x2", "sliding")):
        drawn = lines(fig, axis)
        assert set(drawn) == {"ALiBi", "learned absolute", "RoPE"}
        assert list(drawn["RoPE"].x) == LENGTHS
        assert list(drawn["learned absolute"].y) == [
            RESULTS["models"]["learned"]["perplexity"][protocol][str(n)] for n in LENGTHS]


def test_figure_marks_training_length_on_log2_axis():
    """The x axis is logarithmic with ticks at the lengths, and a line stands at x = 128."""
    fig = perplexity_figure(RESULTS)
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == LENGTHS
    marks = [t for t in fig.data if t.name == "training length (128)"]
    assert len(marks) == 2 and all(list(t.x) == [128, 128] for t in marks)


def test_figure_uses_log_y_only_for_a_wide_range():
    """A collapsing baseline (40 vs 2.9) gives a log y axis; close values stay linear."""
    assert perplexity_figure(RESULTS).layout.yaxis.type == "log"
    close = fake_results({"alibi": {"nonoverlapping": [3.2, 3.1, 3.0]},
                          "rope": {"nonoverlapping": [3.1, 3.3, 3.5]}})
    assert perplexity_figure(close).layout.yaxis.type == "linear"


def test_live_runs_are_drawn_as_stars_in_their_protocol_panel():
    """A live result appears as one star at its length and perplexity, in the sliding panel."""
    run = {"model": "rope", "protocol": "sliding", "length": 256, "ppl": 4.2, "tokens": 512}
    stars = [t for t in perplexity_figure(RESULTS, live=[run]).data
             if t.marker is not None and t.marker.symbol == "star"]
    assert len(stars) == 1 and list(stars[0].x) == [256] and list(stars[0].y) == [4.2]
    assert stars[0].xaxis == "x2"


def test_missing_results_raise_a_clear_error():
    """Empty results raise AlibiVizError naming the command that writes them."""
    with pytest.raises(AlibiVizError, match="alibi_viz.evaluate"):
        perplexity_figure({})


def test_summary_names_rope_best_in_distribution_when_it_is():
    """At the training length RoPE (3.1) is named best, though ALiBi wins at the longest length."""
    sentences = extrapolation_summary(RESULTS, "nonoverlapping")
    assert "lowest perplexity is RoPE's" in sentences[0]
    assert sentences[-1] == "Lowest perplexity by length: RoPE at 128, ALiBi at 256-512."


def test_table_has_one_row_per_model_and_protocol():
    """Three models x two protocols give six rows carrying the stored values."""
    rows = results_table(RESULTS)
    assert len(rows) == 6
    assert rows[0] == {"model": "ALiBi", "protocol": "nonoverlapping", "128": 3.2, "256": 3.1,
                       "512": 3.05}


def test_shipped_results_draw():
    """The shipped results file (when present) draws with every shipped model in it."""
    results = assets.load_extrapolation_results(assets.RESULTS_PATH)
    if not results:
        pytest.skip("assets/results/extrapolation.json is not there yet")
    drawn = lines(perplexity_figure(results))
    assert len(drawn) == len(results["models"]) == len(assets.shipped_models())


# ----------------------------------------------------------------------------- live runs

@pytest.mark.parametrize("length", [128, 512, 1024, 2048, 4096])
@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_live_cap_is_at_least_one_window_and_within_budget(length, protocol):
    """The cap scores at least one full window and, above that, costs at most the cell budget."""
    cap = live_token_cap(length, protocol, stride=64)
    one_window = length if protocol == "nonoverlapping" else 64
    assert cap >= one_window
    cells = cap * length if protocol == "nonoverlapping" else math.ceil(cap / 64) * length**2
    assert cap == one_window or cells <= LIVE_CELL_BUDGET


@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_live_plan_scores_the_requested_tokens(protocol):
    """evaluate.perplexity with live_plan's arguments scores exactly the requested targets."""
    model = tiny_model("bloom")
    ids = np.arange(3, 3 + 200) % 250 + 3
    out = perplexity(model, ids, 32, protocol, **live_plan(32, protocol, 48, stride=16))
    assert out["tokens"] == 48


# ----------------------------------------------------------------------------- attention maps

def test_pool_max_matches_a_loop():
    """Max-pooling a 10x10 map into 4x4 pixels takes the max of each 3x3 block (edges padded)."""
    attention = random_attention(10)
    image, f = pool_max(attention, 4)
    assert f == 3 and image.shape == (4, 4)
    for r in range(4):
        for c in range(4):
            assert image[r, c] == attention[3 * r:3 * r + 3, 3 * c:3 * c + 3].max()


def test_mass_beyond_matches_a_loop():
    """The share of attention farther back than d equals a direct sum over i - j > d."""
    attention = random_attention(12, seed=1)
    d = 4
    rows = [sum(attention[i, j] for j in range(12) if i - j > d) for i in range(d + 1, 12)]
    assert mass_beyond(attention, d) == pytest.approx(np.mean(rows), rel=1e-6)


def test_implied_attention_map_rows_match_the_core_function():
    """Row i of the map is alibi.implied_attention for query i (keys 0..i)."""
    m = 0.3
    attention = implied_attention_map(m, 9)
    for i in range(9):
        np.testing.assert_allclose(attention[i, :i + 1], implied_attention([m], i)[0], rtol=1e-6)
        assert not attention[i, i + 1:].any()


def test_mean_attention_distance_matches_closed_form():
    """For the bias-only map, the mean distance is the average of alibi.mean_distance per row."""
    m, T = 0.1, 40
    expected = np.mean([mean_distance([m], "causal", i + 1)[0] for i in range(T)])
    assert mean_attention_distance(implied_attention_map(m, T)) == pytest.approx(expected, rel=1e-5)


def decode_png(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))


def test_pair_figure_payload_is_bounded():
    """A 2,048-token map is drawn as at most max_px pixels a side, with a 64x64 hover grid."""
    fig = attention_pair_figure(random_attention(64), random_attention(2048), "a", "b", max_px=256)
    images = [t for t in fig.data if t.type == "image"]
    assert decode_png(images[0].source).shape == (64, 64, 3)
    assert decode_png(images[1].source).shape == (256, 256, 3)
    hovers = [t for t in fig.data if t.type == "heatmap"]
    assert np.asarray(hovers[1].z).shape == (64, 64)
    assert len(fig.to_json()) < 400_000


def test_pair_figure_hover_holds_exact_values():
    """Hover values are the map's own entries at the hover positions, NaN above the diagonal."""
    attention = random_attention(30, seed=2)
    hover = [t for t in attention_pair_figure(attention, attention, "a", "b").data
             if t.type == "heatmap"][0]
    z = np.asarray(hover.z, dtype=float)
    assert z[5, 3] == pytest.approx(attention[5, 3]) and math.isnan(z[3, 5])


def test_extrapolation_figure_marks_training_length():
    """The long panel gets lines at query i = 16 and at distance i - j = 16."""
    fig = extrapolation_attention_figure(random_attention(16), random_attention(128), 16, 1, 2, 0.5)
    marks = {t.name: t for t in fig.data if t.type == "scatter" and t.mode == "lines"}
    assert list(marks["query i = 16"].y) == [16, 16]
    assert list(marks["distance i - j = 16"].x) == [0, 111]
    assert "Layer 1, head 2" in fig.layout.title.text


def test_attention_maps_must_be_square():
    """A non-square map raises AlibiVizError."""
    with pytest.raises(AlibiVizError, match="square"):
        pool_max(np.zeros((3, 4)), 2)


# ----------------------------------------------------------------------------- lesson figures

def test_pipeline_attention_is_softmax_of_content_plus_bias():
    """The 'with ALiBi' bars equal torch.softmax(content - m (i - j)); 'without' drops the bias."""
    m, n = 0.25, 12
    fig = score_pipeline_figure(m, num_keys=n, seed=3)
    bars = {t.name: np.asarray(t.y) for t in fig.data}
    content = torch.tensor(toy_content_scores(n, seed=3))
    distance = torch.arange(n - 1, -1, -1, dtype=torch.float64)  # i - j for the last query
    np.testing.assert_allclose(bars["attention with ALiBi"],
                               torch.softmax(content - m * distance, 0).numpy(), rtol=1e-9)
    np.testing.assert_allclose(bars["attention without position"],
                               torch.softmax(content, 0).numpy(), rtol=1e-9)


def test_pipeline_with_zero_slope_ignores_position():
    """With m = 0 the attention with and without ALiBi is the same."""
    bars = {t.name: np.asarray(t.y) for t in score_pipeline_figure(0.0, 10).data}
    np.testing.assert_array_equal(bars["attention with ALiBi"], bars["attention without position"])


def test_enlarge_figure_scales_fonts_and_height_of_a_copy():
    """Presentation scaling multiplies the base font, subplot titles and height; the input stays."""
    fig = decay_figure([0.5, 0.25], 32)
    big = enlarge_figure(fig, 1.5)
    assert big.layout.font.size == 18 and big.layout.height == round(fig.layout.height * 1.5)
    assert big.layout.annotations[0].font.size == 24
    assert fig.layout.font.size is None
