"""Figures for a real model's heads: the pages *Model heads* and *Inspect a model*.

Four builders, in the order a page shows them:

* `attention_grid_figure`: every head of one layer. Up to `LABEL_MAX_TOKENS` tokens each panel
  is a heatmap with the tokens on its axes and in its hover; beyond that the panels are one PNG
  image (`plots.matrix_grid_figure`), so the payload stays bounded whatever the length.
* `decomposition_figure`: one head, one row: content q·k/sqrt(d) | positional bias as the model
  adds it | masked total (what the softmax sees) | attention. Heatmaps with token labels for
  short inputs, images with a sampled hover grid for long ones (about 1-2 MB at most).
* `head_statistics_figure`: effective vs configured slope (log-log, y = x line) and mean
  attention distance per head, for every layer.
* `model_slopes_figure`: a model's slopes against the standard schedules.

The arrays behind them are reduced to display resolution first (`stack_view`), by
`analyze_heads` and `decomposition_view`, so a page can cache them (a few MB) instead of the
full maps (layers x heads x T^2 floats, 512 MB for the shipped model at 2048 tokens).

Downsampling: attention maps are max-pooled over the block of positions under each pixel, so
a sharp head (previous token, a spike at one key) stays visible at any length; scores
(content, bias, total) are sampled at the position under the pixel's centre, as the bias
explorer draws its matrices. Hover values are always exact entries at sampled positions.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .alibi import SCHEDULES, alibi_slopes, mean_distance
from .errors import AlibiVizError
from .heads import Decomposition, HeadStatistics, attention_maps, head_statistics
from .plots import (
    ATTENTION_COLORSCALE,
    HOVER_CELL_BUDGET,
    IMAGE_PIXEL_BUDGET,
    colorize,
    display_positions,
    matrix_grid_figure,
    panel_resolution,
    png_data_uri,
)

LABEL_MAX_TOKENS = 48        # up to this many tokens, maps are heatmaps with token labels
SMALL_GRID_CELLS = 20_000    # ... and the grid only if heads x T^2 stays below this
DECOMP_PANEL_PIXELS = 300    # per side of each decomposition panel (about its width on screen)
DECOMP_HOVER_SIDE = 64       # hover samples per side of each decomposition panel
GRID_HOVER_CELLS = 8_000     # hover samples over all heads of the grid (the row has finer ones)
CONTENT_COLORSCALE = "RdBu_r"
SCORE_COLORSCALE = "Viridis"
MASK_COLOR = "rgb(215,215,215)"  # as plots.MASK_RGB: masked cells (key after its query)
COLOR_SCALES = ("log", "linear")  # how attention probabilities are coloured
DECOMPOSITION_PARTS = ("content", "bias", "total", "probs")


# ----------------------------------------------------------------------------- display arrays

@dataclass
class StackView:
    """A stack of (T, T) matrices (one per head) reduced to display resolution.

    images:      (panels, R, C) float32; pixel (r, c) covers query positions
                 [r*T/R, (r+1)*T/R) and keys [c*T/C, (c+1)*T/C).
    hover:       (panels, len(hover_rows), len(hover_cols)) exact entries at those positions.
    hover_rows, hover_cols: int64 positions of the hover samples.
    seq_len:     T.
    reduced:     None at full resolution, else how it was reduced ("block max", "sampled").
    """

    images: np.ndarray
    hover: np.ndarray
    hover_rows: np.ndarray
    hover_cols: np.ndarray
    seq_len: int
    reduced: str | None = None


def block_starts(length: int, side: int) -> np.ndarray:
    """First position of each of `side` even blocks covering range(length), int64 (side,)."""
    return np.floor(np.arange(side) * length / side).astype(np.int64)


def stack_view(stack, side: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
               hover_side: int | None = None, reduce: str = "max") -> StackView:
    """Reduce a (panels, T, T) stack to at most `side` pixels per side (default: the panels
    share `pixel_budget` pixels), max-pooling blocks (reduce="max", for probabilities) or
    sampling the position under each pixel (reduce="sample", for scores). The hover grid holds
    exact entries at about `hover_side` positions per side (default: HOVER_CELL_BUDGET cells
    over all panels)."""
    stack = np.asarray(stack, dtype=np.float32)
    if stack.ndim != 3 or stack.shape[1] != stack.shape[2] or stack.shape[1] == 0:
        raise AlibiVizError(f"Expected a (panels, T, T) stack of matrices, got {stack.shape}.")
    panels, T, _ = stack.shape
    if side is None:
        side = panel_resolution(T, panels, pixel_budget)
    side = max(1, min(T, side))
    if side == T:
        images, reduced = stack, None
    elif reduce == "max":
        # block max over the positions under each pixel (adaptive pooling: block k covers
        # floor(k*T/side) .. ceil((k+1)*T/side)), so one hot key survives any downsampling
        pooled = torch.nn.functional.adaptive_max_pool2d(torch.from_numpy(stack), side)
        images, reduced = pooled.numpy(), "block max"  # (panels, side, side)
    elif reduce == "sample":
        pos = display_positions(T, side)
        images, reduced = stack[:, pos][:, :, pos], "sampled"  # (panels, side, side)
    else:
        raise AlibiVizError(f"reduce must be 'max' or 'sample', got {reduce!r}.")
    if hover_side is None:
        hover_side = max(2, int(math.sqrt(HOVER_CELL_BUDGET / panels)))
    hpos = display_positions(T, min(T, hover_side))
    hover = stack[:, hpos][:, :, hpos]  # (panels, h, h)
    return StackView(images=np.ascontiguousarray(images), hover=np.ascontiguousarray(hover),
                     hover_rows=hpos, hover_cols=hpos, seq_len=T, reduced=reduced)


def masked_pixels(seq_len: int, rows: int, cols: int) -> np.ndarray:
    """Bool (rows, cols): pixels whose every key comes after every query (causal mask)."""
    r_last = np.append(block_starts(seq_len, rows)[1:], seq_len) - 1  # last query of each row
    c_first = block_starts(seq_len, cols)
    return c_first[None, :] > r_last[:, None]


@dataclass
class HeadsAnalysis:
    """What the heads pages draw for one text, at display resolution (a few MB).

    tokens:   label per position (length T).
    layers:   one StackView of attention probabilities per layer, (heads, R, R).
    stats:    head_statistics of the full maps, arrays (layers, heads).
    truncated: what was cut from the text and why, or None.
    """

    tokens: list[str]
    seq_len: int
    layers: list[StackView]
    stats: HeadStatistics
    truncated: str | None = None


def analyze_heads(model, tokenizer, text, max_tokens: int | None = None, slopes=None,
                  pixel_budget: int = IMAGE_PIXEL_BUDGET,
                  hover_cells: int = GRID_HOVER_CELLS) -> HeadsAnalysis:
    """Run the model once on `text` and keep what the pages draw: every layer's attention at
    display resolution and the head statistics (configured `slopes` beside the fitted ones).

    The full maps (layers x heads x T^2 float32) are dropped before returning.
    """
    result = attention_maps(model, tokenizer, text, max_tokens=max_tokens)
    stats = head_statistics(result.maps, slopes=slopes)
    T = len(result.tokens)
    hover_side = max(2, int(math.sqrt(hover_cells / len(result.maps[0]))))
    layers = [stack_view(m, pixel_budget=pixel_budget, hover_side=hover_side, reduce="max")
              for m in result.maps]
    return HeadsAnalysis(tokens=result.tokens, seq_len=T, layers=layers, stats=stats,
                         truncated=result.truncated)


@dataclass
class DecompositionView:
    """A Decomposition (one layer, every head) at display resolution.

    parts:  "content", "bias", "total", "probs" -> StackView (heads, R, R); probs max-pooled,
            the scores sampled.
    ranges: same keys -> float64 (heads, 2): colour range (min, max) of each head's full matrix
            (content: symmetric about 0, over visible keys; total: over visible keys).
    """

    tokens: list[str]
    seq_len: int
    layer: int
    bias_form: str
    max_abs_error: float
    parts: dict
    ranges: dict
    truncated: str | None = None


def decomposition_view(dec: Decomposition, side: int = DECOMP_PANEL_PIXELS,
                       hover_side: int = DECOMP_HOVER_SIDE) -> DecompositionView:
    """Reduce a Decomposition to display resolution, with each head's colour ranges."""
    T = dec.probs.shape[-1]
    visible = torch.ones(T, T, dtype=torch.bool).tril()  # key j <= query i
    content, bias, total = (torch.from_numpy(np.require(a, np.float32, "W"))  # writable, no copy
                            for a in (dec.content, dec.bias, dec.total))
    top = torch.where(visible, content.abs(), 0.0).amax(dim=(1, 2))
    finite = torch.isfinite(total)  # the masked entries are -inf
    ranges = {
        "content": torch.stack([-top, top], 1),
        "bias": torch.stack([bias.amin(dim=(1, 2)), bias.amax(dim=(1, 2))], 1),
        "total": torch.stack([torch.where(finite, total, math.inf).amin(dim=(1, 2)),
                              torch.where(finite, total, -math.inf).amax(dim=(1, 2))], 1),
        "probs": torch.tensor([[0.0, 1.0]]).expand(len(content), 2),
    }
    ranges = {k: v.double().numpy().copy() for k, v in ranges.items()}
    parts = {name: stack_view(getattr(dec, name), side=side, hover_side=hover_side,
                              reduce="max" if name == "probs" else "sample")
             for name in DECOMPOSITION_PARTS}
    return DecompositionView(tokens=dec.tokens, seq_len=T, layer=dec.layer,
                             bias_form=dec.bias_form, max_abs_error=dec.max_abs_error,
                             parts=parts, ranges=ranges, truncated=dec.truncated)


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
        return values, 0.0, 1.0, "attention"
    floor = log_floor(seq_len)
    with np.errstate(divide="ignore", invalid="ignore"):
        logged = np.log10(np.maximum(values, np.float32(10.0**floor)))
    return np.where(np.isnan(values), np.nan, logged).astype(np.float32), floor, 0.0, "log10 attention"


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
    return (head_text + "query i=%{y} «%{customdata[0]}»<br>key j=%{x} «%{customdata[1]}»"
            "<br>distance i-j=%{customdata[2]}<br>" + label + "=%{customdata[3]:.4g}<extra></extra>")


