"""The bias explorer's figures: slope schedules, per-head bias matrices and their decay.

Each builder returns a plotly Figure; the page only calls st.plotly_chart on it. Matrices are
drawn with the drawing kit (`alibi_viz.figures.render`): evaluated at display resolution, one PNG
mosaic, a hover layer of exact values, so the payload is bounded whatever the length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go

from alibi_viz.alibi import (
    MODE_NAMES,
    SCHEDULE_NAMES,
    SCHEDULES,
    alibi_bias_sampled,
    alibi_slopes,
    check_mode,
    check_seq_len,
    check_slopes,
    half_life,
    query_decay,
)
from alibi_viz.display import (
    HOVER_CELL_BUDGET,
    IMAGE_PIXEL_BUDGET,
    MAX_PANEL_PIXELS,
    display_positions,
    panel_resolution,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.render import (
    BIAS_COLORSCALE,
    MapSet,
    figure,
    map_set,
    matrix_grid_figure,
    plain_text,
    subplot_row,
)
from alibi_viz.i18n import _, ngettext, number, percent, significant

MAX_DECAY_CURVES = 16  # more lines than this are unreadable


# ----------------------------------------------------------------------------- head selection

def check_head_ids(head_ids, num_heads: int) -> list[int]:
    """0-based head indices to draw (None: all), each checked to be in [0, num_heads)."""
    if head_ids is None:
        return list(range(num_heads))
    head_ids = list(head_ids)
    if not head_ids or not all(isinstance(h, (int, np.integer)) and 0 <= h < num_heads for h in head_ids):
        raise AlibiVizError(_("head_ids must be a non-empty list of indices in [0, {last}].")
                            .format(last=num_heads - 1))
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
        raise AlibiVizError(_("key_len ({key_len}) must be >= seq_len ({seq_len}).")
                            .format(key_len=key_len, seq_len=seq_len))
    head_ids = check_head_ids(head_ids, slopes.size)
    side = panel_resolution(key_len, len(head_ids), budget, cap)
    rows, cols = display_positions(seq_len, side), display_positions(key_len, side)
    values = alibi_bias_sampled(slopes[head_ids], rows + (key_len - seq_len), cols, mode)  # (H, R, C)
    return values, rows, cols, head_ids


def bias_display_size(seq_len: int, num_heads: int, key_len: int | None = None) -> int:
    """How many values `bias_display_values` returns for `num_heads` heads (without making them)."""
    key_len = seq_len if key_len is None else key_len
    side = panel_resolution(key_len, num_heads, IMAGE_PIXEL_BUDGET, MAX_PANEL_PIXELS)
    return num_heads * min(seq_len, side) * min(key_len, side)


# How the bias grid colours its panels. "clipped" (the default) is one scale for every head,
# down to -CLIP_LOGITS: a steep head turns dark within a few tokens, a gentle one stays pale
# (on its own scale every linear panel is the same picture, so the heads would look alike).
COLOR_SCALES = ("clipped", "per_head", "shared")
CLIP_LOGITS = 10.0  # e^-10: a key this far down keeps 1/22,026 of the weight of the query's own


@dataclass
class BiasGrid:
    """What a bias grid draws, as a figure (`bias_grid_figure`) or on a canvas
    (`bias_grid_maps`): values (H, R, C) on [cmin, 0] (-inf masked) at query rows `rows` and
    key positions `cols`, what each panel was divided by (`divisors`, 1 but on a scale of its
    own), titles, the colour bar's title and the figure's title (plotly's markup)."""

    values: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    head_ids: list[int]
    divisors: np.ndarray
    panel_titles: list[str]
    cmin: float
    bar_title: str
    title: str


def bias_grid(slopes, seq_len: int, mode: str = "causal", head_ids=None,
              key_len: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
              scale: str = "clipped") -> BiasGrid:
    """The bias grid at display resolution, coloured as `scale` says (`bias_grid_figure`
    explains the arguments)."""
    if scale not in COLOR_SCALES:
        raise AlibiVizError(_("scale must be one of {choices}, got {value!r}.")
                            .format(choices=", ".join(COLOR_SCALES), value=scale))
    images, rows, cols, head_ids = bias_display_values(slopes, seq_len, mode, head_ids, key_len,
                                                       pixel_budget)
    slopes = check_slopes(slopes)
    key_len = seq_len if key_len is None else key_len
    chosen = slopes[head_ids]
    largest = chosen * max(key_len - 1, 1)  # (H,): the most negative bias a panel can hold
    divisors = np.ones(len(head_ids))
    note = "" if len(rows) == seq_len and len(cols) == key_len else " " + _(
        "(drawn at {rows}x{cols}, downsampled from {seq_len}x{key_len})").format(
        rows=len(rows), cols=len(cols), seq_len=number(seq_len), key_len=number(key_len))
    masked = " " + _("Grey: masked (key after query).") if mode == "causal" else ""
    rows_note = (" " + _("Last {queries} queries against {keys} cached keys.").format(
        queries=number(seq_len), keys=number(key_len)) if key_len > seq_len else "")
    if scale == "per_head":
        images = images / largest[:, None, None]  # (H, R, C) in [-1, 0]
        divisors = largest
        titles = [_("head {h}: m={m}, darkest −{largest}").format(
            h=h + 1, m=significant(slopes[h], 3), largest=significant(lg, 3))
            for h, lg in zip(head_ids, largest, strict=True)]
        cmin, bar = -1.0, _("bias ÷ m(L−1)")
        scale_text = _("each head on its own scale")
    elif scale == "clipped":
        # (H, R, C) in [-CLIP_LOGITS, 0]; masked cells (-inf) stay masked
        images = np.where(np.isfinite(images), np.maximum(images, -CLIP_LOGITS), images)
        titles = [_("head {h}: m={m}").format(h=h + 1, m=significant(slopes[h], 3))
                  for h in head_ids]
        cmin = -CLIP_LOGITS
        bar = _("bias (clipped at −{clip})").format(clip=number(CLIP_LOGITS))
        scale_text = _("one scale for all heads, clipped at −{clip}").format(
            clip=number(CLIP_LOGITS))
    else:
        titles = [_("head {h}: m={m}").format(h=h + 1, m=significant(slopes[h], 3))
                  for h in head_ids]
        cmin, bar = (float(-largest.max()) if key_len > 1 else -1.0), _("bias")
        scale_text = _("one scale for all heads")
    title = _("ALiBi bias B<sub>ij</sub> ({mode}, {scale})").format(
        mode=_(MODE_NAMES[mode]), scale=scale_text)
    return BiasGrid(values=images, rows=rows, cols=cols, head_ids=head_ids, divisors=divisors,
                    panel_titles=titles, cmin=cmin, bar_title=bar,
                    title=f"{title}{note}.{rows_note}{masked}")


def bias_grid_figure(slopes, seq_len: int, mode: str = "causal", head_ids=None,
                     key_len: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
                     hover_budget: int = HOVER_CELL_BUDGET, scale: str = "clipped") -> go.Figure:
    """Per-head ALiBi bias matrices, evaluated at display resolution (cost independent of L).

    head_ids: 0-based head indices to draw (default all). key_len > seq_len draws the last
    seq_len queries against key_len keys (a cached decoding step: the bottom rows of the full
    matrix). scale "clipped" (default) puts every head on one scale from 0 down to
    -CLIP_LOGITS, where the bias leaves a key almost no weight: how far each head reaches is
    where its panel turns dark (at distance CLIP_LOGITS / m_h). "per_head" divides each panel
    by its own largest penalty m_h (key_len - 1): every head then shows the same gradient and
    only the titles differ. "shared" puts every head on one unclipped scale, down to the
    steepest head's largest penalty. Hover always shows the bias itself.
    """
    grid = bias_grid(slopes, seq_len, mode, head_ids, key_len, pixel_budget, scale)
    key_len = seq_len if key_len is None else key_len
    hover, hr, hc, _heads = bias_display_values(slopes, seq_len, mode, grid.head_ids, key_len,
                                                hover_budget, cap=64)
    return matrix_grid_figure(
        grid.values, grid.panel_titles, seq_len, key_len, cmin=grid.cmin, cmax=0.0,
        colorbar_title=grid.bar_title, hover=hover, hover_rows=hr, hover_cols=hc,
        hover_label=_("bias"), panel_ids=[h + 1 for h in grid.head_ids], title=grid.title)


def bias_grid_maps(slopes, seq_len: int, mode: str = "causal", head_ids=None,
                   key_len: int | None = None, scale: str = "clipped") -> MapSet:
    """The bias grid of `bias_grid_figure` as a `render.MapSet`, for a canvas drawn in the
    browser with no plotly: the same pixels (the bias at the position under each pixel's
    centre) as 8-bit codes, masked pixels code 255; the hover reads the bias itself, on every
    scale. A byte a pixel, whatever the length or the head count."""
    grid = bias_grid(slopes, seq_len, mode, head_ids, key_len, scale=scale)
    return map_set(grid.values, vmin=grid.cmin, vmax=0.0, title=plain_text(grid.title),
                   panel_titles=grid.panel_titles, seq_len=seq_len,
                   key_len=None if key_len in (None, seq_len) else key_len, reads="linear",
                   colorscale=BIAS_COLORSCALE, bar_title=grid.bar_title,
                   value_label=_("bias"), tokens=[], sampled=True,
                   panel_scales=(None if scale != "per_head"
                                 else [float(d) for d in grid.divisors]))


DARK_SHARE = 0.05  # a clipped panel whose head reaches the clip within this share of the keys
                   # reads as one dark colour, bar a band along the diagonal


def dark_panel_heads(slopes, key_len: int, head_ids=None) -> list[int]:
    """The heads (0-based, of `head_ids`, default all) whose clipped bias panel is dark but for
    a thin band: the bias reaches −CLIP_LOGITS within DARK_SHARE of the `key_len` keys, i.e.
    CLIP_LOGITS / m_h < DARK_SHARE · (key_len − 1)."""
    slopes = check_slopes(slopes)
    head_ids = check_head_ids(head_ids, slopes.size)
    return [h for h in head_ids if CLIP_LOGITS / slopes[h] < DARK_SHARE * max(key_len - 1, 1)]


def dark_panels_note(slopes, key_len: int, head_ids=None, own_scale: str = "") -> str | None:
    """The sentence under a clipped bias grid where some panels look like one flat colour (a long
    sequence: 64 heads at 4,096 tokens): how many, that it is the bias's meaning (no key beyond
    the band keeps more than e^−10 of the query's own weight), and that each head on its own
    scale shows their gradient (`own_scale`: that scale's name as the page's control shows it).
    None when no panel is that dark."""
    dark = dark_panel_heads(slopes, key_len, head_ids)
    if not dark:
        return None
    slopes = check_slopes(slopes)
    total = len(check_head_ids(head_ids, slopes.size))
    reach = CLIP_LOGITS / float(slopes[dark].min())  # the widest band among them, in tokens
    return ngettext(
        "{n} of these {total} panels is dark but for a thin band along the diagonal: its head's "
        "bias reaches −{clip} within {reach} tokens, under {share} of the {keys} keys, so the bias "
        "alone leaves no key farther more than e^−{clip} of the weight of the query's own. That "
        "is what a "
        "steep slope does at this length; the colour scale “{own_scale}” shows the gradient "
        "of every head.",
        "{n} of these {total} panels are dark but for a thin band along the diagonal: their "
        "heads' bias reaches −{clip} within {reach} tokens, under {share} of the {keys} keys, so "
        "the bias alone leaves no key farther more than e^−{clip} of the weight of the query's "
        "own. That is what a steep slope does at this length; the colour scale “{own_scale}” shows the "
        "gradient of every head.", len(dark)).format(own_scale=own_scale,
            n=number(len(dark)), total=number(total), clip=number(CLIP_LOGITS),
            reach=number(math.ceil(reach)), share=percent(DARK_SHARE), keys=number(key_len))


# ----------------------------------------------------------------------------- slopes

def slope_schedule_figure(num_heads: int, max_bias: float = 8.0, schedules=SCHEDULES,
                          selected: str = "official") -> go.Figure:
    """Slopes m_h against head index h for each schedule, log2 y axis.

    Lines join heads in head order, so a non-monotonic schedule shows as a zigzag.
    """
    head_numbers = np.arange(1, num_heads + 1)
    data, drawn = [], {}
    for name in schedules:
        slopes = alibi_slopes(num_heads, name, max_bias)
        # a schedule that coincides with one drawn before would hide under it: dashed, and said
        same = next((other for other, values in drawn.items() if np.array_equal(values, slopes)),
                    None)
        drawn[name] = slopes
        label = (_("{name} (same as {other})").format(name=_(SCHEDULE_NAMES[name]),
                                                      other=_(SCHEDULE_NAMES[same]))
                 if same else _(SCHEDULE_NAMES[name]))
        data.append({
            "type": "scatter", "x": head_numbers, "y": slopes, "mode": "lines+markers",
            "name": label, "line": {"width": 3 if name == selected else 1.2,
                                    **({"dash": "dash"} if same else {})},
            "marker": {"size": 8 if name == selected else 5},
            "hovertemplate": _("head") + " %{x}<br>m=%{y:.5g}<br>log2 m=%{customdata:.3f}"
                             "<extra>" + _(SCHEDULE_NAMES[name]) + "</extra>",
            "customdata": np.log2(slopes)})
    return figure(data, {
        "yaxis": {"type": "log", "title": {"text": _("slope m (log scale)")},
                  "exponentformat": "power"},
        "xaxis": {"title": {"text": _("head h")}, "dtick": max(1, num_heads // 16)},
        "title": {"text": _("Slope schedules for {n} heads").format(n=num_heads)}, "height": 360,
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        "margin": {"l": 60, "r": 20, "t": 70, "b": 40}})


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

    The bias panel's distance axis is linear at every length (−m·d is a straight line); the
    attention panel's is logarithmic when `log_distance` (default: seq_len > 256), and its title
    and axis say so.

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
    # The bias panel keeps a linear distance axis at every length, so −m·d is drawn as the
    # straight line it is; only the attention panel's distance goes logarithmic for a long
    # sequence, where e^(−m·d) of the steep heads would otherwise hide in the first pixels.
    d_bias = decay_distances(reach, points=200)
    d = decay_distances(reach, points=200, log=log_distance)
    bars = head_ids
    if len(head_ids) > MAX_DECAY_CURVES:  # curves for an even subset; bars for every head
        head_ids = [head_ids[k] for k in np.linspace(0, len(head_ids) - 1, MAX_DECAY_CURVES).round().astype(int)]
    chosen = slopes[head_ids]
    # Normaliser of exp(-m d) over the query's keys: d = 0..behind and 1..ahead.
    r = np.exp(-chosen)
    total = (-np.expm1(-chosen * (decay["behind"] + 1)) - np.expm1(-chosen * (decay["ahead"] + 1))
             ) / -np.expm1(-chosen) - 1.0
    colors = pc.sample_colorscale("Turbo", np.linspace(0.05, 0.95, max(2, len(head_ids))))
    data = []
    for k, h in enumerate(head_ids):
        line = {"color": colors[k], "width": 1.5}
        name = _("head {h}").format(h=h + 1)
        data.append({"type": "scatter", "x": d_bias, "y": -chosen[k] * d_bias, "mode": "lines",
                     "name": name, "line": line, "legendgroup": str(h), "xaxis": "x", "yaxis": "y",
                     "hovertemplate": "d=%{x}<br>" + _("bias") + "=%{y:.4g}"})
        data.append({"type": "scatter", "x": d, "y": r[k] ** d / total[k], "mode": "lines",
                     "name": name, "line": line, "legendgroup": str(h), "showlegend": False,
                     "xaxis": "x2", "yaxis": "y2",
                     "hovertemplate": "d=%{x}<br>" + _("weight of one key") + "=%{y:.4g}"})
    labels = [f"h{h + 1}" for h in bars]
    data.append({"type": "bar", "x": labels, "y": half_life(slopes[bars]),
                 "name": _("half-life ln2/m"), "marker": {"color": "#4c78a8"},
                 "xaxis": "x3", "yaxis": "y3"})
    data.append({"type": "bar", "x": labels, "y": decay["span90"][bars],
                 "name": _("90% span"), "marker": {"color": "#f58518"},
                 "xaxis": "x3", "yaxis": "y3"})
    if mode == "causal" and decay["query_pos"] == seq_len - 1:
        where = _("the last query (i = {i}), {behind} keys behind it").format(
            i=number(decay["query_pos"]), behind=number(decay["behind"]))
    else:
        where = _("query i = {i} of {n}: {behind} keys behind, {ahead} ahead").format(
            i=number(decay["query_pos"]), n=number(seq_len), behind=number(decay["behind"]),
            ahead=number(decay["ahead"]))
    title = _("Decay ({mode}; {where})").format(mode=_(MODE_NAMES[mode]), where=where)
    if len(bars) > len(head_ids):
        title += "; " + _("curves for {shown} of {total} heads").format(shown=len(head_ids),
                                                                        total=len(bars))
    distance = "log" if log_distance else "linear"
    layout = {
        "height": 400, "barmode": "group", "margin": {"l": 50, "r": 20, "t": 60, "b": 50},
        # Under the plot in rows: beside it, 12 heads (each its own legend group, 10 px apart)
        # needed a scroll bar and left the three panels a third of the width each.
        "legend": {"orientation": "h", "y": -0.2, "yanchor": "top", "tracegroupgap": 0},
        "title": {"text": title},
        "xaxis": {"title": {"text": _("distance d = |i - j| (tokens)")}, "type": "linear"},
        "xaxis2": {"title": {"text": _("distance d (tokens, log scale)") if log_distance
                             else _("distance d (tokens)")}, "type": distance},
        # room under the steepest line's end: its tick label (−60) lay on the x axis's "0"
        "yaxis": {"range": [-float(chosen.max() * d_bias.max()) * 1.08,
                            float(chosen.max() * d_bias.max()) * 0.03]},
        "yaxis2": {"title": {"text": _("weight of one key")}},
        "yaxis3": {"type": "log", "title": {"text": _("tokens")}},
        "annotations": [],
    }
    # Three side-by-side panels, placed as plotly's make_subplots(rows=1, cols=3) places them.
    titles = (_("bias -m·d vs distance d"),
              _("attention with no content signal (log distance)") if log_distance
              else _("attention with no content signal"), _("half-life and 90% span"))
    for k, (x0, x1) in enumerate(subplot_row(3, 0.2 / 3)):
        suffix = "" if k == 0 else str(k + 1)
        layout[f"xaxis{suffix}"] = {**layout.get(f"xaxis{suffix}", {}), "domain": [x0, x1],
                                    "anchor": f"y{suffix}"}
        layout[f"yaxis{suffix}"] = {**layout.get(f"yaxis{suffix}", {}), "domain": [0, 1],
                                    "anchor": f"x{suffix}"}
        layout["annotations"].append({
            "text": titles[k], "x": (x0 + x1) / 2, "y": 1.0, "xref": "paper", "yref": "paper",
            "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 16}})
    return figure(data, layout)

