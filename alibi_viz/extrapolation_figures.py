"""Figures for "train short, test long" (the Extrapolation lab) and for the Lesson page.

Three groups, in the order the pages use them:

* Shipped results (`assets/results/extrapolation.json`, written by `alibi_viz.evaluate`):
  `perplexity_figure` draws perplexity against evaluation length for every model, one panel per
  protocol, with the training length marked; `results_table` and `extrapolation_summary` give
  the same numbers as rows and as plain sentences computed from the data (whichever model wins
  at a length is the one named, so RoPE is said to be better in distribution when it is).
  `live_token_cap` bounds a live re-run so that it stays interactive.
* Attention at two lengths: `attention_pair_figure` puts two attention maps side by side as
  images (max-pooled to at most `max_px` pixels a side, so a 4,096-token map costs the same as
  a 512-token one) with a sparse hover grid of exact values; `extrapolation_attention_figure`
  uses it for one head of the ALiBi model at the training length and at 8x that length, with
  the training length marked.
* Lesson figures: `score_pipeline_figure` (where the bias enters the score of one query),
  `implied_attention_map` (what a slope alone does to a whole map) and `enlarge_figure`
  (larger fonts and height for a projector).

The ALiBi facts used here (Press, Smith & Lewis 2021, arXiv:2108.12409): the bias -m (i - j)
is added to the scaled scores q.k / sqrt(d) before the softmax, not itself scaled, and the
model has no position embeddings.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .alibi import alibi_bias, check_int, check_seq_len, check_slopes
from .errors import AlibiVizError
from .plots import ATTENTION_COLORSCALE, colorize, display_positions, png_data_uri

MODEL_LABELS = {"alibi": "ALiBi", "learned": "learned absolute", "rope": "RoPE"}
MODEL_COLORS = {"alibi": "#1f77b4", "learned": "#ff7f0e", "rope": "#2ca02c"}
OTHER_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
PROTOCOL_TITLES = {"nonoverlapping": "non-overlapping windows", "sliding": "sliding window"}
LOG_Y_RATIO = 8.0  # a log perplexity axis once the largest value is 8x the smallest

LIVE_CELL_BUDGET = 2048 * 4096  # attention cells (query x key) a live run may compute
LIVE_MAX_TOKENS = 4096          # scored tokens of a live run, whatever the length
MARKER_COLOR = "red"


def model_label(name: str) -> str:
    return MODEL_LABELS.get(name, name)


def model_color(name: str, index: int = 0) -> str:
    return MODEL_COLORS.get(name, OTHER_COLORS[index % len(OTHER_COLORS)])


# ----------------------------------------------------------------------------- shipped results

def check_results(results) -> None:
    """Raise AlibiVizError unless `results` looks like what `alibi_viz.evaluate` writes:
    {"lengths": [...], "models": {name: {"perplexity": {protocol: {"128": ppl, ...}}}}}."""
    if not isinstance(results, dict) or not results.get("models") or not results.get("lengths"):
        raise AlibiVizError("No extrapolation results: run `python -m alibi_viz.evaluate` to "
                            "write assets/results/extrapolation.json.")
    for name, entry in results["models"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("perplexity"), dict):
            raise AlibiVizError(f"The results for model {name!r} have no perplexities; "
                                "re-run `python -m alibi_viz.evaluate`.")


def train_length(results: dict) -> int | None:
    """The training length the results were measured against (the first model's), or None."""
    for entry in results.get("models", {}).values():
        if entry.get("train_seq_len"):
            return int(entry["train_seq_len"])
    return None


def protocols_in(results: dict) -> list[str]:
    """Protocols with at least one perplexity, in the order the evaluator uses."""
    found = []
    for entry in results["models"].values():
        for protocol in entry["perplexity"]:
            if protocol not in found:
                found.append(protocol)
    order = {"nonoverlapping": 0, "sliding": 1}
    return sorted(found, key=lambda p: (order.get(p, 2), p))


def _curve(entry: dict, protocol: str, lengths) -> tuple[list[int], list[float]]:
    values = entry["perplexity"].get(protocol, {})
    xs = [n for n in lengths if str(n) in values and values[str(n)] is not None]
    return xs, [float(values[str(n)]) for n in xs]


def perplexity_figure(results: dict, live=(), protocols=None, height: int = 420) -> go.Figure:
    """Perplexity vs evaluation length: one line per model, one panel per protocol.

    x: evaluation length in tokens on a log2 axis (128, 256, ..., 4096 evenly spaced). A dashed
    vertical line marks the training length. y: per-token perplexity, on a log axis when the
    largest value is over LOG_Y_RATIO times the smallest (a collapsing baseline would
    otherwise flatten the others). live: optional dicts {"model", "protocol", "length", "ppl",
    "tokens"} drawn as stars over the shipped lines.
    """
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    protocols = protocols_in(results) if protocols is None else list(protocols)
    if not protocols:
        raise AlibiVizError("The results hold no protocol to draw.")
    train_len = train_length(results)
    stride = results.get("stride")
    titles = [PROTOCOL_TITLES.get(p, p) + (f" (stride {stride})" if p == "sliding" and stride
                                           else "") for p in protocols]
    fig = make_subplots(rows=1, cols=len(protocols), subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.06)
    all_values = []
    for col, protocol in enumerate(protocols, start=1):
        for k, (name, entry) in enumerate(results["models"].items()):
            xs, ys = _curve(entry, protocol, lengths)
            if not xs:
                continue
            all_values += ys
            base = ys[xs.index(train_len)] if train_len in xs else None
            ratio = [y / base if base else math.nan for y in ys]
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=model_label(name), legendgroup=name,
                showlegend=col == 1, line=dict(color=model_color(name, k), width=2.5),
                marker=dict(size=7), customdata=ratio,
                hovertemplate=(f"{model_label(name)}<br>length %{{x}}<br>perplexity %{{y:.3f}}"
                               "<br>x%{customdata:.2f} of its value at the training length"
                               "<extra>" + protocol + "</extra>")), row=1, col=col)
        for k, run in enumerate(r for r in live if r.get("protocol") == protocol):
            all_values.append(float(run["ppl"]))
            fig.add_trace(go.Scatter(
                x=[int(run["length"])], y=[float(run["ppl"])], mode="markers",
                name=f"live: {model_label(run['model'])} at {int(run['length'])}",
                legendgroup="live", showlegend=True,
                marker=dict(symbol="star", size=16, color=model_color(run["model"], k),
                            line=dict(color="black", width=1)),
                hovertemplate=(f"live run, {model_label(run['model'])}<br>length %{{x}}<br>"
                               f"perplexity %{{y:.3f}}<br>{int(run['tokens']):,} tokens scored"
                               "<extra>" + protocol + "</extra>")), row=1, col=col)
    if not all_values:
        raise AlibiVizError("The results hold no perplexity for these protocols.")
    low, high = min(all_values), max(all_values)
    log_y = high > LOG_Y_RATIO * low
    # y range with some room; the training-length line spans exactly this range
    if log_y:
        y_range = [math.log10(low) - 0.05, math.log10(high) + 0.05]
        line_y = [10 ** y_range[0], 10 ** y_range[1]]
    else:
        pad = 0.06 * (high - low or 1.0)
        y_range = line_y = [low - pad, high + pad]
    if train_len is not None:
        for col in range(1, len(protocols) + 1):
            fig.add_trace(go.Scatter(
                x=[train_len, train_len], y=line_y, mode="lines", name=f"training length ({train_len})",
                legendgroup="train", showlegend=col == 1, hoverinfo="skip",
                line=dict(color="gray", width=1.5, dash="dash")), row=1, col=col)
    ticks = [n for n in lengths]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{n:,}" for n in ticks],
                     title="evaluation length (tokens, log2 scale)",
                     range=[math.log10(lengths[0]) - 0.08, math.log10(lengths[-1]) + 0.08])
    fig.update_yaxes(type="log" if log_y else "linear", range=y_range, row=1, col=1,
                     title="perplexity per token" + (" (log scale)" if log_y else ""))
    for col in range(2, len(protocols) + 1):
        fig.update_yaxes(type="log" if log_y else "linear", range=y_range, row=1, col=col)
    fig.update_layout(
        height=height, margin=dict(l=60, r=20, t=80, b=50), hovermode="closest",
        title=dict(text="Train short, test long: perplexity vs evaluation length"
                   + (f" (trained at {train_len})" if train_len else "")),
        legend=dict(orientation="h", y=-0.22, yanchor="top", x=0.5, xanchor="center"))
    return fig


