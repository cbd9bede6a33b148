"""Every image panel reads like its colour bar, in the page as drawn (issue 41): the panel's
pixel at a position whose value is known has the colour its bar shows at that value.

The panels are PNG images coloured in Python (render.colorize) and the bars are drawn by
plotly.js from the figure's colour scale: two pieces of code that once disagreed (plotly.js's
"Blues" runs dark to light, so the attention bars put most attention at light grey). Here the
page itself is read: the image's pixels through a canvas, the bar's colour from its SVG
gradient at the place its tick labels give a value, as a student would read it.

Known values, from what the figures show (one pixel a position or a block that holds it):
every query attends to itself alone at position 0 (attention 1: the top of a linear bar,
log10 1 = 0 the top of a log one); ALiBi's bias is 0 at distance 0 and -m (i - j) below it;
/compare's panels divide each method by its own largest |value|, ALiBi's at its farthest key.
"""

import re

import numpy as np
import pytest
from helpers import wait_for_app

from alibi_viz.alibi import alibi_slopes
from alibi_viz.positional import DEFAULT_METHODS

pytestmark = pytest.mark.browser

TOLERANCE = 8  # RGB units a channel: the PNG's 256 levels, a tick label a pixel off (3 seen)

# For a chart (its container's key), every image's panels read back through a canvas, cut at
# the white gaps of a mosaic, with each panel's top-left and bottom-left pixels (query 0 and
# the last query at key 0) and the image's place on the screen; and every colour bar's
# gradient stops and its tick labels' place along the gradient (0 at its first stop).
READ_CHART_JS = """async (key) => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  const centre = (el) => { const b = el.getBoundingClientRect();
                           return [b.x + b.width / 2, b.y + b.height / 2]; };
  const bands = (has) => {
    const out = []; let start = -1;
    has.forEach((on, i) => {
      if (on && start < 0) start = i;
      if (!on && start >= 0) { out.push([start, i - 1]); start = -1; }
    });
    if (start >= 0) out.push([start, has.length - 1]);
    return out;
  };
  const images = [];
  for (const el of gd.querySelectorAll('image')) {
    if (el.closest('.hm')) continue;  // an invisible heatmap (the hover layer) drawn as an image
    const href = el.getAttribute('href') || el.getAttribute('xlink:href');
    if (!href || !href.startsWith('data:image/png')) continue;
    const img = new Image(); img.src = href; await img.decode();
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
    const ctx = canvas.getContext('2d'); ctx.drawImage(img, 0, 0);
    const {data, width, height} = ctx.getImageData(0, 0, canvas.width, canvas.height);
    const px = (r, c) => [...data.slice(4 * (r * width + c), 4 * (r * width + c) + 3)];
    const white = (r, c) => { const i = 4 * (r * width + c);
                              return data[i] === 255 && data[i + 1] === 255 && data[i + 2] === 255; };
    const rowHas = new Array(height).fill(false), colHas = new Array(width).fill(false);
    for (let r = 0; r < height; r++) for (let c = 0; c < width; c++)
      if (!white(r, c)) { rowHas[r] = true; colHas[c] = true; }
    const panels = [];
    for (const [r0, r1] of bands(rowHas)) for (const [c0, c1] of bands(colHas)) {
      if (white(r0, c0) && white(r1, c0) && white(r0, c1)) continue;  // an empty cell
      panels.push({rows: r1 - r0 + 1, cols: c1 - c0 + 1, tl: px(r0, c0), bl: px(r1, c0)});
    }
    images.push({x: centre(el)[0], panels});
  }
  const bars = [];
  for (const bar of gd.querySelectorAll('g.colorbar')) {
    const rect = bar.querySelector('rect.cbfill');
    const fill = rect.getAttribute('fill') || rect.style.fill;
    const gradient = document.getElementById(fill.match(/#([^)"']+)/)[1]);
    const b = rect.getBoundingClientRect();
    const g = (name) => parseFloat(gradient.getAttribute(name) || '0') / (
      (gradient.getAttribute(name) || '').endsWith('%') ? 100 : 1);
    const start = [b.x + g('x1') * b.width, b.y + g('y1') * b.height];
    const end = [b.x + g('x2') * b.width, b.y + g('y2') * b.height];
    const along = (p) => { const d = [end[0] - start[0], end[1] - start[1]];
      return ((p[0] - start[0]) * d[0] + (p[1] - start[1]) * d[1]) / (d[0] ** 2 + d[1] ** 2); };
    const stops = [...gradient.querySelectorAll('stop')].map(s => [
      parseFloat(s.getAttribute('offset')) / (s.getAttribute('offset').endsWith('%') ? 100 : 1),
      s.getAttribute('stop-color')]);
    const ticks = [...bar.querySelectorAll('.cbaxis text')]
      .filter(t => t.textContent.trim()).map(t => [t.textContent, along(centre(t))]);
    bars.push({x: centre(rect)[0], stops, ticks});
  }
  return {images, bars};
}"""


