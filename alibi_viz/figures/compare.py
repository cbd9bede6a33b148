"""Plot builders for the "Compare positional methods" page: score vs distance, and as matrices.

A *selection* is an ordered mapping {method name: {parameter: value}} over the methods of
`positional.METHODS` (missing parameters take their defaults). Two pictures of it:

- `score_vs_distance_figure`: each method's contribution at distance d = i - j, one line per
  method. Methods that add a bias to the score (ALiBi, T5, KERPLE, Sandwich; logits) and methods
  that only shape q . k (sinusoidal, RoPE; unitless) are drawn in separate panels, because the
  second kind is not added to anything and its numbers are not logits.
- `score_matrices_figure`: one matrix per method, drawn as images at display resolution (the drawing kit's
  `render.matrix_grid_figure`). Their scales differ by orders of magnitude (ALiBi reaches -4,095
  at 65,536 tokens, a normalised cosine stays in [-1, 1]), so each panel is divided by its own
  largest |value|, named in its title; colour 0 always means "no contribution". Hover shows the
  unscaled value.

Both evaluate the closed forms only at the distances or pixels drawn, so the payload and the
build time are bounded whatever the sequence length.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from alibi_viz.alibi import MODE_NAMES, check_mode, check_seq_len
from alibi_viz.display import MAX_PANEL_PIXELS, display_positions, panel_resolution
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.bias import decay_distances
from alibi_viz.figures.render import matrix_grid_figure
from alibi_viz.i18n import N_, _, ngettext, number, significant
from alibi_viz.positional import (
    METHODS,
    check_params,
    score_matrix_sampled,
    score_vs_distance,
)

MAX_CURVE_POINTS = 1024  # distances evaluated per curve: about the pixels a chart is wide
# Smaller than the bias explorer's budgets: these matrices can be as noisy as PNG allows
# (oscillating cosines), and 400,000 pixels of pure noise encode to about 0.86 MB of base64;
# with the hover cells (about 27 bytes each) the figure stays under 1.5 MB in the worst case.
PIXEL_BUDGET = 400_000  # image pixels over all panels
HOVER_BUDGET = 16_000  # hover cells over all panels
MATRIX_COLORSCALE = "RdYlBu"  # diverging: red = penalty, yellow = 0, blue = positive
# One fixed colour per method (plotly's D3 palette), so a method keeps its colour whatever else
# is selected; the six defaults get the six most distinct ones.
METHOD_COLORS = {
    "alibi": "#1f77b4", "t5": "#ff7f0e", "sinusoidal": "#2ca02c", "rope_bound": "#d62728",
    "kerple_log": "#9467bd", "sandwich": "#8c564b", "rope_cos": "#e377c2",
    "kerple_power": "#17becf",
}
KIND_TITLES = {  # panel titles, translated where shown: `_(KIND_TITLES[kind])`
    "bias": N_("Bias: added to the score (bias, logits)"),
    "similarity": N_("Similarity: positional part of q·k (not added to the score; unitless)"),
}


# ----------------------------------------------------------------------------- selection

def check_selection(selection, mode: str = "causal") -> dict[str, dict]:
    """Validate {method: params} (or an iterable of method names); fill in default parameters.

    Returns a new dict in the same order. Raises AlibiVizError when nothing is selected, for an
    unknown method, or for parameters the method refuses in this mode (T5's max_distance must
    exceed its exact buckets, which depend on whether buckets are split per side).
    """
    if selection is None:
        selection = {}
    if not isinstance(selection, dict):
        selection = {name: {} for name in selection}
    if not selection:
        raise AlibiVizError(_("Nothing to draw: choose at least one method."))
    checked = {name: check_params(name, **(params or {})) for name, params in selection.items()}
    for name, params in checked.items():  # one distance each: catches mode-dependent limits
        score_vs_distance(name, np.zeros(1, dtype=np.int64), mode, **params)
    return checked


def format_params(method: str, params: dict) -> str:
    """Short "label = value, ..." text of a method's parameters, for legends and titles: each
    parameter by its label in the current language, numbers with the language's marks; a
    yes/no parameter only when it is off its default ("off: normalise to 1 at distance 0")."""
    parts = []
    for p in METHODS[method].params:
        value = params.get(p.name, p.default)
        if p.kind == "bool":
            if bool(value) != bool(p.default):
                parts.append(_(p.label) if value else _("off: {label}").format(label=_(p.label)))
            continue
        shown = significant(value, 4) if p.kind == "float" else number(int(value))
        parts.append(f"{_(p.label)} = {shown}")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- vs distance

def compare_distances(seq_len: int, mode: str = "causal", max_points: int = MAX_CURVE_POINTS,
                      log: bool = False) -> np.ndarray:
    """Signed distances d = i - j to plot for a sequence of seq_len tokens, int64, sorted.

    causal: 0 .. seq_len-1. symmetric: -(seq_len-1) .. seq_len-1. All of them when they fit in
    `max_points` (half of them per side when symmetric), else an even (or, with log, geometric)
    sample of at most max_points, always including the ends. log: only d >= 1 (a log axis
    cannot show 0 or negative d; every method here is even in d, so one side says everything).
    """
    seq_len = check_seq_len(seq_len)
    mode = check_mode(mode)
    if log:
        d = decay_distances(seq_len - 1, max_points, log=True)
        return d[d >= 1]
    if mode == "causal":
        return decay_distances(seq_len - 1, max_points)
    half = decay_distances(seq_len - 1, max(2, max_points // 2))
    return np.concatenate([-half[:0:-1], half])


def stacked_layout(titles: list[str], gap: float = 0.12) -> dict:
    """Layout dict for len(titles) panels stacked vertically, sharing one distance axis.

    What make_subplots(rows=n, shared_xaxes=True, subplot_titles=titles) builds, written out:
    make_subplots validates every property it sets, which costs more than all the curves.
    Panel k (0-based) uses axes x{k+1}, y{k+1} ("x", "y" for the first); only the bottom
    one shows tick labels; zooming one zooms all.
    """
    n = len(titles)
    height = (1 - gap * (n - 1)) / n  # of each panel, as a fraction of the plot area
    layout = {"annotations": []}
    for k, title in enumerate(titles):
        top = 1 - k * (height + gap)
        suffix = "" if k == 0 else str(k + 1)
        layout[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", showticklabels=k == n - 1,
                                        **({"matches": "x"} if k else {}))
        layout[f"yaxis{suffix}"] = dict(anchor=f"x{suffix}",
                                        domain=[max(0.0, top - height), top])  # no -1e-17
        layout["annotations"].append(dict(
            text=title, x=0.5, y=top, xref="paper", yref="paper", xanchor="center",
            yanchor="bottom", showarrow=False, font=dict(size=16)))
    return layout


def score_vs_distance_figure(selection, seq_len: int, mode: str = "causal",
                             log_distance: bool = False,
                             max_points: int = MAX_CURVE_POINTS) -> go.Figure:
    """Each selected method's score contribution against distance d = i - j, one line each.

    selection: {method: params} (see `check_selection`). Bias methods (added to the score, in
    logits) and similarity methods (positional part of q . k, unitless) get separate panels
    when both are present. Causal mode plots d >= 0 (d < 0 is masked); symmetric plots signed
    d. Each curve holds exact `positional.score_vs_distance` values at `compare_distances`
    (at most max_points of them), so the figure is small whatever seq_len is.
    """
    mode = check_mode(mode)
    selection = check_selection(selection, mode)
    seq_len = check_seq_len(seq_len)
    d = compare_distances(seq_len, mode, max_points, log_distance)
    kinds = [k for k in KIND_TITLES if any(METHODS[m].kind == k for m in selection)]
    layout = stacked_layout([_(KIND_TITLES[k]) for k in kinds])
    value_word = _("value")
    traces = []
    for name, params in selection.items():
        method = METHODS[name]
        label = _(method.label)
        suffix = "" if method.kind == kinds[0] else "2"
        traces.append(go.Scatter(
            x=d, y=score_vs_distance(name, d, mode, **params), mode="lines",
            name=f"{label} ({format_params(name, params)})", legendgroup=name,
            line=dict(color=METHOD_COLORS[name], width=2), xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            hovertemplate=f"{label}<br>d=%{{x}}<br>{value_word}=%{{y:.4g}}<extra></extra>"))
    axis = "|d| = |i - j|" if mode == "symmetric" and log_distance else _("distance d = i - j")
    for k, kind in enumerate(kinds):
        suffix = "" if k == 0 else str(k + 1)
        layout[f"yaxis{suffix}"] |= dict(title=_("logits") if kind == "bias" else _("q·k part"),
                                         zeroline=True, zerolinecolor="#999")
        layout[f"xaxis{suffix}"] |= dict(type="log" if log_distance else "linear")
    layout[f"xaxis{'' if len(kinds) == 1 else len(kinds)}"]["title"] = (
        _("{axis} (tokens, log scale)") if log_distance else _("{axis} (tokens)")).format(axis=axis)
    available = (seq_len - 1 if log_distance  # d = 1 .. seq_len-1
                 else seq_len if mode == "causal" else 2 * seq_len - 1)
    sampled = "" if d.size >= available else ngettext(
        "; evaluated at {shown} of {total} distance", "; evaluated at {shown} of {total} distances",
        available).format(shown=number(d.size), total=number(available))
    what = (_("Keys before the query (d ≥ 0)") if mode == "causal"
            else _("Keys on both sides; every method here is even in d (real T5 learns "
                   "separate buckets for each side)") if log_distance
            else _("Keys on both sides"))
    top, bottom = 100, 150  # a two-line title; a legend of up to 4 rows
    height = 320 * len(kinds) + top + bottom
    title = ngettext("Score contribution vs distance ({mode}, {n} token)",
                     "Score contribution vs distance ({mode}, {n} tokens)", seq_len).format(
        mode=_(MODE_NAMES[mode]), n=number(seq_len))
    layout |= dict(
        title=dict(text=f"{title}<br><sup>{what}{sampled}</sup>"),
        height=height, margin=dict(l=60, r=20, t=top, b=bottom),
        # below the x-axis title, a fixed number of pixels whatever the height
        legend=dict(orientation="h", y=-70 / (height - top - bottom), yanchor="top"),
        hovermode="closest")
    return go.Figure(data=traces, layout=layout)


# ----------------------------------------------------------------------------- matrices

def score_display_values(selection, seq_len: int, mode: str = "causal",
                         budget: int = PIXEL_BUDGET, cap: int = MAX_PANEL_PIXELS):
    """Each method's score matrix at display resolution: (values (P, R, C), rows, cols).

    values[p] is `positional.score_matrix_sampled` for the p-th selected method at query
    positions `rows` and key positions `cols` (int64, from `display.display_positions`), float64,
    -inf where masked (causal, key after query). P panels share `budget` pixels.
    """
    mode = check_mode(mode)
    selection = check_selection(selection, mode)
    seq_len = check_seq_len(seq_len)
    side = panel_resolution(seq_len, len(selection), budget, cap)
    positions = display_positions(seq_len, side)
    values = np.stack([score_matrix_sampled(name, positions, positions, mode, **params)
                       for name, params in selection.items()])  # (P, R, C)
    return values, positions, positions


def panel_scales(values: np.ndarray) -> np.ndarray:
    """Largest finite |value| of each panel of (P, R, C) values, shape (P,); 1 where all are 0."""
    finite = np.where(np.isfinite(values), np.abs(values), 0.0)
    scales = finite.reshape(len(values), -1).max(axis=1)
    return np.where(scales > 0, scales, 1.0)


def score_matrices_figure(selection, seq_len: int, mode: str = "causal",
                          pixel_budget: int = PIXEL_BUDGET,
                          hover_budget: int = HOVER_BUDGET) -> go.Figure:
    """One score matrix per selected method, each divided by its own largest |value|.

    Colour = value / max|value| of that panel, in [-1, 1] on a diverging scale (0, no
    contribution, is the middle colour); the divisor is in each panel's title and hover shows
    the unscaled value. Masked cells (causal) are grey. Evaluated at display resolution, so
    the payload is bounded whatever seq_len is; the title says when it is downsampled.
    """
    selection = check_selection(selection, mode)
    images, rows, cols = score_display_values(selection, seq_len, mode, pixel_budget)
    scales = panel_scales(images)
    hover, hr, hc = score_display_values(selection, seq_len, mode, hover_budget, cap=64)
    titles = [f"{k}. {_(METHODS[name].label)} (÷{significant(scale, 3)})"
              for k, (name, scale) in enumerate(zip(selection, scales, strict=True), start=1)]
    note = "" if rows.size == seq_len else " " + _(
        "(drawn at {rows}x{cols}, downsampled from {seq_len}x{seq_len})").format(
        rows=rows.size, cols=cols.size, seq_len=number(seq_len))
    masked = " " + _("Grey: masked (key after query).") if mode == "causal" else ""
    title = (_("Score matrices ({mode})").format(mode=_(MODE_NAMES[mode])) + note + "<br><sup>"
             + _("Each panel divided by its own max |value| (in its title); hover shows the "
                 "unscaled value.") + masked + "</sup>")
    fig = matrix_grid_figure(
        images / scales[:, None, None], titles, seq_len, cmin=-1.0, cmax=1.0,
        colorscale=MATRIX_COLORSCALE, colorbar_title=_("value ÷ panel's<br>max |value|"),
        hover=hover, hover_rows=hr, hover_cols=hc, hover_label=_("value (unscaled)"),
        panel_label=_("panel"), title=title, panel_px=240 if len(selection) <= 4 else 200,
    )
    return fig

