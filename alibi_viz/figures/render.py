"""The drawing kit every figure module uses: big matrices as images with a hover layer.

Large matrices never travel to the browser as JSON floats (a 16-head x 512-token go.Heatmap grid
is tens of MB per render). Instead a matrix is drawn as a PNG image (values mapped through a
colour table first, so the colour survives) with a transparent, low-resolution heatmap on top
that carries the hover values, and an invisible point that carries the colour bar. What is drawn
is evaluated or pooled to display resolution first, so the payload is bounded whatever the
sequence length.

In the order a figure uses it (the reductions to pixels come from `alibi_viz.display`):
  explicit_colorscale                                  a named scale as images and bars use it
  colorize, png_data_uri                               values -> RGB -> a PNG data URI
  image_panel, causal_map_panel                        one image + hover panel in a subplot
  matrix_grid_figure                                   a mosaic of panels as ONE image
  MapSet, map_set, bar_ticks                           maps as 8-bit codes, for a browser canvas
  plain_text                                           a plotly title as plain text
Masked cells (a key after its query) are NaN in the values and MASK_RGB in the image.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import math
import re
from dataclasses import dataclass, field

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from PIL import Image

from alibi_viz.display import (
    display_positions,
    masked_pixels,
    pool_max,
    quantize,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, number, plotly_separators

MASK_RGB = (215, 215, 215)  # light grey: masked cells (a key after its query in causal mode)
MASK_COLOR = "rgb({},{},{})".format(*MASK_RGB)  # the same grey as a plotly colour
BIAS_COLORSCALE = "Viridis"
ATTENTION_COLORSCALE = "Blues"


# ----------------------------------------------------------------------------- colour

@functools.lru_cache(maxsize=16)
def _stops(name: str) -> tuple[tuple[float, str], ...]:
    return tuple((float(position), color if color.startswith("rgb")
                  else "rgb({},{},{})".format(*pc.hex_to_rgb(color)))
                 for position, color in pc.get_colorscale(name))


def explicit_colorscale(name: str) -> list[list]:
    """plotly.py's colour scale `name` written out, [[position, "rgb(r,g,b)"], ...]: the one
    definition both the images (`colorize`) and the colour bars use. A figure spec carries this
    list, never the bare name: plotly.js has scales of its own under some of the same names
    that differ (its "Blues" runs dark to light, plotly.py's light to dark) and does not know
    others ("RdYlBu", "RdBu_r"), so a bar drawn from a name contradicted the image beside it."""
    return [[position, color] for position, color in _stops(name)]


@functools.lru_cache(maxsize=16)
def color_table(colorscale: str) -> np.ndarray:
    """256 RGB colours sampled evenly from `explicit_colorscale(colorscale)`, uint8 (256, 3)."""
    colors = pc.sample_colorscale(explicit_colorscale(colorscale), np.linspace(0, 1, 256),
                                  colortype="rgb")
    return np.array([pc.unlabel_rgb(c) for c in colors]).round().astype(np.uint8)


def colorize(values: np.ndarray, cmin: float, cmax: float, colorscale: str) -> np.ndarray:
    """Map a float array (any shape S) to RGB uint8 (*S, 3) through a plotly colour scale.

    Non-finite values (-inf where masked, NaN) become MASK_RGB.
    """
    # A 257th table entry holds the mask colour, so one lookup colours every pixel (S,) -> (S, 3).
    table = np.vstack([color_table(colorscale), np.array(MASK_RGB, dtype=np.uint8)])
    values = np.asarray(values, dtype=np.float32)
    scaled = values - np.float32(cmin)
    scaled *= np.float32(255 / ((cmax - cmin) or 1.0))
    np.clip(scaled, 0, 255, out=scaled)
    scaled[~np.isfinite(values)] = 256
    return table[scaled.astype(np.uint16)]


PNG_CACHE_ENTRIES = 64  # encoded images kept, a few hundred kB each at most


def png_data_uri(rgb: np.ndarray) -> str:
    """Encode an (H, W, 3) uint8 array as a base64 PNG data URI for an image trace's source.

    Content-addressed cache: the same pixels (a per-head bias grid does not depend on the
    slopes, a head switch redraws the same mosaic) are encoded once; a key made of the pixels
    themselves can never go stale.
    """
    rgb = np.ascontiguousarray(rgb)
    key = hashlib.blake2b(rgb.data, digest_size=16)
    key.update(repr(rgb.shape).encode())
    return _encode_png(key.digest(), rgb)


def _encode_png(key: bytes, rgb: np.ndarray, _cache: dict = {}) -> str:  # noqa: B006 (the cache)
    if key in _cache:
        _cache[key] = _cache.pop(key)  # most recently used last
        return _cache[key]
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=1)
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    _cache[key] = uri
    while len(_cache) > PNG_CACHE_ENTRIES:
        _cache.pop(next(iter(_cache)))
    return uri


class Figure(go.Figure):
    """A go.Figure built from plain dicts, without plotly's per-property validation.

    Building traces through plotly's validators costs more than computing what they show (the
    bias explorer's three figures at 128 heads: 0.1 s of validation), and so does every copy:
    st.cache_data pickles what it returns, and a plain go.Figure unpickles through full
    validation (0.04 s for those three). The kit writes its figures as the JSON plotly.js
    reads; tests/test_render.py checks that they pass full validation.
    """

    def __reduce__(self):
        return (_light_figure, (self.to_dict(),))

    def to_dict(self) -> dict:
        """plotly's to_dict without its deep copy of every value: containers are copied (so
        converting arrays to base64 leaves this figure as it was), arrays and strings are
        shared. A figure whose hover holds T x T token labels copies in milliseconds instead
        of a quarter of a second."""
        return sendable(_spec_of(self))


def _copy_tree(node):
    """dicts and lists copied all the way down; everything else (arrays, strings) shared."""
    if isinstance(node, dict):
        return {key: _copy_tree(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_copy_tree(value) for value in node]
    return node


CHAR_EM = 0.55      # average width of a character, in ems (what fitting text to a width assumes)
PAGE_WIDTH_PX = 620  # a page's full-width figure on a 1024 px screen with the sidebar open
WIDE_PAGE_PX = 900   # ... on a 1366 px laptop


def wrap_text(text: str, font_px: float, width_px: float, max_lines: int = 3) -> tuple[str, int]:
    """(text, lines): each line of `text` (lines end at <br>) broken at spaces into lines at
    most `width_px` wide at `font_px` (CHAR_EM ems a character), at most `max_lines` pieces a
    line; unchanged when it fits or holds a tag with spaces in it (which a break could split)."""
    if re.search(r"<[^>]* [^>]*>", text):
        return text, text.count("<br>") + 1
    per_line = max(8, int(width_px / (CHAR_EM * font_px)))
    out = []
    for part in text.split("<br>"):
        if len(re.sub(r"<[^>]+>", "", part)) <= per_line:
            out.append(part)
            continue
        lines, line = [], ""
        for word in part.split(" "):
            if line and len(line) + 1 + len(word) > per_line and len(lines) < max_lines - 1:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        out += [*lines, line]
    return "<br>".join(out), len(out)


SUBSCRIPTS = str.maketrans("ijklmn", "ᵢⱼₖₗₘₙ")


def plain_text(text: str) -> str:
    """A plotly title (its markup: <sub>, <br>, <b>) as plain text for an HTML page or a canvas:
    subscripts as Unicode subscripts where they exist (B<sub>ij</sub>: Bᵢⱼ), else after "_"."""
    def sub(match: re.Match) -> str:
        inner = match.group(1)
        shown = inner.translate(SUBSCRIPTS)
        return shown if all(c != s for c, s in zip(inner, shown, strict=True)) else f"_{inner}"
    text = re.sub(r"<sub>(.*?)</sub>", sub, text)
    text = re.sub(r"<br\s*/?>", " ", text)
    return re.sub(r"</?[a-z]+>", "", text)


def without_qualifier(text: str) -> str:
    """`text` without a qualifier in brackets at its end: "context (tokens, log2 scale)"."""
    return re.sub(r"\s*\([^()]*\)$", "", text)


def fit_texts(fig: go.Figure, width: int, height: int | None = None, *, font: int | None = None,
              title_font: int | None = None, place_legend: bool = False,
              min_font: float = 0) -> None:
    """Break the title, subplot titles and axis titles of `fig` where they would overflow a
    `width` x `height` px figure (plotly neither wraps nor moves text, and Spanish and Russian
    run a fifth longer than English), growing the top margin to hold them. A legend under the
    plot is pinned to the figure's bottom edge, below the axis title (in paper coordinates a
    short plot pulls it onto the title). With `place_legend`, a side legend too tall for the
    plot moves under it too (the lesson's projector figures, lesson_figures.enlarge_figure).
    An axis title too long for its axis is set in a smaller font, down to 3/4 of its size and
    never below `min_font` px; past that it loses a qualifier in brackets at its end, and only
    then is broken over two lines (which can reach its tick labels)."""
    layout = fig.layout
    font = font or layout.font.size or 12
    title_font = title_font or layout.title.font.size or 17
    height = height or layout.height or 450
    margin = {side: getattr(layout.margin, side) for side in ("l", "r", "t", "b")}
    margin = {k: v if v is not None else 80 for k, v in margin.items()}

    def added_lines(old: str, lines: int) -> int:  # breaks already there have their room
        return lines - (old.count("<br>") + 1)

    old = layout.title.text or ""
    text, lines = wrap_text(old, title_font, width - 20, max_lines=5)
    extra_top = added_lines(old, lines) * round(1.2 * title_font)
    if text != old:
        layout.title.text = text
    if layout.title.subtitle and layout.title.subtitle.text:
        size = layout.title.subtitle.font.size or font
        old = layout.title.subtitle.text
        text, lines = wrap_text(old, size, width - 20, max_lines=5)
        layout.title.subtitle.text = text
        extra_top += added_lines(old, lines) * round(1.2 * size)
    # Subplot titles (paper-placed text above a panel): each has its panel's width, the
    # figure's width shared by the titles of its row.
    titles = [a for a in layout.annotations
              if a.yref == "paper" and a.yanchor == "bottom" and a.showarrow is False]
    legend = layout.legend
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    entry_px = [len(n) * CHAR_EM * font + 45 for n in names]  # symbol, gap and text
    if (names and not place_legend and layout.showlegend is not False  # (place_legend: it
            and legend.orientation in (None, "v")  # may move under the plot, below)
            and (legend.x is None or legend.x >= 1)):  # beside the plot: plotly narrows it
        margin["r"] += max(entry_px)
    plot_width = width - margin["l"] - margin["r"]
    domains = sorted({tuple(layout[k].domain) for k in fig._layout
                      if k.startswith("xaxis") and layout[k].domain})
    top_row = 0
    for annotation in titles:
        row = sum(1 for other in titles if other.y == annotation.y)
        size = annotation.font.size or 16
        # centred on its panel: as wide as its panel (or the panel's share of the row), and
        # no wider than twice the distance from its centre to the figure's nearer edge
        x = annotation.x if annotation.x is not None else 0.5
        panel = next((d for d in domains if d[0] - 1e-6 <= x <= d[1] + 1e-6), None)
        share = (panel[1] - panel[0]) * plot_width if panel else width / row - 16
        centre = margin["l"] + x * plot_width
        room = min(share, width / row - 16, 2 * min(centre, width - centre) - 10)
        old = annotation.text or ""
        whole = old  # a qualifier in brackets goes before a fourth line: "(labels: R²...)"
        if wrap_text(old, size, room, max_lines=9)[1] > 3:
            whole = without_qualifier(old)
        text, lines = wrap_text(whole, size, room)
        annotation.text = text
        if annotation.y == 1.0:
            top_row = max(top_row, added_lines(old, lines) * round(1.2 * size))
            # clear of the panel's top tick label, half of which stands above the panel
            shift = round(0.6 * font)
            if (annotation.yshift or 0) < shift:
                top_row = max(top_row, shift - (annotation.yshift or 0))
                annotation.yshift = shift
    # The title sits above the top row of subplot titles: their added lines stack.
    extra_top += top_row
    if extra_top:
        fig.update_layout(margin_t=margin["t"] + extra_top)
    top_titles = [a for a in titles if a.y == 1.0]
    if top_titles and layout.title.text:  # just above the panels' titles, however many lines
        block = max((a.text or "").count("<br>") + 1 for a in top_titles)
        size = max(a.font.size or 16 for a in top_titles)
        # plotly.js anchors a title's first line: its later lines, and a subtitle, hang
        # below the anchor
        below = layout.title.text.count("<br>") * round(1.3 * title_font)  # (its lines' pitch)
        if layout.title.subtitle and layout.title.subtitle.text:
            sub = layout.title.subtitle.font.size or font
            lines = layout.title.subtitle.text.count("<br>") + 1
            below += lines * round(1.3 * sub) + round(0.6 * title_font)
        fig.update_layout(title=dict(yref="paper", y=1.0, yanchor="bottom",
                                     pad=dict(b=round(1.2 * size * block + 0.6 * font + 8)
                                              + below)))
    elif layout.title.text and "<br>" in layout.title.text and layout.height:
        # plotly.js centres a title's first line in the top margin and hangs the others below
        # it, into the plot: the first line goes near the top edge, the margin holds them all
        lines = layout.title.text.count("<br>") + 1
        need = round(1.2 * title_font * lines) + 24
        fig.update_layout(title=dict(yref="container", yanchor="middle",
                                     y=1 - (round(0.6 * title_font) + 8) / layout.height))
        if margin["t"] + extra_top < need:
            extra_top = need - margin["t"]
            fig.update_layout(margin_t=need)
    plot_height = height - margin["t"] - extra_top - margin["b"]
    for name in [key for key in fig._layout if key.startswith(("xaxis", "yaxis"))]:
        axis = layout[name]
        span = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        room = span * (plot_width if name.startswith("x") else plot_height)  # the axis, in px
        if axis.type == "log" and axis.dtick is None and axis.tickvals is None:
            # plotly labels every digit of a short decade, and in a short plot they lie on
            # each other: 1, 2 and 5 per decade, or the powers of ten alone in a narrow panel
            axis.dtick = 1 if room < 250 else "D2"
        if not axis.title or not axis.title.text:
            continue
        if name.startswith("x"):  # below its tick labels, even rotated ones (plotly
            # rotates labels that do not fit side by side, onto a title at a fixed offset)
            axis.automargin = True
        # One line, in a smaller font if need be (a title broken over lines grows toward its
        # tick labels and covers them); broken only when even 3/4 of the font will not fit.
        size = axis.title.font.size or font
        length = len(re.sub(r"<[^>]+>", "", axis.title.text)) * CHAR_EM
        if "<br>" not in axis.title.text and length * size > room - 10:
            floor = max(0.75 * size, min_font)
            short = without_qualifier(axis.title.text)  # "(tokens, log2 scale)"
            if short != axis.title.text and (room - 10) / (len(short) * CHAR_EM) >= floor:
                # a qualifier in brackets goes before the words would have to break
                axis.title.text, length = short, len(short) * CHAR_EM
            fitted = (room - 10) / length
            if fitted >= floor:
                axis.title.font.size = min(size, math.floor(fitted))
            else:
                axis.title.font.size = math.ceil(floor)
                axis.title.text = wrap_text(axis.title.text, floor, room - 10, max_lines=2)[0]
    # A colour bar's title beside a vertical bar, not on top of it (where it met the top tick
    # label), and above a horizontal one.
    bars = [layout[k].colorbar for k in fig._layout if k.startswith("coloraxis")]
    bars += [t.colorbar for t in fig.data if getattr(t, "colorbar", None) is not None]
    for bar in bars:  # a horizontal bar's title above it: beside it, a long one left no bar
        if bar.title and bar.title.text:
            bar.title.side = "top" if bar.orientation == "h" else "right"
    if (not place_legend and legend.orientation == "h" and legend.y is not None and legend.y >= 1
            and sum(entry_px) > width - 40):  # a legend above the plot in rows runs onto the
        fig.update_layout(legend=dict(y=-0.2, yanchor="top"))  # title: under the plot
    beside = (place_legend and legend.orientation in (None, "v")
              and len(names) * 1.6 * font > plot_height)
    if beside or (legend.orientation == "h" and legend.y is not None and legend.y < 0):
        # Under the plot: tick labels, the axis title and the legend's rows (in the
        # container's coordinates, so a short plot cannot pull it onto the axis title).
        # plotly.js sets the entries side by side at their own widths, starting a new row
        # when the next one does not fit: the rows as it fills them
        row_px, rows, used = width - 40, 1, 0.0
        for entry in entry_px:
            if used and used + entry > row_px:
                rows, used = rows + 1, 0.0
            used += entry
        fig.update_layout(legend=dict(orientation="h", yref="container", y=0.0,
                                      yanchor="bottom", x=0.5, xanchor="center"),
                          margin_b=round((4 + 1.5 * rows) * font))


def figure_spec(fig: go.Figure, width: int = PAGE_WIDTH_PX, fit: bool = True) -> dict:
    """A figure as the plain dict plotly.js reads (arrays still numpy): what a page caches and
    shows. Pickling it (st.cache_data copies every cached value on every read) costs
    microseconds per array; pickling a go.Figure validates every property again on the way
    back, and constructing one deep-copies every hover label (0.05-0.2 s for a figure with
    T x T token hovers). Reads plotly's own per-trace and layout dicts (`_data`, `_layout`),
    after fitting the figure's texts to a page, or to `width` px for a figure in a column
    (`fit_texts`: this changes `fig`), with the language's decimal and thousands marks."""
    if isinstance(fig, dict):
        return fig
    if fig.layout.separators is None:  # numbers in hovers and ticks follow the language
        fig.update_layout(separators=plotly_separators())
    if fit:  # fit=False: fitted already, e.g. for a projector (lesson.projector_figure)
        fit_texts(fig, width)
        fig.update_layout(meta={"fitted_width": width})  # a phone keeps this width (alibi_viz_app.ui)
    return _spec_of(fig)


TOOLBAR_PX = 30  # plotly's toolbar (modebar): 2 px from the figure's top, 26 px tall
PLOTLY_HEIGHT, PLOTLY_TOP = 450, 100  # plotly.js's own height and top margin when unset


def with_toolbar_room(spec: dict) -> dict:
    """A figure dict (`figure_spec`) TOOLBAR_PX taller, the room added at its top: a strip for
    plotly's toolbar, which plotly draws over the figure's top right corner (always on a touch
    screen, elsewhere while the pointer is on the chart), where it lay on titles and legends.
    The plot keeps its size; what is placed in the figure's own coordinates (yref "container":
    a title, a legend) keeps its distance from the top edge plus the strip, and what is placed
    on the plot moves with it. `spec` itself, often cached, is unchanged; a spec that has its
    room already, or was not fitted to a page (a projector's, whose height is its step's
    room), is returned as it is."""
    layout = spec.get("layout", {})
    meta = layout.get("meta") or {}
    if not isinstance(meta, dict) or "fitted_width" not in meta or meta.get("toolbar_room"):
        return spec
    old = layout.get("height") or PLOTLY_HEIGHT
    height = old + TOOLBAR_PX
    margin = layout.get("margin") or {}
    top = margin["t"] if margin.get("t") is not None else PLOTLY_TOP

    def lowered(item: dict, auto_px: float) -> dict:
        """`item` (a title or legend in the figure's coordinates) TOOLBAR_PX further down."""
        y = item.get("y")
        px = auto_px if y in (None, "auto") else (1 - y) * old  # from the top edge
        moved = {**item, "y": 1 - (px + TOOLBAR_PX) / height}
        if y in (None, "auto"):
            moved["yanchor"] = "middle"  # plotly's "auto": the middle of the top margin
        return moved

    layout = {**layout, "height": height, "margin": {**margin, "t": top + TOOLBAR_PX},
              "meta": {**meta, "toolbar_room": TOOLBAR_PX}}
    title = layout.get("title")
    if isinstance(title, dict) and title.get("text") and title.get("yref", "container") == "container":
        layout["title"] = lowered(title, top / 2)
    legend = layout.get("legend")
    if isinstance(legend, dict) and legend.get("yref") == "container" and legend.get("y") is not None:
        layout["legend"] = lowered(legend, 0)
    return {**spec, "layout": layout}


def with_fitted_layout(fig: go.Figure, fitted: dict) -> dict:
    """`fig` as a figure dict (`figure_spec`) laid out as `fitted`, the spec of a figure fitted
    earlier that differs from `fig` only in its title's text and its colour axes' ranges (one
    head's decomposition row against another head's): fitting the texts is the largest part
    of building such a figure, and gives the same layout. `fig`'s title must fit on one line
    (tests/test_render.py checks a head's row against its own fitting)."""
    spec = _spec_of(fig)
    own, layout = spec["layout"], _copy_tree(fitted["layout"])
    layout["title"] = {**layout.get("title", {}), "text": own.get("title", {}).get("text")}
    for name, axis in own.items():
        if name.startswith("coloraxis"):
            layout[name] = {**layout[name], "cmin": axis["cmin"], "cmax": axis["cmax"]}
    return {"data": spec["data"], "layout": layout}


def with_traces(spec: dict, traces: list) -> dict:
    """A figure dict with `traces` drawn on top (`spec` itself, often cached, is unchanged):
    e.g. the rings marking the chosen head over a cached figure of every head."""
    return {**spec, "data": [*spec["data"], *traces]}


def _spec_of(fig: go.Figure) -> dict:
    """`fig` as plain dicts: plotly's own per-trace and layout dicts, containers copied."""
    return {"data": [_copy_tree(trace) for trace in fig._data], "layout": _copy_tree(fig._layout)}




# plotly.js's typed-array spec ({"dtype", "bdata", "shape"}): the dtypes it reads, by short name.
TYPED_ARRAY_DTYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4",
                      "uint32": "u4", "float32": "f4", "float64": "f8"}
