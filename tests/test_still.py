"""Still figures (`figures.still`): the pages' own figures drawn as SVG with no plotly.js, held
to plotly.js's own drawing of the same figure dicts, and the app drawing them on a phone.

The reference is plotly.js (the copy plotly's Python package ships): for every figure the
pages send, the axes it draws (their ranges once it has set them) and where each point of
each line lands along them, as a fraction of the axis, must be where the still figure puts it.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
import pytest

from alibi_viz.figures import still
from alibi_viz.figures.render import figure_spec, plain_text
from alibi_viz_app import ui
from alibi_viz_app.testing import figures, run_app

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
# The pages whose figures are checked, with what a page needs in its URL, in English.
PAGES = {"bias": ("", {}), "compare": ("compare", {}), "extrapolation": ("extrapolation", {}),
         "lesson handout": ("lesson", {"print": "1"})}  # the handout: every step's figure


@pytest.fixture(scope="module")
def page_figures() -> dict[str, list[dict]]:
    """Every plotly figure the pages above draw on a laptop, as the browser gets it (JSON,
    arrays as plotly.js's typed arrays)."""
    return {name: figures(run_app(path, params)) for name, (path, params) in PAGES.items()}


def test_typed_arrays_read_as_plotly_wrote_them():
    """plotly's own JSON encoder (to_json) writes arrays as typed arrays; `still.values` reads
    back the numbers it was given, in every dtype and shape the pages send."""
    arrays = [np.arange(7, dtype=np.int64), np.linspace(-1, 1, 5, dtype=np.float32),
              np.arange(12, dtype=np.float64).reshape(3, 4), np.array([0, 255], dtype=np.uint8)]
    fig = go.Figure([go.Heatmap(z=a) if a.ndim == 2 else go.Scatter(y=a) for a in arrays])
    sent = json.loads(fig.to_json())["data"]
    for array, trace in zip(arrays, sent, strict=True):
        written = trace["z"] if array.ndim == 2 else trace["y"]
        assert isinstance(written, dict) and "bdata" in written  # typed, not a list
        np.testing.assert_array_equal(still.values(written), array)


def test_a_log_axis_puts_powers_of_two_evenly():
    """On a log axis 128, 256, ..., 4,096 lie evenly (the perplexity figure's lengths), the
    first and last at the ends of the range they set, with their labels as ticks."""
    lengths = [128 * 2**k for k in range(6)]
    spec = figure_spec(go.Figure(go.Scatter(x=lengths, y=[3, 2, 2, 2, 2, 2])).update_xaxes(
        type="log", range=[np.log10(128), np.log10(4096)], tickvals=lengths,
        ticktext=[str(n) for n in lengths]))
    axes, _area = still.plot_axes(spec, 400, 300)
    x = axes["xaxis"]
    px = x.px(x.data(lengths))
    np.testing.assert_allclose(np.diff(px), np.diff(px)[0], rtol=1e-9)
    assert px[0] == pytest.approx(x.span[0]) and px[-1] == pytest.approx(x.span[1])
    assert [label for _v, label in x.ticks()] == [str(n) for n in lengths]


def test_every_figure_of_the_pages_is_drawn_still(page_figures):
    """Each figure the pages draw becomes one still picture: its title, every named line in
    its legend, one marker per point drawn with markers, one SVG image per image trace, and
    no hover layer (invisible heatmaps are left out)."""
    count = 0
    for name, specs in page_figures.items():
        assert specs, f"{name}: no figure"
        for spec in specs:
            out = still.figure_html(spec, width=360)
            count += 1
            layout = spec.get("layout", {})
            title = (layout.get("title") or {}).get("text")
            if title:
                assert _plain(title) in _unescape(out), (name, title)
            traces = still.shown_traces(spec)
            images = sum(t.get("type") == "image" for t in traces)
            assert svg_of(out).count("<image ") >= images, (name, title)
            legend = re.search(r'<div class="avz-legend"[^>]*>(.*?)</div>', out)
            named = {_plain(t["name"]) for t in traces if t.get("name")
                     and t.get("showlegend", True) is not False
                     and t.get("type", "scatter") in ("scatter", "bar")}
            if len(named) > 1 and layout.get("showlegend", True) is not False:
                assert legend, (name, title)
                for label in named:
                    assert label in _unescape(legend.group(1)), (name, label)
    assert count >= 8


def svg_of(out: str) -> str:
    """The SVG inside a still figure's HTML (an <img> with a data URI)."""
    (data,) = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', out)
    svg = base64.b64decode(data).decode()
    assert svg.startswith("<svg ") and svg.endswith("</svg>")
    return svg


def _plain(text: str) -> str:
    return plain_text(str(text))


def _unescape(text: str) -> str:
    return html.unescape(text)


# For each axis of the figure plotly.js drew: its type, its range and, for every point of
# every line, marker or bar trace on it, the point's place along it as a fraction (0 at the
# axis's start: the left, or the top for a y axis).
PLOTLY_PLACES_JS = """async (spec) => {
  const gd = document.getElementById('g');
  await Plotly.newPlot(gd, spec.data, spec.layout, {staticPlot: true});
  const full = gd._fullLayout, axes = {}, points = [];
  for (const name of Object.keys(full)) {
    if (!/^[xy]axis\\d*$/.test(name)) continue;
    const ax = full[name];
    axes[name] = {type: ax.type, range: ax.range.slice()};
  }
  gd._fullData.forEach((trace) => {
    if (trace.type !== 'scatter' || trace.visible !== true || !trace.x || !trace.y) return;
    const k = trace.index;  // the trace's place in the figure's data
    const xa = full[trace.xaxis.replace('x', 'xaxis')], ya = full[trace.yaxis.replace('y', 'yaxis')];
    for (let i = 0; i < Math.min(trace.x.length, trace.y.length); i++) {
      const x = trace.x[i], y = trace.y[i];
      if (x === null || y === null || typeof x === 'string' || typeof y === 'string') continue;
      points.push([k, i, xa.d2p(x) / xa._length, ya.d2p(y) / ya._length]);
    }
  });
  return {axes, points};
}"""


@pytest.mark.browser
def test_points_land_where_plotly_js_draws_them(page_figures, browser):
    """Every point of every scatter trace (lines, markers, error bars' centres) of the pages'
    figures lands, along each of its axes, within 0.1% of where plotly.js puts it, on linear
    and log axes, in subplots and on reversed axes, once the still figure uses the ranges
    plotly.js chose (its own padding rule differs)."""
    context = browser.new_context(viewport={"width": 700, "height": 600})
    page = context.new_page()
    try:
        page.set_content('<div id="g" style="width:620px;height:450px"></div>')
        page.add_script_tag(path=str(PLOTLY_JS))
        checked = 0
        for name, specs in page_figures.items():
            for spec in specs:
                drawn = page.evaluate(PLOTLY_PLACES_JS, spec)
                ranged = json.loads(json.dumps(spec))
                for axis, seen in drawn["axes"].items():
                    ranged.setdefault("layout", {}).setdefault(axis, {})["range"] = seen["range"]
                    ranged["layout"][axis]["type"] = seen["type"]
                    ranged["layout"][axis].pop("autorange", None)
                axes, _area = still.plot_axes(ranged, 620, 450)
                for k, i, fx, fy in drawn["points"]:
                    trace = ranged["data"][k]
                    ax = axes[still._axis_name(trace.get("xaxis", "x"), "x")]
                    ay = axes[still._axis_name(trace.get("yaxis", "y"), "y")]
                    xs, ys = still._xy(trace, ax, ay)
                    ours_x = (ax.px(xs[i]) - ax.span[0]) / (ax.span[1] - ax.span[0])
                    ours_y = (ay.px(ys[i]) - ay.span[1]) / (ay.span[0] - ay.span[1])
                    assert ours_x == pytest.approx(fx, abs=1e-3), (name, k, i)
                    assert ours_y == pytest.approx(fy, abs=1e-3), (name, k, i)
                    checked += 1
        assert checked > 100
    finally:
        context.close()


def test_a_page_with_its_charts_off_draws_them_still_and_a_button_turns_them_on():
    """With the app's charts off (a phone's start), the Extrapolation lab sends no plotly
    chart: each figure is a still picture (an SVG image) with a button under it; the button turns
    every chart on, and the page draws them with plotly again."""
    at = run_app("extrapolation")
    shown = len(figures(at))
    assert shown >= 2
    at.session_state[ui.CHARTS] = False
    at.run()
    assert figures(at) == []
    stills = [h.proto.body for h in at.get("html") if still.STILL_CLASS in h.proto.body]
    assert len(stills) == shown
    assert all("<svg" in svg_of(body) for body in stills)
    buttons = [b for b in at.button if b.key and b.key.endswith("_charts_on")]
    assert len(buttons) == shown
    buttons[0].click().run()
    assert at.session_state[ui.CHARTS] is True
    assert len(figures(at)) == shown