def _add_panel(fig, row: int, col: int, view: StackView, image: np.ndarray, hover: np.ndarray,
               tokens: list[str], *, coloraxis: str, cmin: float, cmax: float, colorscale: str,
               label: str, labels: bool, head_text: str = "") -> None:
    """Draw one (T, T) matrix into subplot (row, col), in position coordinates (-0.5..T-0.5).

    labels=True: a heatmap of `image` (full resolution, T x T) with tokens in its hover.
    Otherwise `image` (R, C) as one PNG (NaN grey) plus an invisible heatmap at the hover
    samples carrying the hover, and an invisible point carrying the colour bar. `hover` holds
    the values the hover shows (probabilities even when the colours are log10).
    """
    T = view.seq_len
    if labels:
        positions = np.arange(T)
        fig.add_trace(go.Heatmap(
            z=np.where(np.isfinite(image), image, np.nan), x=positions, y=positions,
            coloraxis=coloraxis, hoverongaps=False,
            customdata=_token_hover(tokens, positions, positions, hover),
            hovertemplate=_hovertemplate(label, head_text)), row=row, col=col)
        return
    R, C = image.shape
    rgb = colorize(image, cmin, cmax, colorscale)  # (R, C, 3), NaN grey
    fig.add_trace(go.Image(source=png_data_uri(rgb), x0=T / C / 2 - 0.5, dx=T / C,
                           y0=T / R / 2 - 0.5, dy=T / R, hoverinfo="skip"), row=row, col=col)
    fig.add_trace(go.Heatmap(
        z=np.where(np.isfinite(hover), hover, np.nan), x=view.hover_cols, y=view.hover_rows,
        opacity=0, showscale=False, hoverongaps=False, colorscale="Greys",
        customdata=_token_hover(tokens, view.hover_rows, view.hover_cols, hover),
        hovertemplate=_hovertemplate(label, head_text)), row=row, col=col)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False,
                             hoverinfo="skip", marker=dict(coloraxis=coloraxis, color=[cmin])),
                  row=row, col=col)


