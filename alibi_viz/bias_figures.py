"""The bias explorer's figures: slope schedules, per-head bias matrices and their decay.

Each builder returns a plotly Figure; the page only calls st.plotly_chart on it. Matrices are
drawn with the drawing kit (`alibi_viz.render`): evaluated at display resolution, one PNG
mosaic, a hover layer of exact values, so the payload is bounded whatever the length.
"""

from __future__ import annotations

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .alibi import (
    SCHEDULES,
    alibi_bias_sampled,
    alibi_slopes,
    check_mode,
    check_seq_len,
    check_slopes,
    half_life,
    query_decay,
)
from .errors import AlibiVizError
from .render import (
    HOVER_CELL_BUDGET,
    IMAGE_PIXEL_BUDGET,
    MAX_PANEL_PIXELS,
    display_positions,
    matrix_grid_figure,
    panel_resolution,
)

MAX_DECAY_CURVES = 16  # more lines than this are unreadable


# ----------------------------------------------------------------------------- head selection

def check_head_ids(head_ids, num_heads: int) -> list[int]:
    """0-based head indices to draw (None: all), each checked to be in [0, num_heads)."""
    if head_ids is None:
        return list(range(num_heads))
    head_ids = list(head_ids)
    if not head_ids or not all(isinstance(h, (int, np.integer)) and 0 <= h < num_heads for h in head_ids):
        raise AlibiVizError(f"head_ids must be a non-empty list of indices in [0, {num_heads - 1}].")
    return [int(h) for h in head_ids]


# ----------------------------------------------------------------------------- bias grid

