"""A figure spec (the plain dict plotly.js reads) drawn as a still picture: SVG and HTML made on
the server, with no script in the browser.

A phone parses and runs plotly.js for seconds before its first chart: a page whose charts are
off (`alibi_viz_app.ui.charts_shown`) shows each figure this way instead. It draws what the
project's figures use: line, marker and text scatters (error bars, dashes, fills to zero or
to the previous line), bars, heatmaps and images (as PNGs), linear and log axes with their
titles, subplots (axis domains, equal scales), shapes (lines), annotations, and, in HTML that
wraps to any width, the title, the legend and the colour bar. No hover and no zoom: those are
what plotly.js is for.

    html = still.figure_html(spec, width=360)    # one <div>, to put in a page as it is
"""

from __future__ import annotations

import base64
import html
import math
import re

import numpy as np
import plotly.colors as pc

from alibi_viz.figures.render import (
    PAGE_WIDTH_PX,
    bar_ticks,
    explicit_colorscale,
    plain_text,
    png_data_uri,
)
from alibi_viz.i18n import number

FONT_PX = 12
TICK_CHARS_PX = 6.6          # a tick label's character, at FONT_PX
COLORWAY = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692",
            "#B6E880", "#FF97FF", "#FECB52")  # plotly.js's default trace colours, in its order
DASHES = {"dash": "6,4", "dot": "2,3", "dashdot": "6,3,2,3", "longdash": "10,4"}
MARKER_SYMBOLS_X = {"x", "x-thin", "x-thin-open", "x-open", "cross", "cross-thin"}
STILL_CLASS = "avz-still"    # the <div> around every still figure (tests and benchmarks find it)

# Inline styles (a page may sanitise a <style> away): the title and the legend wrap to the box.
BOX_STYLE = f"max-width:100%;font-size:{FONT_PX}px;color:#262730"
TITLE_STYLE = "font-size:15px;margin:0 0 4px;overflow-wrap:anywhere"
IMAGE_STYLE = "display:block;width:100%;height:auto"
LEGEND_STYLE = "display:flex;flex-wrap:wrap;gap:2px 12px;margin-top:4px"
BAR_STYLE = "max-width:420px;margin-top:6px"
BAR_TICKS_STYLE = "display:flex;justify-content:space-between;font-size:11px"


# ----------------------------------------------------------------------------- reading a spec

def values(array) -> np.ndarray:
    """A spec's array (a list, a numpy array or plotly.js's typed array {"dtype", "bdata",
    "shape"}) as a numpy array; None for none."""
    if array is None:
        return None
    if isinstance(array, dict) and "bdata" in array:
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(array, dtype=object if _mixed(array) else None)


def _mixed(array) -> bool:
    return isinstance(array, list | tuple) and any(isinstance(v, str) for v in array)


def _numbers(array) -> np.ndarray:
    """A spec's array as float64, None and text as NaN."""
    out = values(array)
    if out is None:
        return None
    if out.dtype == object or out.dtype.kind in "US":
        return np.array([v if isinstance(v, int | float) and v is not None else np.nan
                         for v in out.ravel()], dtype=np.float64).reshape(out.shape)
    return out.astype(np.float64)


def _text(node) -> str:
    """A title or text node ({"text": ...} or a string) as plain text."""
    if isinstance(node, dict):
        node = node.get("text")
    return plain_text(str(node)) if node else ""


def _axis_name(ref: str, letter: str) -> str:
    """"x2" -> "xaxis2"; "x" -> "xaxis"."""
    return letter + "axis" + (ref[1:] if ref and len(ref) > 1 else "")