def _marker_lines(T: int, training_length: int | None):
    """x, y of dashed lines at key and query position `training_length` (None: no lines)."""
    if training_length is None or not 0 < training_length < T:
        return None
    edge = training_length - 0.5
    return [edge, edge, None, -0.5, T - 0.5], [-0.5, T - 0.5, None, edge, edge]


def _tick_labels(tokens: list[str], T: int, panel_px: int) -> dict:
    """Axis settings that show every token under its position, in a font that fits."""
    size = int(max(6, min(11, 0.8 * panel_px / max(T, 1))))
    return dict(tickmode="array", tickvals=list(range(T)), ticktext=[_escape(t) for t in tokens],
                tickfont=dict(size=size), tickangle=0)


# ----------------------------------------------------------------------------- (a) grid

def use_labels(seq_len: int, panels: int = 1) -> bool:
    """Whether `panels` maps of `seq_len` tokens are drawn as labelled heatmaps (else images)."""
    return seq_len <= LABEL_MAX_TOKENS and panels * seq_len**2 <= SMALL_GRID_CELLS


def attention_grid_figure(view: StackView, tokens: list[str], layer: int, *, slopes=None,
                          selected: int | None = None, training_length: int | None = None,
                          scale: str = "log", panel_px: int = 240) -> go.Figure:
    """Every head's attention map for one layer (0-based `layer`), one shared colour bar.

    view: the layer's StackView (heads, R, R). slopes: per-head slopes for the panel titles
    (ALiBi models). selected: 0-based head whose title is marked. training_length: dashed lines
    at that key and query position when the input is longer.
    """
    heads, T = len(view.images), view.seq_len
    if len(tokens) != T:
        raise AlibiVizError(f"{len(tokens)} tokens for maps of {T} positions.")
    titles = []
    for h in range(heads):
        title = f"head {h + 1}" + (f": m={slopes[h]:.3g}" if slopes is not None else "")
        titles.append(f"<b>▶ {title}</b>" if h == selected else title)
    over = training_length is not None and T > training_length
    mark = f"; red dashes: training length {training_length}" if over else ""
    shown = "log10 attention" if scale == "log" else "attention"
    if not use_labels(T, heads):
        values, cmin, cmax, bar = attention_colors(_with_mask(view.images, T), T, scale)
        note = f", {view.reduced} to {view.images.shape[1]} px" if view.reduced else ""
        return matrix_grid_figure(
            values, titles, T, cmin=cmin, cmax=cmax, colorscale=ATTENTION_COLORSCALE,
            colorbar_title=bar, hover=view.hover, hover_rows=view.hover_rows,
            hover_cols=view.hover_cols, hover_label="attention", marker=training_length if over else None,
            title=f"Layer {layer + 1}: {shown}, {T:,} tokens{note}{mark}. Grey: masked.",
            panel_px=panel_px)

    columns = min(heads, 4)
    rows = math.ceil(heads / columns)
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles, shared_xaxes=True,
                        shared_yaxes=True, horizontal_spacing=0.02, vertical_spacing=0.06)
    values, cmin, cmax, bar = attention_colors(_with_mask(view.images, T), T, scale)
    fig.update_layout(coloraxis=dict(colorscale=ATTENTION_COLORSCALE, cmin=cmin, cmax=cmax,
                                     colorbar=dict(title=dict(text=bar), thickness=14)))
    lines = _marker_lines(T, training_length)
    for h in range(heads):
        r, c = divmod(h, columns)
        _add_panel(fig, r + 1, c + 1, view, values[h], view.images[h], tokens,
                   coloraxis="coloraxis", cmin=cmin, cmax=cmax, colorscale=ATTENTION_COLORSCALE,
                   label="attention", head_text=f"head {h + 1}<br>", labels=True)
        if lines:
            fig.add_trace(go.Scatter(x=lines[0], y=lines[1], mode="lines", hoverinfo="skip",
                                     showlegend=False, line=dict(color="red", dash="dash")),
                          row=r + 1, col=c + 1)
    ticks = _tick_labels(tokens, T, panel_px)
    fig.update_xaxes(range=[-0.5, T - 0.5], showgrid=False, zeroline=False, **ticks)
    fig.update_yaxes(range=[T - 0.5, -0.5], showgrid=False, zeroline=False, **ticks)
    for r in range(rows):  # labels on the outer axes only
        for c in range(columns):
            if c > 0:
                fig.update_yaxes(showticklabels=False, row=r + 1, col=c + 1)
            if r < rows - 1:
                fig.update_xaxes(showticklabels=False, row=r + 1, col=c + 1)
    fig.update_layout(title=dict(text=f"Layer {layer + 1}: {shown}, {T} tokens{mark}. "
                                      "Rows: query i; columns: key j. Grey: masked."),
                      height=panel_px * rows + 160, plot_bgcolor=MASK_COLOR, showlegend=False,
                      margin=dict(l=60, r=10, t=70, b=50))
    return fig