def results_table(results: dict) -> list[dict]:
    """One row per model and protocol: {"model", "protocol", "<length>": perplexity, ...}."""
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    rows = []
    for name, entry in results["models"].items():
        for protocol in protocols_in(results):
            xs, ys = _curve(entry, protocol, lengths)
            if not xs:
                continue
            row = {"model": model_label(name), "protocol": protocol}
            values = dict(zip(xs, ys, strict=True))
            row.update({f"{n:,}": values.get(n) for n in lengths})
            rows.append(row)
    return rows


def _rank(results: dict, protocol: str, length: int) -> list[tuple[str, float]]:
    found = []
    for name, entry in results["models"].items():
        value = entry["perplexity"].get(protocol, {}).get(str(length))
        if value is not None:
            found.append((name, float(value)))
    return sorted(found, key=lambda item: item[1])


def extrapolation_summary(results: dict, protocol: str = "nonoverlapping") -> list[str]:
    """Plain sentences on what the numbers say under `protocol`, computed from the data:
    who is best at the training length, how each model moves from there to the longest
    length, and which model is lowest at each length. Empty if the protocol or the training
    length is missing."""
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    train_len = train_length(results)
    if train_len is None or train_len not in lengths:
        return []
    at_train = _rank(results, protocol, train_len)
    if not at_train:
        return []
    order = ", then ".join(f"{model_label(n)} {v:.3f}" for n, v in at_train)
    sentences = [f"At the training length ({train_len} tokens) the lowest perplexity is "
                 f"{model_label(at_train[0][0])}'s: {order}."]
    longest = lengths[-1]
    at_long = dict(_rank(results, protocol, longest))
    start = dict(at_train)
    moves = []
    for name, value in sorted(at_long.items(), key=lambda item: item[1]):
        if name in start:
            ratio = value / start[name]
            change = (f"{(ratio - 1) * 100:+.1f}%" if ratio < 2 else f"x{ratio:.1f}")
            moves.append(f"{model_label(name)} {value:.3f} ({change})")
    if moves:
        sentences.append(f"At {longest:,} tokens ({longest // train_len}x the training length): "
                         + ", ".join(moves) + ", relative to each model's own value at "
                         f"{train_len}.")
    runs = []  # [model, first length, last length] where that model is lowest
    for n in lengths:
        ranked = _rank(results, protocol, n)
        if not ranked:
            continue
        if runs and runs[-1][0] == ranked[0][0]:
            runs[-1][2] = n
        else:
            runs.append([ranked[0][0], n, n])
    sentences.append("Lowest perplexity by length: " + ", ".join(
        f"{model_label(name)} at {a:,}" + (f"-{b:,}" if b != a else "") for name, a, b in runs)
        + ".")
    return sentences


