"""Plot builders: each returns a plotly Figure; the app only calls st.plotly_chart on it.

Large matrices never travel to the browser as JSON floats (a 16-head x 512-token go.Heatmap grid
is tens of MB per render). Instead each panel is a PNG image (values mapped through a colour
table first, so the colour survives), with one shared colour bar drawn separately, and a
transparent low-resolution heatmap on top that carries the hover values. What is drawn is
evaluated at display resolution (see `display_positions`), so the payload is bounded whatever
the sequence length, and the figure says when and from what size it was downsampled.
"""

from __future__ import annotations

import base64
import functools
import io
import math

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from PIL import Image
from plotly.subplots import make_subplots

from .alibi import (
    SCHEDULES,
    alibi_bias_sampled,
    alibi_slopes,
    attention_span,
    check_mode,
    check_seq_len,
    check_slopes,
    half_life,
    mean_distance,
)
from .errors import AlibiVizError

IMAGE_PIXEL_BUDGET = 600_000  # pixels over all panels of one grid (PNG, a few hundred kB at most)
HOVER_CELL_BUDGET = 24_000  # hover cells over all panels (20 bytes each in the JSON, base64)
MAX_PANEL_PIXELS = 512  # per side: more than a panel is ever drawn wide
MAX_DECAY_CURVES = 16  # more lines than this are unreadable
MASK_RGB = (215, 215, 215)  # light grey: masked cells (a key after its query in causal mode)
BIAS_COLORSCALE = "Viridis"
ATTENTION_COLORSCALE = "Blues"


# ----------------------------------------------------------------------------- sampling

def display_positions(length: int, max_points: int) -> np.ndarray:
    """Positions to evaluate so that `length` positions fit in `max_points` pixels.

    Returns int64 indices, one per pixel, each the position under the pixel's centre; all of
    range(length) when it fits. Pixel p then sits at x = (p + 0.5) * length / k - 0.5.
    """
    k = max(1, min(length, max_points))
    return np.floor((np.arange(k) + 0.5) * length / k).astype(np.int64)


def panel_resolution(length: int, num_panels: int, budget: int, cap: int = MAX_PANEL_PIXELS) -> int:
    """Pixels per side for each of `num_panels` square panels sharing `budget` pixels."""
    return max(2, min(length, cap, int(math.sqrt(budget / max(1, num_panels)))))


def check_heads(heads, num_heads: int) -> list[int]:
    """0-based head indices to draw (None: all), each checked to be in [0, num_heads)."""
    if heads is None:
        return list(range(num_heads))
    heads = list(heads)
    if not heads or not all(isinstance(h, (int, np.integer)) and 0 <= h < num_heads for h in heads):
        raise AlibiVizError(f"heads must be a non-empty list of indices in [0, {num_heads - 1}].")
    return [int(h) for h in heads]


# ----------------------------------------------------------------------------- colour

@functools.lru_cache(maxsize=16)
def color_table(colorscale: str) -> np.ndarray:
    """256 RGB colours sampled evenly from a named plotly colour scale, uint8 (256, 3)."""
    colors = pc.sample_colorscale(colorscale, np.linspace(0, 1, 256), colortype="rgb")
    return np.array([pc.unlabel_rgb(c) for c in colors]).round().astype(np.uint8)


def colorize(values: np.ndarray, cmin: float, cmax: float, colorscale: str) -> np.ndarray:
    """Map a float array (any shape S) to RGB uint8 (*S, 3) through a plotly colour scale.

    Non-finite values (-inf where masked, NaN) become MASK_RGB.
    """
    table = color_table(colorscale)
    scaled = (np.asarray(values, dtype=np.float32) - np.float32(cmin)) * np.float32(255 / ((cmax - cmin) or 1.0))
    finite = np.isfinite(scaled)
    np.clip(scaled, 0, 255, out=scaled)
    scaled[~finite] = 0
    rgb = table[scaled.astype(np.uint8)]  # (*S, 3)
    rgb[~finite] = MASK_RGB
    return rgb