def _error_bounds(t: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(low ends, high ends) of a trace's shown error bars (error_y arrays), in data values."""
    error = t.get("error_y") or {}
    if error.get("array") is None or error.get("visible", True) is False:
        return None
    raw, up = _numbers(t.get("y")), _numbers(error["array"])
    down = _numbers(error.get("arrayminus", error["array"]))
    if raw is None or up is None or down is None or min(len(up), len(down)) < len(raw):
        return None
    return raw - down[:len(raw)], raw + up[:len(raw)]


# ----------------------------------------------------------------------------- axes

class Axis:
    """One axis: its data range, its pixel span and how values map between them."""

    def __init__(self, spec: dict, letter: str):
        self.spec = spec or {}
        self.letter = letter
        self.log = self.spec.get("type") == "log"
        self.categories: list = []
        self.low = self.high = None          # data range (log10 for a log axis)
        self.reversed = self.spec.get("autorange") == "reversed"
        self.visible = self.spec.get("visible", True) is not False
        self.span = (0.0, 1.0)               # pixels: where low and high land

    def category(self, value) -> float:
        if value not in self.categories:
            self.categories.append(value)
        return float(self.categories.index(value))

    def data(self, array) -> np.ndarray:
        """A trace's coordinates on this axis in axis units (categories by order, log10)."""
        raw = values(array)
        if raw is None:
            return None
        if raw.dtype == object or raw.dtype.kind in "US":
            numeric = [isinstance(v, int | float) or v is None for v in raw.ravel()]
            if not all(numeric):
                return np.array([np.nan if v is None else self.category(v) for v in raw.ravel()])
        out = _numbers(raw)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.where(out > 0, np.log10(out), np.nan)
        return out

    def extend(self, low: float, high: float) -> None:
        if not (np.isfinite(low) and np.isfinite(high)):
            return
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    def settle(self, padded: bool) -> None:
        """The range: the spec's own, else the data's (5% more each side for points)."""
        given = self.spec.get("range")
        if given is not None and len(given) == 2 and None not in given:
            low, high = float(given[0]), float(given[1])
            self.reversed = low > high
            self.low, self.high = min(low, high), max(low, high)
            return
        if self.low is None:
            self.low, self.high = (0.0, 1.0) if not self.log else (0.0, 1.0)
        if self.high - self.low < 1e-12:
            self.low, self.high = self.low - 0.5, self.high + 0.5
        elif padded:
            pad = (self.high - self.low) * 0.05
            self.low, self.high = self.low - pad, self.high + pad

    def px(self, v):
        a, b = self.span
        if self.reversed:
            a, b = b, a
        return a + (np.asarray(v, dtype=np.float64) - self.low) / (self.high - self.low) * (b - a)

    def ticks(self) -> list[tuple[float, str]]:
        """(axis value, label) of the ticks: the spec's tickvals and ticktext, else round ones
        as many as fit the axis's pixels; on an x axis, every k-th where the labels would
        touch."""
        pixels = abs(self.span[1] - self.span[0])
        count = max(2, min(8, int(pixels // (60 if self.letter == "x" else 40))))
        if "tickvals" in self.spec and self.spec["tickvals"] is not None:
            vals = list(values(self.spec["tickvals"]))
            texts = self.spec.get("ticktext")
            texts = [plain_text(str(t)) for t in texts] if texts is not None else [
                _tick_label(v) for v in vals]
            vals = [math.log10(v) if self.log and v > 0 else v for v in vals]
            ticks = [(v, t) for v, t in zip(vals, texts, strict=False)
                     if self.low - 1e-9 <= v <= self.high + 1e-9]
        elif self.categories:
            ticks = [(float(k), plain_text(str(c))) for k, c in enumerate(self.categories)]
        elif self.log:
            ticks = self._log_ticks(count)
        elif isinstance(self.spec.get("dtick"), int | float) and self.spec["dtick"] > 0:
            step, start = float(self.spec["dtick"]), float(self.spec.get("tick0") or 0)
            first = math.ceil((self.low - start) / step - 1e-9)
            ticks = [(start + k * step, _tick_label(start + k * step)) for k in
                     range(first, math.floor((self.high - start) / step + 1e-9) + 1)][:200]
        else:
            ticks = _round_ticks(self.low, self.high, count)
        if self.letter == "x" and ticks:
            room = max(len(label) for _v, label in ticks) * TICK_CHARS_PX + 8
            step = max(1, math.ceil(len(ticks) / max(1, pixels // room)))
            ticks = ticks[::step]
        return ticks

    def _log_ticks(self, count: int) -> list[tuple[float, str]]:
        first, last = math.ceil(self.low - 1e-9), math.floor(self.high + 1e-9)
        decades = list(range(first, last + 1))
        ticks = [(float(d), _tick_label(10.0 ** d)) for d in decades]
        if len(decades) < 2:  # under a decade: 1, 2, 5 times the powers of ten
            ticks = [(math.log10(m * 10.0 ** d), _tick_label(m * 10.0 ** d))
                     for d in range(first - 1, last + 1) for m in (1, 2, 5)
                     if self.low <= math.log10(m * 10.0 ** d) <= self.high]
        step = max(1, math.ceil(len(ticks) / count))
        return ticks[::step]


def _round_ticks(low: float, high: float, count: int) -> list[tuple[float, str]]:
    """About `count` ticks at multiples of 1, 2 or 5 times a power of ten in [low, high]."""
    raw = (high - low) / max(1, count - 1)
    step = 10.0 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw * 0.8)
    first = math.ceil(low / step - 1e-9)
    return [(k * step, _tick_label(k * step))
            for k in range(first, math.floor(high / step + 1e-9) + 1)]


def _tick_label(v: float) -> str:
    """A tick's number in the page's language, with the decimals it needs and no more."""
    if abs(v) < 1e-12:
        return "0"
    magnitude = abs(v)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    decimals = next((d for d in range(7) if abs(round(v, d) - v) < 1e-9 * max(1.0, magnitude)), 6)
    return number(float(v), decimals)


# ----------------------------------------------------------------------------- drawing

def _color(value, fallback: str) -> str:
    return value if isinstance(value, str) and value else fallback


def _path(xs: np.ndarray, ys: np.ndarray) -> str:
    """An SVG path through the points, broken where a coordinate is missing."""
    parts, pen = [], "M"
    for x, y in zip(xs, ys, strict=True):
        if not (np.isfinite(x) and np.isfinite(y)):
            pen = "M"
            continue
        parts.append(f"{pen}{x:.1f},{y:.1f}")
        pen = "L"
    return "".join(parts)


def _marker(x: float, y: float, size: float, color: str, symbol: str) -> str:
    r = max(1.5, size / 2)
    if symbol in MARKER_SYMBOLS_X:
        return (f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},'
                f'{y + r:.1f}L{x + r:.1f},{y - r:.1f}" stroke="{color}" stroke-width="1.5"/>')
    if "square" in symbol:
        return (f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}"'
                f' fill="{color}"/>')
    if "diamond" in symbol or "star" in symbol:
        return (f'<path d="M{x:.1f},{y - r * 1.3:.1f}L{x + r:.1f},{y:.1f}L{x:.1f},'
                f'{y + r * 1.3:.1f}L{x - r:.1f},{y:.1f}Z" fill="{color}"/>')
    fill = "none" if symbol.endswith("open") else color
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" stroke="{color}"/>'


def _colors_of(colorscale, z: np.ndarray, zmin: float, zmax: float) -> np.ndarray:
    """RGB uint8 of `z` through a spec's colour scale (a list of stops or a name), NaN white."""
    if isinstance(colorscale, str):
        colorscale = explicit_colorscale(colorscale)
    if not colorscale:
        colorscale = explicit_colorscale("Viridis")
    table = np.array([pc.unlabel_rgb(c) for c in pc.sample_colorscale(
        [[float(p), c if str(c).startswith("rgb") else "rgb({},{},{})".format(*pc.hex_to_rgb(c))]
         for p, c in colorscale], np.linspace(0, 1, 256), colortype="rgb")]).round()
    table = np.vstack([table, [255, 255, 255]]).astype(np.uint8)
    scaled = (z - zmin) * (255 / ((zmax - zmin) or 1.0))
    index = np.clip(np.nan_to_num(scaled, nan=0), 0, 255).astype(np.int64)
    index[~np.isfinite(z)] = 256
    return table[index]


def _bar_html(colorscale, cmin: float, cmax: float, title: str) -> str:
    if isinstance(colorscale, str):
        colorscale = explicit_colorscale(colorscale)
    stops = ", ".join(f"{c} {float(p) * 100:.0f}%" for p, c in colorscale)
    ticks = "".join(f"<span>{html.escape(label)}</span>"
                    for _at, label in bar_ticks(cmin, cmax, 4))
    head = f"<div>{html.escape(title)}</div>" if title else ""
    return (f'<div class="avz-bar" style="{BAR_STYLE}">{head}<div style="height:12px;background:'
            f'linear-gradient(to right, {stops})"></div><div style="{BAR_TICKS_STYLE}">{ticks}</div>'
            "</div>")


def figure_html(spec: dict, width: int | None = None) -> str:
    """`spec` drawn as one <div class="avz-still">: the title in HTML, the plot as an SVG image
    (`width` px wide in its own units, default the width its texts were fitted to, and scaled
    to its box), then the legend and the colour bars in HTML. Raises nothing for a trace type
    it does not draw: it leaves it out."""
    layout = spec.get("layout") or {}
    W, H = size(spec, width)
    traces = shown_traces(spec)
    axes, area = plot_axes(spec, W, H)
    lowest = max((max(a.span) for a in axes.values() if a.letter == "y"), default=area[2])
    if lowest < area[2] - 20:  # equal scales left the plot's bottom empty: the picture ends
        H -= int(area[2] - lowest)  # where the lowest axis does, its labels under it

    parts = [f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
             f'xmlns="http://www.w3.org/2000/svg" font-size="{FONT_PX}" '
             f'font-family="sans-serif" fill="#262730">']
    parts += _grids_and_axes(axes, layout)
    legend, bars = [], []
    for k, t in enumerate(traces):
        ax, ay = _axis(axes, layout, t.get("xaxis"), "x"), _axis(axes, layout, t.get("yaxis"), "y")
        color = _trace_color(t, k)
        parts += _trace(t, ax, ay, color, traces[k - 1] if k else None, W / fitted_width(spec))
        if t.get("showlegend", True) is not False and t.get("name") and (
                layout.get("showlegend", True) is not False) and t.get("type", "scatter") in (
                "scatter", "bar"):
            label = plain_text(str(t["name"]))
            if all(label != seen for seen, _c in legend):
                legend.append((label, color))
        bar = _trace_bar(t, layout)
        if bar and bar not in bars:
            bars.append(bar)
    parts += _shapes(layout.get("shapes") or [], axes, layout, area)
    parts += _annotations(layout.get("annotations") or [], axes, layout, area)
    parts.append("</svg>")
    title = _text(layout.get("title"))
    out = [f'<div class="{STILL_CLASS}" style="{BOX_STYLE}">']
    if title:
        out.append(f'<div class="avz-title" style="{TITLE_STYLE}">{html.escape(title)}</div>')
    # The SVG as an image of the page: a page's HTML sanitiser (Streamlit's st.html) drops
    # inline <svg>, never an <img> with a data URI; the maps inside it are data URIs too.
    svg = base64.b64encode("".join(parts).encode()).decode("ascii")
    out.append(f'<img src="data:image/svg+xml;base64,{svg}" alt="{html.escape(title)}" '
               f'style="{IMAGE_STYLE}">')
    if len(legend) > 1 or (legend and layout.get("showlegend")):
        out.append(f'<div class="avz-legend" style="{LEGEND_STYLE}">' + "".join(
            f'<span style="overflow-wrap:anywhere"><span style="color:{c}">&#9632;</span> '
            f"{html.escape(label)}</span>" for label, c in legend) + "</div>")
    out += bars
    out.append("</div>")
    return "".join(out)


def fitted_width(spec: dict) -> int:
    """The width the figure's texts were fitted to (`render.figure_spec` records it)."""
    meta = (spec.get("layout") or {}).get("meta")
    return int(meta.get("fitted_width", PAGE_WIDTH_PX)) if isinstance(meta, dict) else PAGE_WIDTH_PX


def size(spec: dict, width: int | None = None) -> tuple[int, int]:
    """The SVG's own width and height: `width` (default the width the figure's texts were
    fitted to), and the figure's height, shrunk with the width down to 60% of it."""
    layout = spec.get("layout") or {}
    fitted = fitted_width(spec)
    W = int(width or layout.get("width") or fitted)
    spec_h = float(layout.get("height") or 450)
    return W, int(max(spec_h * min(1.0, max(0.6, W / fitted)), 180))


def shown_traces(spec: dict) -> list[dict]:
    """The traces plotly.js draws (not those hidden, nor those shown in the legend only)."""
    return [t for t in spec.get("data") or [] if t.get("visible", True) is True]


def plot_axes(spec: dict, W: int, H: int) -> tuple[dict[str, Axis], tuple]:
    """Every axis of `spec` ({"xaxis": Axis, "y2axis"...}) with its range and its pixels in a
    W x H picture, and the plot area (x from, x to, y of its bottom, y of its top)."""
    layout = spec.get("layout") or {}
    traces = shown_traces(spec)
    axes: dict[str, Axis] = {}

    for name in layout:
        if re.fullmatch(r"[xy]axis\d*", name):
            _axis(axes, layout, name[0] + name[5:], name[0])
    padded = set()
    for t in traces:
        ax, ay = _axis(axes, layout, t.get("xaxis"), "x"), _axis(axes, layout, t.get("yaxis"), "y")
        kind = t.get("type", "scatter")
        if kind == "image":
            w, h = _image_size(t)
            x0, dx = float(t.get("x0", 0)), float(t.get("dx", 1))
            y0, dy = float(t.get("y0", 0)), float(t.get("dy", 1))
            ax.extend(x0 - dx / 2, x0 + dx * (w - 0.5))
            ay.extend(y0 - dy / 2, y0 + dy * (h - 0.5))
            if (layout.get(_axis_name(t.get("yaxis", "y"), "y")) or {}).get("range") is None:
                ay.reversed = True  # plotly.js draws an image's first row at the top
        elif kind == "heatmap":
            z = _numbers(t.get("z"))
            if z is None or z.ndim != 2:
                continue
            xs = ax.data(t["x"]) if t.get("x") is not None else np.arange(z.shape[1], dtype=float)
            ys = ay.data(t["y"]) if t.get("y") is not None else np.arange(z.shape[0], dtype=float)
            for a, v in ((ax, xs), (ay, ys)):
                finite = v[np.isfinite(v)]
                if finite.size:
                    half = (finite.max() - finite.min()) / max(1, finite.size - 1) / 2
                    a.extend(finite.min() - half, finite.max() + half)
        else:
            xs, ys = _xy(t, ax, ay)
            if kind == "bar":
                ys = np.concatenate([ys, [0.0]])
                half = 0.4 if ax.categories else _bar_half(xs)
                xs = np.concatenate([xs - half, xs + half])
            bounds = _error_bounds(t)
            if bounds is not None:
                ys = np.concatenate([ys, ay.data(bounds[0]), ay.data(bounds[1])])
            fx, fy = xs[np.isfinite(xs)], ys[np.isfinite(ys)]
            if fx.size:
                ax.extend(fx.min(), fx.max())
                padded.add(id(ax))
            if fy.size:
                ay.extend(fy.min(), fy.max())
                padded.add(id(ay))
    for a in axes.values():
        a.settle(id(a) in padded)
    # the plot area: room for the tick labels and the axis titles, and above it for the
    # subplots' titles (annotations at the top of the paper)
    y_label = max((len(label) for a in axes.values() if a.letter == "y" and a.visible
                   for _v, label in a.ticks()), default=0)
    titled = {letter: any(_text(a.spec.get("title")) for a in axes.values()
                          if a.letter == letter and a.visible) for letter in "xy"}
    top_lines = max((len(re.split(r"<br\s*/?>", str(n.get("text") or "")))
                     for n in layout.get("annotations") or []
                     if _paper(n, "y") and float(n.get("y", 0) or 0) >= 0.95), default=0)
    left = 8 + (y_label * TICK_CHARS_PX + 6 if y_label else 0) + (18 if titled["y"] else 0)
    bottom = 8 + (18 if any(a.visible for a in axes.values() if a.letter == "x") else 0) + (
        18 if titled["x"] else 0)
    area = (left, W - 10, H - bottom, 8 + 15 * top_lines)
    for a in axes.values():
        d0, d1 = (a.spec.get("domain") or [0, 1])
        if a.letter == "x":
            a.span = (area[0] + d0 * (area[1] - area[0]), area[0] + d1 * (area[1] - area[0]))
        else:
            a.span = (area[2] - d0 * (area[2] - area[3]), area[2] - d1 * (area[2] - area[3]))
    for a in axes.values():  # equal scales (a square map stays square): the wider one shrinks
        anchor = a.spec.get("scaleanchor")
        if a.letter == "y" and isinstance(anchor, str) and re.fullmatch(r"x\d*", anchor):
            _equal_scale(_axis(axes, layout, anchor, "x"), a)
    return axes, area


def _paper(note: dict, letter: str) -> bool:
    return str(note.get(letter + "ref", "paper")).startswith("paper")


def _image_size(t: dict) -> tuple[int, int]:
    source = str(t.get("source") or "")
    if source.startswith("data:image/png;base64,"):
        head = base64.b64decode(source[22:22 + 44])
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    z = values(t.get("z"))
    return (z.shape[1], z.shape[0]) if z is not None and z.ndim >= 2 else (1, 1)


def _bar_half(xs: np.ndarray) -> float:
    finite = np.unique(xs[np.isfinite(xs)])
    return float(np.min(np.diff(finite))) * 0.4 if finite.size > 1 else 0.4


def _xy(t: dict, ax: Axis, ay: Axis) -> tuple[np.ndarray, np.ndarray]:
    y = t.get("y")
    ys = ay.data(y) if y is not None else np.array([])
    x = t.get("x")
    xs = ax.data(x) if x is not None else np.arange(len(ys), dtype=float)
    n = min(len(xs), len(ys))
    return xs[:n].astype(np.float64), ys[:n].astype(np.float64)


def _equal_scale(ax: Axis, ay: Axis) -> None:
    per_x = abs(ax.span[1] - ax.span[0]) / (ax.high - ax.low)
    per_y = abs(ay.span[1] - ay.span[0]) / (ay.high - ay.low)
    if per_x > per_y:
        width = per_y * (ax.high - ax.low)
        ax.span = (ax.span[0], ax.span[0] + width)
    else:
        height = per_x * (ay.high - ay.low)
        ay.span = (ay.span[1] + height, ay.span[1])


def _trace_color(t: dict, k: int) -> str:
    line = t.get("line") or {}
    marker = t.get("marker") or {}
    return _color(line.get("color"), _color(marker.get("color"), COLORWAY[k % len(COLORWAY)]))


def _grids_and_axes(axes: dict[str, Axis], layout: dict) -> list[str]:
    out = []
    for a in axes.values():
        if not a.visible:
            continue
        other = [b for b in axes.values() if b.letter != a.letter]
        cross = other[0] if other else None
        name = a.spec.get("anchor")
        if name and name != "free":
            cross = axes.get(_axis_name(name, "y" if a.letter == "x" else "x"), cross)
        if cross is None:
            continue
        c0, c1 = sorted(cross.span)
        for v, label in a.ticks():
            p = float(a.px(v))
            if a.letter == "x":
                out.append(f'<line x1="{p:.1f}" x2="{p:.1f}" y1="{c0:.1f}" y2="{c1:.1f}" '
                           'stroke="#e5e5ea"/>')
                out.append(f'<text x="{p:.1f}" y="{c1 + 14:.1f}" text-anchor="middle">'
                           f"{html.escape(label)}</text>")
            else:
                out.append(f'<line x1="{c0:.1f}" x2="{c1:.1f}" y1="{p:.1f}" y2="{p:.1f}" '
                           'stroke="#e5e5ea"/>')
                out.append(f'<text x="{c0 - 4:.1f}" y="{p + 4:.1f}" text-anchor="end">'
                           f"{html.escape(label)}</text>")
        title = _text(a.spec.get("title"))
        lo, hi = sorted(a.span)
        if title and a.letter == "x":
            out.append(f'<text x="{(lo + hi) / 2:.1f}" y="{c1 + 30:.1f}" text-anchor="middle">'
                       f"{html.escape(title)}</text>")
        elif title:
            x = c0 - 10 - max((len(label) for _v, label in a.ticks()), default=0) * TICK_CHARS_PX
            before = [max(b.span) for b in axes.values() if b.letter == "x" and max(b.span) < c0]
            if before and x - 8 < max(before):
                continue  # no room between this subplot and the one to its left
            out.append(f'<text transform="translate({x:.1f},{(lo + hi) / 2:.1f}) rotate(-90)" '
                       f'text-anchor="middle">{html.escape(title)}</text>')
    return out


def _trace(t: dict, ax: Axis, ay: Axis, color: str, previous: dict | None,
           scale: float = 1.0) -> list[str]:
    kind = t.get("type", "scatter")
    opacity = t.get("opacity", 1)
    if opacity == 0:
        return []
    if kind == "image":
        w, h = _image_size(t)
        source = t.get("source")
        if not source:
            z = values(t.get("z"))
            if z is None:
                return []
            source = png_data_uri(np.ascontiguousarray(z[..., :3].astype(np.uint8)))
        x0, dx = float(t.get("x0", 0)), float(t.get("dx", 1))
        y0, dy = float(t.get("y0", 0)), float(t.get("dy", 1))
        return [_image(source, ax, ay, x0 - dx / 2, x0 + dx * (w - 0.5),
                       y0 - dy / 2, y0 + dy * (h - 0.5))]
    if kind == "heatmap":
        z = _numbers(t.get("z"))
        if z is None or z.ndim != 2 or z.size == 0:
            return []
        finite = z[np.isfinite(z)]
        zmin = t.get("zmin", float(finite.min()) if finite.size else 0.0)
        zmax = t.get("zmax", float(finite.max()) if finite.size else 1.0)
        rgb = _colors_of(t.get("colorscale"), z, float(zmin), float(zmax))
        xs = ax.data(t["x"]) if t.get("x") is not None else np.arange(z.shape[1], dtype=float)
        ys = ay.data(t["y"]) if t.get("y") is not None else np.arange(z.shape[0], dtype=float)
        hx = (xs[-1] - xs[0]) / max(1, len(xs) - 1) / 2 if len(xs) > 1 else 0.5
        hy = (ys[-1] - ys[0]) / max(1, len(ys) - 1) / 2 if len(ys) > 1 else 0.5
        return [_image(png_data_uri(np.ascontiguousarray(rgb)), ax, ay, xs[0] - hx, xs[-1] + hx,
                       ys[0] - hy, ys[-1] + hy)]
    xs, ys = _xy(t, ax, ay)
    px, py = ax.px(xs), ay.px(ys)
    out = []
    if kind == "bar":
        base = float(ay.px(0.0 if not ay.log else ay.low))
        half = (0.4 if ax.categories else _bar_half(xs)) * abs(ax.span[1] - ax.span[0]) / (
            ax.high - ax.low)
        marker = t.get("marker") or {}
        colors = marker.get("color")
        for k, (x, y) in enumerate(zip(px, py, strict=True)):
            if not (np.isfinite(x) and np.isfinite(y)):
                continue
            fill = colors[k] if isinstance(colors, list | tuple) and k < len(colors) else color
            out.append(f'<rect x="{x - half:.1f}" y="{min(y, base):.1f}" width="{2 * half:.1f}" '
                       f'height="{abs(base - y):.1f}" fill="{_color(fill, color)}"/>')
        return out
    mode = t.get("mode") or ("lines+markers" if len(xs) < 20 else "lines")
    line = t.get("line") or {}
    fill = t.get("fill")
    if fill in ("tozeroy", "tonexty", "toself"):
        points = _path(px, py)
        if points:
            if fill == "tonexty" and previous is not None:
                bx, by = _xy(previous, ax, ay)
                back = _path(ax.px(bx)[::-1], ay.px(by)[::-1]).replace("M", "L", 1)
                d = points + back + "Z"
            elif fill == "toself":
                d = points + "Z"
            else:
                base = float(ay.px(max(0.0, ay.low)))
                finite = np.isfinite(px) & np.isfinite(py)
                d = (points + f"L{px[finite][-1]:.1f},{base:.1f}L{px[finite][0]:.1f},{base:.1f}Z"
                     if finite.any() else "")
            out.append(f'<path d="{d}" fill="{_color(t.get("fillcolor"), color)}" '
                       'fill-opacity="0.25" stroke="none"/>')
    bounds = _error_bounds(t)
    if bounds is not None:
        lows, highs = ay.px(ay.data(bounds[0])), ay.px(ay.data(bounds[1]))
        for x, lo, hi in zip(px, lows, highs, strict=False):
            if np.isfinite(x) and np.isfinite(lo) and np.isfinite(hi):
                out.append(f'<path d="M{x:.1f},{lo:.1f}L{x:.1f},{hi:.1f}M{x - 3:.1f},{lo:.1f}'
                           f'L{x + 3:.1f},{lo:.1f}M{x - 3:.1f},{hi:.1f}L{x + 3:.1f},{hi:.1f}" '
                           f'stroke="{color}" stroke-width="1"/>')
    if "lines" in mode and line.get("width", 2) != 0:
        d = _path(px, py)
        if d:
            dash = DASHES.get(str(line.get("dash") or ""), "")
            dash = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<path d="{d}" fill="none" stroke="{color}" '
                       f'stroke-width="{float(line.get("width", 2)):.1f}"{dash}/>')
    if "markers" in mode:
        marker = t.get("marker") or {}
        if marker.get("coloraxis") and not any(np.isfinite(xs)):
            return out  # an invisible point that carries a colour bar
        size = marker.get("size", 6)
        size = float(size) if isinstance(size, int | float) else 6.0
        symbol = str(marker.get("symbol") or "circle")
        mcolor = _color(marker.get("color"), color)
        for x, y in zip(px, py, strict=True):
            if np.isfinite(x) and np.isfinite(y):
                out.append(_marker(float(x), float(y), size, mcolor, symbol))
    if "text" in mode and t.get("text") is not None:
        texts = t["text"] if isinstance(t["text"], list | tuple | np.ndarray) else [t["text"]] * len(xs)
        # texts placed among the data (a mosaic's panel titles) were fitted to the figure's
        # width: narrower, they shrink with it
        size = max(7.0, float((t.get("textfont") or {}).get("size", FONT_PX)) * min(1.0, scale))
        for x, y, text in zip(px, py, texts, strict=False):
            if np.isfinite(x) and np.isfinite(y) and text:
                lines = re.split(r"<br\s*/?>", str(text))
                out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" '
                           f'font-size="{size}">' + "".join(
                               f'<tspan x="{x:.1f}" dy="{"0" if i == 0 else "1.15em"}">'
                               f"{html.escape(plain_text(s))}</tspan>"
                               for i, s in enumerate(lines)) + "</text>")
    return out


def _image(source: str, ax: Axis, ay: Axis, x_low: float, x_high: float, y_low: float,
           y_high: float) -> str:
    xa, xb = sorted((float(ax.px(x_low)), float(ax.px(x_high))))
    ya, yb = sorted((float(ay.px(y_low)), float(ay.px(y_high))))
    flip = ""
    if ay.px(y_low) > ay.px(y_high):  # the image's first row at the bottom: flip it
        flip = f' transform="translate(0,{ya + yb:.1f}) scale(1,-1)"'
    flip_x = ""
    if ax.px(x_low) > ax.px(x_high):
        flip_x = f' transform="translate({xa + xb:.1f},0) scale(-1,1)"'
    return (f'<image href="{source}" x="{xa:.1f}" y="{ya:.1f}" width="{xb - xa:.1f}" '
            f'height="{yb - ya:.1f}" preserveAspectRatio="none" '
            f'style="image-rendering: pixelated"{flip or flip_x}/>')


def _trace_bar(t: dict, layout: dict) -> str | None:
    marker = t.get("marker") or {}
    name = marker.get("coloraxis") or t.get("coloraxis")
    if name:
        axis = layout.get(name) or {}
        if axis.get("showscale", True) is False or axis.get("cmin") is None:
            return None
        title = _text((axis.get("colorbar") or {}).get("title"))
        return _bar_html(axis.get("colorscale"), float(axis["cmin"]), float(axis["cmax"]), title)
    if t.get("type") == "heatmap" and t.get("opacity", 1) != 0 and t.get("showscale", True):
        z = _numbers(t.get("z"))
        finite = z[np.isfinite(z)] if z is not None else np.array([])
        if not finite.size:
            return None
        title = _text((t.get("colorbar") or {}).get("title"))
        return _bar_html(t.get("colorscale") or "Viridis", float(t.get("zmin", finite.min())),
                         float(t.get("zmax", finite.max())), title)
    return None


def _axis(axes: dict, layout: dict, ref: str | None, letter: str) -> Axis:
    """The Axis a trace's reference names ("x2": layout's xaxis2), made on first use."""
    name = _axis_name(ref or letter, letter)
    if name not in axes:
        axes[name] = Axis(layout.get(name), letter)
    return axes[name]


def _ref_axis(axes: dict, layout: dict, ref: str, letter: str) -> Axis:
    """The axis a shape's or annotation's reference ("x2", "x2 domain", "paper") places it on;
    for "paper", the first one."""
    return _axis(axes, layout, letter if ref.startswith("paper") else ref.split()[0], letter)


def _ref_px(ref: str, v: float, a: Axis, area: tuple, letter: str) -> float:
    """A shape's or annotation's coordinate in pixels: on an axis, or a fraction of the plot
    area ("paper") or of an axis's domain ("x domain")."""
    if ref.startswith("paper"):
        return area[0] + v * (area[1] - area[0]) if letter == "x" else area[2] - v * (area[2] - area[3])
    if ref.endswith(" domain"):
        lo, hi = a.span
        return lo + v * (hi - lo)
    return float(a.px(math.log10(v) if a.log and v > 0 else v))


def _shapes(shapes: list, axes: dict, layout: dict, area: tuple) -> list[str]:
    out = []
    for s in shapes:
        if s.get("type", "line") not in ("line", "rect") or s.get("visible", True) is False:
            continue
        xref, yref = str(s.get("xref", "x")), str(s.get("yref", "y"))
        ax, ay = _ref_axis(axes, layout, xref, "x"), _ref_axis(axes, layout, yref, "y")
        try:
            x0, x1 = (_ref_px(xref, float(s[k]), ax, area, "x") for k in ("x0", "x1"))
            y0, y1 = (_ref_px(yref, float(s[k]), ay, area, "y") for k in ("y0", "y1"))
        except (KeyError, TypeError, ValueError):
            continue
        line = s.get("line") or {}
        color = _color(line.get("color"), "#444")
        dash = DASHES.get(str(line.get("dash") or ""), "")
        dash = f' stroke-dasharray="{dash}"' if dash else ""
        if s.get("type") == "rect":
            out.append(f'<rect x="{min(x0, x1):.1f}" y="{min(y0, y1):.1f}" '
                       f'width="{abs(x1 - x0):.1f}" height="{abs(y1 - y0):.1f}" '
                       f'fill="{_color(s.get("fillcolor"), "none")}" fill-opacity="'
                       f'{s.get("opacity", 0.2)}" stroke="none"/>')
        else:
            out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                       f'stroke="{color}" stroke-width="{float(line.get("width", 1.5)):.1f}"{dash}/>')
    return out


def _annotations(notes: list, axes: dict, layout: dict, area: tuple) -> list[str]:
    """The figure's notes (subplot titles among them), each line shrunk to the width of the
    subplot it stands over (or of the plot), at 8 px at least."""
    out = []
    anchors = {"left": "start", "right": "end", "center": "middle", "auto": "middle"}
    for n in notes:
        lines = [plain_text(line) for line in re.split(r"<br\s*/?>", str(n.get("text") or ""))]
        lines = [line for line in lines if line.strip()]
        if not lines or n.get("visible", True) is False:
            continue
        xref, yref = str(n.get("xref", "x")), str(n.get("yref", "y"))
        ax, ay = _ref_axis(axes, layout, xref, "x"), _ref_axis(axes, layout, yref, "y")
        try:
            fx = float(n.get("x", 0.5))
            x = _ref_px(xref, fx, ax, area, "x")
            y = _ref_px(yref, float(n.get("y", 0.5)), ay, area, "y")
        except (TypeError, ValueError):
            continue
        width = area[1] - area[0]
        if xref.startswith("paper"):
            for a in axes.values():
                d0, d1 = a.spec.get("domain") or [0, 1]
                if a.letter == "x" and d0 <= fx <= d1 and (d1 - d0) < 1:
                    width = abs(a.span[1] - a.span[0]) + 8
        size = float((n.get("font") or {}).get("size", FONT_PX))
        size = max(8.0, min(size, width / (max(len(line) for line in lines) * 0.55)))
        anchor = str(n.get("yanchor", "middle"))
        first = {"bottom": -4 - (len(lines) - 1) * size * 1.15, "top": size}.get(
            anchor, 4 - (len(lines) - 1) * size * 0.575)
        out.append(f'<text x="{x:.1f}" y="{y + first:.1f}" text-anchor="'
                   f'{anchors.get(str(n.get("xanchor", "center")), "middle")}" '
                   f'font-size="{size:.1f}">' + "".join(
                       f'<tspan x="{x:.1f}" dy="{0 if k == 0 else size * 1.15:.1f}">'
                       f"{html.escape(line)}</tspan>" for k, line in enumerate(lines))
                   + "</text>")
    return out