def live_token_cap(length: int, protocol: str = "nonoverlapping", stride: int = 64,
                   cell_budget: int = LIVE_CELL_BUDGET, max_tokens: int = LIVE_MAX_TOKENS) -> int:
    """Most tokens a live run scores at `length`, so its attention costs about `cell_budget`
    query x key cells (one 2,048-token window pair; eager attention time grows with cells).

    nonoverlapping: each scored token costs `length` cells; sliding: each window of `length`
    tokens costs length^2 cells and scores `stride` tokens. Never less than one full window
    (`length` tokens, or `stride` for sliding: the length is the point of the run) and never
    more than `max_tokens`.
    """
    length = check_seq_len(length, "length")
    stride = min(check_int(stride, "stride", 1, 1 << 24), length)
    if protocol == "nonoverlapping":
        cap = cell_budget // length
        return int(min(max(cap, length), max(max_tokens, length)))
    if protocol == "sliding":
        windows = max(1, cell_budget // (length * length))
        return int(min(windows * stride, max_tokens))
    raise AlibiVizError(f"protocol must be 'nonoverlapping' or 'sliding', got {protocol!r}.")


def live_plan(length: int, protocol: str, tokens: int, stride: int = 64) -> dict:
    """Keyword arguments for `evaluate.perplexity` that score `tokens` targets at `length`.

    nonoverlapping: targets 1..tokens. sliding: targets length..length + tokens - 1, so every
    scored token sees a full window (between length - stride and length tokens of context).
    """
    tokens = check_int(tokens, "tokens", 1, 1 << 24)
    if protocol == "nonoverlapping":
        return {"max_tokens": tokens}
    if protocol == "sliding":
        return {"max_tokens": length - 1 + tokens, "score_from": length, "stride": stride}
    raise AlibiVizError(f"protocol must be 'nonoverlapping' or 'sliding', got {protocol!r}.")


# ----------------------------------------------------------------------------- attention maps

def check_attention(attention, name: str = "attention") -> np.ndarray:
    """An attention map as float32 (T, T), T >= 1; else AlibiVizError."""
    attention = np.asarray(attention, dtype=np.float32)
    if attention.ndim != 2 or attention.shape[0] != attention.shape[1] or attention.shape[0] < 1:
        raise AlibiVizError(f"{name} must be a square (T, T) map, got shape {attention.shape}.")
    return attention


def pool_max(attention, max_px: int) -> tuple[np.ndarray, int]:
    """Max-pool a (T, T) map by f = ceil(T / max_px) so that it fits max_px pixels a side.

    Returns (image (ceil(T/f), ceil(T/f)) float32, f). Max rather than mean so that a sharp
    diagonal or a single strong key stays visible when 8 positions share a pixel.
    """
    attention = check_attention(attention)
    T = attention.shape[0]
    f = max(1, math.ceil(T / max(1, max_px)))
    if f == 1:
        return attention, 1
    n = math.ceil(T / f)
    padded = np.zeros((n * f, n * f), dtype=np.float32)
    padded[:T, :T] = attention
    return padded.reshape(n, f, n, f).max(axis=(1, 3)), f  # (n, f, n, f) -> (n, n)


def mass_beyond(attention, distance: int) -> float:
    """Mean share of attention on keys more than `distance` tokens back (i - j > distance),
    over the queries that have such keys (i > distance); NaN if none do."""
    attention = check_attention(attention)
    T = attention.shape[0]
    distance = check_int(distance, "distance", 0, 1 << 24)
    if T <= distance + 1:
        return math.nan
    far = np.tril(attention, k=-(distance + 1))  # keeps j <= i - distance - 1
    return float(far[distance + 1:].sum(axis=1).mean())


def mean_attention_distance(attention) -> float:
    """Mean over queries of the expected distance i - j under each query's attention row, in
    tokens (rows are assumed to sum to 1)."""
    attention = check_attention(attention)
    T = attention.shape[0]
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]  # (T, T): i - j
    return float((np.clip(distance, 0, None) * attention).sum(axis=1).mean())


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


