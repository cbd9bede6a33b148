"""Figures for a real model's heads: the pages *Model heads* and *Inspect a model*.

Four builders, in the order a page shows them:

* `attention_grid_maps`: the same grid as 8-bit maps for the app's canvas (no plotly), which
  switches heads in the browser.
* `attention_grid_figure`: every head of one layer. Up to `LABEL_MAX_TOKENS` tokens each panel
  is a heatmap with the tokens on its axes and in its hover; beyond that the panels are one PNG
  image (`render.matrix_grid_figure`), so the payload stays bounded whatever the length.
* `decomposition_figure`: one head, one row: content q·k/sqrt(d) | positional bias | masked
  total (what the softmax sees) | attention. Heatmaps with token labels for short inputs,
  kit panels (`render.image_panel`) with a sampled hover grid for long ones.
* `head_statistics_figure`: fitted slope vs the slope from the config (log-log, y = x line) and mean
  attention distance per head, for every layer.
* `model_slopes_figure`: a model's slopes against the standard schedules.

They draw the display-resolution arrays that `heads.analyze_heads` and
`heads.decomposition_view` keep (attention max-pooled, scores sampled; hover values exact).
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from alibi_viz.alibi import SCHEDULES, alibi_slopes, bias_only_mean_distance
from alibi_viz.display import StackView, masked_pixels
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.render import (
    ATTENTION_COLORSCALE,
    CHAR_EM,
    MASK_COLOR,
    PAGE_WIDTH_PX,
    MapSet,
    causal_map_panel,
    explicit_colorscale,
    figure,
    map_set,
    matrix_grid_figure,
    panel_traces,
    subplot_row,
    wrap_text,
)
from alibi_viz.i18n import N_, _, ngettext, number, significant
from alibi_viz.models.attention import (
    CONTINUATION,
    DECOMPOSITION_PARTS,
    DecompositionView,
    HeadStatistics,
    check_attention,
)
from alibi_viz.models.behaviour import BEHAVIOUR_TITLES, BEHAVIOURS
from alibi_viz.models.conformance import VERDICT_TITLES

LABEL_MAX_TOKENS = 48        # up to this many tokens, maps are heatmaps with token labels
GRID_TITLE_PX = 13           # panel titles of a labelled grid
SMALL_GRID_CELLS = 20_000    # ... and the grid only if heads x T^2 stays below this
CONTENT_COLORSCALE = "RdBu_r"
SCORE_COLORSCALE = "Viridis"
COLOR_SCALES = ("log", "linear")  # how attention probabilities are coloured
# How display.stack_view reduced a long map (StackView.reduced), as the titles say it.
REDUCTIONS = {"block max": N_("block max"), "sampled": N_("sampled")}
# Each standard schedule's legend entry, whole (not "{name} schedule"): the adjective agrees with
# the noun in Spanish and Russian, and the code name (alibi.SCHEDULES) is never shown.
# The precision lens's bias forms (precision.FORMS), as a student reads them: the option and
# the error panel's title, whole per form.
FORM_TITLES = {"row_constant": N_("m·j, as BLOOM adds it"),
               "textbook": N_("−m(i−j), the textbook form"),
               "falcon": N_("Falcon's builder (bfloat16, times 1/√d)")}
FORM_ERROR_TITLES = {"row_constant": N_("{dtype} error of the bias m·j, as BLOOM adds it"),
                     "textbook": N_("{dtype} error of the textbook bias −m(i−j)"),
                     "falcon": N_("{dtype} error of Falcon's bias (bfloat16, times 1/√d)")}
SCHEDULE_LEGENDS = {"official": N_("official schedule"), "geometric": N_("geometric schedule"),
                    "mpt": N_("MPT schedule")}


# ----------------------------------------------------------------------------- colours

def log_floor(seq_len: int) -> float:
    """Lowest log10 probability coloured: two decades below uniform attention over T keys."""
    return -float(math.ceil(math.log10(max(seq_len, 1)) + 2))


def attention_colors(values: np.ndarray, seq_len: int, scale: str = "log"):
    """(values to colour, cmin, cmax, colour bar title) for attention probabilities.

    log: log10 p, clipped at `log_floor(T)` (so exact zeros get the lowest colour); linear: p.
    """
    if scale not in COLOR_SCALES:
        raise AlibiVizError(f"scale must be one of {COLOR_SCALES}, got {scale!r}.")
    values = np.asarray(values, dtype=np.float32)
    if scale == "linear":
        return values, 0.0, 1.0, _("attention")
    floor = log_floor(seq_len)
    with np.errstate(divide="ignore", invalid="ignore"):
        logged = np.log10(np.maximum(values, np.float32(10.0**floor)))
    return (np.where(np.isnan(values), np.nan, logged).astype(np.float32), floor, 0.0,
            _("log10 attention"))


def _escape(token: str) -> str:
    """A token as plotly text: HTML special characters escaped (plotly reads <b>, <br>, ...)."""
    return html.escape(token, quote=False)


def _with_mask(images: np.ndarray, seq_len: int) -> np.ndarray:
    """Copy of (panels, R, C) images with fully masked pixels set to NaN (drawn grey)."""
    out = np.array(images, dtype=np.float32)
    out[:, masked_pixels(seq_len, out.shape[1], out.shape[2])] = np.nan
    return out


# ----------------------------------------------------------------------------- panels

def _token_hover(tokens, rows, cols, values) -> np.ndarray:
    """customdata (r, c, 4) object array: query token, key token, distance i - j, value."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    custom = np.empty((rows.size, cols.size, 4), dtype=object)
    custom[..., 0] = np.array([_escape(tokens[i]) for i in rows], dtype=object)[:, None]
    custom[..., 1] = np.array([_escape(tokens[j]) for j in cols], dtype=object)[None, :]
    custom[..., 2] = (rows[:, None] - cols[None, :]).astype(object)
    finite = np.where(np.isfinite(values), np.asarray(values, dtype=np.float64), np.nan)
    custom[..., 3] = np.where(np.isnan(finite), None, np.round(finite, 6)).astype(object)
    return custom


def _hovertemplate(label: str, head_text: str = "") -> str:
    return (head_text + _("query i=%{y}") + " «%{customdata[0]}»<br>" + _("key j=%{x}")
            + " «%{customdata[1]}»<br>" + _("distance i-j=%{customdata[2]}") + "<br>" + label
            + "=%{customdata[3]:.4g}<extra></extra>")


