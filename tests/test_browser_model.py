"""Model heads and Inspect a model in a real browser: they render, and choosing a head redraws
its decomposition."""

from urllib.parse import quote

import pytest
from conftest import screenshot, wait_for_app
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = pytest.mark.browser

TEXT = quote("def add(a, b):\n    return a + b\n")


def open_page(page, url: str, charts: int) -> None:
    """Go to `url` and wait until `charts` plotly charts are drawn and the script is done."""
    page.goto(url)
    page.wait_for_selector(f".js-plotly-plot >> nth={charts - 1}")
    wait_for_app(page)


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label` (the first click can land while the
    page is still settling, so try again once or twice)."""
    for _ in range(3):
        page.get_by_role("combobox", name=label).click()
        try:
            page.get_by_role("option", name=option).click(timeout=5_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError(f"could not choose {option!r} in {label!r}")


def chart_title(page, index: int) -> str:
    return page.locator(".js-plotly-plot").nth(index).locator(".gtitle").first.text_content()


def test_model_heads_renders(page, server_url):
    """/model draws the grid, the head row and the statistics with no exception."""
    open_page(page, f"{server_url}/model?text={TEXT}", charts=3)
    assert chart_title(page, 0).startswith("Layer 1:")
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, "model_heads")


def test_choosing_a_head_redraws_its_decomposition(page, server_url):
    """Choosing head 5 redraws the decomposition row for head 5 and updates the URL."""
    open_page(page, f"{server_url}/model?text={TEXT}&head=1", charts=3)
    assert chart_title(page, 1).startswith("Layer 1, head 1")
    choose(page, "Head", "head 5")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot')[1]"
                           "?.querySelector('.gtitle')?.textContent.includes('head 5')")
    assert "head=5" in page.url


def test_inspect_renders(page, server_url):
    """/inspect shows the shipped model's facts, its slopes and its heads."""
    open_page(page, f"{server_url}/inspect?text={TEXT}", charts=4)
    assert chart_title(page, 0).startswith("Slopes of BloomForCausalLM")
    assert page.get_by_text("BloomForCausalLM (bloom)").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, "inspect")


def test_gallery_click_on_a_head_updates_the_detail(page, server_url):
    """The head gallery's grid renders; clicking another head's cell redraws the detail map
    and its text for that head."""
    open_page(page, f"{server_url}/model?text={TEXT}", charts=5)
    gallery = page.locator(".st-key-mh_fig_gallery .js-plotly-plot")
    gallery.scroll_into_view_if_needed()
    detail = page.locator(".st-key-mh_fig_gallery_map .gtitle")
    before = detail.text_content()
    points = gallery.locator("path.point")
    assert points.count() >= 32  # 4 layers x 8 heads (and the outline of the selected one)
    for index in range(points.count()):
        points.nth(index).click(force=True)
        try:
            page.wait_for_function(
                "([sel, old]) => document.querySelector(sel)?.textContent !== old",
                arg=[".st-key-mh_fig_gallery_map .gtitle", before], timeout=15_000)
            break
        except PlaywrightTimeout:
            continue  # that cell was the selected head already
    wait_for_app(page)
    assert detail.text_content() != before
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, "gallery")