def png_data_uri(rgb: np.ndarray) -> str:
    """Encode an (H, W, 3) uint8 array as a base64 PNG data URI for go.Image(source=...)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


# ----------------------------------------------------------------------------- matrix grids

def grid_columns(num_panels: int) -> int:
    """Columns of a panel mosaic: 4 for a few panels, about square for many."""
    return min(num_panels, max(4, math.ceil(math.sqrt(num_panels * 1.5))))


def matrix_grid_figure(
    images: np.ndarray,
    titles: list[str],
    seq_len: int,
    key_len: int | None = None,
    *,
    cmin: float,
    cmax: float,
    colorscale: str = BIAS_COLORSCALE,
    colorbar_title: str = "",
    hover: np.ndarray | None = None,
    hover_rows: np.ndarray | None = None,
    hover_cols: np.ndarray | None = None,
    hover_label: str = "value",
    panel_ids: list[int] | None = None,
    panel_label: str = "head",
    marker: int | None = None,
    title: str = "",
    panel_px: int = 200,
) -> go.Figure:
    """A mosaic of matrices, one panel per head, drawn as ONE image with one shared colour bar.

    images: (panels, R, C) values at display resolution of a seq_len x key_len matrix (row r is
    the query under pixel row r, see `display_positions`). hover: optional (panels, r, c) values
    at query positions hover_rows and key positions hover_cols, shown on hover with the head,
    (i, j), the distance i - j and the value. marker: a dashed line at this position in every
    panel (e.g. the model's training length). One image and one hover trace keep building and
    drawing fast for 128 heads; panel titles are a single text trace.
    """
    key_len = seq_len if key_len is None else key_len
    panel_ids = list(range(1, len(titles) + 1)) if panel_ids is None else panel_ids
    images = np.asarray(images)
    # Tiny matrices: repeat pixels so every panel is drawn crisp, at least ~96 px wide.
    factor = max(1, math.ceil(96 / max(images.shape[1:])))
    images = images.repeat(factor, axis=1).repeat(factor, axis=2)  # (n, R*f, C*f)
    n, side_r, side_c = images.shape
    if n == 0:
        raise AlibiVizError("Nothing to draw: choose at least one head.")
    columns = grid_columns(n)
    grid_rows = math.ceil(n / columns)
    gap = max(2, max(side_r, side_c) // 10)  # white pixels between panels
    cell_w, cell_h = side_c + gap, side_r + gap
    mosaic = np.full((grid_rows * cell_h, columns * cell_w, 3), 255, dtype=np.uint8)
    rgb = colorize(images, cmin, cmax, colorscale)  # (n, R, C, 3)
    origins = []  # top-left pixel of each panel
    for p in range(n):
        r, c = divmod(p, columns)
        y0, x0 = r * cell_h + gap, c * cell_w
        mosaic[y0:y0 + side_r, x0:x0 + side_c] = rgb[p]
        origins.append((x0, y0))
    fig = go.Figure(go.Image(source=png_data_uri(mosaic), x0=0, dx=1, y0=0, dy=1, hoverinfo="skip"))
    # Panel titles: one text trace above the panels.
    fig.add_trace(go.Scatter(
        x=[x0 + side_c / 2 for x0, _ in origins], y=[y0 - gap / 2 for _, y0 in origins],
        text=titles, mode="text", textfont=dict(size=11), hoverinfo="skip", showlegend=False))
    sx, sy = side_c / key_len, side_r / seq_len  # pixels per position
    if hover is not None:
        hover = np.asarray(hover)
        hr, hc = np.asarray(hover_rows), np.asarray(hover_cols)
        # Centres of hover cells in mosaic pixels; one NaN column/row closes each panel, so
        # plotly does not stretch cells across the gaps.
        hx = np.concatenate([np.append(x0 + (hc + 0.5) * sx - 0.5, x0 + side_c + gap / 2)
                             for x0 in range(0, columns * cell_w, cell_w)])
        hy = np.concatenate([np.append(y0 + gap + (hr + 0.5) * sy - 0.5, y0 + gap + side_r + gap / 2)
                             for y0 in range(0, grid_rows * cell_h, cell_h)])
        z = np.full((hy.size, hx.size), np.nan, dtype=np.float32)
        custom = np.zeros((hy.size, hx.size, 4), dtype=np.int32)  # head, i, j, i - j
        ah, ac = hr.size + 1, hc.size + 1
        offset = key_len - seq_len
        for p in range(n):
            r, c = divmod(p, columns)
            block = hover[p].astype(np.float32)
            z[r * ah:r * ah + hr.size, c * ac:c * ac + hc.size] = np.where(np.isfinite(block), block, np.nan)
            cd = custom[r * ah:r * ah + hr.size, c * ac:c * ac + hc.size]
            cd[..., 0] = panel_ids[p]
            cd[..., 1] = hr[:, None] + offset
            cd[..., 2] = hc[None, :]
            cd[..., 3] = hr[:, None] + offset - hc[None, :]
        fig.add_trace(go.Heatmap(
            x=hx, y=hy, z=z, customdata=custom, opacity=0, coloraxis="coloraxis",
            hoverongaps=False,
            hovertemplate=(panel_label + " %{customdata[0]}<br>query i=%{customdata[1]}"
                           "<br>key j=%{customdata[2]}<br>distance i-j=%{customdata[3]}<br>"
                           + hover_label + "=%{z:.4g}<extra></extra>")))
    else:  # an invisible point carries the colour bar
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False,
                                 hoverinfo="skip", marker=dict(coloraxis="coloraxis", color=[cmin])))
    if marker is not None and 0 < marker < max(seq_len, key_len):
        xs, ys = [], []
        mx, my = marker * sx, (marker - (key_len - seq_len)) * sy  # key and query position
        for x0, y0 in origins:
            xs += [x0 + mx, x0 + mx, None]
            ys += [y0, y0 + side_r, None]
            if 0 < my < side_r:
                xs += [x0, x0 + side_c, None]
                ys += [y0 + my, y0 + my, None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="red", width=1.5, dash="dash")))
    fig.update_xaxes(visible=False, range=[-0.5, columns * cell_w - 0.5])
    fig.update_yaxes(visible=False, range=[grid_rows * cell_h - 0.5, -0.5], scaleanchor="x")
    fig.update_layout(
        coloraxis=dict(colorscale=colorscale, cmin=cmin, cmax=cmax,
                       colorbar=dict(title=dict(text=colorbar_title), thickness=14)),
        title=dict(text=title), height=min(2400, panel_px * grid_rows + 100),
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white", showlegend=False)
    return fig


def bias_display_values(slopes, seq_len: int, mode: str = "causal", heads=None,
                        key_len: int | None = None, budget: int = IMAGE_PIXEL_BUDGET,
                        cap: int = MAX_PANEL_PIXELS):
    """The bias at display resolution: (values (H, R, C), rows, cols, heads).

    rows/cols are the row indices (0..seq_len-1) and key positions evaluated; with key_len the
    query of row r sits at position r + key_len - seq_len. heads: 0-based indices (default all).
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    seq_len = check_seq_len(seq_len)
    key_len = seq_len if key_len is None else check_seq_len(key_len, "key_len")
    if key_len < seq_len:
        raise AlibiVizError(f"key_len ({key_len}) must be >= seq_len ({seq_len}).")
    heads = check_heads(heads, slopes.size)
    side = panel_resolution(key_len, len(heads), budget, cap)
    rows, cols = display_positions(seq_len, side), display_positions(key_len, side)
    values = alibi_bias_sampled(slopes[heads], rows + (key_len - seq_len), cols, mode)  # (H, R, C)
    return values, rows, cols, heads


def bias_grid_figure(slopes, seq_len: int, mode: str = "causal", heads=None,
                     key_len: int | None = None, pixel_budget: int = IMAGE_PIXEL_BUDGET,
                     hover_budget: int = HOVER_CELL_BUDGET) -> go.Figure:
    """Per-head ALiBi bias matrices, evaluated at display resolution (cost independent of L).

    heads: 0-based head indices to draw (default all). The colour scale is shared by all heads,
    so a head with a small slope looks flat next to a steep one, as it is.
    """
    images, rows, cols, heads = bias_display_values(slopes, seq_len, mode, heads, key_len,
                                                    pixel_budget)
    slopes = check_slopes(slopes)
    key_len = seq_len if key_len is None else key_len
    hover, hr, hc, _ = bias_display_values(slopes, seq_len, mode, heads, key_len, hover_budget,
                                           cap=64)
    chosen = slopes[heads]
    cmin = float(-chosen.max() * (key_len - 1)) if key_len > 1 else -1.0
    note = "" if len(rows) == seq_len and len(cols) == key_len else (
        f" (drawn at {len(rows)}x{len(cols)}, downsampled from {seq_len:,}x{key_len:,})")
    masked = " Grey: masked (key after query)." if mode == "causal" else ""
    return matrix_grid_figure(
        images, [f"head {h + 1}: m={slopes[h]:.3g}" for h in heads], seq_len, key_len,
        cmin=cmin, cmax=0.0, colorbar_title="bias", hover=hover, hover_rows=hr, hover_cols=hc,
        hover_label="bias", panel_ids=[h + 1 for h in heads],
        title=f"ALiBi bias B<sub>ij</sub> ({mode}){note}.{masked}",
    )


# ----------------------------------------------------------------------------- slopes

def slope_schedule_figure(num_heads: int, max_bias: float = 8.0, schedules=SCHEDULES,
                          selected: str = "official") -> go.Figure:
    """Slopes m_h against head index h for each schedule, log2 y axis.

    Lines join heads in head order, so a non-monotonic schedule shows as a zigzag.
    """
    fig = go.Figure()
    heads = np.arange(1, num_heads + 1)
    for name in schedules:
        slopes = alibi_slopes(num_heads, name, max_bias)
        fig.add_trace(go.Scatter(
            x=heads, y=slopes, mode="lines+markers", name=name,
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


def decay_figure(slopes, seq_len: int, mode: str = "causal", heads=None,
                 log_distance: bool | None = None) -> go.Figure:
    """Three panels per head: bias vs distance, bias-only attention vs distance, half-life & span.

    The attention panel is for a query with seq_len - 1 keys behind it (causal) or on each side
    (symmetric), i.e. the last query of the sequence, evaluated in closed form.
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    seq_len = check_seq_len(seq_len)
    heads = check_heads(heads, slopes.size)
    log_distance = seq_len > 256 if log_distance is None else log_distance
    d = decay_distances(seq_len - 1, points=200, log=log_distance)
    bars = heads
    if len(heads) > MAX_DECAY_CURVES:  # curves for an even subset; bars for every head
        heads = [heads[k] for k in np.linspace(0, len(heads) - 1, MAX_DECAY_CURVES).round().astype(int)]
    chosen = slopes[heads]
    r = np.exp(-chosen)
    # Normaliser of exp(-m d) over d = 0..seq_len-1 (counting both sides when symmetric).
    total = -np.expm1(-chosen * seq_len) / -np.expm1(-chosen)
    if mode == "symmetric":
        total = 2 * total - 1
    fig = make_subplots(rows=1, cols=3, subplot_titles=(
        "bias -m·d vs distance d", "attention with no content signal", "half-life and 90% span"))
    colors = pc.sample_colorscale("Turbo", np.linspace(0.05, 0.95, max(2, len(heads))))
    for k, h in enumerate(heads):
        style = dict(color=colors[k], width=1.5)
        fig.add_trace(go.Scatter(x=d, y=-chosen[k] * d, mode="lines", name=f"head {h + 1}",
                                 line=style, legendgroup=str(h),
                                 hovertemplate="d=%{x}<br>bias=%{y:.4g}"), row=1, col=1)
        fig.add_trace(go.Scatter(x=d, y=r[k] ** d / total[k], mode="lines", name=f"head {h + 1}",
                                 line=style, legendgroup=str(h), showlegend=False,
                                 hovertemplate="d=%{x}<br>weight per key=%{y:.4g}"), row=1, col=2)
    labels = [f"h{h + 1}" for h in bars]
    fig.add_trace(go.Bar(x=labels, y=half_life(slopes[bars]), name="half-life ln2/m",
                         marker_color="#4c78a8"), row=1, col=3)
    fig.add_trace(go.Bar(x=labels, y=attention_span(slopes[bars], 0.9, mode, seq_len),
                         name="90% span",
                         marker_color="#f58518"), row=1, col=3)
    fig.update_xaxes(title="distance d = i - j (tokens)", row=1, col=1)
    fig.update_xaxes(title="distance d (tokens)", row=1, col=2)
    if log_distance:
        for c in (1, 2):
            fig.update_xaxes(type="log", row=1, col=c)
    fig.update_yaxes(type="log", title="tokens", row=1, col=3)
    fig.update_yaxes(title="weight of one key", row=1, col=2)
    fig.update_layout(height=380, barmode="group", margin=dict(l=50, r=20, t=60, b=50),
                      title=f"Decay ({mode}, query with {seq_len - 1:,} keys "
                            f"{'behind it' if mode == 'causal' else 'on each side'})"
                            + (f"; curves for {len(heads)} of {len(bars)} heads"
                               if len(bars) > len(heads) else ""))
    return fig


def head_summary(slopes, seq_len: int, mode: str = "causal") -> list[dict]:
    """One row per head: slope, half-life, 90% span and mean distance (tokens) at this length."""
    slopes = check_slopes(slopes)
    spans = attention_span(slopes, 0.9, mode, seq_len)
    means = mean_distance(slopes, mode, seq_len)
    return [
        {"head": h + 1, "slope m": float(m), "log2 m": float(np.log2(m)),
         "half-life (tokens)": float(hl), "90% span (tokens)": int(s), "mean distance": float(md)}
        for h, (m, hl, s, md) in enumerate(zip(slopes, half_life(slopes), spans, means, strict=True))
    ]
