"""Extrapolation lab figures: numbers drawn as given, bounded payloads, honest marks."""

import base64
import io
import math

import numpy as np
import pytest
import torch
from fake_results import LENGTHS, RESULTS, fake_results
from PIL import Image

from alibi_viz import assets, data
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.extrapolation import (
    attention_pair_figure,
    extrapolation_attention_figure,
    perplexity_figure,
)


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
        assert set(drawn) == {"ALiBi", "learned", "RoPE"}
        assert list(drawn["RoPE"].x) == LENGTHS
        assert list(drawn["learned"].y) == [
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
    with pytest.raises(AlibiVizError, match="experiments.evaluate"):
        perplexity_figure({})


def test_shipped_results_draw():
    """The shipped results of every kind of text draw with every shipped model in them."""
    for kind in data.CORPUS_KINDS:
        results = assets.load_extrapolation_results(kind)
        assert results, kind
        drawn = lines(perplexity_figure(results))
        assert len(drawn) == len(results["models"]) == len(assets.shipped_models())


# ----------------------------------------------------------------------------- attention maps

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
    """The long panel gets lines at query i = 16 and at distance i - j = 16; the 0-based
    layer 0, head 1 is titled 1-based."""
    fig = extrapolation_attention_figure(random_attention(16), random_attention(128), 16, 0, 1, 0.5)
    marks = {t.name: t for t in fig.data if t.type == "scatter" and t.mode == "lines"}
    assert list(marks["query i = 16"].y) == [16, 16]
    assert list(marks["distance i - j = 16"].x) == [0, 111]
    assert "Layer 1, head 2" in fig.layout.title.text


def test_attention_maps_must_be_square():
    """A non-square map raises AlibiVizError."""
    with pytest.raises(AlibiVizError, match="square"):
        attention_pair_figure(np.zeros((3, 4)), np.zeros((3, 3)), "a", "b")