UNTYPED_KEYS = {"geojson", "layer", "layers", "range"}  # plotly.js reads these as plain lists


def typed_array(value):
    """A numpy array as plotly.js's typed-array spec, as plotly's to_dict encodes it: 64-bit
    integers narrowed to the smallest type that holds them; an empty array, a list or another
    dtype unchanged."""
    if not isinstance(value, np.ndarray) or value.size == 0:
        return value
    if value.dtype.kind in "iu" and value.dtype.itemsize == 8:
        low, high = value.min(), value.max()
        signed = value.dtype.kind == "i"
        for bits in (8, 16, 32):
            info = np.iinfo(f"{'int' if signed else 'uint'}{bits}")
            if info.min <= low and high <= info.max:
                value = value.astype(info.dtype)
                break
        else:
            return value
    short = TYPED_ARRAY_DTYPES.get(str(value.dtype))
    if short is None:
        return value
    spec = {"dtype": short, "bdata": base64.b64encode(np.ascontiguousarray(value)).decode("ascii")}
    if value.ndim > 1:
        spec["shape"] = str(value.shape)[1:-1]
    return spec


def _encode_arrays(tree) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in UNTYPED_KEYS:
                continue
            if isinstance(value, np.ndarray):
                tree[key] = typed_array(value)
            else:
                _encode_arrays(value)
    elif isinstance(tree, list | tuple):
        for value in tree:
            _encode_arrays(value)


