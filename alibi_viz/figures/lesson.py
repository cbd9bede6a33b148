"""The Lesson page's figures: where the bias enters a score, a head beside its bias alone,
and the same figures enlarged for a projector.

* `score_pipeline_figure`: one query against every key: content score, ALiBi bias, their sum,
  and the attention with and without the bias.
* `head_vs_bias_figure`: a real head's attention map beside what its slope alone would give
  (`alibi.implied_attention_map`), drawn by `extrapolation_figures.attention_pair_figure`.
* `enlarge_figure`: any figure with its fonts and height scaled for a projector.
* `tokens`: a token count written for the current language's grammar.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from alibi_viz.alibi import check_int, implied_attention_map
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.extrapolation import MARKER_COLOR, attention_pair_figure
from alibi_viz.figures.render import CHAR_EM, fit_texts
from alibi_viz.i18n import _, number, significant, tokens
from alibi_viz.models.attention import check_attention


def head_vs_bias_figure(attention, slope: float, layer: int, head: int, **kwargs) -> go.Figure:
    """A real head's attention (T, T) beside what its ALiBi slope alone would give (all
    q.k equal): the difference is what the content term does. `layer` and `head` are 0-based
    (shown 1-based)."""
    attention = check_attention(attention)
    implied = implied_attention_map([slope], attention.shape[0])[0]  # (T, T)
    life = math.log(2) / slope
    # The part of each panel title before the colon names the map in its hover label.
    fig = attention_pair_figure(
        attention, implied, _("Layer {layer}, head {head}: the model").format(layer=layer + 1,
                                                                            head=head + 1),
        _("Bias alone: m={m}").format(m=significant(slope)),
        title=_("Real attention vs the bias alone (m={m}, half-life {half_life})").format(
            m=significant(slope), half_life=tokens(life, significant(life))), **kwargs)
    return fig


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
                          scale: float = 1.0, height: int = 520,
                          side_by_side: bool = False) -> go.Figure:
    """Where position enters: one query (the last of `num_keys` tokens) against every key.

    Top: content scores q.k / sqrt(d) (toy values, `toy_content_scores`), the ALiBi bias
    -m (i - j) and their sum, per key. Bottom: the attention softmax gives with and without
    the bias. slope 0 means no position information: both rows are the same.
    `side_by_side`: the two panels left and right instead (a projector's wide, low room).
    """
    num_keys = check_int(num_keys, "num_keys", 2, 4096)
    slope = float(slope)
    if not (math.isfinite(slope) and 0 <= slope <= 16):
        raise AlibiVizError(_("slope must be in [0, 16], got {value}.").format(value=slope))
    content = toy_content_scores(num_keys, seed, scale)
    j = np.arange(num_keys)
    i = num_keys - 1
    bias = -slope * (i - j)
    second = (1, 2) if side_by_side else (2, 1)  # (row, col) of the attention panel
    fig = make_subplots(rows=second[0], cols=second[1], shared_xaxes=not side_by_side,
                        vertical_spacing=0.12, horizontal_spacing=0.1,
                        subplot_titles=(_("scores before the softmax"),
                                        _("attention of query i={i} over keys").format(i=i)))
    weight_hover = _("key %{x}<br>weight %{y:.3f}<extra></extra>")
    fig.add_trace(go.Bar(x=j, y=content, name=_("content q·k/√d"), marker_color="#9ecae1",
                         hovertemplate=_("key %{x}<br>content %{y:.3f}<extra></extra>")),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=j, y=bias,
                             name=_("ALiBi bias −m(i−j), m={m}").format(m=significant(slope)),
                             mode="lines", line=dict(color=MARKER_COLOR, width=2),
                             hovertemplate=_("key %{x}<br>bias %{y:.3f}<extra></extra>")),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=j, y=content + bias, name=_("score = content + bias"),
                             mode="markers", marker=dict(color="black", size=7),
                             hovertemplate=_("key %{x}<br>score %{y:.3f}<extra></extra>")),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=j, y=_softmax(content), name=_("attention without position"),
                         marker_color="#bdbdbd", hovertemplate=weight_hover), *second)
    fig.add_trace(go.Bar(x=j, y=_softmax(content + bias), name=_("attention with ALiBi"),
                         marker_color="#1f77b4", hovertemplate=weight_hover), *second)
    fig.update_xaxes(title=_("key position j (the query is the last token)"), row=second[0],
                     col=second[1])
    if side_by_side:
        fig.update_xaxes(title=_("key position j (the query is the last token)"), row=1, col=1)
    fig.update_yaxes(title=_("logit"), row=1, col=1)
    fig.update_yaxes(title=_("weight"), row=second[0], col=second[1])
    fig.update_layout(height=height, barmode="group", margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", y=-0.15, yanchor="top", x=0.5,
                                  xanchor="center"))
    return fig


PRESENT_WIDTH = 940  # px a figure spans on a 1024-pixel-wide projector (page padding aside)
PRESENT_SCALE = 1.35  # figure fonts grow by this much on a projector
PRESENT_HEIGHT = 300  # figure height (px) on a projector: fits 1024x768 under the step's text
PROJECTOR_MIN_FONT = 14  # px: no figure text smaller on a projector (read from the back row)


def enlarge_figure(fig: go.Figure, scale: float = 1.5, min_height: int = 450,
                   height: int | None = None, width: int = PRESENT_WIDTH) -> go.Figure:
    """A copy of `fig` for a projector: every font (base, titles, subplot titles, text
    traces) multiplied by `scale`, and the height too unless `height` (px) is given, so that
    the figure can be sized to the screen.

    plotly neither wraps nor moves text, and Spanish and Russian run longer than English, so
    the texts are then fitted to a figure `width` px wide: the title, subplot titles and axis
    titles are broken over lines where they would not fit (the margins grow to hold them), a
    legend under the plot is pinned to the figure's bottom edge below the axis title, and a
    legend beside the plot that would not fit its height moves under it.
    """
    if not (isinstance(scale, (int, float)) and 0.5 <= scale <= 4):
        raise AlibiVizError(_("scale must be in [0.5, 4], got {value}.").format(value=repr(scale)))
    fig = go.Figure(fig)

    def grow(size, default):
        return round((size or default) * scale)

    layout = fig.layout
    font, title_font = grow(layout.font.size, 12), grow(layout.title.font.size, 17)
    total = height if height is not None else grow(layout.height, min_height)
    fig.update_layout(font=dict(size=font), title_font_size=title_font, height=total)
    for annotation in layout.annotations:  # subplot titles
        annotation.font.size = grow(annotation.font.size, 16)
    for trace in fig.data:
        textfont = getattr(trace, "textfont", None)
        if textfont is not None and textfont.size:
            textfont.size = grow(textfont.size, 12)
    # Fonts a figure set smaller than its base (a dense legend, tick labels) grow too, to at
    # least PROJECTOR_MIN_FONT.
    if layout.legend.font.size:
        layout.legend.font.size = max(PROJECTOR_MIN_FONT, grow(layout.legend.font.size, 12))
    for name in [key for key in layout.to_plotly_json() if key.startswith(("xaxis", "yaxis"))]:
        axis = layout[name]
        if axis.tickfont.size:
            axis.tickfont.size = max(PROJECTOR_MIN_FONT, grow(axis.tickfont.size, 12))
    fit_texts(fig, width, total, font=font, title_font=title_font, place_legend=True,
              min_font=PROJECTOR_MIN_FONT)
    return fig


MIN_TICKS = 3  # tick labels an axis shows at least on a projector (one label reads as no scale)
LOG_MANTISSAS = ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8))


def log_ticks(low: float, high: float, most: int) -> list[float]:
    """Round values (1, 2, 5 x 10^k, then finer) between `low` and `high` (> 0) for a log
    axis: the coarsest set with at least MIN_TICKS values, at most `most` (or the finest)."""
    ticks: list[float] = []
    for mantissas in LOG_MANTISSAS:
        ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(low)) - 1,
                                              math.ceil(math.log10(high)) + 1)
                 for m in mantissas if low <= m * 10.0 ** k <= high]
        if len(ticks) >= MIN_TICKS:
            break
    if len(ticks) < MIN_TICKS:  # a range narrower than 1 to 8: evenly spaced on the log scale
        return [float(f"{t:.2g}") for t in np.geomspace(low, high, MIN_TICKS)]
    while len(ticks) > most and len(ticks[::2]) >= MIN_TICKS:
        ticks = ticks[::2]
    return ticks


def _axis_values(fig: go.Figure, name: str) -> np.ndarray | None:
    """The finite values the traces on axis `name` ("yaxis2", "xaxis") draw; None when they
    are names (a category axis)."""
    letter, ref = name[0], name[0] + name[5:]  # "yaxis2" -> "y2", "xaxis" -> "x"
    values = []
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) != ref \
                or trace.type not in ("scatter", "bar") or getattr(trace, letter) is None:
            continue
        try:
            values.append(np.asarray(getattr(trace, letter), dtype=float).ravel())
        except (TypeError, ValueError):  # category names
            return None
    values = np.concatenate(values) if values else np.array([])
    return values[np.isfinite(values)]


def _held_height(fig: go.Figure, name: str, plot_h: float) -> float | None:
    """The height in px of the y axis that x axis `name` ("xaxis2") is held to, scale for
    scale (a square heatmap: the panel is no wider than that); None when it is not held."""
    y = fig.layout["yaxis" + name[5:]]
    if y is None or y.scaleanchor != "x" + name[5:]:
        return None
    return plot_h * ((y.domain[1] - y.domain[0]) if y.domain else 1.0)


def _widen_column_gaps(fig: go.Figure, font: float, plot_w: float) -> None:
    """Room between side-by-side panels for the right panel's y tick labels and title, so the
    title does not lie on the left panel's lines: each gap at least `needed` px, the panels
    narrowed alike."""
    layout = fig.layout
    columns = sorted({tuple(layout[name].domain) for name in layout.to_plotly_json()
                      if name.startswith("xaxis") and layout[name].domain})
    if len(columns) < 2 or any(b[0] < a[1] for a, b in pairwise(columns)):
        return  # one column, or panels that overlap (insets): nothing to space
    needed = (6 * CHAR_EM * font + 2.4 * font + 12) / plot_w  # ticks like "−100", a title line
    gaps = [b[0] - a[1] for a, b in pairwise(columns)]
    if min(gaps) >= needed:
        return
    start, end = columns[0][0], columns[-1][1]
    width = (end - start - needed * (len(columns) - 1)) / len(columns)
    moved = {old: (start + k * (width + needed), start + k * (width + needed) + width)
             for k, old in enumerate(columns)}
    for name in [key for key in layout.to_plotly_json() if key.startswith("xaxis")]:
        if layout[name].domain and tuple(layout[name].domain) in moved:
            old = tuple(layout[name].domain)
            layout[name].domain = moved[old]
            for annotation in layout.annotations:  # subplot titles centred over their panel
                if annotation.xref == "paper" and annotation.yref == "paper" \
                        and abs(annotation.x - (old[0] + old[1]) / 2) < 1e-6:
                    annotation.x = (moved[old][0] + moved[old][1]) / 2


def projector_figure(fig: go.Figure, height: int = PRESENT_HEIGHT) -> go.Figure:
    """`fig` as the lesson shows it on a 1024x768 projector: without its title (the step's
    heading and question say it, and at 768 px the room is the plot's), fonts PRESENT_SCALE
    larger, `height` px tall (the room its step leaves under its text), its texts fitted to
    PRESENT_WIDTH (`enlarge_figure`), side-by-side panels far enough apart for their y titles,
    and on every numeric axis at least MIN_TICKS tick labels, no more than its length holds at
    that size. Built from the figure itself, not from one already fitted to a page, so its
    titles are broken once."""
    fig = go.Figure(fig)
    # without its title a figure needs no room above its panels' own titles for one
    top = min(fig.layout.margin.t if fig.layout.margin.t is not None else 80, 80)
    fig = enlarge_figure(fig.update_layout(title_text="", margin_t=top), PRESENT_SCALE,
                         height=height, width=PRESENT_WIDTH)
    layout = fig.layout
    font = layout.font.size
    margin = layout.margin
    plot_h = height - (margin.t or 80) - (margin.b or 80)
    plot_w = PRESENT_WIDTH - (margin.l or 80) - (margin.r or 80)
    _widen_column_gaps(fig, font, plot_w)
    for name in [key for key in layout.to_plotly_json() if key.startswith(("xaxis", "yaxis"))]:
        axis = layout[name]
        span = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        square = False
        if name.startswith("y"):  # a label every 2.5 lines of text
            most = max(MIN_TICKS, int(span * plot_h / (2.5 * font)))
        elif axis.type in ("linear", "log", "-", None):  # numbers: one every 10 characters
            held = _held_height(fig, name, plot_h)
            square = held is not None
            width = span * plot_w if held is None else min(span * plot_w, held)
            most = max(MIN_TICKS, int(width / (10 * CHAR_EM * font)))
        else:
            continue
        values = _axis_values(fig, name)
        if axis.type == "category" or values is None:
            continue
        if axis.type == "log" and (axis.tickvals is None or len(axis.tickvals) < MIN_TICKS):
            if axis.range is not None:
                low, high = 10.0 ** axis.range[0], 10.0 ** axis.range[1]
            else:
                values = values[values > 0]
                if not values.size:
                    continue
                low, high = values.min(), values.max()
            ticks = log_ticks(low, high, most)
            # automargin: the margin was fitted to plotly's own labels, these may be wider
            axis.update(tickvals=ticks, automargin=True,
                        ticktext=[number(t) if t >= 10 else significant(t, 2) for t in ticks])
        elif axis.tickvals is None:
            # plotly's nticks is a most, and it picks round steps below it: at 5 a range of
            # -6 to 1 got only -5 and 0. Under a square panel, labels that do not fit side by
            # side are turned on end (step 5's 0, 20, ... 120), which costs the panel its
            # height (the room's height bounds it): there one more than fit.
            axis.nticks = max(most, MIN_TICKS) + (1 if square else 4)
    return fig