# ----------------------------------------------------------------------------- (b) one head

PART_TITLES = {
    "content": "content q·k/√d",
    "bias": "position bias, as added",
    "total": "masked total = softmax input",
    "probs": "attention",
}


def decomposition_figure(view: DecompositionView, head: int, *, slope: float | None = None,
                         training_length: int | None = None, scale: str = "log",
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
    fig = make_subplots(rows=1, cols=4, subplot_titles=[PART_TITLES[p] for p in DECOMPOSITION_PARTS],
                        horizontal_spacing=0.035)
    lines = _marker_lines(T, training_length)
    for k, part in enumerate(DECOMPOSITION_PARTS, start=1):
        sv = view.parts[part]
        image = sv.images[head]
        hover = image if labels else sv.hover[head]  # labelled heatmaps hover every cell
        low, high = view.ranges[part][head]
        colorscale = {"content": CONTENT_COLORSCALE, "probs": ATTENTION_COLORSCALE}.get(part, SCORE_COLORSCALE)
        bar = "logit"
        if part == "probs":
            image, low, high, bar = attention_colors(_with_mask(image[None], T)[0], T, scale)
        if not high > low:  # a constant panel (no bias at all): any range draws it flat
            low, high = low - 1.0, high + 1.0
        axis = "coloraxis" if k == 1 else f"coloraxis{k}"
        domain = fig.layout[f"xaxis{'' if k == 1 else k}"].domain
        fig.update_layout({axis: dict(
            colorscale=colorscale, cmin=float(low), cmax=float(high),
            colorbar=dict(title=dict(text=bar, side="top"), orientation="h", thickness=10,
                          x=(domain[0] + domain[1]) / 2, xanchor="center", len=domain[1] - domain[0],
                          y=-0.08, yanchor="top"))})
        _add_panel(fig, 1, k, sv, image, hover, view.tokens, coloraxis=axis, cmin=float(low),
                   cmax=float(high), colorscale=colorscale,
                   label="attention" if part == "probs" else part, labels=labels)
        if lines:
            fig.add_trace(go.Scatter(x=lines[0], y=lines[1], mode="lines", hoverinfo="skip",
                                     showlegend=False, line=dict(color="red", dash="dash")),
                          row=1, col=k)
    ticks = _tick_labels(view.tokens, T, panel_px) if labels else {}
    fig.update_xaxes(range=[-0.5, T - 0.5], showgrid=False, zeroline=False, constrain="domain",
                     **ticks)
    fig.update_yaxes(range=[T - 0.5, -0.5], showgrid=False, zeroline=False, constrain="domain",
                     **ticks)
    for k in range(1, 5):
        fig.update_yaxes(scaleanchor=f"x{'' if k == 1 else k}", row=1, col=k)
        if k > 1 and labels:
            fig.update_yaxes(showticklabels=False, row=1, col=k)
    what = f"Layer {view.layer + 1}, head {head + 1}" + (f" (m={slope:.3g})" if slope is not None else "")
    notes = []
    if sv.reduced:
        notes.append(f"drawn at {sv.images.shape[-1]} px from {T:,} tokens (scores sampled, "
                     "attention block max); hover shows exact values")
    if lines:
        notes.append(f"red dashes: training length {training_length}")
    fig.update_layout(
        title=dict(text=what, subtitle=dict(text="; ".join(notes).capitalize())),
        height=panel_px + 180, plot_bgcolor=MASK_COLOR, showlegend=False,
        margin=dict(l=60 if labels else 40, r=10, t=110, b=80))
    return fig


# ----------------------------------------------------------------------------- (c) statistics

def bias_only_mean_distance(slopes, seq_len: int) -> np.ndarray:
    """Mean attention distance per head if attention followed the ALiBi bias alone, averaged
    over the T queries of a causal sequence (query i sees i + 1 keys), shape (heads,)."""
    contexts = range(1, seq_len + 1)
    return np.mean([mean_distance(slopes, "causal", c) for c in contexts], axis=0)


def _layer_colors(layers: int) -> list[str]:
    import plotly.colors as pc

    return pc.sample_colorscale("Viridis", np.linspace(0.0, 0.85, max(2, layers)))[:layers]


def head_statistics_figure(stats: HeadStatistics, seq_len: int,
                           selected: tuple[int, int] | None = None) -> go.Figure:
    """Two panels over every (layer, head): effective vs configured slope, and mean distance.

    Left, for models with configured slopes (ALiBi): fitted effective slope against configured
    slope, log-log, with the line y = x (a head on it decays exactly as its bias says; above it
    is more local, below it looks further). Heads whose fit is not positive cannot sit on a log
    axis; their number is in the title. Without configured slopes: effective slope per head.
    Right: mean attention distance per head, one line per layer, and (ALiBi) what the bias
    alone would give at this length. selected: (layer, head), 0-based, ringed in both panels.
    """
    effective, configured = stats.effective_slope, stats.configured_slope
    layers, heads = effective.shape
    alibi = configured is not None
    positive = np.isfinite(effective) & (effective > 0)
    hidden = int((~positive).sum()) if alibi else 0
    left_title = ("effective vs configured slope" if alibi else "effective slope per head")
    if hidden:
        left_title += f" ({hidden} not positive, not shown)"
    fig = make_subplots(rows=1, cols=2, subplot_titles=(left_title, "mean attention distance"),
                        horizontal_spacing=0.1)
    colors = _layer_colors(layers)
    head_ids = np.arange(1, heads + 1)
    for layer in range(layers):
        custom = np.stack([np.full(heads, layer + 1), head_ids, stats.slope_fit_r2[layer],
                           stats.local_share[layer], stats.entropy[layer]], axis=1)
        style = dict(color=colors[layer], size=8)
        if alibi:
            keep = positive[layer]
            x, y = configured[layer][keep], effective[layer][keep]
            fig.add_trace(go.Scatter(
                x=x, y=y, customdata=custom[keep], mode="markers", marker=style,
                name=f"layer {layer + 1}", legendgroup=str(layer),
                hovertemplate="layer %{customdata[0]} head %{customdata[1]}<br>configured "
                              "m=%{x:.4g}<br>effective m=%{y:.4g}<br>fit R²=%{customdata[2]:.2f}"
                              "<extra></extra>"), row=1, col=1)
        else:
            fig.add_trace(go.Scatter(
                x=head_ids, y=effective[layer], customdata=custom, mode="lines+markers",
                marker=style, line=dict(color=colors[layer], width=1), name=f"layer {layer + 1}",
                legendgroup=str(layer),
                hovertemplate="layer %{customdata[0]} head %{customdata[1]}<br>effective "
                              "m=%{y:.4g}<br>fit R²=%{customdata[2]:.2f}<extra></extra>"),
                row=1, col=1)
        fig.add_trace(go.Scatter(
            x=head_ids, y=stats.mean_distance[layer], customdata=custom, mode="lines+markers",
            marker=style, line=dict(color=colors[layer], width=1), name=f"layer {layer + 1}",
            legendgroup=str(layer), showlegend=False,
            hovertemplate="layer %{customdata[0]} head %{customdata[1]}<br>mean distance "
                          "%{y:.3g} tokens<br>share within " + str(stats.k) + " tokens "
                          "%{customdata[3]:.2f}<br>entropy %{customdata[4]:.2f} nats"
                          "<extra></extra>"), row=1, col=2)
    if alibi:
        finite = configured[np.isfinite(configured) & (configured > 0)]
        ys = effective[positive]
        low = min(finite.min(), ys.min() if ys.size else finite.min()) / 1.5
        high = max(finite.max(), ys.max() if ys.size else finite.max()) * 1.5
        fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="y = x",
                                 line=dict(color="grey", dash="dash"), hoverinfo="skip"),
                      row=1, col=1)
        fig.update_xaxes(type="log", title="configured slope m (per token)", row=1, col=1,
                         exponentformat="power")
        fig.update_yaxes(type="log", title="effective slope (fitted)", row=1, col=1,
                         exponentformat="power")
        reference = bias_only_mean_distance(configured[0], seq_len)
        fig.add_trace(go.Scatter(
            x=head_ids, y=reference, mode="markers", name="bias alone",
            marker=dict(symbol="x", color="black", size=9),
            hovertemplate="head %{x}: bias alone gives %{y:.3g} tokens<extra></extra>"),
            row=1, col=2)
    else:
        fig.update_xaxes(title="head", dtick=max(1, heads // 16), row=1, col=1)
        fig.update_yaxes(title="effective slope (fitted)", row=1, col=1)
    if selected is not None:
        layer, head = selected
        ring = dict(symbol="circle-open", size=18, color="red", line=dict(width=2))
        if not alibi or positive[layer, head]:
            x = configured[layer, head] if alibi else head + 1
            fig.add_trace(go.Scatter(x=[x], y=[effective[layer, head]], mode="markers",
                                     marker=ring, name="selected head", hoverinfo="skip"),
                          row=1, col=1)
        fig.add_trace(go.Scatter(x=[head + 1], y=[stats.mean_distance[layer, head]],
                                 mode="markers", marker=ring, showlegend=False, hoverinfo="skip"),
                      row=1, col=2)
    fig.update_xaxes(title="head", dtick=max(1, heads // 16), row=1, col=2)
    fig.update_yaxes(title="tokens", row=1, col=2, rangemode="tozero")
    fig.update_layout(
        title=f"Head statistics over {seq_len:,} tokens (effective slope: log p fitted "
              f"against distance up to {stats.max_distance})",
        height=420, margin=dict(l=60, r=20, t=80, b=50),
        legend=dict(orientation="h", y=-0.2, yanchor="top", x=0.5, xanchor="center"))
    return fig


# ----------------------------------------------------------------------------- (d) slopes

def model_slopes_figure(slopes, effective=None, schedules=SCHEDULES, max_bias: float = 8.0,
                        name: str = "this model") -> go.Figure:
    """A model's slopes m_h (markers) against the standard schedules (thin lines), log2 y.

    effective: the per-token slope the model's eager attention really applies, drawn too when
    it differs from `slopes` (Falcon: 2m/sqrt(d)).
    """
    slopes = np.asarray(slopes, dtype=np.float64)
    if slopes.ndim != 1 or slopes.size == 0 or not np.all(slopes > 0):
        raise AlibiVizError("slopes must be a non-empty list of positive numbers.")
    heads = np.arange(1, slopes.size + 1)
    fig = go.Figure()
    for schedule in schedules:
        fig.add_trace(go.Scatter(
            x=heads, y=alibi_slopes(slopes.size, schedule, max_bias), mode="lines",
            name=f"{schedule} schedule", line=dict(width=1.2, dash="dot"),
            hovertemplate="head %{x}<br>m=%{y:.5g}<extra>" + schedule + "</extra>"))
    fig.add_trace(go.Scatter(
        x=heads, y=slopes, mode="markers", name=f"{name}: configured m",
        marker=dict(size=11, color="black", symbol="circle-open", line=dict(width=2)),
        customdata=np.log2(slopes),
        hovertemplate="head %{x}<br>m=%{y:.5g}<br>log2 m=%{customdata:.3f}<extra></extra>"))
    if effective is not None:
        effective = np.asarray(effective, dtype=np.float64)
        if not np.allclose(effective, slopes, rtol=1e-6):
            fig.add_trace(go.Scatter(
                x=heads, y=effective, mode="markers", name="per-token slope as applied (eager)",
                marker=dict(size=9, color="#d62728", symbol="diamond"),
                hovertemplate="head %{x}<br>applied slope=%{y:.5g}<extra></extra>"))
    fig.update_yaxes(type="log", title="slope m (log scale)", exponentformat="power")
    fig.update_xaxes(title="head h", dtick=max(1, slopes.size // 16))
    standard = [alibi_slopes(slopes.size, s, max_bias) for s in schedules]
    agree = len(standard) > 1 and all(np.allclose(standard[0], s) for s in standard[1:])
    fig.update_layout(title=dict(text=f"Slopes of {name} against the standard schedules "
                                      f"({slopes.size} heads)",
                                 subtitle=dict(text="For this head count the schedules coincide."
                                               if agree else "")), height=380,
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
                      margin=dict(l=60, r=20, t=80, b=40))
    return fig


# ----------------------------------------------------------------------------- model facts

def training_length(info, training: dict | None = None) -> int | None:
    """The length the model was trained at: training.json's train_seq_len when the folder has
    one (the shipped models), else what the config declares (ModelInfo.training_length)."""
    value = (training or {}).get("train_seq_len")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return info.training_length


def model_info_rows(info, training: dict | None = None) -> list[dict]:
    """ModelInfo as (property, value) rows of text for a table."""
    rows = [
        ("architecture", f"{info.architecture} ({info.model_type})"),
        ("layers x heads", f"{info.num_layers} x {info.num_heads} (head size {info.head_dim}, "
                           f"hidden {info.hidden_size})"),
        ("parameters", f"{info.num_params:,}"),
        ("dtype / device", f"{info.dtype} / {info.device}"),
        ("position", info.positional),
        ("how the bias enters", info.bias_form),
    ]
    if info.slopes is not None:
        rows.append(("slope schedule", info.slope_schedule or "none of the standard ones"))
        rows.append(("slopes m", ", ".join(f"{m:.4g}" for m in info.slopes)))
        if info.effective_slopes is not None and not np.allclose(info.effective_slopes, info.slopes):
            rows.append(("slopes as applied", ", ".join(f"{m:.4g}" for m in info.effective_slopes)))
    length = training_length(info, training)
    rows.append(("training length", f"{length:,} tokens" if length else "unknown"))
    if info.max_positions:
        rows.append(("longest input", f"{info.max_positions:,} tokens (learned position table)"))
    if info.path:
        rows.append(("folder", info.path))
    return [{"property": k, "value": v} for k, v in rows]
