"""The Lesson page's figures: where the bias enters a score, a head beside its bias alone,
and the same figures enlarged for a projector.

* `score_pipeline_figure`: one query against every key: content score, ALiBi bias, their sum,
  and the attention with and without the bias.
* `head_vs_bias_figure`: a real head's attention map beside what its slope alone would give
  (`alibi.implied_attention_map`), drawn by `extrapolation_figures.attention_pair_figure`.
* `enlarge_figure`: any figure with its fonts and height scaled for a projector.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .alibi import check_int, implied_attention_map
from .errors import AlibiVizError
from .extrapolation_figures import MARKER_COLOR, attention_pair_figure
from .heads import check_attention


def head_vs_bias_figure(attention, slope: float, layer: int, head: int, **kwargs) -> go.Figure:
    """A real head's attention (T, T) beside what its ALiBi slope alone would give (all
    q.k equal): the difference is what the content term does. layer/head are 1-based."""
    attention = check_attention(attention)
    implied = implied_attention_map([slope], attention.shape[0])[0]  # (T, T)
    return attention_pair_figure(
        attention, implied, f"Layer {layer}, head {head}: the model",
        f"Bias alone: m={slope:.3g}",
        title=f"Real attention vs the bias alone (m={slope:.3g}, half-life "
              f"{math.log(2) / slope:.3g} tokens)", **kwargs)


# ----------------------------------------------------------------------------- lesson figures

def toy_content_scores(num_keys: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Made-up content scores q.k / sqrt(d) of one query against `num_keys` keys, float64
    (num_keys,): standard normal times `scale`, fixed by `seed` (for the lesson only)."""
    num_keys = check_int(num_keys, "num_keys", 1, 4096)
    return np.random.default_rng(seed).standard_normal(num_keys) * scale


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def score_pipeline_figure(slope: float, num_keys: int = 32, seed: int = 0,
                          scale: float = 1.0, height: int = 520) -> go.Figure:
    """Where position enters: one query (the last of `num_keys` tokens) against every key.

    Top: content scores q.k / sqrt(d) (toy values, `toy_content_scores`), the ALiBi bias
    -m (i - j) and their sum, per key. Bottom: the attention softmax gives with and without
    the bias. slope 0 means no position information: both rows are the same.
    """
    num_keys = check_int(num_keys, "num_keys", 2, 4096)
    slope = float(slope)
    if not (math.isfinite(slope) and 0 <= slope <= 16):
        raise AlibiVizError(f"slope must be in [0, 16], got {slope}.")
    content = toy_content_scores(num_keys, seed, scale)
    j = np.arange(num_keys)
    i = num_keys - 1
    bias = -slope * (i - j)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("scores before the softmax",
                                        f"attention of query i={i} over keys"))
    fig.add_trace(go.Bar(x=j, y=content, name="content q·k/√d", marker_color="#9ecae1",
                         hovertemplate="key %{x}<br>content %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=j, y=bias, name=f"ALiBi bias −m(i−j), m={slope:.3g}",
                             mode="lines", line=dict(color=MARKER_COLOR, width=2),
                             hovertemplate="key %{x}<br>bias %{y:.3f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=j, y=content + bias, name="score = content + bias",
                             mode="markers", marker=dict(color="black", size=7),
                             hovertemplate="key %{x}<br>score %{y:.3f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=j, y=_softmax(content), name="attention without position",
                         marker_color="#bdbdbd",
                         hovertemplate="key %{x}<br>weight %{y:.3f}<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Bar(x=j, y=_softmax(content + bias), name="attention with ALiBi",
                         marker_color="#1f77b4",
                         hovertemplate="key %{x}<br>weight %{y:.3f}<extra></extra>"), row=2, col=1)
    fig.update_xaxes(title="key position j (the query is the last token)", row=2, col=1)
    fig.update_yaxes(title="logit", row=1, col=1)
    fig.update_yaxes(title="weight", row=2, col=1)
    fig.update_layout(height=height, barmode="group", margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", y=-0.15, yanchor="top", x=0.5,
                                  xanchor="center"))
    return fig


def enlarge_figure(fig: go.Figure, scale: float = 1.5, min_height: int = 450,
                   height: int | None = None) -> go.Figure:
    """A copy of `fig` for a projector: every font (base, titles, subplot titles, text
    traces) multiplied by `scale`, and the height too unless `height` (px) is given, so that
    the figure can be sized to the screen."""
    if not (isinstance(scale, (int, float)) and 0.5 <= scale <= 4):
        raise AlibiVizError(f"scale must be in [0.5, 4], got {scale!r}.")
    fig = go.Figure(fig)

    def grow(size, default):
        return round((size or default) * scale)

    layout = fig.layout
    fig.update_layout(font=dict(size=grow(layout.font.size, 12)),
                      title_font_size=grow(layout.title.font.size, 17),
                      height=height if height is not None else grow(layout.height, min_height))
    legend = layout.legend
    if legend.orientation == "h" and legend.y is not None and legend.y < 0:
        # a legend below the plot moves down with the larger axis titles, and the margin
        # under the plot grows to hold it
        fig.update_layout(legend_y=legend.y * scale,
                          margin_b=grow(layout.margin.b, 80) + 20 * (scale - 1))
    for annotation in layout.annotations:  # subplot titles
        annotation.font.size = grow(annotation.font.size, 16)
    for trace in fig.data:
        textfont = getattr(trace, "textfont", None)
        if textfont is not None and textfont.size:
            textfont.size = grow(textfont.size, 12)
    return fig