def sendable(spec: dict) -> dict:
    """`spec` copied (containers only) with its numeric arrays base64-encoded, as plotly's
    to_dict hands a figure to plotly.js."""
    spec = _copy_tree(spec)
    _encode_arrays(spec)
    return spec


def _light_figure(spec: dict) -> Figure:
    return Figure(spec, _validate=False)  # plotly's own private switch (its templates use it)


HEAVY_ITEMS = 64  # a trace's arrays longer than this skip plotly's copy (see `figure`)


def _heavy(value) -> bool:
    if isinstance(value, np.ndarray):
        return value.size > HEAVY_ITEMS
    return isinstance(value, (list, tuple)) and len(value) > HEAVY_ITEMS


def figure(data: list[dict], layout: dict) -> Figure:
    """A Figure of `data` (trace dicts) and `layout` (a dict), unvalidated (see `Figure`).
    Numbers in hover labels and ticks follow the current language (decimal comma in es, ru).

    Constructing a Figure deep-copies every value it is given: for a T x T token hover that
    is millions of calls (0.05 s a figure at 512 tokens). The traces' long arrays (z,
    customdata, x, y, text...) are therefore put into the Figure's own trace dicts after it is
    built, as they are: the Figure reads them as usual (`fig.data[0].z`), and they are shared
    with `data`, which the caller must not change afterwards."""
    light = [{k: v for k, v in trace.items() if not _heavy(v)} for trace in data]
    fig = _light_figure({"data": light,
                         "layout": {"separators": plotly_separators(), **layout}})
    for own, trace in zip(fig._data, data, strict=True):
        own.update({k: v for k, v in trace.items() if _heavy(v)})
    return fig


