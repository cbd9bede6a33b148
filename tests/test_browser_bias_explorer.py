"""The bias explorer in a real browser: renders, re-renders on input, restores a shared URL."""

import pytest
from conftest import screenshot, wait_for_app

pytestmark = pytest.mark.browser


def grid_titles(page) -> list[str]:
    """Panel titles drawn in the bias grid (SVG text of the second chart)."""
    return page.locator(".js-plotly-plot").nth(1).locator("g.textpoint").all_inner_texts()


def test_page_renders_charts(page, server_url):
    """The landing page draws the slope, grid and decay charts with the default 8 heads."""
    page.goto(server_url)
    page.wait_for_selector(".js-plotly-plot >> nth=2")
    wait_for_app(page)
    assert page.locator(".js-plotly-plot").count() >= 3
    assert len(grid_titles(page)) == 8
    screenshot(page, "bias_explorer")


def test_typing_head_count_rerenders_grid(page, server_url):
    """Typing 12 heads redraws the grid with 12 panels."""
    page.goto(server_url)
    page.wait_for_selector(".js-plotly-plot >> nth=2")
    box = page.get_by_label("Heads", exact=True)
    box.fill("12")
    box.press("Enter")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot')[1]"
        "?.querySelectorAll('g.textpoint').length === 12")
    assert len(grid_titles(page)) == 12
    assert "heads=12" in page.url


def test_shared_url_restores_view(page, server_url):
    """Opening /?heads=12&len=512&mode=symmetric shows exactly that view."""
    page.goto(server_url + "/?heads=12&len=512&mode=symmetric")
    page.wait_for_selector(".js-plotly-plot >> nth=2")
    wait_for_app(page)
    assert page.get_by_label("Heads", exact=True).input_value() == "12"
    assert page.get_by_label("Sequence length", exact=True).input_value() == "512"
    assert "symmetric" in page.locator(".js-plotly-plot").nth(1).locator(".gtitle").text_content()
    assert len(grid_titles(page)) == 12
    screenshot(page, "bias_explorer_shared_url")


def test_bad_url_warns_in_browser(page, server_url):
    """A bad URL value shows a visible warning and the page still draws."""
    page.goto(server_url + "/?heads=-3&len=abc")
    page.wait_for_selector(".js-plotly-plot >> nth=2")
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
    page.wait_for_selector(".js-plotly-plot >> nth=2")
    wait_for_app(page)
    assert outside == []