def number(label: str) -> float:
    """A tick label as a number: "−5" (plotly's minus sign), "0.2"."""
    return float(label.replace("−", "-"))


def stop_colours(bar: dict) -> tuple[list[float], np.ndarray]:
    """(offsets along the gradient 0..1, their colours (stops, 3)) of a bar's gradient."""
    offsets = [offset for offset, _c in bar["stops"]]
    colours = np.array([[float(v) for v in re.findall(r"[\d.]+", c)[:3]]
                        for _o, c in bar["stops"]])
    return offsets, colours


def bar_colour(bar: dict, value: float) -> np.ndarray:
    """The colour a bar shows beside `value`: where its tick labels put that value along its
    gradient (a straight line through the ticks), the gradient's stops interpolated there."""
    ticks = np.array([(number(text), t) for text, t in bar["ticks"]])
    assert len(ticks) >= 2, bar["ticks"]
    slope, intercept = np.polyfit(ticks[:, 0], ticks[:, 1], 1)
    where = float(np.clip(slope * value + intercept, 0.0, 1.0))
    offsets, colours = stop_colours(bar)
    return np.array([np.interp(where, offsets, colours[:, k]) for k in range(3)])


def read_chart(page, key: str) -> tuple[list, list]:
    """(images, bars) of the chart in container `key`, each sorted left to right on screen
    (a row of panels and its row of bars pair up)."""
    chart = page.locator(f".st-key-{key} .js-plotly-plot")
    chart.scroll_into_view_if_needed()
    page.wait_for_function("(key) => document.querySelector(`.st-key-${key} g.colorbar`)"
                           " && document.querySelector(`.st-key-${key} image`)", arg=key)
    found = page.evaluate(READ_CHART_JS, key)
    images = sorted(found["images"], key=lambda i: i["x"])
    bars = sorted(found["bars"], key=lambda b: b["x"])
    return images, bars


def check(pixel, bar: dict, value: float, where: str) -> None:
    """The pixel has the bar's colour at `value`, within TOLERANCE."""
    expected = bar_colour(bar, value)
    assert np.abs(np.asarray(pixel, dtype=float) - expected).max() <= TOLERANCE, (
        f"{where}: the panel draws {value} as {tuple(pixel)}, the bar shows "
        f"{tuple(expected.round())}")


# The href of a chart's first image panel (not the invisible hover heatmap plotly draws as one)
PANEL_HREF_JS = """(key) => { const image = [...document.querySelectorAll(`.st-key-${key} image`)]
  .find(i => !i.closest('.hm')); return image ? image.getAttribute('href') : null; }"""


def switch(page, group: str, option: str, key: str) -> None:
    """Choose `option` in the radio group labelled `group`; wait until the chart in `key`
    has a new image."""
    old = page.evaluate(PANEL_HREF_JS, key)
    page.get_by_role("radiogroup", name=group).get_by_text(option, exact=True).click()
    page.wait_for_function(f"([key, old]) => {{ const now = ({PANEL_HREF_JS})(key);"
                           " return now && now !== old; }", arg=[key, old])
    wait_for_app(page)


def test_bias_explorer_panels_read_like_their_bar(page, server_url):
    """/ (8 heads, 64 tokens, one pixel a position), in each colour scale: every head's
    distance-0 corner has the bar's colour at bias 0, and its farthest key (query 63, key 0)
    the colour at -m 63 clipped at -10, divided by m 63, or unscaled."""
    page.goto(server_url)
    wait_for_app(page)
    page.get_by_text("The same maps as an interactive chart (zoom)").click()  # its expander
    slopes = alibi_slopes(8)
    for scale, option in [("clipped", None), ("per_head", "each head its own"),
                          ("shared", "one for all heads")]:
        if option:
            switch(page, "Colour scale", option, "be_fig_grid")
        (image,), (bar,) = read_chart(page, "be_fig_grid")
        assert len(image["panels"]) == 8
        for head, panel in enumerate(image["panels"]):
            assert (panel["rows"], panel["cols"]) == (64, 64)
            far = {"clipped": max(-slopes[head] * 63, -10.0), "per_head": -1.0,
                   "shared": -slopes[head] * 63}[scale]
            check(panel["tl"], bar, 0.0, f"{scale}, head {head + 1}, distance 0")
            check(panel["bl"], bar, far, f"{scale}, head {head + 1}, farthest key")