def implied_attention_map(slope: float, seq_len: int) -> np.ndarray:
    """Causal attention of the ALiBi bias alone (all q.k equal), float32 (T, T):
    row i is softmax over j <= i of -m (i - j), i.e. weights proportional to e^(-m (i - j))."""
    bias = alibi_bias(check_slopes([slope]), check_seq_len(seq_len))[0]  # (T, T), -inf above
    bias -= bias.max(axis=1, keepdims=True)
    weights = np.exp(bias)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


def _panel(fig, attention, col: int, max_px: int, hover_cells: int, cmax: float,
           hover_label: str) -> int:
    """Draw one map as an image in column `col` (token coordinates on both axes), plus an
    invisible heatmap of exact values at a grid of positions for hover. Returns the pool factor."""
    T = attention.shape[0]
    image, f = pool_max(attention, max_px)
    mask = np.triu(np.ones(image.shape, dtype=bool), k=1)  # pixels wholly above the diagonal
    shown = np.where(mask, np.nan, image)
    rgb = colorize(shown, 0.0, cmax, ATTENTION_COLORSCALE)  # (n, n, 3)
    # pixel p covers positions p*f .. p*f + f - 1: its centre is at p*f + (f - 1) / 2
    fig.add_trace(go.Image(source=png_data_uri(rgb), x0=(f - 1) / 2, dx=f, y0=(f - 1) / 2, dy=f,
                           hoverinfo="skip"), row=1, col=col)
    pos = display_positions(T, hover_cells)  # same positions for rows and columns: the
    values = attention[np.ix_(pos, pos)]       # diagonal is always among the hover cells
    distance = pos[:, None] - pos[None, :]
    values = np.where(distance >= 0, values, np.nan)
    fig.add_trace(go.Heatmap(
        x=pos, y=pos, z=values, customdata=distance, opacity=0, coloraxis="coloraxis",
        hoverongaps=False,
        hovertemplate=(hover_label + "<br>query i=%{y}<br>key j=%{x}<br>distance i-j="
                       "%{customdata}<br>attention=%{z:.4f}<extra></extra>")), row=1, col=col)
    fig.update_xaxes(range=[-0.5, T - 0.5], row=1, col=col, title="key position j",
                     constrain="domain")
    fig.update_yaxes(range=[T - 0.5, -0.5], row=1, col=col, title="query position i",
                     scaleanchor="x" if col == 1 else f"x{col}", constrain="domain")
    return f


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
    factors = [_panel(fig, left, 1, max_px, hover_cells, cmax, left_title.split(":")[0]),
               _panel(fig, right, 2, max_px, hover_cells, cmax, right_title.split(":")[0])]
    pooled = [f"{T}x{T} tokens drawn as {math.ceil(T / f)}x{math.ceil(T / f)} pixels (max of "
              f"{f}x{f})" for T, f in zip((left.shape[0], right.shape[0]), factors, strict=True)
              if f > 1]
    fig.update_layout(
        title=dict(text=title + (f"<br><sup>{'; '.join(pooled)}</sup>" if pooled else "")),
        coloraxis=dict(colorscale=ATTENTION_COLORSCALE, cmin=0.0, cmax=cmax,
                       colorbar=dict(title=dict(text=f"attention<br>(colour capped<br>at {cmax:.3g})"),
                                     thickness=14)),
        height=height, margin=dict(l=60, r=20, t=90, b=50), plot_bgcolor="white",
        showlegend=False)
    return fig