def _panel(view: StackView, image: np.ndarray, hover: np.ndarray, tokens: list[str], *,
           coloraxis: str, cmin: float, cmax: float, colorscale: str, label: str, labels: bool,
           head_text: str = "", axes: tuple[str, str] = ("x", "y")) -> list[dict]:
    """One (T, T) matrix as trace dicts on `axes`, in position coordinates (-0.5..T-0.5).

    labels=True: a heatmap of `image` (full resolution, T x T) with tokens in its hover.
    Otherwise `image` (R, C) as a kit panel (`render.panel_traces`: PNG, NaN grey, hover at the
    view's samples). `hover` holds the values the hover shows (probabilities even when the
    colours are log10).
    """
    T = view.seq_len
    if labels:
        positions = np.arange(T)
        return [{"type": "heatmap", "z": np.where(np.isfinite(image), image, np.nan),
                 "x": positions, "y": positions, "coloraxis": coloraxis, "hoverongaps": False,
                 "customdata": _token_hover(tokens, positions, positions, hover),
                 "hovertemplate": _hovertemplate(label, head_text),
                 "xaxis": axes[0], "yaxis": axes[1]}]
    return panel_traces(image, T, hover=hover, hover_rows=view.hover_rows,
                        hover_cols=view.hover_cols,
                        customdata=_token_hover(tokens, view.hover_rows, view.hover_cols, hover),
                        hovertemplate=_hovertemplate(label, head_text), coloraxis=coloraxis,
                        cmin=cmin, cmax=cmax, colorscale=colorscale, axes=axes)


def _add_panel(fig, row: int, col: int, *args, **kwargs) -> None:
    """`_panel` drawn into subplot (row, col) of a plotly subplots figure."""
    for trace in _panel(*args, **kwargs):
        trace.pop("xaxis"), trace.pop("yaxis")
        fig.add_trace(trace, row=row, col=col)


def _marker_lines(T: int, train_seq_len: int | None):
    """x, y of dashed lines at key and query position `train_seq_len` (None: no lines)."""
    if train_seq_len is None or not 0 < train_seq_len < T:
        return None
    edge = train_seq_len - 0.5
    return [edge, edge, None, -0.5, T - 0.5], [-0.5, T - 0.5, None, edge, edge]


def _tick_labels(tokens: list[str], T: int, panel_px: float) -> dict:
    """Axis settings that label the tokens under their positions in a panel `panel_px` wide
    (and tall), in a font of 8-11 px: every token where they fit, else every k-th one (at 6 px
    a label a token, 31 tokens in a 100 px panel lay on each other; the hover names each)."""
    size = int(max(8, min(11, 0.8 * panel_px / max(T, 1))))
    step = max(1, math.ceil(T * (1.2 * size + 2) / panel_px))
    shown = list(range(0, T, step))
    return dict(tickmode="array", tickvals=shown, ticktext=[_escape(tokens[i]) for i in shown],
                tickfont=dict(size=size), tickangle=0)


# ----------------------------------------------------------------------------- (a) grid

def use_labels(seq_len: int, panels: int = 1) -> bool:
    """Whether `panels` maps of `seq_len` tokens are drawn as labelled heatmaps (else images)."""
    return seq_len <= LABEL_MAX_TOKENS and panels * seq_len**2 <= SMALL_GRID_CELLS


def head_titles(heads: int, slopes=None) -> list[str]:
    """Each head's panel title: "head 3: m=0.25" (slopes given) or "head 3"."""
    return [_("head {h}").format(h=h + 1) + (f": m={significant(slopes[h])}"
                                             if slopes is not None else "")
            for h in range(heads)]


def attention_grid_maps(view: StackView, tokens: list[str], layer: int, *, slopes=None,
                        train_seq_len: int | None = None, scale: str = "log") -> MapSet:
    """Every head's attention map for one layer (0-based `layer`) as a `render.MapSet`: the
    view's pixels (block max beyond its resolution, as `attention_grid_figure` draws them),
    masked pixels grey, coloured as `attention_colors(scale)` says, for a canvas drawn in the
    browser. Its 8-bit codes weigh a byte a pixel, whatever the text's length."""
    heads, T = len(view.images), view.seq_len
    if len(tokens) != T:
        raise AlibiVizError(f"{len(tokens)} tokens for maps of {T} positions.")
    values, cmin, cmax, bar = attention_colors(_with_mask(view.images, T), T, scale)
    over = train_seq_len is not None and T > train_seq_len
    mark = ("; " + _("red dashes: training length {n}").format(n=train_seq_len)) if over else ""
    note = (", " + _("{reduction} to {px} px").format(
        reduction=_(REDUCTIONS.get(view.reduced, view.reduced)), px=view.images.shape[1])
        if view.reduced else "")
    shown = _("log10 attention") if scale == "log" else _("attention")
    title = ngettext("Layer {layer}: {shown}, {n} token{note}{mark}. Grey: masked.",
                     "Layer {layer}: {shown}, {n} tokens{note}{mark}. Grey: masked.",
                     T).format(layer=layer + 1, shown=shown, n=number(T), note=note, mark=mark)
    return map_set(values, vmin=cmin, vmax=cmax, title=title,
                   panel_titles=head_titles(heads, slopes), seq_len=T,
                   reads="log10" if scale == "log" else "linear",
                   colorscale=ATTENTION_COLORSCALE, bar_title=bar, value_label=_("attention"),
                   tokens=list(tokens), marker=train_seq_len if over else None)


