"""The bias explorer in a real browser: renders, re-renders on input, restores a shared URL."""

import time

import pytest
from helpers import draw_every_figure, screenshot, wait_for_app

pytestmark = pytest.mark.browser


MAPS = ".avm"  # the canvas grid's root (`canvas_maps`; playwright's selectors pierce its shadow)
CHARTS_DRAWN = ".js-plotly-plot:visible >> nth=1"  # slopes and decay (the grid's is folded)


def grid_titles(page) -> list[str]:
    """Panel titles drawn in the bias grid (the canvas grid's captions)."""
    return page.locator(f"{MAPS} .avm-grid .avm-cap").all_inner_texts()


def test_page_renders_charts_and_typing_a_head_count_rerenders_the_grid(page, server_url):
    """The landing page draws the slope and decay charts and the canvas grid with the default 8
    heads, and the grid again as a plotly chart in an expander; then,
    on the same page, typing 12 heads redraws the grid with 12 panels. (One page load for both:
    the checks of the page as it loads come first.)"""
    page.goto(server_url)
    page.wait_for_selector(CHARTS_DRAWN)
    page.locator(f"{MAPS}[data-drawn]").wait_for()
    wait_for_app(page)
    assert page.locator(".st-key-be_fig_grid").count() == 1
    assert page.locator(".js-plotly-plot").count() >= 2
    assert len(grid_titles(page)) == 8
    # with a mouse, a drag still zooms (only a touch screen draws charts without a drag mode)
    assert page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')]"
                         ".every(p => p._fullLayout.dragmode !== false)")
    screenshot(page, "bias_explorer")
    box = page.get_by_label("Heads", exact=True)
    box.fill("12")
    box.press("Enter")
    page.locator(f"{MAPS} .avm-grid .avm-cap >> nth=11").wait_for()
    assert len(grid_titles(page)) == 12
    assert "heads=12" in page.url


def test_shared_url_restores_view(page, server_url):
    """Opening /?heads=12&len=512&mode=symmetric shows exactly that view."""
    page.goto(server_url + "/?heads=12&len=512&mode=symmetric")
    page.wait_for_selector(CHARTS_DRAWN)
    page.locator(f"{MAPS}[data-drawn]").wait_for()
    wait_for_app(page)
    assert page.get_by_label("Heads", exact=True).input_value() == "12"
    assert page.get_by_label("Sequence length", exact=True).input_value() == "512"
    assert "symmetric" in page.locator(f"{MAPS} .avm-title").text_content()
    assert len(grid_titles(page)) == 12
    screenshot(page, "bias_explorer_shared_url")


def test_bad_url_warns_in_browser(page, server_url):
    """A bad URL value shows a visible warning and the page still draws."""
    page.goto(server_url + "/?heads=-3&len=abc")
    page.wait_for_selector(CHARTS_DRAWN)
    assert page.get_by_text("URL parameter ignored").count() >= 2
    assert page.locator("[data-testid='stException']").count() == 0


def test_no_request_leaves_the_machine(fresh_page, server_url):
    """Offline: opening the app asks nothing of any host but the local server (in a page of
    its own: an empty cache, so every request is made)."""
    page = fresh_page
    outside = []
    page.on("request", lambda request: None if request.url.startswith(
        (server_url, "data:", "blob:", "about:")) else outside.append(request.url))
    page.goto(server_url)
    page.wait_for_selector(CHARTS_DRAWN)
    wait_for_app(page)
    assert outside == []


MAIN_SCROLL_JS = "() => document.querySelector('[data-testid=stMain]').scrollTop"
RANGES_JS = """(plot) => JSON.stringify(['xaxis', 'yaxis'].map(
    a => plot._fullLayout[a] ? plot._fullLayout[a].range : null))"""


def swipe(cdp, x: float, y: float, dy: float, steps: int = 10) -> None:
    """A finger on (x, y) moved dy px vertically and lifted, as touch events."""
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for k in range(1, steps + 1):
        cdp.send("Input.dispatchTouchEvent",
                 {"type": "touchMove", "touchPoints": [{"x": x, "y": y + dy * k / steps}]})
        time.sleep(0.016)  # a finger's pace: one move a frame
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def test_a_swipe_on_a_chart_scrolls_a_phone(browser, server_url):
    """On a 390x844 touch screen in Russian, a swipe up that starts on a chart scrolls the page
    and leaves the chart's axes alone (it used to zoom the chart and not move the page); after
    the chart's toolbar button for zooming is tapped, the same swipe explores the chart."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                  is_mobile=True)
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(server_url + "/?lang=ru")
        page.wait_for_selector(CHARTS_DRAWN, timeout=180_000)
        draw_every_figure(page)
        cdp = context.new_cdp_session(page)
        plots = page.locator(".js-plotly-plot:visible")  # the grid's is in a closed expander
        assert plots.count() == 2
        for index in range(2):
            plot = plots.nth(index)
            plot.scroll_into_view_if_needed()
            wait_for_app(page)
            box = plot.bounding_box()
            before, ranges = page.evaluate(MAIN_SCROLL_JS), plot.evaluate(RANGES_JS)
            swipe(cdp, box["x"] + box["width"] / 2, box["y"] + min(box["height"] / 2, 300), -150)
            page.wait_for_function(f"() => ({MAIN_SCROLL_JS})() > {before} + 50", timeout=5_000)
            assert plot.evaluate(RANGES_JS) == ranges, f"chart {index + 1} was zoomed"
        # exploring, asked for: the toolbar's zoom button, then the same swipe zooms
        plot = plots.first
        plot.scroll_into_view_if_needed()
        wait_for_app(page)
        plot.evaluate("(p) => p._fullLayout._modeBar.buttonElements"
                      ".find(b => b.getAttribute('data-val') === 'zoom').click()")
        assert plot.evaluate("(p) => p._fullLayout.dragmode") == "zoom"
        box, ranges = plot.bounding_box(), plot.evaluate(RANGES_JS)
        swipe(cdp, box["x"] + box["width"] / 2, box["y"] + box["height"] / 2 - 60, 120)
        page.wait_for_function(f"(r) => ({RANGES_JS})(document.querySelector('.js-plotly-plot'))"
                               " !== r", arg=ranges, timeout=5_000)
    finally:
        context.close()