def extrapolation_attention_figure(short, long, train_len: int, layer: int, head: int,
                                   slope: float | None = None, **kwargs) -> go.Figure:
    """One ALiBi head on the same text at the training length (`short`, (L, L)) and longer
    (`long`, (T, T), T > L). On the long map a dashed line marks query i = L (queries below it
    see more tokens than any training window had) and a dotted one the distance i - j = L
    (keys left of it are farther back than training ever showed). layer/head are 1-based."""
    short, long = check_attention(short, "short"), check_attention(long, "long")
    L, T = short.shape[0], long.shape[0]
    train_len = check_int(train_len, "train_len", 1, 1 << 24)
    m = f", m={slope:.3g}" if slope is not None else ""
    fig = attention_pair_figure(
        short, long, f"{L} tokens: the training length", f"{T:,} tokens: {T / train_len:g}x",
        title=f"Layer {layer}, head {head}{m}: the same text at {L} and {T:,} tokens", **kwargs)
    if T > train_len:
        fig.add_trace(go.Scatter(x=[0, T - 1], y=[train_len, train_len], mode="lines",
                                 line=dict(color=MARKER_COLOR, width=1.5, dash="dash"),
                                 name=f"query i = {train_len}", hoverinfo="skip"), row=1, col=2)
        fig.add_trace(go.Scatter(x=[0, T - 1 - train_len], y=[train_len, T - 1], mode="lines",
                                 line=dict(color=MARKER_COLOR, width=1.5, dash="dot"),
                                 name=f"distance i - j = {train_len}", hoverinfo="skip"),
                      row=1, col=2)
    return fig


def head_vs_bias_figure(attention, slope: float, layer: int, head: int, **kwargs) -> go.Figure:
    """A real head's attention (T, T) beside what its ALiBi slope alone would give (all
    q.k equal): the difference is what the content term does. layer/head are 1-based."""
    attention = check_attention(attention)
    implied = implied_attention_map(slope, attention.shape[0])
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


def enlarge_figure(fig: go.Figure, scale: float = 1.5, min_height: int = 450) -> go.Figure:
    """A copy of `fig` for a projector: every font (base, titles, subplot titles, text
    traces) and the height multiplied by `scale`."""
    if not (isinstance(scale, (int, float)) and 0.5 <= scale <= 4):
        raise AlibiVizError(f"scale must be in [0.5, 4], got {scale!r}.")
    fig = go.Figure(fig)

    def grow(size, default):
        return round((size or default) * scale)

    layout = fig.layout
    fig.update_layout(font=dict(size=grow(layout.font.size, 12)),
                      title_font_size=grow(layout.title.font.size, 17),
                      height=grow(layout.height, min_height))
    for annotation in layout.annotations:  # subplot titles
        annotation.font.size = grow(annotation.font.size, 16)
    for trace in fig.data:
        textfont = getattr(trace, "textfont", None)
        if textfont is not None and textfont.size:
            textfont.size = grow(textfont.size, 12)
    return fig
