"""Every log axis of the lab's perplexity charts shows at least three labelled values."""

import math

import pytest

from alibi_viz import assets, data
from alibi_viz.figures.extrapolation import (
    MIN_TICKS,
    log_ticks,
    perplexity_figure,
    rescale_figure,
    tick_texts,
)


def log_axes(fig) -> dict:
    """name -> (tickvals, data range) of every log y axis, the range from the traces drawn on
    it (the axis's own range when set, in log10 units)."""
    layout = fig.layout
    found = {}
    for name in [k for k in layout.to_plotly_json() if k.startswith("yaxis")]:
        axis = layout[name]
        if axis.type != "log":
            continue
        ref = "y" + name[len("yaxis"):]
        ys = [y for t in fig.data if (t.yaxis or "y") == ref and t.y is not None
              for y in t.y if y is not None]
        low, high = ((10 ** axis.range[0], 10 ** axis.range[1]) if axis.range
                     else (min(ys), max(ys)))
        found[name] = (axis.tickvals, (low, high))
    return found


@pytest.mark.parametrize("kind", data.CORPUS_KINDS)
def test_perplexity_and_rescale_log_axes_have_three_ticks(kind):
    """The shipped results' charts: each log y axis carries explicit ticks, at least three of
    them inside what the axis shows (the page's fitting kept only "10" on a short axis)."""
    figures = [perplexity_figure(assets.load_extrapolation_results(kind))]
    if kind == "en":
        figures.append(rescale_figure(assets.load_rescale_results()))
    for fig in figures:
        for name, (ticks, (low, high)) in log_axes(fig).items():
            assert ticks is not None, name
            inside = [t for t in ticks if low <= t <= high]
            assert len(inside) >= MIN_TICKS, (name, ticks, low, high)


@pytest.mark.parametrize(("low", "high"), [(2.127, 46.08), (2.7, 3.3), (1.0, 1.05), (0.9, 1000),
                                           (5.5, 6.5), (11.0, 19.0)])
def test_log_ticks_give_three_round_values_inside_any_span(low, high):
    """1-2-5 per decade, every digit, or round steps: at least MIN_TICKS inside the span, and
    their labels written with one number of decimals."""
    ticks = log_ticks(low, high)
    assert len(ticks) >= MIN_TICKS and all(low <= t <= high for t in ticks)
    assert all(math.isclose(t, round(t, 6)) for t in ticks)
    texts = tick_texts(ticks)
    assert len({len(t.split(".")[-1]) if "." in t else 0 for t in texts}) == 1, texts
