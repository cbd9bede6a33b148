"""Colours read back from a figure, for the tests that require an image panel and its colour bar
to agree (issue 41): the pixels of an image trace, and the colour a bar shows at a value."""

import base64
import io
import math

import numpy as np
import plotly.colors as pc
from PIL import Image

# colorize keeps 256 colours a scale: a value lies at most 1/255 of the range from its colour
# (a few RGB units where the scale changes fastest)
QUANTISATION = 4


def image_pixels(source: str) -> np.ndarray:
    """An image trace's source (a PNG data URI) decoded to (H, W, 3) uint8 pixels."""
    png = base64.b64decode(source.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def bar_color(axis, value: float) -> np.ndarray:
    """The colour a colour axis's bar (a dict or plotly object with colorscale, cmin, cmax)
    shows at `value`, float (3,): its explicit stops interpolated in RGB, as the bar's SVG
    gradient between them is drawn."""
    get = axis.get if isinstance(axis, dict) else lambda key: getattr(axis, key)
    scale = get("colorscale")
    assert isinstance(scale, (list, tuple)) and not isinstance(scale, str), scale
    positions = [float(p) for p, _ in scale]
    colors = np.array([pc.unlabel_rgb(c) for _, c in scale], dtype=float)  # (stops, 3)
    low, high = get("cmin"), get("cmax")
    where = min(1.0, max(0.0, (value - low) / (high - low)))
    return np.array([np.interp(where, positions, colors[:, k]) for k in range(3)])


def assert_pixel_reads_like_the_bar(pixel, axis, value: float) -> None:
    """`pixel` (3,) is the bar's colour at `value`, within colorize's quantisation."""
    expected = bar_color(axis, value)
    assert np.abs(np.asarray(pixel, dtype=float) - expected).max() <= QUANTISATION, (
        f"pixel {tuple(pixel)} for {value}, bar {tuple(expected.round())}")


def colour_scales(spec: dict) -> list:
    """Every colour scale a figure dict (`fig.to_dict()`) names: its colour axes' and traces'."""
    found = [axis["colorscale"] for name, axis in spec["layout"].items()
             if name.startswith("coloraxis") and "colorscale" in axis]
    found += [trace["colorscale"] for trace in spec["data"] if "colorscale" in trace]
    found += [trace["marker"]["colorscale"] for trace in spec["data"]
              if "colorscale" in trace.get("marker", {})]
    return found


def mosaic_panels(fig, n: int) -> list[np.ndarray]:
    """The mosaic image of a `render.matrix_grid_figure` decoded back to pixels, cut into its n
    panels (equal cells of the grid_columns(n) x rows layout, each panel the cell's box of
    pixels that are not the white of the gaps and title band), each (h, w, 3) uint8."""
    from alibi_viz.figures.render import grid_columns

    mosaic = image_pixels(next(t.source for t in fig.data if t.type == "image"))
    columns = grid_columns(n)
    rows = math.ceil(n / columns)
    h, w = mosaic.shape[0] // rows, mosaic.shape[1] // columns
    panels = []
    for p in range(n):
        cell = mosaic[(p // columns) * h:(p // columns + 1) * h,
                      (p % columns) * w:(p % columns + 1) * w]
        rows_in, cols_in = np.nonzero(np.any(cell != 255, axis=-1))
        panels.append(cell[rows_in.min():rows_in.max() + 1, cols_in.min():cols_in.max() + 1])
    return panels