# ----------------------------------------------------------------------------- panels

def panel_traces(image: np.ndarray, seq_len: int, *, hover: np.ndarray, hover_rows,
                 hover_cols, customdata=None, hovertemplate: str, coloraxis: str, cmin: float,
                 cmax: float, colorscale: str, key_len: int | None = None,
                 axes: tuple[str, str] = ("x", "y")) -> list[dict]:
    """One matrix of seq_len x key_len positions as trace dicts on the axes `axes`, in
    position coordinates (-0.5 .. T - 0.5), as the kit draws it everywhere:

    * `image` (R, C) at display resolution (pixel k covers the positions of `pool_max` /
      `display_positions`), coloured through `colorscale` between cmin and cmax, NaN grey;
    * an invisible heatmap of `hover` (len(hover_rows), len(hover_cols)) exact values at those
      positions, with `customdata` and `hovertemplate` (NaN cells show no hover);
    * an invisible point on `coloraxis`, so the figure's colour bar describes the image.
    """
    key_len = seq_len if key_len is None else key_len
    R, C = image.shape
    rgb = colorize(image, cmin, cmax, colorscale)  # (R, C, 3), NaN grey
    on = {"xaxis": axes[0], "yaxis": axes[1]}
    hover = np.asarray(hover, dtype=np.float64)
    return [
        {"type": "image", "source": png_data_uri(rgb), "x0": key_len / C / 2 - 0.5,
         "dx": key_len / C, "y0": seq_len / R / 2 - 0.5, "dy": seq_len / R, "hoverinfo": "skip",
         **on},
        {"type": "heatmap", "z": np.where(np.isfinite(hover), hover, np.nan),
         "x": np.asarray(hover_cols), "y": np.asarray(hover_rows), "opacity": 0,
         "showscale": False, "hoverongaps": False, "colorscale": explicit_colorscale("Greys"),
         "customdata": customdata, "hovertemplate": hovertemplate, **on},
        {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "showlegend": False,
         "hoverinfo": "skip", "marker": {"coloraxis": coloraxis, "color": [cmin]}, **on},
    ]


