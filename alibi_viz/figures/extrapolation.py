"""Figures for "train short, test long": the Extrapolation lab.

In the order the page uses them:

* `perplexity_figure`: perplexity against evaluation length for every shipped model, one panel
  per protocol, with the training length marked (the numbers are `assets/results/
  extrapolation.json`, read and summarised by `experiments.evaluate`).
* `attention_pair_figure`: two attention maps side by side, each a kit panel
  (`render.image_panel`: max-pooled to at most `max_px` pixels a side, so a 4,096-token map
  costs the same as a 512-token one) with a sparse hover grid of exact values;
  `extrapolation_attention_figure` uses it for one head of the ALiBi model at the training
  length and at 8x that length, with the training length marked.

The ALiBi facts used here (Press, Smith & Lewis 2021, arXiv:2108.12409): the bias -m (i - j)
is added to the scaled scores q.k / sqrt(d) before the softmax, not itself scaled, and the
model has no position embeddings.

Every text is in the current language (`alibi_viz.i18n`), numbers included (the figures carry
the language's decimal and thousands marks), so a cached figure must be keyed by the language.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from alibi_viz.alibi import check_int, content_to_win_half
from alibi_viz.assets import MODEL_ORDER, model_label, results_train_seq_len, text_kind_in_sentence
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.render import ATTENTION_COLORSCALE, causal_map_panel, explicit_colorscale
from alibi_viz.i18n import N_, _, ngettext, number, significant
from alibi_viz.models.attention import check_attention
from alibi_viz.results.evaluation import (
    check_results,
    protocol_name,
    protocols_in,
    result_curve,
    seed_spread,
)
from alibi_viz.results.learnable_slopes import cell
from alibi_viz.results.reach import ReachResult
from alibi_viz.results.rescale import interpolation_scale, scale_label

# One fixed colour per shipped model (plotly's D3 palette), so a model keeps its colour.
MODEL_COLORS = dict(zip(MODEL_ORDER, ("#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#7f7f7f"),
                        strict=True))
OTHER_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#17becf")
PROTOCOL_TITLES = {"nonoverlapping": N_("non-overlapping windows"),
                   "sliding": N_("sliding window")}
LOG_Y_RATIO = 8.0  # a log perplexity axis once the largest value is 8x the smallest
MARKER_COLOR = "red"


MIN_TICKS = 3  # every axis shows at least this many labelled values


def log_ticks(low: float, high: float, min_ticks: int = MIN_TICKS) -> list[float]:
    """Tick values for a log axis spanning [low, high] (both > 0): 1, 2 and 5 per decade, or
    every digit, or for a span of less than one digit evenly spaced round values, whichever is
    the first to give at least `min_ticks` inside the span. Explicit, so that neither plotly
    nor the page's fitting (which keeps only the powers of ten on a short axis) leaves a
    perplexity axis of 2 to 46 with the single label "10"."""
    if not 0 < low < high:
        raise AlibiVizError(f"log_ticks needs 0 < low < high, got {low!r}, {high!r}.")
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for digits in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [d * 10.0**k for k in decades for d in digits if low <= d * 10.0**k <= high]
        if len(ticks) >= min_ticks:
            return ticks
    step = 10.0 ** math.floor(math.log10((high - low) / min_ticks))
    for factor in (5, 2, 1, 0.5, 0.2, 0.1):  # the coarsest round step that gives enough ticks
        ticks = [k * step * factor for k in range(math.ceil(low / (step * factor)),
                                                  math.floor(high / (step * factor)) + 1)]
        if len(ticks) >= min_ticks:
            return [round(t, 12) for t in ticks]
    return [low, (low * high) ** 0.5, high]


def tick_texts(values) -> list[str]:
    """Tick labels in the page's number format, all with the fewest decimals that write every
    value exactly ("5", "10", "20"; "2.8", "3.0", "3.2")."""
    decimals = next((d for d in range(7) if all(abs(v * 10**d - round(v * 10**d)) < 1e-6
                                                 for v in values)), 6)
    return [number(v, decimals) for v in values]


def model_color(name: str, index: int = 0) -> str:
    return MODEL_COLORS.get(name, OTHER_COLORS[index % len(OTHER_COLORS)])


# ----------------------------------------------------------------------------- shipped results

def _one_line_per_model_layout(fig: go.Figure, height: int, title: str) -> go.Figure:
    """The layout of a figure with one line per shipped model: `title`, the legend of models
    under the plot, hover on the nearest point."""
    return fig.update_layout(
        # room for a title that wraps onto two lines above the panels' own titles: the title
        # hangs from the top edge, the panels start below it
        height=height, margin=dict(l=60, r=20, t=110, b=50), hovermode="closest",
        title=dict(text=title, y=0.99, yanchor="top"),
        legend=dict(orientation="h", y=-0.22, yanchor="top", x=0.5, xanchor="center"))


def perplexity_figure(results: dict, live=(), protocols=None, height: int = 420) -> go.Figure:
    """Perplexity vs evaluation length: one line per model, one panel per protocol.

    x: evaluation length in tokens on a log2 axis (128, 256, ..., 4096 evenly spaced). A dashed
    vertical line marks the training length. y: per-token perplexity with its 95% interval as
    error bars (when the results carry `ci95`), the runs trained with other seeds as crosses
    (when the results carry `seeds`), on a log axis when the
    largest value is over LOG_Y_RATIO times the smallest (a collapsing baseline would
    otherwise flatten the others). live: optional dicts {"model", "protocol", "length", "ppl",
    "tokens"} drawn as stars over the shipped lines.
    """
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    protocols = protocols_in(results) if protocols is None else list(protocols)
    if not protocols:
        raise AlibiVizError(_("The results hold no protocol to draw."))
    train_seq_len = results_train_seq_len(results)
    stride = results.get("stride")
    titles = [_("sliding window (stride {stride})").format(stride=stride)
              if p == "sliding" and stride else _(PROTOCOL_TITLES[p]) if p in PROTOCOL_TITLES
              else p for p in protocols]
    hover = _("length %{x}<br>perplexity %{y:.3f} (95% interval %{customdata[1]:.3f}-"
              "%{customdata[2]:.3f})<br>x%{customdata[0]:.2f} of its value at the training "
              "length")
    live_hover = _("length %{x}<br>perplexity %{y:.3f}")
    seed_hover = _("trained with seed %{customdata}<br>length %{x}<br>perplexity %{y:.3f}")
    fig = make_subplots(rows=1, cols=len(protocols), subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.06)
    all_values = []
    for col, protocol in enumerate(protocols, start=1):
        for k, (name, entry) in enumerate(results["models"].items()):
            xs, ys = result_curve(entry, protocol, lengths)
            if not xs:
                continue
            all_values += ys
            base = ys[xs.index(train_seq_len)] if train_seq_len in xs else None
            ratio = [y / base if base else math.nan for y in ys]
            intervals = entry.get("ci95", {}).get(protocol, {})
            low = [intervals.get(str(x), [y, y])[0] for x, y in zip(xs, ys, strict=True)]
            high = [intervals.get(str(x), [y, y])[1] for x, y in zip(xs, ys, strict=True)]
            all_values += low + high
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=model_label(name), legendgroup=name,
                showlegend=col == 1, line=dict(color=model_color(name, k), width=2.5),
                marker=dict(size=7), customdata=list(zip(ratio, low, high, strict=True)),
                error_y=dict(type="data", symmetric=False,
                             array=[h - y for h, y in zip(high, ys, strict=True)],
                             arrayminus=[y - lo for lo, y in zip(low, ys, strict=True)],
                             thickness=1.2, width=3) if intervals else None,
                hovertemplate=(model_label(name) + "<br>" + hover + "<extra>"
                               + protocol_name(protocol) + "</extra>")), row=1, col=col)
            others = [(n, seed, v) for n, runs in seed_spread(results, name, protocol).items()
                      for seed, v in runs.items() if seed != entry.get("seed", 0) and n in xs]
            if others:  # the runs trained with other seeds: the spread the intervals leave out
                all_values += [v for _n, _seed, v in others]
                fig.add_trace(go.Scatter(
                    x=[n for n, _seed, _v in others], y=[v for _n, _seed, v in others],
                    mode="markers", name=_("{model}, other seeds").format(model=model_label(name)),
                    legendgroup=name, showlegend=col == 1, customdata=[s for _n, s, _v in others],
                    marker=dict(symbol="x-thin-open", size=9, color=model_color(name, k),
                                line=dict(width=1.5, color=model_color(name, k))),
                    hovertemplate=(model_label(name) + "<br>" + seed_hover + "<extra>"
                                   + protocol_name(protocol) + "</extra>")), row=1, col=col)
        for k, run in enumerate(r for r in live if r.get("protocol") == protocol):
            all_values.append(float(run["ppl"]))
            fig.add_trace(go.Scatter(
                x=[int(run["length"])], y=[float(run["ppl"])], mode="markers",
                name=_("live: {model} at {length}").format(model=model_label(run["model"]),
                                                            length=number(int(run["length"]))),
                legendgroup="live", showlegend=True,
                marker=dict(symbol="star", size=16, color=model_color(run["model"], k),
                            line=dict(color="black", width=1)),
                hovertemplate=(_("live run, {model}").format(model=model_label(run["model"]))
                               + "<br>" + live_hover + "<br>"
                               + _("{n} tokens scored").format(n=number(int(run["tokens"])))
                               + "<extra>" + protocol_name(protocol) + "</extra>")),
                row=1, col=col)
    if not all_values:
        raise AlibiVizError(_("The results hold no perplexity for these protocols."))
    low, high = min(all_values), max(all_values)
    log_y = high > LOG_Y_RATIO * low
    # y range with some room; the training-length line spans exactly this range
    if log_y:
        y_range = [math.log10(low) - 0.05, math.log10(high) + 0.05]
        line_y = [10 ** y_range[0], 10 ** y_range[1]]
    else:
        pad = 0.06 * (high - low or 1.0)
        y_range = line_y = [low - pad, high + pad]
    if train_seq_len is not None:
        for col in range(1, len(protocols) + 1):
            fig.add_trace(go.Scatter(
                x=[train_seq_len, train_seq_len], y=line_y, mode="lines",
                name=_("training length ({n})").format(n=number(train_seq_len)),
                legendgroup="train", showlegend=col == 1, hoverinfo="skip",
                line=dict(color="gray", width=1.5, dash="dash")), row=1, col=col)
    ticks = [n for n in lengths]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[number(n) for n in ticks],
                     title=_("evaluation length (tokens, log2 scale)"),
                     range=[math.log10(lengths[0]) - 0.08, math.log10(lengths[-1]) + 0.08])
    y_ticks = {}
    if log_y:  # explicit ticks: a short log axis otherwise kept only "10"
        values = log_ticks(*line_y)
        y_ticks = dict(tickvals=values, ticktext=tick_texts(values))
    fig.update_yaxes(type="log" if log_y else "linear", range=y_range, row=1, col=1,
                     title=_("perplexity per token (log scale)") if log_y
                     else _("perplexity per token"), **y_ticks)
    for col in range(2, len(protocols) + 1):
        fig.update_yaxes(type="log" if log_y else "linear", range=y_range, row=1, col=col,
                         **y_ticks)
    return _one_line_per_model_layout(
        fig, height,
        _("Train short, test long: perplexity vs evaluation length (trained at "
          "{n})").format(n=number(train_seq_len)) if train_seq_len
        else _("Train short, test long: perplexity vs evaluation length"))


# ----------------------------------------------------------------------------- attention maps

def attention_color_cap(*maps, quantile: float = 0.99) -> float:
    """Top of the colour scale shared by several maps: the `quantile` of their non-zero values.

    Attention is mostly tiny with a few large entries (often the diagonal); a cap at the 99th
    percentile keeps the long-range structure visible. Hover shows exact values.
    """
    values = np.concatenate([np.asarray(m, dtype=np.float32).ravel() for m in maps])
    values = values[values > 0]
    if values.size == 0:
        return 1.0
    return float(max(np.quantile(values, quantile), 1e-6))


def attention_pair_figure(left, right, left_title: str, right_title: str, *, title: str = "",
                          max_px: int = 512, hover_cells: int = 64, height: int = 520,
                          cmax: float | None = None) -> go.Figure:
    """Two causal attention maps side by side, each (T, T) with its own T, one colour scale.

    Each map is an image max-pooled to at most `max_px` pixels a side (grey above the
    diagonal, where a causal model cannot look), so the payload is bounded whatever T. Hover
    shows exact values at a `hover_cells` x `hover_cells` grid of positions per map. Axes are
    token positions. cmax: top of the colour scale (default: `attention_color_cap`).
    """
    left, right = check_attention(left, "left"), check_attention(right, "right")
    cmax = attention_color_cap(left, right) if cmax is None else float(cmax)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(left_title, right_title),
                        horizontal_spacing=0.08)
    sides = [causal_map_panel(fig, 1, 1, left, max_px=max_px, hover_cells=hover_cells,
                              cmax=cmax, hover_label=left_title.split(":")[0]),
             causal_map_panel(fig, 1, 2, right, max_px=max_px, hover_cells=hover_cells,
                              cmax=cmax, hover_label=right_title.split(":")[0])]
    pooled = [_("{tokens}x{tokens} tokens drawn as {pixels}x{pixels} pixels (block max)").format(
                  tokens=number(T), pixels=number(side))
              for T, side in zip((left.shape[0], right.shape[0]), sides, strict=True)
              if side < T]
    fig.update_layout(
        title=dict(text=title + (f"<br><sup>{'; '.join(pooled)}</sup>" if pooled else "")),
        coloraxis=dict(colorscale=explicit_colorscale(ATTENTION_COLORSCALE), cmin=0.0, cmax=cmax,
                       colorbar=dict(title=dict(text=_("attention<br>(colour capped<br>at "
                                                       "{cap})").format(cap=significant(cmax))),
                                     thickness=14)),
        height=height, margin=dict(l=60, r=20, t=90, b=50), plot_bgcolor="white",
        showlegend=False)
    return fig


def extrapolation_attention_figure(short, long, train_seq_len: int, layer: int, head: int,
                                   slope: float | None = None, **kwargs) -> go.Figure:
    """One ALiBi head on the same text at the training length (`short`, (L, L)) and longer
    (`long`, (T, T), T > L). On the long map a dashed line marks query i = L (queries below it
    see more tokens than any training window had) and a dotted one the distance i - j = L
    (keys left of it are farther back than training ever showed). `layer` and `head` are
    0-based (shown 1-based)."""
    short, long = check_attention(short, "short"), check_attention(long, "long")
    L, T = short.shape[0], long.shape[0]
    train_seq_len = check_int(train_seq_len, "train_seq_len", 1, 1 << 24)
    if slope is not None:
        title = _("Layer {layer}, head {head}, m={m}: the same text at {short} and {long} "
                  "tokens").format(layer=layer + 1, head=head + 1, m=significant(slope),
                                   short=number(L), long=number(T))
    else:
        title = _("Layer {layer}, head {head}: the same text at {short} and {long} "
                  "tokens").format(layer=layer + 1, head=head + 1, short=number(L), long=number(T))
    fig = attention_pair_figure(
        short, long,
        ngettext("{n} token: the training length", "{n} tokens: the training length",
                 L).format(n=number(L)),
        ngettext("{n} token: {factor}x", "{n} tokens: {factor}x", T).format(
            n=number(T), factor=number(T / train_seq_len)),
        title=title, **kwargs)
    if T > train_seq_len:
        fig.add_trace(go.Scatter(x=[0, T - 1], y=[train_seq_len, train_seq_len], mode="lines",
                                 line=dict(color=MARKER_COLOR, width=1.5, dash="dash"),
                                 name=_("query i = {n}").format(n=train_seq_len),
                                 hoverinfo="skip"), row=1, col=2)
        fig.add_trace(go.Scatter(x=[0, T - 1 - train_seq_len], y=[train_seq_len, T - 1], mode="lines",
                                 line=dict(color=MARKER_COLOR, width=1.5, dash="dot"),
                                 name=_("distance i - j = {n}").format(n=train_seq_len),
                                 hoverinfo="skip"),
                      row=1, col=2)
    return fig


# ----------------------------------------------------------------------------- context reach

def check_reach(reach: dict) -> None:
    """Raise AlibiVizError unless `reach` looks like what `python -m experiments.reach` writes."""
    if not isinstance(reach, dict) or not reach.get("models"):
        raise AlibiVizError(_("No reach results: run `python -m experiments.reach` to write "
                              "assets/results/reach.json."))


def reach_figure(reach: dict, train_seq_len: int | None = None, height: int = 420) -> go.Figure:
    """Left: per-token loss of the same held-out targets against the context given (at most
    that many tokens before each target, log2 axis), one line per model. Right: the gain on a
    repeated span (loss on the same span at the same place with nothing to copy, minus loss on
    the repeat, nats per token) against the distance between the two copies, with a 0 line.
    Dashes: on the left the training length; on the right the longest distance whose probe
    fits in the training length. Bars on the left: each context's 95% t interval over the
    passages, where the file has them.
    """
    check_reach(reach)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=(
        _("loss vs context given (same scored tokens)"),
        _("copy at a distance: gain on a repeated span")))
    reach_hover = _("context %{x} tokens<br>loss %{y:.3f} nats/token")
    interval_hover = _("context %{x} tokens<br>loss %{y:.3f} nats/token<br>95% interval "
                       "%{customdata[0]:.3f} to %{customdata[1]:.3f} over the passages")
    copy_hover = _("copies %{x} tokens apart<br>gain %{y:.3f} nats/token<br>repeat "
                   "%{customdata[1]:.3f}, same span with nothing to copy %{customdata[2]:.3f}, "
                   "first copy %{customdata[0]:.3f}")
    contexts, distances = [], []
    for k, (name, entry) in enumerate(reach["models"].items()):
        color = model_color(name, k)
        r, c = entry["reach"], entry["copy"]
        contexts += r["contexts"]
        distances += c["distances"]
        bounds = ReachResult.from_dict(r).mean_intervals()  # (C, 2) or None
        bars = {} if bounds is None else {
            "error_y": dict(type="data", symmetric=False, array=bounds[:, 1] - r["nll"],
                            arrayminus=r["nll"] - bounds[:, 0], color=color, thickness=1.2,
                            width=3),
            "customdata": np.round(bounds, 4).tolist()}
        fig.add_trace(go.Scatter(
            x=r["contexts"], y=r["nll"], mode="lines+markers", name=model_label(name),
            legendgroup=name, line=dict(color=color, width=2.5),
            hovertemplate=(model_label(name) + "<br>" + (reach_hover if bounds is None
                                                         else interval_hover)
                           + "<extra></extra>"), **bars),
            row=1, col=1)
        fig.add_trace(go.Scatter(
            x=c["distances"], y=c["gain"], mode="lines+markers", name=model_label(name),
            legendgroup=name, showlegend=False, line=dict(color=color, width=2.5),
            customdata=list(zip(c["first"], c["repeat"], c.get("control", c["first"]),
                                strict=True)),
            hovertemplate=model_label(name) + "<br>" + copy_hover + "<extra></extra>"),
            row=1, col=2)
    if distances:
        fig.add_trace(go.Scatter(x=[min(distances), max(distances)], y=[0, 0], mode="lines",
                                 line=dict(color="gray", width=1), hoverinfo="skip",
                                 showlegend=False), row=1, col=2)
    if train_seq_len:
        fig.add_vline(x=train_seq_len, line=dict(color="gray", dash="dash", width=1.5),
                      row=1, col=1)
        # right of this distance a probe (prefix, span, filler, span) is longer than training
        fits = train_seq_len - reach.get("copy", {}).get("prefix", 0) - reach.get(
            "copy", {}).get("span", 0)
        if fits > 0:
            fig.add_vline(x=fits, line=dict(color="gray", dash="dash", width=1.5), row=1, col=2)
    for col, values, title in ((1, contexts, _("context given (tokens, log2 scale)")),
                               (2, distances, _("distance between the copies (tokens)"))):
        ticks = sorted(set(values))
        ticks = ticks[::2] if len(ticks) > 6 else ticks  # upright labels in a half-width panel
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[number(v) for v in ticks],
                         title=title, row=1, col=col)
    fig.update_yaxes(title=_("loss (nats per token)"), row=1, col=1)
    fig.update_yaxes(title=_("nothing to copy − repeat (nats per token)"), row=1, col=2)
    return _one_line_per_model_layout(
        fig, height,
        _("How far back do the models really look? (dashes: training length "
          "{n})").format(n=number(train_seq_len)) if train_seq_len
        else _("How far back do the models really look?"))


def win_half_figure(slopes, num_keys: int, distances=None, height: int = 380) -> go.Figure:
    """Per ALiBi head, the content score (logits above every other key) a key d tokens back
    needs to take half of the query's attention under the bias alone
    (`alibi.content_to_win_half`): the retrieval limit, growing by m logits per token."""
    if distances is None:
        distances = np.unique(np.round(np.geomspace(1, num_keys - 1, 64))).astype(int)
    need = content_to_win_half(slopes, distances, num_keys)  # (H, D)
    fig = go.Figure()
    colors = pc.sample_colorscale("Turbo", np.linspace(0.05, 0.95, max(2, len(slopes))))
    hover = _("distance %{x}<br>needs %{y:.1f} logits")
    for h, m in enumerate(slopes):
        fig.add_trace(go.Scatter(x=distances, y=need[h], mode="lines",
                                 name=_("head {h}").format(h=h + 1),
                                 line=dict(color=colors[h], width=2),
                                 hovertemplate=_("head {h} (m={m})").format(h=h + 1, m=significant(m))
                                 + "<br>" + hover + "<extra></extra>"))
    fig.update_xaxes(type="log", title=_("distance of the key (tokens)"))
    fig.update_yaxes(type="log", title=_("content advantage needed (logits)"))
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=70, b=50),
                      title=_("To win half the attention against {n} other keys").format(
                          n=number(num_keys - 1)),
                      legend=dict(orientation="h", y=-0.25, yanchor="top", x=0.5,
                                  xanchor="center"))
    return fig


def copy_heads_figure(values, distance: int, height: int = 300) -> go.Figure:
    """Layer x head heatmap of `models.reach.copy_attention`: how much each head attends from the
    repeat to the token after its twin, the attention that does the copying."""
    values = np.asarray(values, dtype=np.float64)
    layers, heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(1, heads + 1)), y=list(range(1, layers + 1)),
        colorscale=explicit_colorscale(ATTENTION_COLORSCALE), zmin=0.0,
        zmax=max(1e-6, float(values.max())),
        colorbar=dict(title=dict(text=_("attention")), thickness=12),
        hovertemplate=_("layer %{y}, head %{x}<br>attention to the copy: %{z:.3f}")
                      + "<extra></extra>"))
    fig.update_xaxes(title=_("head"), tickvals=list(range(1, heads + 1)))
    fig.update_yaxes(title=_("layer"), tickvals=list(range(1, layers + 1)), autorange="reversed")
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=60, b=40),
                      title=_("Which heads copy: attention from the repeat to its twin's next "
                              "token ({n} tokens back)").format(n=number(distance)))
    return fig



# ----------------------------------------------------------------------------- rescaled slopes

def rescale_figure(results: dict, height: int = 420) -> go.Figure:
    """The shipped ALiBi model with every slope times s (`models.rescale`): perplexity against s
    at each evaluated length, one panel per protocol, a star at s = L_train / L (position
    interpolation); right, the reach curve for each s."""
    protocols = list(results["perplexity"])
    fig = make_subplots(rows=1, cols=len(protocols) + 1, horizontal_spacing=0.13,
                        subplot_titles=[*(_(PROTOCOL_TITLES[p]) for p in protocols),
                                        _("reach, for each s")])
    scales = results["scales"]
    key = [f"{s:.6g}" for s in scales]
    colors = pc.qualitative.Dark2
    shown = []  # every perplexity drawn, for the shared y ticks
    for k, length in enumerate(results["lengths"]):
        interp = interpolation_scale(results["train_seq_len"], length)
        name = _("{length} tokens").format(length=number(length))
        for col, protocol in enumerate(protocols, start=1):
            values = results["perplexity"][protocol][str(length)]
            shown += [values[q] for q in key]
            fig.add_trace(go.Scatter(
                x=scales, y=[values[q] for q in key], mode="lines+markers", name=name,
                legendgroup=name, showlegend=col == 1, line=dict(color=colors[k % len(colors)]),
                hovertemplate=name + "<br>s=%{x:.4g}<br>" + _("perplexity %{y:.3f}")
                + "<extra></extra>"), row=1, col=col)
            if f"{interp:.6g}" in values:
                fig.add_trace(go.Scatter(
                    x=[interp], y=[values[f"{interp:.6g}"]], mode="markers", showlegend=False,
                    marker=dict(symbol="star", size=15, color=colors[k % len(colors)]),
                    hovertemplate=name + "<br>" + _("s = L_train / L = %{x:.4g}") + "<br>"
                    + _("perplexity %{y:.3f}") + "<extra></extra>"), row=1, col=col)
    greys = pc.sample_colorscale("Greys", np.linspace(0.95, 0.35, len(scales)))
    for k, (scale, q) in enumerate(zip(scales, key, strict=True)):
        r = results["reach"][q]
        label = "s = " + scale_label(scale)
        fig.add_trace(go.Scatter(
            x=r["contexts"], y=r["nll"], mode="lines+markers", name=label,
            line=dict(color=greys[k], width=3 if scale == 1 else 1.5),
            hovertemplate=label + "<br>" + _("context %{x} tokens<br>loss %{y:.3f} nats/token")
            + "<extra></extra>"), row=1, col=len(protocols) + 1)
    y_ticks = log_ticks(min(shown), max(shown))  # a short log axis otherwise kept only "10"
    for col in range(1, len(protocols) + 1):
        fig.update_xaxes(type="log", tickvals=scales, ticktext=[scale_label(s) for s in scales],
                         title=_("slope scale s"), row=1, col=col)
        fig.update_yaxes(type="log", title=_("perplexity") if col == 1 else None, row=1, col=col,
                         tickvals=y_ticks, ticktext=tick_texts(y_ticks))
    contexts = results["reach"][key[0]]["contexts"]
    fig.update_xaxes(type="log", tickvals=contexts[::2], ticktext=[number(c) for c in contexts[::2]],
                     title=_("context given (tokens, log2 scale)"), row=1,
                     col=len(protocols) + 1)
    fig.update_yaxes(title=_("loss (nats per token)"), row=1, col=len(protocols) + 1)
    # the stars' meaning in the legend: a title that says it too wraps onto the panels' titles
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip",
                             name=_("s = L_train / L (position interpolation)"),
                             marker=dict(symbol="star", size=12, color="gray")), row=1, col=1)
    return _one_line_per_model_layout(fig, height, _("ALiBi with its slopes rescaled at inference"))


def learned_slopes_figure(results: dict, height: int = 520) -> go.Figure:
    """The learnable-slope variant's slopes over training (`models.layer_slopes`): one panel
    per layer, one line per head on a log2 y axis, each head's initial (official) slope as a
    dotted line of its colour."""
    steps = results["steps"]
    slopes = np.asarray(results["slopes"], dtype=np.float64)  # (steps, layers, heads)
    layers, heads = slopes.shape[1:]
    cols = 2
    fig = make_subplots(rows=math.ceil(layers / cols), cols=cols, shared_xaxes=True,
                        shared_yaxes=True, horizontal_spacing=0.06, vertical_spacing=0.12,
                        subplot_titles=[_("layer {n}").format(n=i + 1) for i in range(layers)])
    colors = pc.sample_colorscale("Plasma", np.linspace(0.0, 0.85, heads))
    for layer in range(layers):
        row, col = divmod(layer, cols)
        for h in range(heads):
            name = _("head {h}").format(h=h + 1)
            fig.add_trace(go.Scatter(
                x=steps, y=slopes[:, layer, h], mode="lines", name=name, legendgroup=name,
                showlegend=layer == 0, line=dict(color=colors[h], width=2),
                hovertemplate=_("layer {n}").format(n=layer + 1) + ", " + name + "<br>"
                + _("step %{x}") + "<br>m=%{y:.4g}<extra></extra>"), row=row + 1, col=col + 1)
            fig.add_trace(go.Scatter(
                x=[steps[0], steps[-1]], y=[slopes[0, layer, h]] * 2, mode="lines",
                showlegend=False, hoverinfo="skip",
                line=dict(color=colors[h], width=1, dash="dot")), row=row + 1, col=col + 1)
    powers = range(0, -11, -2)  # the schedule's own units: 1, 1/4, ..., 1/1024
    fig.update_yaxes(type="log", tickvals=[2.0**k for k in powers],
                     ticktext=["1" if k == 0 else f"1/{2 ** -k}" for k in powers])
    fig.update_yaxes(title=_("slope m (log scale)"), row=math.ceil(layers / cols), col=1)
    fig.update_xaxes(dtick=1000)
    fig.update_xaxes(title=_("training step"), row=math.ceil(layers / cols), col=1)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", hoverinfo="skip",
                             name=_("dotted: the official slope it started from"),
                             line=dict(color="gray", width=1, dash="dot")), row=1, col=1)
    return _one_line_per_model_layout(fig, height, _("Learned slopes during training"))


def learnable_perplexity_figure(results: dict, kind: str, height: int = 400) -> go.Figure:
    """The learnable-slope variant against the fixed-slope model on the held-out text of
    `kind`, at each evaluated length (1x .. 32x the training length). Left: both models'
    non-overlapping perplexity with its 95% interval (the text's own spread, wide). Right:
    learnable / fixed for each protocol with the paired 95% interval (the same tokens, so the
    text's spread cancels), a line at 1."""
    lengths = results["lengths"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=[_(PROTOCOL_TITLES["nonoverlapping"]),
                                        _("learnable / fixed")])
    cells = [cell(results, kind, "nonoverlapping", n) for n in lengths]
    for key, name, color in (("fixed", _("fixed slopes (the shipped ALiBi model)"),
                              MODEL_COLORS["alibi"]),
                             ("learnable", _("learnable slopes"), OTHER_COLORS[0])):
        y = [c[key] for c in cells]
        fig.add_trace(go.Scatter(
            x=lengths, y=y, mode="lines+markers", name=name, line=dict(color=color),
            error_y=dict(type="data", array=[c[f"{key}_ci95"][1] - v for c, v in zip(cells, y, strict=True)],
                         arrayminus=[v - c[f"{key}_ci95"][0] for c, v in zip(cells, y, strict=True)],
                         thickness=1),
            hovertemplate=name + "<br>" + _("%{x} tokens") + "<br>" + _("perplexity %{y:.3f}")
            + "<extra></extra>"), row=1, col=1)
    for k, protocol in enumerate(results["protocols"]):
        ratios = [cell(results, kind, protocol, n)["ratio"] for n in lengths]
        name = protocol_name(protocol)
        fig.add_trace(go.Scatter(
            x=lengths, y=[r[0] for r in ratios], mode="lines+markers", name=name,
            line=dict(color="#444444", dash="solid" if k == 0 else "dash"),
            error_y=dict(type="data", array=[r[2] - r[0] for r in ratios],
                         arrayminus=[r[0] - r[1] for r in ratios], thickness=1),
            hovertemplate=name + "<br>" + _("%{x} tokens") + "<br>" + _("ratio %{y:.3f}")
            + "<extra></extra>"), row=1, col=2)
    fig.add_hline(y=1, line=dict(color="gray", width=1), row=1, col=2)
    for col in (1, 2):
        fig.add_vline(x=results["train_seq_len"], line=dict(color=MARKER_COLOR, dash="dash",
                                                            width=1), row=1, col=col)
        fig.update_xaxes(type="log", tickvals=lengths, ticktext=[number(n) for n in lengths],
                         title=_("evaluation length (tokens)"), row=1, col=col)
    fig.update_yaxes(title=_("perplexity"), row=1, col=1)
    return _one_line_per_model_layout(fig, height, _("Learnable against fixed slopes: {text}")
                                      .format(text=text_kind_in_sentence(kind)))