def attention_grid_figure(view: StackView, tokens: list[str], layer: int, *, slopes=None,
                          selected: int | None = None, train_seq_len: int | None = None,
                          scale: str = "log", panel_px: int = 240,
                          labels: bool | None = None) -> go.Figure:
    """Every head's attention map for one layer (0-based `layer`), one shared colour bar.

    view: the layer's StackView (heads, R, R). slopes: per-head slopes for the panel titles
    (ALiBi models). selected: 0-based head whose title is marked. train_seq_len: dashed lines
    at that key and query position when the input is longer. labels: labelled heatmaps (True;
    needs a full-resolution view) or one image (False); default `use_labels(T, heads)` (a
    caller drawing many layers in one figure passes False sooner, to bound the payload).
    """
    heads, T = len(view.images), view.seq_len
    if len(tokens) != T:
        raise AlibiVizError(f"{len(tokens)} tokens for maps of {T} positions.")
    titles = []
    for h in range(heads):
        title = _("head {h}").format(h=h + 1) + (f": m={significant(slopes[h])}"
                                                 if slopes is not None else "")
        titles.append(f"<b>▶ {title}</b>" if h == selected else title)
    over = train_seq_len is not None and T > train_seq_len
    mark = ("; " + _("red dashes: training length {n}").format(n=train_seq_len)) if over else ""
    shown = _("log10 attention") if scale == "log" else _("attention")
    if not (use_labels(T, heads) if labels is None else labels):
        values, cmin, cmax, bar = attention_colors(_with_mask(view.images, T), T, scale)
        note = (", " + _("{reduction} to {px} px").format(
            reduction=_(REDUCTIONS.get(view.reduced, view.reduced)), px=view.images.shape[1])
            if view.reduced else "")
        fig = matrix_grid_figure(
            values, titles, T, cmin=cmin, cmax=cmax, colorscale=ATTENTION_COLORSCALE,
            colorbar_title=bar, hover=view.hover, hover_rows=view.hover_rows,
            hover_cols=view.hover_cols, hover_label=_("attention"), panel_label=_("head"),
            marker=train_seq_len if over else None,
            title=ngettext("Layer {layer}: {shown}, {n} token{note}{mark}. Grey: masked.",
                           "Layer {layer}: {shown}, {n} tokens{note}{mark}. Grey: masked.",
                           T).format(layer=layer + 1, shown=shown, n=number(T), note=note,
                                     mark=mark),
            panel_px=panel_px)
        return fig

    columns = min(heads, 4)
    rows = math.ceil(heads / columns)
    # The gap between rows holds the longest panel title as it breaks on a page (a 0.06
    # fraction of the height left its second line on the tick marks of the row above).
    shown_px = (PAGE_WIDTH_PX - 150) / columns  # a panel on a page, beside the colour bar
    lines = max(wrap_text(t, GRID_TITLE_PX, shown_px - 6)[1] for t in titles)
    gap_px = lines * 1.2 * GRID_TITLE_PX + 12
    height = panel_px * rows + gap_px * (rows - 1) + 160
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles, shared_xaxes=True,
                        shared_yaxes=True, horizontal_spacing=0.02,
                        vertical_spacing=gap_px / (height - 120) if rows > 1 else 0.06)
    fig.update_annotations(font_size=GRID_TITLE_PX)
    values, cmin, cmax, bar = attention_colors(_with_mask(view.images, T), T, scale)
    fig.update_layout(coloraxis=dict(colorscale=explicit_colorscale(ATTENTION_COLORSCALE),
                                     cmin=cmin, cmax=cmax,
                                     colorbar=dict(title=dict(text=bar), thickness=14)))
    lines = _marker_lines(T, train_seq_len)
    for h in range(heads):
        r, c = divmod(h, columns)
        _add_panel(fig, r + 1, c + 1, view, values[h], view.images[h], tokens,
                   coloraxis="coloraxis", cmin=cmin, cmax=cmax, colorscale=ATTENTION_COLORSCALE,
                   label=_("attention"), head_text=_("head {h}").format(h=h + 1) + "<br>",
                   labels=True)
        if lines:
            fig.add_trace(go.Scatter(x=lines[0], y=lines[1], mode="lines", hoverinfo="skip",
                                     showlegend=False, line=dict(color="red", dash="dash")),
                          row=r + 1, col=c + 1)
    ticks = _tick_labels(tokens, T, shown_px)
    fig.update_xaxes(range=[-0.5, T - 0.5], showgrid=False, zeroline=False, **ticks)
    fig.update_yaxes(range=[T - 0.5, -0.5], showgrid=False, zeroline=False, **ticks)
    for r in range(rows):  # labels on the outer axes only
        for c in range(columns):
            if c > 0:
                fig.update_yaxes(showticklabels=False, row=r + 1, col=c + 1)
            if r < rows - 1:
                fig.update_xaxes(showticklabels=False, row=r + 1, col=c + 1)
    fig.update_layout(title=dict(text=ngettext(
        "Layer {layer}: {shown}, {n} token{mark}. Rows: query i; columns: key j. Grey: masked.",
        "Layer {layer}: {shown}, {n} tokens{mark}. Rows: query i; columns: key j. Grey: masked.",
        T).format(layer=layer + 1, shown=shown, n=T, mark=mark)),
                      height=height, plot_bgcolor=MASK_COLOR, showlegend=False,
                      margin=dict(l=60, r=90, t=70, b=50))  # r: the colour bar's room
    return fig


# ----------------------------------------------------------------------------- (b) one head

# Panel titles (translated where drawn: `_(PART_TITLES[part])`).
PART_TITLES = {
    "content": N_("content q·k/√d"),
    "bias": N_("position bias −m(i−j)"),
    "total": N_("masked total = softmax input"),
    "probs": N_("attention"),
}
AS_ADDED_TITLE = N_("position bias, as the model adds it")


def decomposition_title(layer: int, head: int, slope: float | None = None) -> str:
    """The title of `decomposition_figure`'s row of (layer, head), 0-based."""
    return (_("Layer {layer}, head {head}").format(layer=layer + 1, head=head + 1)
            + (f" (m={significant(slope)})" if slope is not None else ""))