def test_compare_matrices_read_like_their_bar(page, server_url):
    """/compare: ALiBi's panel is 0 at distance 0 (the bar's middle) and -1 at its farthest
    key (the bar's red end); sinusoidal's is +1 at distance 0 (the blue end)."""
    page.goto(f"{server_url}/compare")
    wait_for_app(page)
    (image,), (bar,) = read_chart(page, "cmp_fig_matrices")
    panels = image["panels"]
    assert len(panels) == len(DEFAULT_METHODS)
    alibi, sinusoidal = (panels[DEFAULT_METHODS.index(m)] for m in ("alibi", "sinusoidal"))
    check(alibi["tl"], bar, 0.0, "ALiBi, distance 0")
    check(alibi["bl"], bar, -1.0, "ALiBi, farthest key")
    check(sinusoidal["tl"], bar, 1.0, "sinusoidal, distance 0")
    red, blue = bar_colour(bar, -1.0), bar_colour(bar, 1.0)
    assert red[0] > red[2] and blue[2] > blue[0]  # the bar's far keys are red, as drawn


def heads_page_reads_like_its_bars(page, prefix: str, gallery: bool) -> None:
    """On /model or /inspect (prefix mh, im), log then linear colours: every head of the grid,
    and the attention panel of the head's row, draw query 0's attention to itself (1) in the
    bar's top colour, its darkest blue; the row's bias panel draws distance 0 as the bias
    bar's 0; the gallery's map (mh) draws it as its bar's 1."""
    for scale in ("log", "linear"):
        if scale == "linear":
            switch(page, "Colours", "linear", f"{prefix}_fig_grid")
        top = 0.0 if scale == "log" else 1.0
        (image,), (bar,) = read_chart(page, f"{prefix}_fig_grid")
        assert image["panels"]
        for head, panel in enumerate(image["panels"]):
            check(panel["tl"], bar, top, f"{scale}, grid head {head + 1}, query 0")
        darkest = min(stop_colours(bar)[1], key=sum)  # most attention: the darkest blue
        assert np.abs(bar_colour(bar, top) - darkest).max() <= TOLERANCE
        images, bars = read_chart(page, f"{prefix}_fig_row")
        assert len(images) == len(bars) == 4  # content | bias | total | attention
        check(images[1]["panels"][0]["tl"], bars[1], 0.0, f"{scale}, row bias, distance 0")
        check(images[3]["panels"][0]["tl"], bars[3], top, f"{scale}, row attention, query 0")
    if gallery:
        (image,), (bar,) = read_chart(page, f"{prefix}_fig_gallery_map")
        check(image["panels"][0]["tl"], bar, 1.0, "gallery map, query 0")


def test_model_heads_panels_read_like_their_bars(page, server_url):
    """/model's grid, head row and gallery map, in log and linear colours."""
    page.goto(f"{server_url}/model?tokens=64")
    wait_for_app(page)
    heads_page_reads_like_its_bars(page, "mh", gallery=True)


def test_inspect_panels_read_like_their_bars(page, server_url):
    """/inspect's grid and head row (the shipped model), in log and linear colours."""
    page.goto(f"{server_url}/inspect?tokens=64")
    wait_for_app(page)
    heads_page_reads_like_its_bars(page, "im", gallery=False)


def test_extrapolation_attention_reads_like_its_bar(page, server_url):
    """/extrapolation's head at the training length and beyond: both maps draw query 0's
    attention to itself (1, at or above the cap) in the bar's top colour."""
    page.goto(f"{server_url}/extrapolation")
    wait_for_app(page)
    images, (bar,) = read_chart(page, "xl_fig_attention")
    assert len(images) == 2
    for side, image in zip(("training length", "longer"), images, strict=True):
        check(image["panels"][0]["tl"], bar, 1.0, f"{side}, query 0")