def bias_display_values(slopes, seq_len: int, mode: str = "causal", head_ids=None,
                        key_len: int | None = None, budget: int = IMAGE_PIXEL_BUDGET,
                        cap: int = MAX_PANEL_PIXELS):
    """The bias at display resolution: (values (H, R, C), rows, cols, head_ids).

    rows/cols are the row indices (0..seq_len-1) and key positions evaluated; with key_len the
    query of row r sits at position r + key_len - seq_len. head_ids: 0-based indices (default all).
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    seq_len = check_seq_len(seq_len)
    key_len = seq_len if key_len is None else check_seq_len(key_len, "key_len")
    if key_len < seq_len:
        raise AlibiVizError(f"key_len ({key_len}) must be >= seq_len ({seq_len}).")
    head_ids = check_head_ids(head_ids, slopes.size)
    side = panel_resolution(key_len, len(head_ids), budget, cap)
    rows, cols = display_positions(seq_len, side), display_positions(key_len, side)
    values = alibi_bias_sampled(slopes[head_ids], rows + (key_len - seq_len), cols, mode)  # (H, R, C)
    return values, rows, cols, head_ids


COLOR_SCALES = ("per_head", "shared")  # how the bias grid colours its panels


def bias_grid_figure(slopes, seq_len: int, mode: str = "causal", head_ids=None,
                     key_len: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
                     hover_budget: int = HOVER_CELL_BUDGET, scale: str = "per_head") -> go.Figure:
    """Per-head ALiBi bias matrices, evaluated at display resolution (cost independent of L).

    head_ids: 0-based head indices to draw (default all). key_len > seq_len draws the last
    seq_len queries against key_len keys (a cached decoding step: the bottom rows of the full
    matrix). scale "per_head" divides each panel by its own largest penalty m_h (key_len - 1),
    so a gentle head shows its gradient instead of a flat colour (the panel title gives the
    divisor); "shared" puts every head on one scale, where a gentle head looks flat beside a
    steep one, as it is in logits. Hover always shows the bias itself.
    """
    if scale not in COLOR_SCALES:
        raise AlibiVizError(f"scale must be one of {COLOR_SCALES}, got {scale!r}.")
    images, rows, cols, head_ids = bias_display_values(slopes, seq_len, mode, head_ids, key_len,
                                                       pixel_budget)
    slopes = check_slopes(slopes)
    key_len = seq_len if key_len is None else key_len
    hover, hr, hc, _ = bias_display_values(slopes, seq_len, mode, head_ids, key_len, hover_budget,
                                           cap=64)
    chosen = slopes[head_ids]
    largest = chosen * max(key_len - 1, 1)  # (H,): the most negative bias a panel can hold
    note = "" if len(rows) == seq_len and len(cols) == key_len else (
        f" (drawn at {len(rows)}x{len(cols)}, downsampled from {seq_len:,}x{key_len:,})")
    masked = " Grey: masked (key after query)." if mode == "causal" else ""
    rows_note = (f" Last {seq_len:,} queries against {key_len:,} cached keys."
                 if key_len > seq_len else "")
    if scale == "per_head":
        images = images / largest[:, None, None]  # (H, R, C) in [-1, 0]
        titles = [f"head {h + 1}: m={slopes[h]:.3g}, darkest −{lg:.3g}" for h, lg in
                  zip(head_ids, largest, strict=True)]
        cmin, bar = -1.0, "bias ÷ m(L−1)"
    else:
        titles = [f"head {h + 1}: m={slopes[h]:.3g}" for h in head_ids]
        cmin, bar = (float(-largest.max()) if key_len > 1 else -1.0), "bias"
    return matrix_grid_figure(
        images, titles, seq_len, key_len, cmin=cmin, cmax=0.0, colorbar_title=bar,
        hover=hover, hover_rows=hr, hover_cols=hc, hover_label="bias",
        panel_ids=[h + 1 for h in head_ids],
        title=(f"ALiBi bias B<sub>ij</sub> ({mode}, "
               + ("each head on its own scale" if scale == "per_head" else "one scale for all heads")
               + f"){note}.{rows_note}{masked}"),
    )


# ----------------------------------------------------------------------------- slopes

def slope_schedule_figure(num_heads: int, max_bias: float = 8.0, schedules=SCHEDULES,
                          selected: str = "official") -> go.Figure:
    """Slopes m_h against head index h for each schedule, log2 y axis.

    Lines join heads in head order, so a non-monotonic schedule shows as a zigzag.
    """
    fig = go.Figure()
    head_numbers = np.arange(1, num_heads + 1)
    for name in schedules:
        slopes = alibi_slopes(num_heads, name, max_bias)
        fig.add_trace(go.Scatter(
            x=head_numbers, y=slopes, mode="lines+markers", name=name,
            line=dict(width=3 if name == selected else 1.2),
            marker=dict(size=8 if name == selected else 5),
            hovertemplate="head %{x}<br>m=%{y:.5g}<br>log2 m=%{customdata:.3f}<extra>" + name + "</extra>",
            customdata=np.log2(slopes),
        ))
    fig.update_yaxes(type="log", title="slope m (log scale)", exponentformat="power")
    fig.update_xaxes(title="head h", dtick=max(1, num_heads // 16))
    fig.update_layout(title=f"Slope schedules for {num_heads} heads", height=360,
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
                      margin=dict(l=60, r=20, t=70, b=40))
    return fig


# ----------------------------------------------------------------------------- decay

def decay_distances(max_distance: int, points: int = 400, log: bool = False) -> np.ndarray:
    """Distances 0..max_distance to plot: all when few, else `points` of them (geometric if log)."""
    if max_distance + 1 <= points:
        return np.arange(max_distance + 1)
    if log:
        return np.unique(np.concatenate([[0], np.round(np.geomspace(1, max_distance, points))])).astype(np.int64)
    return np.unique(np.round(np.linspace(0, max_distance, points))).astype(np.int64)


def decay_figure(slopes, seq_len: int, mode: str = "causal", head_ids=None,
                 log_distance: bool | None = None, query_pos: int | None = None) -> go.Figure:
    """Three panels per head: bias vs distance, bias-only attention vs distance, half-life & span.

    The attention panel and the 90% span are for one real query (`alibi.query_decay`): the
    last one in causal mode, the middle one in symmetric mode, or `query_pos`; the title says
    which, and how many keys it has behind and ahead. Closed forms, any length.
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    seq_len = check_seq_len(seq_len)
    head_ids = check_head_ids(head_ids, slopes.size)
    decay = query_decay(slopes, seq_len, mode, query_pos)
    reach = max(decay["behind"], decay["ahead"])
    log_distance = seq_len > 256 if log_distance is None else log_distance
    d = decay_distances(reach, points=200, log=log_distance)
    bars = head_ids
    if len(head_ids) > MAX_DECAY_CURVES:  # curves for an even subset; bars for every head
        head_ids = [head_ids[k] for k in np.linspace(0, len(head_ids) - 1, MAX_DECAY_CURVES).round().astype(int)]
    chosen = slopes[head_ids]
    # Normaliser of exp(-m d) over the query's keys: d = 0..behind and 1..ahead.
    r = np.exp(-chosen)
    total = (-np.expm1(-chosen * (decay["behind"] + 1)) - np.expm1(-chosen * (decay["ahead"] + 1))
             ) / -np.expm1(-chosen) - 1.0
    fig = make_subplots(rows=1, cols=3, subplot_titles=(
        "bias -m·d vs distance d", "attention with no content signal", "half-life and 90% span"))
    colors = pc.sample_colorscale("Turbo", np.linspace(0.05, 0.95, max(2, len(head_ids))))
    for k, h in enumerate(head_ids):
        style = dict(color=colors[k], width=1.5)
        fig.add_trace(go.Scatter(x=d, y=-chosen[k] * d, mode="lines", name=f"head {h + 1}",
                                 line=style, legendgroup=str(h),
                                 hovertemplate="d=%{x}<br>bias=%{y:.4g}"), row=1, col=1)
        fig.add_trace(go.Scatter(x=d, y=r[k] ** d / total[k], mode="lines", name=f"head {h + 1}",
                                 line=style, legendgroup=str(h), showlegend=False,
                                 hovertemplate="d=%{x}<br>weight of one key=%{y:.4g}"),
                      row=1, col=2)
    labels = [f"h{h + 1}" for h in bars]
    fig.add_trace(go.Bar(x=labels, y=half_life(slopes[bars]), name="half-life ln2/m",
                         marker_color="#4c78a8"), row=1, col=3)
    fig.add_trace(go.Bar(x=labels, y=decay["span90"][bars], name="90% span",
                         marker_color="#f58518"), row=1, col=3)
    fig.update_xaxes(title="distance d = |i - j| (tokens)", row=1, col=1)
    fig.update_xaxes(title="distance d (tokens)", row=1, col=2)
    if log_distance:
        for c in (1, 2):
            fig.update_xaxes(type="log", row=1, col=c)
    fig.update_yaxes(type="log", title="tokens", row=1, col=3)
    fig.update_yaxes(title="weight of one key", row=1, col=2)
    where = (f"the last query (i = {decay['query_pos']:,}), {decay['behind']:,} keys behind it"
             if mode == "causal" and decay["query_pos"] == seq_len - 1 else
             f"query i = {decay['query_pos']:,} of {seq_len:,}: {decay['behind']:,} keys behind, "
             f"{decay['ahead']:,} ahead")
    fig.update_layout(height=400, barmode="group", margin=dict(l=50, r=20, t=60, b=50),
                      legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top",
                                  font=dict(size=10)),
                      title=f"Decay ({mode}; {where})"
                            + (f"; curves for {len(head_ids)} of {len(bars)} heads"
                               if len(bars) > len(head_ids) else ""))
    return fig