def image_panel(fig: go.Figure, row: int, col: int, image: np.ndarray, seq_len: int,
                **panel) -> None:
    """`panel_traces` drawn into subplot (row, col) of a plotly subplots figure."""
    for trace in panel_traces(image, seq_len, **panel):
        trace.pop("xaxis"), trace.pop("yaxis")
        fig.add_trace(trace, row=row, col=col)


def subplot_row(columns: int, spacing: float) -> list[tuple[float, float]]:
    """x domains of one row of `columns` equal panels `spacing` apart, as plotly's
    make_subplots(rows=1, cols=columns, horizontal_spacing=spacing) places them."""
    width = (1 - spacing * (columns - 1)) / columns
    return [(k * (width + spacing), k * (width + spacing) + width) for k in range(columns)]


def causal_map_panel(fig: go.Figure, row: int, col: int, attention: np.ndarray, *,
                     max_px: int, hover_cells: int, cmax: float, hover_label: str = "") -> int:
    """One causal attention map (T, T) as an `image_panel` in subplot (row, col), in token
    coordinates: max-pooled to at most `max_px` pixels a side (pixels wholly above the
    diagonal grey), exact values on a `hover_cells` x `hover_cells` grid of positions (the
    same positions for rows and columns, so the diagonal is always among them), colours
    0 .. cmax on the figure's "coloraxis". Returns the pixels per side."""
    T = attention.shape[0]
    image = pool_max(attention, max_px)  # (side, side)
    side = image.shape[0]
    shown = np.where(masked_pixels(T, side, side), np.nan, image)
    pos = display_positions(T, hover_cells)
    values = attention[np.ix_(pos, pos)]
    distance = pos[:, None] - pos[None, :]
    prefix = hover_label + "<br>" if hover_label else ""
    image_panel(fig, row, col, shown, T, hover=np.where(distance >= 0, values, np.nan),
                hover_rows=pos, hover_cols=pos, customdata=distance,
                hovertemplate=(prefix + _("query i") + "=%{y}<br>" + _("key j") + "=%{x}<br>"
                               + _("distance i-j") + "=%{customdata}<br>" + _("attention")
                               + "=%{z:.4f}<extra></extra>"),
                coloraxis="coloraxis", cmin=0.0, cmax=cmax, colorscale=ATTENTION_COLORSCALE)
    fig.update_xaxes(range=[-0.5, T - 0.5], row=row, col=col, title=_("key position j"),
                     constrain="domain")
    fig.update_yaxes(range=[T - 0.5, -0.5], row=row, col=col, title=_("query position i"),
                     scaleanchor="x" if col == 1 else f"x{col}", constrain="domain")
    return side


