"""The Extrapolation lab and the Lesson in a real browser: they render, the lesson steps through."""

import pytest
from helpers import screenshot, wait_for_app

from alibi_viz import assets

pytestmark = pytest.mark.browser

FIRST_LOAD_MS = 180_000  # a cold server loads the model and runs it on 1,024 tokens first
STEP_TITLES = ["Where position enters attention", "The bias matrix", "Slopes",
               "Decay and half-life", "A real head of the shipped model", "Train short, test long",
               "How far back does it look?", "Watch a copying head form", "Common misconceptions"]


def test_extrapolation_page_renders_with_the_shipped_reach_curves(page, server_url):
    """/extrapolation draws the results chart (when shipped) and the attention maps, and its
    reach section draws one line per shipped model in each panel, from
    assets/results/reach.json (nothing is run for it). One page load for both."""
    page.goto(server_url + "/extrapolation")
    page.wait_for_selector(".st-key-xl_fig_reach .js-plotly-plot", timeout=FIRST_LOAD_MS)
    page.wait_for_selector(".st-key-xl_fig_attention .js-plotly-plot", timeout=FIRST_LOAD_MS)
    wait_for_app(page)
    assert page.locator(".st-key-xl_fig_results .js-plotly-plot").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("Run live evaluation").count() == 1
    screenshot(page, "extrapolation")
    chart = page.locator(".st-key-xl_fig_reach .js-plotly-plot")
    models = len(assets.load_reach_results()["models"])
    assert chart.locator(".scatterlayer .trace").count() >= 2 * models


def test_lesson_steps_through_with_next(page, server_url):
    """Clicking Next walks the lesson from step 1 to the last step, with the URL following."""
    page.goto(server_url + "/lesson")
    page.get_by_role("heading", name=f"1. {STEP_TITLES[0]}").wait_for(timeout=FIRST_LOAD_MS)
    page.wait_for_selector(".js-plotly-plot")
    for step in range(2, len(STEP_TITLES) + 1):
        page.get_by_role("button", name="Next →").click()
        page.get_by_role("heading", name=f"{step}. {STEP_TITLES[step - 1]}").wait_for(
            timeout=FIRST_LOAD_MS)
        wait_for_app(page)
        assert page.locator("[data-testid='stException']").count() == 0
        if step == 5:
            screenshot(page, "lesson")
    assert f"step={len(STEP_TITLES)}" in page.url
    assert page.get_by_role("button", name="Next →").is_disabled()
