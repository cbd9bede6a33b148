"""The bias explorer's figures at a long length (64 heads, 4,096 tokens, symmetric): the bias
drawn as straight lines, and the panels that read as one colour said to be so."""

import numpy as np

from alibi_viz.alibi import alibi_slopes
from alibi_viz.figures.bias import (
    CLIP_LOGITS,
    DARK_SHARE,
    bias_display_values,
    dark_panel_heads,
    dark_panels_note,
    decay_figure,
)


def test_long_decay_keeps_the_bias_on_a_linear_axis():
    """At 4,096 tokens the attention panel's distance goes logarithmic (and says so in its
    title and axis), but the bias panel's stays linear, so −m·d is drawn as straight lines
    (on the log axis it was drawn as curves)."""
    fig = decay_figure(alibi_slopes(64), 4096, "symmetric")
    layout = fig.to_dict()["layout"]
    assert layout["xaxis"]["type"] == "linear"
    assert layout["xaxis2"]["type"] == "log" and "log" in layout["xaxis2"]["title"]["text"]
    assert "(log distance)" in layout["annotations"][1]["text"]
    bias = [t for t in fig.data if t.xaxis == "x" and t.type == "scatter"]
    assert len(bias) > 1
    for trace in bias:
        x, y = np.asarray(trace.x, float), np.asarray(trace.y, float)
        assert x.max() == 2048 and np.all(np.diff(x) > 0)
        gaps = np.diff(x)
        assert gaps.max() - gaps.min() <= 1  # evenly spaced distances: a line, not a log sweep
        assert np.allclose(y[1:] / x[1:], y[-1] / x[-1])  # y = −m·x


def test_short_decay_is_linear_in_both_panels():
    """Up to 256 tokens both distance axes are linear and no title mentions a log scale."""
    layout = decay_figure(alibi_slopes(8), 64).to_dict()["layout"]
    assert layout["xaxis"]["type"] == layout["xaxis2"]["type"] == "linear"
    assert "log" not in layout["annotations"][1]["text"]


def test_dark_panels_are_the_ones_the_figure_draws_dark():
    """At 4,096 tokens, 64 heads: the heads said to be dark are those whose clipped panel (the
    grid's own display values) sits at the clip on nine tenths of its cells or more, and the
    others are not; their count and reach are in the note. At 64 tokens, 8 heads: none."""
    slopes = alibi_slopes(64)
    dark = dark_panel_heads(slopes, 4096)
    values, _rows, _cols, heads = bias_display_values(slopes, 4096, "symmetric")
    at_clip = (values <= -CLIP_LOGITS).mean(axis=(1, 2))  # (H,) share of each panel at the clip
    assert len(dark) == 34 and dark == list(range(34))  # the steepest 34
    assert all(at_clip[h] >= 0.9 for h in dark)
    assert all(CLIP_LOGITS / slopes[h] >= DARK_SHARE * 4095 for h in heads if h not in dark)
    note = dark_panels_note(slopes, 4096, own_scale="each head its own")
    assert note.startswith("34 of these 64 panels are dark but for a thin band")
    assert "within 191 tokens" in note and "“each head its own”" in note
    assert dark_panels_note(alibi_slopes(8), 64) is None