# ----------------------------------------------------------------------------- mosaics

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
    hover_label: str | None = None,
    panel_ids: list[int] | None = None,
    panel_label: str | None = None,
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
    panel_label = _("head") if panel_label is None else panel_label
    hover_label = _("value") if hover_label is None else hover_label
    images = np.asarray(images)
    n = images.shape[0]
    if n == 0:
        raise AlibiVizError(_("Nothing to draw: choose at least one head."))
    rgb = colorize(images, cmin, cmax, colorscale)  # (n, R, C, 3): colour before any repeat
    # Tiny matrices: repeat pixels so every panel is drawn crisp, at least ~48 px wide.
    factor = max(1, math.ceil(48 / max(images.shape[1:])))
    # Few rows against many keys (a decoding step): stretch the rows to a quarter of the width
    # so the strip stays visible; the hover positions follow the stretched panel.
    stretch = max(1, math.ceil(images.shape[2] / (4 * images.shape[1])))
    rgb = rgb.repeat(factor * stretch, axis=1).repeat(factor, axis=2)  # (n, R*f*s, C*f, 3)
    side_r, side_c = rgb.shape[1:3]
    columns = grid_columns(n)
    grid_rows = math.ceil(n / columns)
    gap = max(2, max(side_r, side_c) // 10)  # white pixels between panels
    # Panel titles broken to their panel's width on a page (a colour bar beside them), each in
    # the band above its panel, which is as tall as the longest title: in a band of `gap`
    # pixels a second line lay on the panel above. Panels are drawn at least `shown` px wide
    # (a page's width shared by the columns), so `scale` mosaic pixels make one page pixel.
    column_px = (PAGE_WIDTH_PX - 100) / columns
    shown = min(panel_px, column_px)
    room = column_px - 6
    if max(len(word) for t in titles for word in re.split(r" |<br>", t)) * CHAR_EM * 11 > room:
        titles = [str(k) for k in panel_ids]  # 64+ heads: a word wider than its panel lay on
        # its neighbours' titles; the number alone (the hover and the page's table say more)
    wrapped = [wrap_text(t, 11, room) for t in titles]
    title_px = max(lines for _text, lines in wrapped) * 14 + 4
    scale = side_c / shown
    top = max(gap, math.ceil(title_px * scale))  # the band above each panel, in mosaic px
    # The figure as tall as a laptop's page draws the grid (a taller one was white space).
    height = min(2400, grid_rows * (min(panel_px, (WIDE_PAGE_PX - 100) / columns) + title_px)
                 + 100)
    cell_w, cell_h = side_c + gap, side_r + top
    # (grid_rows, columns) cells of (cell_h, cell_w) pixels; each panel sits at the cell's
    # left under its title band, so the mosaic is one reshape of the padded panels.
    cells = np.full((grid_rows * columns, cell_h, cell_w, 3), 255, dtype=np.uint8)
    cells[:n, top:, :side_c] = rgb
    mosaic = (cells.reshape(grid_rows, columns, cell_h, cell_w, 3)
              .transpose(0, 2, 1, 3, 4).reshape(grid_rows * cell_h, columns * cell_w, 3))
    origins = [((p % columns) * cell_w, (p // columns) * cell_h + top) for p in range(n)]
    data = [
        {"type": "image", "source": png_data_uri(mosaic), "x0": 0, "dx": 1, "y0": 0, "dy": 1,
         "hoverinfo": "skip"},
        {"type": "scatter", "x": [x0 + side_c / 2 for x0, _y in origins],
         "y": [y0 - top / 2 for _x, y0 in origins], "mode": "text",
         "textposition": "middle center", "text": [text for text, _lines in wrapped],
         "cliponaxis": False, "textfont": {"size": 11}, "hoverinfo": "skip",
         "showlegend": False},
    ]
    sx, sy = side_c / key_len, side_r / seq_len  # pixels per position
    if hover is not None:
        hover = np.asarray(hover)
        hr, hc = np.asarray(hover_rows), np.asarray(hover_cols)
        # Centres of hover cells in mosaic pixels; one NaN column/row closes each panel, so
        # plotly does not stretch cells across the gaps.
        hx = np.concatenate([np.append(x0 + (hc + 0.5) * sx - 0.5, x0 + side_c + gap / 2)
                             for x0 in range(0, columns * cell_w, cell_w)])
        hy = np.concatenate([np.append(y0 + top + (hr + 0.5) * sy - 0.5, y0 + top + side_r + gap / 2)
                             for y0 in range(0, grid_rows * cell_h, cell_h)])
        z = np.full((hy.size, hx.size), np.nan, dtype=np.float32)
        # head, i, j, i - j: 16-bit when they fit (8 bytes a cell instead of 16 in the page)
        wide = max(key_len, seq_len, max(panel_ids, default=0)) > np.iinfo(np.int16).max
        custom = np.zeros((hy.size, hx.size, 4), dtype=np.int32 if wide else np.int16)
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
        data.append({
            "type": "heatmap", "x": hx, "y": hy, "z": z, "customdata": custom, "opacity": 0,
            "coloraxis": "coloraxis", "hoverongaps": False,
            "hovertemplate": (panel_label + " %{customdata[0]}<br>" + _("query i")
                              + "=%{customdata[1]}<br>" + _("key j") + "=%{customdata[2]}<br>"
                              + _("distance i-j") + "=%{customdata[3]}<br>"
                              + hover_label + "=%{z:.4g}<extra></extra>")})
    else:  # an invisible point carries the colour bar
        data.append({"type": "scatter", "x": [None], "y": [None], "mode": "markers",
                     "showlegend": False, "hoverinfo": "skip",
                     "marker": {"coloraxis": "coloraxis", "color": [cmin]}})
    if marker is not None and 0 < marker < max(seq_len, key_len):
        xs, ys = [], []
        mx, my = marker * sx, (marker - (key_len - seq_len)) * sy  # key and query position
        for x0, y0 in origins:
            xs += [x0 + mx, x0 + mx, None]
            ys += [y0, y0 + side_r, None]
            if 0 < my < side_r:
                xs += [x0, x0 + side_c, None]
                ys += [y0 + my, y0 + my, None]
        data.append({"type": "scatter", "x": xs, "y": ys, "mode": "lines", "hoverinfo": "skip",
                     "showlegend": False, "line": {"color": "red", "width": 1.5, "dash": "dash"}})
    return figure(data, {
        "xaxis": {"visible": False, "range": [-0.5, columns * cell_w - 0.5]},
        "yaxis": {"visible": False, "range": [grid_rows * cell_h - 0.5, -0.5],
                  "scaleanchor": "x"},
        "coloraxis": {"colorscale": explicit_colorscale(colorscale), "cmin": cmin, "cmax": cmax,
                      "colorbar": {"title": {"text": colorbar_title}, "thickness": 14}},
        "title": {"text": title}, "height": height,
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10}, "plot_bgcolor": "white",
        "showlegend": False})




# ----------------------------------------------------------------------------- canvas maps

@dataclass
class MapSet:
    """Maps for a canvas drawn in the browser (the app's `canvas_maps`), no plotly: the same
    picture as a mosaic figure, as 8-bit codes at display resolution.

    codes:        uint8 (panels, R, C), `display.quantize` of the coloured values: pixel (r, c)
                  covers queries [r*T/R, (r+1)*T/R) and keys [c*T/C, (c+1)*T/C); 255 masked.
    vmin, vmax:   the values codes 0 and 254 stand for; `reads` says how a value reads back:
                  "log10" (the value is log10 of what the hover shows) or "linear".
    ticks:        (fraction of the colour bar, label) pairs, labels in the page's language.
    tokens:       one readable label per position (T), for the hover.
    marker:       a dashed line at this key and query position (the training length), or None.
    key_len:      keys, when more than the seq_len queries (a decoding step: the queries are the
                  last seq_len of key_len positions); None: seq_len.
    sampled:      each pixel holds the value at the position under its centre
                  (`display_positions`), not the largest of its block.
    panel_scales: per panel, what its values are multiplied by to read as `value_label` (a
                  panel drawn on its own scale), or None.
    """

    title: str
    panel_titles: list[str]
    codes: np.ndarray
    seq_len: int
    vmin: float
    vmax: float
    reads: str
    colorscale: str
    bar_title: str
    value_label: str
    tokens: list[str]
    ticks: list[tuple[float, str]] = field(default_factory=list)
    marker: int | None = None
    key_len: int | None = None
    sampled: bool = False
    panel_scales: list[float] | None = None


def bar_ticks(vmin: float, vmax: float, count: int = 5) -> list[tuple[float, str]]:
    """About `count` round values between vmin and vmax as (fraction of the bar, label)."""
    span = (vmax - vmin) or 1.0
    raw = span / max(1, count - 1)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= 0.8 * raw)
    first = math.ceil(vmin / step - 1e-9)
    values = [k * step for k in range(first, math.floor(vmax / step + 1e-9) + 1)]
    decimals = max(0, -math.floor(math.log10(step)))
    decimals += not math.isclose(step * 10**decimals, round(step * 10**decimals))
    return [((v - vmin) / span, number(v, decimals)) for v in values]


def map_set(values: np.ndarray, *, vmin: float, vmax: float, **kwargs) -> MapSet:
    """A MapSet of float `values` (panels, R, C; NaN masked), quantized to 8-bit codes on
    [vmin, vmax]; the other fields as MapSet names them (ticks default to `bar_ticks`)."""
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 3 or 0 in values.shape:
        raise AlibiVizError(f"Expected (panels, R, C) values, got {values.shape}.")
    kwargs.setdefault("ticks", bar_ticks(vmin, vmax))
    return MapSet(codes=quantize(values, vmin, vmax), vmin=float(vmin), vmax=float(vmax),
                  **kwargs)
