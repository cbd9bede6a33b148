"""The Lesson's figures: the score pipeline, a head beside its bias, enlarged copies."""

import numpy as np
import torch

from alibi_viz.figures.bias import decay_figure
from alibi_viz.figures.lesson import enlarge_figure, score_pipeline_figure, toy_content_scores


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

