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



def test_log_ticks_give_at_least_three_round_values_inside_the_range():
    """A log axis on a projector labels at least three values, round ones where the range
    allows (perplexity 4.5 to 18: 5, 7, 10, 15; half-lives 1.4 to 215: 2, 10, 50, 200), all
    inside the range, however few the axis's length holds."""
    from alibi_viz.figures.lesson import log_ticks

    assert log_ticks(4.5, 18, 5) == [5, 7, 10, 15]
    assert log_ticks(1.386, 215, 3) == [2, 10, 50, 200]
    narrow = log_ticks(1.2, 1.9, 5)
    assert len(narrow) == 3 and all(1.2 <= t <= 1.9 for t in narrow)


def test_projector_figure_takes_the_height_and_spaces_side_by_side_panels():
    """projector_figure draws a figure at the height asked; step 1's panels side by side; the
    decay figure's panels are moved apart so that the middle panel's y title and tick labels
    have room (they lay on the left panel's lines), and its linear axes ask plotly for more
    than MIN_TICKS labels."""
    from alibi_viz import alibi_slopes
    from alibi_viz.figures.lesson import CHAR_EM, MIN_TICKS, projector_figure

    fig = projector_figure(decay_figure(alibi_slopes(8), 256, "causal"), height=333)
    assert fig.layout.height == 333
    domains = sorted(fig.layout[n].domain for n in ("xaxis", "xaxis2", "xaxis3"))
    font = fig.layout.font.size
    plot_w = 940 - fig.layout.margin.l - fig.layout.margin.r
    gaps = [(b[0] - a[1]) * plot_w for a, b in zip(domains, domains[1:], strict=False)]
    assert min(gaps) >= 6 * CHAR_EM * font + 2.4 * font + 12 - 1e-6
    assert fig.layout.yaxis.nticks > MIN_TICKS and fig.layout.yaxis2.nticks > MIN_TICKS
    assert len(fig.layout.yaxis3.tickvals) >= MIN_TICKS  # the half-lives' log axis
    side = projector_figure(score_pipeline_figure(0.25, 24, side_by_side=True), height=305)
    assert side.layout.xaxis.domain[1] < side.layout.xaxis2.domain[0]
    assert side.layout.yaxis.domain == side.layout.yaxis2.domain