def decomposition_figure(view: DecompositionView, head: int, *, slope: float | None = None,
                         train_seq_len: int | None = None, scale: str = "log",
                         panel_px: int = 300) -> go.Figure:
    """One head (0-based) in one row: content | bias | masked total | attention.

    Each panel has its own colour bar (below it). Up to LABEL_MAX_TOKENS tokens the panels are
    heatmaps with tokens on the axes; beyond, images with a hover grid of exact sampled values.
    """
    heads = len(view.parts["probs"].images)
    if not 0 <= head < heads:
        raise AlibiVizError(f"head must be in [0, {heads - 1}], got {head}.")
    T = view.seq_len
    labels = use_labels(T)
    title_ids = [AS_ADDED_TITLE if p == "bias" and view.bias_shown == "as_added" else PART_TITLES[p]
                 for p in DECOMPOSITION_PARTS]
    titles = [_(title) for title in title_ids]
    hover_labels = {"content": _("content"), "bias": _("bias"), "total": _("total"),
                    "probs": _("attention")}
    lines = _marker_lines(T, train_seq_len)
    ticks = _tick_labels(view.tokens, T, (PAGE_WIDTH_PX - 60) / 4) if labels else {}
    data, layout = [], {"annotations": []}
    for k, (part, (x0, x1)) in enumerate(zip(DECOMPOSITION_PARTS, subplot_row(4, 0.035),
                                             strict=True), start=1):
        sv = view.parts[part]
        image = sv.images[head]
        hover = image if labels else sv.hover[head]  # labelled heatmaps hover every cell
        low, high = view.ranges[part][head]
        colorscale = {"content": CONTENT_COLORSCALE, "probs": ATTENTION_COLORSCALE}.get(part, SCORE_COLORSCALE)
        bar = _("logit")
        if part == "probs":
            image, low, high, bar = attention_colors(_with_mask(image[None], T)[0], T, scale)
        if not high > low:  # a constant panel (no bias at all): any range draws it flat
            low, high = low - 1.0, high + 1.0
        suffix = "" if k == 1 else str(k)
        axis = f"coloraxis{suffix}"
        layout[axis] = {"colorscale": explicit_colorscale(colorscale),
                        "cmin": float(low), "cmax": float(high),
                        "colorbar": {"title": {"text": bar, "side": "top"}, "orientation": "h",
                                     "thickness": 10, "x": (x0 + x1) / 2, "xanchor": "center",
                                     "len": x1 - x0, "y": -0.08, "yanchor": "top"}}
        data += _panel(sv, image, hover, view.tokens, coloraxis=axis, cmin=float(low),
                       cmax=float(high), colorscale=colorscale, label=hover_labels[part],
                       labels=labels, axes=(f"x{suffix}", f"y{suffix}"))
        if lines:
            data.append({"type": "scatter", "x": lines[0], "y": lines[1], "mode": "lines",
                         "hoverinfo": "skip", "showlegend": False,
                         "line": {"color": "red", "dash": "dash"},
                         "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        layout[f"xaxis{suffix}"] = {"domain": [x0, x1], "anchor": f"y{suffix}",
                                    "range": [-0.5, T - 0.5], "showgrid": False,
                                    "zeroline": False, "constrain": "domain", **ticks}
        layout[f"yaxis{suffix}"] = {"domain": [0.0, 1.0], "anchor": f"x{suffix}",
                                    "range": [T - 0.5, -0.5], "showgrid": False,
                                    "zeroline": False, "constrain": "domain",
                                    "scaleanchor": f"x{suffix}", **ticks}
        if k > 1 and labels:
            layout[f"yaxis{suffix}"]["showticklabels"] = False
        layout["annotations"].append({  # the panel's title, where make_subplots puts it
            "text": titles[k - 1], "x": (x0 + x1) / 2, "y": 1.0, "xref": "paper",
            "yref": "paper", "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 16}})
    what = decomposition_title(view.layer, head, slope)
    notes = []
    if sv.reduced:
        notes.append(_("drawn at {px} px from {n} tokens (scores sampled, attention block max); "
                       "hover shows exact values").format(px=sv.images.shape[-1], n=number(T)))
    if lines:
        notes.append(_("red dashes: training length {n}").format(n=train_seq_len))
    layout.update(
        title={"text": what, "subtitle": {"text": "; ".join(notes).capitalize()}},
        height=panel_px + 180, plot_bgcolor=MASK_COLOR, showlegend=False,
        margin={"l": 60 if labels else 40, "r": 10, "t": 110, "b": 80})
    return figure(data, layout)


# ----------------------------------------------------------------------------- (c) statistics

def _layer_colors(layers: int) -> list[str]:
    return pc.sample_colorscale("Viridis", np.linspace(0.0, 0.85, max(2, layers)))[:layers]


LABEL_PX = 10  # font of the R² labels
# The fitted-vs-config slope panel on a page: one of three panels of a page-wide figure (px).
SLOPE_PANEL_PX = (150, 240)


def _slope_range(config: np.ndarray, fitted: np.ndarray) -> tuple[float, float]:
    """Both axes of the fitted-vs-config slope panel (log): every positive slope, with room."""
    finite = config[np.isfinite(config) & (config > 0)]
    ys = fitted[np.isfinite(fitted) & (fitted > 0)]
    low = min(finite.min(), ys.min() if ys.size else finite.min()) / 1.5
    high = max(finite.max(), ys.max() if ys.size else finite.max()) * 1.5
    return low, high


def _label_sides(x, y, texts: list[str], axis: tuple[float, float]) -> list[str | None]:
    """Where each point's label goes ("middle right", else "middle left"), or None where both
    sides would lie on another label or past the panel's edge (the tick labels): points at
    (x, y) on log axes spanning `axis`, in a panel of at least SLOPE_PANEL_PX. Consecutive
    heads sit about 12 px apart, closer than a label is wide."""
    span = np.log10(axis[1]) - np.log10(axis[0])
    width, height = SLOPE_PANEL_PX
    placed, sides = [], []
    for xv, yv, text in zip(x, y, texts, strict=True):
        px = (np.log10(xv) - np.log10(axis[0])) / span * width
        py = (np.log10(yv) - np.log10(axis[0])) / span * height
        w, h = len(text) * CHAR_EM * LABEL_PX + 2, LABEL_PX * 1.3
        for side, left in (("middle right", px + 6), ("middle left", px - 6 - w)):
            box = (left, py - h / 2, left + w, py + h / 2)
            if box[0] < 0 or box[2] > width or any(
                    box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                    for b in placed):
                continue
            placed.append(box)
            sides.append(side)
            break
        else:
            sides.append(None)
    return sides


def head_statistics_figure(stats: HeadStatistics, seq_len: int,
                           selected: tuple[int, int] | None = None,
                           labelled_layer: int | None = 0) -> go.Figure:
    """Panels over every (layer, head): fitted slope, mean distance and (ALiBi) content
    reliance.

    Left, for models with slopes from the config (ALiBi): the fitted slope against the slope
    from the config (`HeadStatistics.config_slope`), log-log, with the line y = x, one layer's points labelled with their fit's R^2 in
    the layer's colour (`head_statistics_labels`; every point's R^2 is in its hover). For an
    ALiBi
    head log p = content - m d - log Z, so the row-centred fit returns m whenever content is
    uncorrelated with distance, however much content moves the attention: a point on y = x
    with a low R^2 is a head whose content does the work. Heads whose fit is not positive
    cannot sit on a log axis; their number is in the figure's title. Without config slopes: the
    fitted slope per head. Middle: mean attention distance per head, one line per layer,
    and (ALiBi) what the bias alone would give at this length. Right (ALiBi): content
    reliance, KL(attention || bias-only attention) per head. selected: (layer, head),
    0-based, ringed in every panel. labelled_layer: the layer whose R² labels are drawn, or
    None for none (a page adds the chosen head's layer's, as it adds the rings).
    """
    fitted, config = stats.fitted_slope, stats.config_slope
    layers, heads = fitted.shape
    alibi = config is not None
    reliance = stats.content_kl is not None
    positive = np.isfinite(fitted) & (fitted > 0)
    hidden = int((~positive).sum()) if alibi else 0
    left_title = (_("fitted slope vs slope from the config (labels: fit R²)") if alibi
                  else _("fitted slope per head"))
    titles = [left_title, _("mean attention distance")]
    if reliance:
        titles.append(_("content reliance: KL from the bias alone"))
    layer_name = _("layer {n}")
    where = _("layer %{customdata[0]} head %{customdata[1]}") + "<br>"
    fit = "<br>" + _("fit R²=%{customdata[2]:.2f}")
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles,
                        horizontal_spacing=0.08)
    colors = _layer_colors(layers)
    head_ids = np.arange(1, heads + 1)
    kl = stats.content_kl if reliance else np.full((layers, heads), np.nan)
    for layer in range(layers):
        custom = np.stack([np.full(heads, layer + 1), head_ids, stats.slope_fit_r2[layer],
                           stats.local_share[layer], stats.entropy[layer], kl[layer]], axis=1)
        style = dict(color=colors[layer], size=8)
        if alibi:
            keep = positive[layer]
            x, y = config[layer][keep], fitted[layer][keep]
            fig.add_trace(go.Scatter(
                x=x, y=y, customdata=custom[keep], mode="markers", marker=style,
                name=layer_name.format(n=layer + 1), legendgroup=str(layer),
                hovertemplate=where + _("m from the config=%{x:.4g}") + "<br>"
                              + _("fitted m=%{y:.4g}") + fit + "<br>"
                              + _("KL from bias alone %{customdata[5]:.3f} nats")
                              + "<extra></extra>"), row=1, col=1)
        else:
            fig.add_trace(go.Scatter(
                x=head_ids, y=fitted[layer], customdata=custom, mode="lines+markers",
                marker=style, line=dict(color=colors[layer], width=1),
                name=layer_name.format(n=layer + 1), legendgroup=str(layer),
                hovertemplate=where + _("fitted m=%{y:.4g}") + fit + "<extra></extra>"),
                row=1, col=1)
        fig.add_trace(go.Scatter(
            x=head_ids, y=stats.mean_distance[layer], customdata=custom, mode="lines+markers",
            marker=style, line=dict(color=colors[layer], width=1),
            name=layer_name.format(n=layer + 1), legendgroup=str(layer), showlegend=False,
            hovertemplate=where + _("mean distance %{y:.3g} tokens") + "<br>"
                          + _("share within {k} tokens").format(k=stats.k)
                          + " %{customdata[3]:.2f}<br>"
                          + _("entropy %{customdata[4]:.2f} nats") + "<extra></extra>"),
            row=1, col=2)
        if reliance:
            fig.add_trace(go.Scatter(
                x=head_ids, y=kl[layer], customdata=custom, mode="lines+markers", marker=style,
                line=dict(color=colors[layer], width=1), name=layer_name.format(n=layer + 1),
                legendgroup=str(layer), showlegend=False,
                hovertemplate=where + _("KL from bias alone %{y:.3f} nats") + fit
                              + "<extra></extra>"), row=1, col=3)
    if alibi:
        low, high = _slope_range(config, fitted)
        fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="y = x",
                                 line=dict(color="grey", dash="dash"), hoverinfo="skip"),
                      row=1, col=1)
        fig.update_xaxes(type="log", title=_("slope m from the config (per token)"), row=1, col=1,
                         exponentformat="power")
        fig.update_yaxes(type="log", title=_("fitted slope"), row=1, col=1,
                         exponentformat="power")
        reference = bias_only_mean_distance(config[0], seq_len)
        fig.add_trace(go.Scatter(
            x=head_ids, y=reference, mode="markers", name=_("bias alone"),
            marker=dict(symbol="x", color="black", size=9),
            hovertemplate=_("head %{x}: bias alone gives %{y:.3g} tokens") + "<extra></extra>"),
            row=1, col=2)
    else:
        fig.update_xaxes(title=_("head"), dtick=max(1, heads // 16), row=1, col=1)
        fig.update_yaxes(title=_("fitted slope"), row=1, col=1)
    for trace in (head_statistics_labels(stats, labelled_layer) if labelled_layer is not None
                  else []) + head_statistics_selection(stats, selected):
        fig.add_trace(trace)
    fig.update_xaxes(title=_("head"), dtick=max(1, heads // 16), row=1, col=2)
    fig.update_yaxes(title=_("tokens"), row=1, col=2, rangemode="tozero")
    if reliance:
        fig.update_xaxes(title=_("head"), dtick=max(1, heads // 16), row=1, col=3)
        fig.update_yaxes(title="nats", row=1, col=3, rangemode="tozero")
    title = ngettext("Head statistics over {n} token (fitted slope: log p fitted against "
                     "distance up to {d})",
                     "Head statistics over {n} tokens (fitted slope: log p fitted against "
                     "distance up to {d})", seq_len).format(n=number(seq_len),
                                                            d=stats.max_distance)
    if hidden:  # in the wide title: a second qualifier broke the panel's title past its width
        title += "; " + _("{n} not positive, not shown").format(n=hidden)
    fig.update_layout(
        title=title,
        height=440, margin=dict(l=60, r=20, t=80, b=50),
        legend=dict(orientation="h", y=-0.2, yanchor="top", x=0.5, xanchor="center"))
    return fig


# ----------------------------------------------------------------------------- (d) slopes

def model_slopes_figure(slopes, config_slopes=None, schedules=SCHEDULES, max_bias: float = 8.0,
                        name: str | None = None) -> go.Figure:
    """A model's slopes m_h (markers) against the standard schedules (thin lines), log2 y.

    slopes: (heads,), or (layers, heads) for a model whose layers have their own (one marker
    series per layer). config_slopes: the per-token slope the model's eager attention applies
    as the config and the model's code predict it (`ModelInfo.config_slopes`), drawn too when
    it differs from `slopes` (Falcon: 2m/sqrt(d)). name: the model's
    name ("this model").
    """
    name = _("this model") if name is None else name
    slopes = np.asarray(slopes, dtype=np.float64)
    if slopes.ndim not in (1, 2) or slopes.size == 0 or not np.all(slopes > 0):
        raise AlibiVizError("slopes must be a non-empty list of positive numbers.")
    rows = slopes if slopes.ndim == 2 else slopes[None, :]  # (layers, heads)
    n_heads = rows.shape[1]
    heads = np.arange(1, n_heads + 1)
    fig = go.Figure()
    for schedule in schedules:
        fig.add_trace(go.Scatter(
            x=heads, y=alibi_slopes(n_heads, schedule, max_bias), mode="lines",
            name=_(SCHEDULE_LEGENDS[schedule]), line=dict(width=1.2, dash="dot"),
            hovertemplate=_("head %{x}") + "<br>m=%{y:.5g}<extra>" + html.escape(
                _(SCHEDULE_LEGENDS[schedule])) + "</extra>"))
    shades = _layer_colors(len(rows)) if slopes.ndim == 2 else ["black"]
    for layer, (row, color) in enumerate(zip(rows, shades, strict=True)):
        fig.add_trace(go.Scatter(
            x=heads, y=row, mode="markers",
            name=(_("{name}: layer {n}").format(name=name, n=layer + 1) if slopes.ndim == 2
                  else _("{name}: configured m").format(name=name)),
            marker=dict(size=11, color=color, symbol="circle-open", line=dict(width=2)),
            customdata=np.log2(row),
            hovertemplate=_("head %{x}") + "<br>m=%{y:.5g}<br>log2 m=%{customdata:.3f}"
                          "<extra></extra>"))
    slopes = rows.reshape(-1) if slopes.ndim == 1 else slopes
    if config_slopes is not None:
        config_slopes = np.asarray(config_slopes, dtype=np.float64)
        if not np.allclose(config_slopes, slopes, rtol=1e-6):
            fig.add_trace(go.Scatter(
                x=np.tile(heads, config_slopes.size // n_heads), y=config_slopes.reshape(-1),
                mode="markers", name=_("per-token slope from the config (eager)"),
                marker=dict(size=9, color="#d62728", symbol="diamond"),
                hovertemplate=_("head %{x}") + "<br>" + _("slope from the config=%{y:.5g}")
                              + "<extra></extra>"))
    fig.update_yaxes(type="log", title=_("slope m (log scale)"), exponentformat="power")
    fig.update_xaxes(title=_("head h"), dtick=max(1, n_heads // 16))
    standard = [alibi_slopes(n_heads, s, max_bias) for s in schedules]
    agree = len(standard) > 1 and all(np.allclose(standard[0], s) for s in standard[1:])
    fig.update_layout(title=dict(text=ngettext(
        "Slopes of {name} against the standard schedules ({n} head)",
        "Slopes of {name} against the standard schedules ({n} heads)",
        n_heads).format(name=name, n=n_heads),
                                 subtitle=dict(text=_("For this head count the schedules "
                                                      "coincide.") if agree else "")),
                      height=380,
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
                      margin=dict(l=60, r=20, t=80, b=40))
    return fig


# ----------------------------------------------------------------------------- (e) gallery

BEHAVIOUR_COLORS = {
    "previous_token": "#1f77b4", "local": "#aec7e8", "sink": "#7f7f7f", "induction": "#d62728",
    "delimiter": "#2ca02c", "newline": "#9467bd", "content": "#ff7f0e",
}


def head_statistics_labels(stats: HeadStatistics, layer: int) -> list:
    """The fit's R² beside each point of `layer` in the fitted-vs-config slope panel of
    `head_statistics_figure`, in the layer's colour, as trace dicts (a page adds them for the
    chosen head's layer, as it adds the rings): each on the side where it lies on no other
    label and off the tick labels, or left out (`_label_sides`). Four layers' labels of the
    same slopes lay on each other. No traces for a model without config slopes."""
    config, fitted = stats.config_slope, stats.fitted_slope
    if config is None:
        return []
    keep = np.isfinite(fitted[layer]) & (fitted[layer] > 0)
    x, y = config[layer][keep], fitted[layer][keep]
    texts = [number(r, 2) for r in stats.slope_fit_r2[layer][keep]]
    sides = _label_sides(x, y, texts, _slope_range(config, fitted))
    placed = [k for k, side in enumerate(sides) if side]
    color = _layer_colors(fitted.shape[0])[layer]
    return [{"type": "scatter", "mode": "text", "x": x[placed], "y": y[placed],
             "text": [texts[k] for k in placed], "textposition": [sides[k] for k in placed],
             "textfont": {"size": LABEL_PX, "color": color}, "hoverinfo": "skip",
             "showlegend": False, "xaxis": "x", "yaxis": "y"}]


def head_statistics_selection(stats: HeadStatistics, selected: tuple[int, int] | None) -> list:
    """Red rings around head `selected` (layer, head), 0-based, in each panel of
    `head_statistics_figure`, as trace dicts: a page draws the figure once per text and adds
    these for the chosen head, so a head switch rebuilds nothing."""
    if selected is None:
        return []
    layer, head = selected
    config = stats.config_slope
    alibi = config is not None
    ring = {"symbol": "circle-open", "size": 18, "color": "red", "line": {"width": 2}}
    base = {"type": "scatter", "mode": "markers", "marker": ring, "hoverinfo": "skip",
            "showlegend": False}
    traces = []
    fitted = stats.fitted_slope
    if not alibi or (fitted[layer, head] > 0 and np.isfinite(fitted[layer, head])):
        x = config[layer, head] if alibi else head + 1
        traces.append({**base, "x": [x], "y": [fitted[layer, head]],
                       "name": _("selected head"), "showlegend": True,
                       "xaxis": "x", "yaxis": "y"})
    traces.append({**base, "x": [head + 1], "y": [stats.mean_distance[layer, head]],
                   "xaxis": "x2", "yaxis": "y2"})
    if stats.content_kl is not None:
        traces.append({**base, "x": [head + 1], "y": [stats.content_kl[layer, head]],
                       "xaxis": "x3", "yaxis": "y3"})
    return traces


def behaviour_grid_figure(behaviour, selected: tuple[int, int] | None = None,
                          height: int | None = None) -> go.Figure:
    """A layer x head grid, each cell coloured by the head's strongest behaviour
    (`HeadBehaviour.strongest`), every score in the hover; `selected` (layer, head), 0-based,
    is outlined. Clicking a cell selects a point whose customdata is (layer, head), 0-based."""
    titles = {b: _(BEHAVIOUR_TITLES[b]) for b in BEHAVIOURS}
    strongest = behaviour.strongest()
    layers, heads = strongest.shape
    names = [b for b in BEHAVIOURS if b != "content" or behaviour.content_kl is not None]
    fig = go.Figure()
    for name in names:
        cells = [(lay, h) for lay in range(layers) for h in range(heads) if strongest[lay, h] == name]
        lines = []
        for lay, h in cells:
            parts = behaviour.score_texts(lay, h)
            parts.append(_("sink on a repeated token: {score}").format(
                score=number(behaviour.sink_control[lay, h], 2)))
            span = number(behaviour.span[lay, h], 1)
            parts.append(_("90% span: {span} tokens (bias alone {bias})").format(
                span=span, bias=number(behaviour.bias_span[lay, h], 1))
                         if behaviour.bias_span is not None else
                         _("90% span: {span} tokens").format(span=span))
            lines.append("<br>".join(parts))
        fig.add_trace(go.Scatter(
            x=[h + 1 for _lay, h in cells], y=[lay + 1 for lay, _h in cells], mode="markers",
            name=titles[name], customdata=[[lay, h] for lay, h in cells],
            text=lines, marker=dict(symbol="square", size=30, color=BEHAVIOUR_COLORS[name],
                                    line=dict(color="white", width=1)),
            hovertemplate=_("layer %{y}, head %{x}") + "<br>%{text}<extra>" + titles[name]
                          + "</extra>"))
    for trace in behaviour_selection(selected):
        fig.add_trace(trace)
    fig.update_xaxes(title=_("head"), tickvals=list(range(1, heads + 1)),
                     range=[0.4, heads + 0.6])
    fig.update_yaxes(title=_("layer"), tickvals=list(range(1, layers + 1)),
                     range=[layers + 0.6, 0.4])
    fig.update_layout(height=height or max(280, 46 * layers + 180), plot_bgcolor="white",
                      margin=dict(l=60, r=20, t=50, b=80), clickmode="event+select",
                      title=_("Each head's strongest behaviour (click a head)"),
                      legend=dict(orientation="h", y=-0.3, yanchor="top", x=0.5,
                                  xanchor="center"))
    return fig


def behaviour_selection(selected: tuple[int, int] | None) -> list:
    """The outline of cell `selected` (layer, head), 0-based, in `behaviour_grid_figure`, as
    trace dicts (added to a cached figure for the chosen head)."""
    if selected is None:
        return []
    return [{"type": "scatter", "x": [selected[1] + 1], "y": [selected[0] + 1],
             "mode": "markers", "hoverinfo": "skip", "showlegend": False,
             "marker": {"symbol": "square-open", "size": 38, "color": "black",
                        "line": {"width": 3}}}]


def ablation_figure(increase, slope, slope_kind: str, height: int = 380) -> go.Figure:
    """Which heads matter (`models.ablation`): each head's loss increase when its output is
    zeroed (nats per token) against its slope (log axis, steepest at the left): the ALiBi
    slope from the config (slope_kind "applied", the name assets/results/ablation.json keeps),
    or for a model without one the decay fitted to its attention (slope_kind "fitted"). One
    colour per layer."""
    increase = np.asarray(increase, dtype=float)  # (layers, heads)
    slope = np.asarray(slope, dtype=float)
    layers, heads = increase.shape
    colors = _layer_colors(layers)
    fig = go.Figure()
    hover = ("<br>" + _("head") + " %{customdata}<br>m=%{x:.4g}<br>"
             + _("loss +%{y:.4f} nats per token") + "<extra></extra>")
    for layer in range(layers):
        shown = slope[layer] > 0  # a fitted decay can be 0 or negative: no place on a log axis
        name = _("layer {layer}").format(layer=layer + 1)
        fig.add_trace(go.Scatter(
            x=slope[layer][shown], y=increase[layer][shown], mode="markers",
            customdata=(np.arange(heads) + 1)[shown],
            marker=dict(size=11, color=colors[layer], line=dict(width=1, color="white")),
            name=name, hovertemplate=name + hover))
    # Steepest first, at the left: a figure wider than a phone's screen is cut on the right, and
    # there it hid the steep heads, the ones that matter, leaving only dots at 0 in sight.
    fig.update_xaxes(type="log", autorange="reversed",
                     title=_("slope m (log scale, steepest first)") if slope_kind == "applied"
                     else _("fitted decay m (log scale, steepest first)"))
    fig.update_yaxes(title=_("loss increase when silenced (nats per token)"))
    return fig.update_layout(
        height=height, margin=dict(l=60, r=20, t=60, b=50), hovermode="closest",
        title=dict(text=_("Which heads matter: the loss when one head is silenced")),
        legend=dict(orientation="h", y=-0.25, yanchor="top", x=0.5, xanchor="center"))


def single_map_figure(attention, title: str, height: int = 380) -> go.Figure:
    """One causal attention map (T, T) as a kit panel: pooled to at most 256 px, exact hover."""
    fig = make_subplots(rows=1, cols=1)
    causal_map_panel(fig, 1, 1, check_attention(attention), max_px=256, hover_cells=64,
                     cmax=1.0)
    fig.update_layout(coloraxis=dict(colorscale=explicit_colorscale(ATTENTION_COLORSCALE),
                                     cmin=0.0, cmax=1.0,
                                     colorbar=dict(title=dict(text=_("attention")),
                                                   thickness=12)),
                      title=title, height=height, margin=dict(l=50, r=10, t=60, b=40),
                      plot_bgcolor=MASK_COLOR)
    return fig


def labels_note(tokens: list[str]) -> str:
    """The sentence that explains the maps' token labels (`token_labels`), said once beside
    them: the marks for whitespace, and, when the text has a character of several tokens (a
    byte-level model reads a Russian or accented letter as two bytes), that its first token
    shows the letter and each further one is CONTINUATION ("◦"), with how many there are."""
    note = _("Labels: ␣ space, ⏎ newline, ⇥ tab.")
    further = sum(token.startswith(CONTINUATION) for token in tokens)
    if further:
        note += " " + ngettext(
            "◦ marks a token that goes on with the letter before it: a Russian or accented "
            "letter is two bytes, which this model splits into two tokens, so the letter shows "
            "on its first token and {n} of these {total} tokens is the rest of a letter.",
            "◦ marks a token that goes on with the letter before it: a Russian or accented "
            "letter is two bytes, which this model splits into two tokens, so the letter shows "
            "on its first token and {n} of these {total} tokens are the rest of a letter.",
            further).format(n=number(further), total=number(len(tokens)))
    return note


def highlight_html(tokens: list[str], weights, query: int) -> str:
    """The text with each token's background as dark as the attention `query` gives it, the
    query itself outlined: HTML (escaped), for st.html. weights: (T,) attention of that row.

    tokens are `token_labels`: a token that continues a character (CONTINUATION, "◦") is drawn
    as a thin shaded bar after the character instead of the mark, so the text reads as text
    ("мама", not "м◦а◦м◦а◦") and every byte still shows its weight. Lines break at the box's
    edge, indentation kept."""
    weights = np.asarray(weights, dtype=np.float64)
    top = float(weights[: query + 1].max()) or 1.0
    spans = []
    for j, token in enumerate(tokens):
        label = {"⏎": "⏎\n", "␣": " "}.get(token, _escape(token))
        alpha = 0.0 if j > query else min(1.0, weights[j] / top)
        style = f"background: rgba(31,119,180,{alpha:.2f});"
        if token.startswith(CONTINUATION):
            label = _escape(token[len(CONTINUATION):])
            style += (" display: inline-block; min-width: 0.25em; height: 1.2em;"
                      " vertical-align: text-bottom;")
        if j == query:
            style += " outline: 2px solid #d62728;"
        spans.append(f'<span title="{number(weights[j] if j <= query else 0, 3)}" '
                     f'style="{style}">{label}</span>')
    # pre-wrap: spaces and indentation kept, long lines broken at the box's edge (with
    # non-breaking spaces a code line ran past it)
    return ('<div style="font-family: monospace; font-size: 14px; line-height: 1.6; '
            'white-space: pre-wrap; overflow-wrap: anywhere;">' + "".join(spans) + "</div>")


# ----------------------------------------------------------------------------- (f) conformance

VERDICT_COLORS = {"conforms": "#2ca02c", "scaled": "#ff7f0e", "sign_flipped": "#d62728",
                  "permuted": "#9467bd", "offset": "#8c564b", "missing": "#7f7f7f",
                  "clipped": "#e377c2", "schedule": "#bcbd22",
                  "inconclusive": "#c7c7c7"}  # light grey: not judged (dark grey is missing)


def verdict_grid_figure(check, height: int | None = None) -> go.Figure:
    """Layer x head grid of a conformance check (`conformance.AlibiCheck`): each cell coloured
    by its verdict, with expected vs measured slope and the detail on hover."""
    layers, heads = len(check.heads), len(check.heads[0])
    fig = go.Figure()
    for verdict, color in VERDICT_COLORS.items():
        cells = [h for row in check.heads for h in row if h.verdict == verdict]
        if not cells:
            continue
        shown = _(VERDICT_TITLES[verdict])
        fig.add_trace(go.Scatter(
            x=[c.head + 1 for c in cells], y=[c.layer + 1 for c in cells], mode="markers",
            name=shown,
            customdata=[[c.expected_slope, c.measured_slope, c.ratio, c.detail or "-"]
                        for c in cells],
            marker=dict(symbol="square", size=26, color=color, line=dict(color="white", width=1)),
            hovertemplate=(_("layer %{y}, head %{x}") + ": " + shown + "<br>"
                           + _("expected m=%{customdata[0]:.5g}") + "<br>"
                           + _("measured m=%{customdata[1]:.5g}") + "<br>"
                           + _("ratio %{customdata[2]:.4g}")
                           + "<br>%{customdata[3]}<extra></extra>")))
    fig.update_xaxes(title=_("head"), tickvals=list(range(1, heads + 1)),
                     range=[0.4, heads + 0.6])
    fig.update_yaxes(title=_("layer"), tickvals=list(range(1, layers + 1)),
                     range=[layers + 0.6, 0.4])
    # The legend names each colour's verdict; shown even for one verdict (plotly.js hides a
    # legend of a single trace, so a model whose heads all conform had no key to its colour).
    fig.update_layout(height=height or max(240, 34 * layers + 150), plot_bgcolor="white",
                      margin=dict(l=60, r=20, t=50, b=40), showlegend=True,
                      title=_("Measured bias per head (probe: one token x {n})").format(
                          n=check.probe_length),
                      legend=dict(orientation="h", y=-0.2, yanchor="top", x=0.5,
                                  xanchor="center"))
    return fig


def _head_error_lines(error: np.ndarray, max_points: int) -> tuple[np.ndarray, list]:
    """(sampled key positions, one line per head of `error` (H, T) in logits against key
    position): the error lines of the precision lens's two figures."""
    heads, T = error.shape
    pos = np.unique(np.linspace(0, T - 1, min(T, max_points)).round().astype(int))
    colors = pc.sample_colorscale("Turbo", np.linspace(0.05, 0.95, max(2, heads)))
    key_line = "<br>" + _("key %{x}") + "<br>"
    lines = []
    for h in range(heads):
        head_name = _("head {h}").format(h=h + 1)
        lines.append(go.Scatter(x=pos, y=error[h, pos], mode="lines", name=head_name,
                                line=dict(color=colors[h], width=1.5),
                                hovertemplate=head_name + key_line
                                              + _("error %{y:.4g} logits") + "<extra></extra>"))
    return pos, lines


def content_error_figure(lens: dict, content: float, max_points: int = 400,
                         height: int = 340) -> go.Figure:
    """|what the softmax sees of a content score - the score| against key position, per
    head (`precision_lens(..., content=)`'s "content_error"): BLOOM adds q.k/sqrt(d) to the
    bias in the model's dtype, so the content is rounded to the grid at the bias's size."""
    _pos, lines = _head_error_lines(lens["content_error"], max_points)
    fig = go.Figure(lines)
    fig.update_layout(
        title=_("{dtype}: what the softmax sees of a content score of {content}").format(
            dtype=lens["dtype"], content=significant(content)),
        xaxis_title=_("key position j"), yaxis_title=_("|seen − content| (logits)"),
        height=height, margin=dict(l=60, r=20, t=50, b=50), showlegend=False)
    return fig


def precision_figure(lens: dict, max_points: int = 400, height: int = 380) -> go.Figure:
    """Left: |bias added in the dtype - exact bias| against key position, per head, with the
    dtype's spacing dotted. Right: KL of the last query's bias-only attention, per head."""
    error, step, kl = lens["error"], lens["step"], lens["kl"]
    heads = error.shape[0]
    pos, lines = _head_error_lines(error, max_points)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35], horizontal_spacing=0.1,
                        subplot_titles=(_(FORM_ERROR_TITLES[lens["form"]]).format(
                                            dtype=lens["dtype"]),
                                        _("effect on the last query's attention")))
    for line in lines:
        fig.add_trace(line, row=1, col=1)
    fig.add_trace(go.Scatter(x=pos, y=step[0, pos], mode="lines", name=_("spacing (head 1)"),
                             line=dict(color="black", dash="dot", width=1),
                             hovertemplate=_("key %{x}") + "<br>" + _("spacing %{y:.4g}")
                                           + "<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=[f"h{h + 1}" for h in range(heads)], y=kl, name="KL (nats)",
                         marker_color="#4c78a8", showlegend=False,
                         hovertemplate="%{x}: KL %{y:.3g} nats<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title=_("key position j"), row=1, col=1)
    fig.update_yaxes(title=_("|added − exact| (logits)"), row=1, col=1)
    fig.update_yaxes(title=_("KL from exact (nats)"), row=1, col=2)
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", y=-0.25, yanchor="top", x=0.3,
                                  xanchor="center"))
    return fig
