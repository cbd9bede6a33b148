"""The Extrapolation lab and the Lesson in a real browser: they render, the lesson steps through."""

import pytest
from conftest import screenshot, wait_for_app

from alibi_viz import assets

pytestmark = pytest.mark.browser

FIRST_LOAD_MS = 180_000  # a cold server loads the model and runs it on 1,024 tokens first
STEP_TITLES = ["Where position enters attention", "The bias matrix", "Slopes",
               "Decay and half-life", "A real head of the shipped model", "Train short, test long"]


def test_extrapolation_page_renders(page, server_url):
    """/extrapolation draws the results chart (when shipped) and the attention maps."""
    page.goto(server_url + "/extrapolation")
    expected = int(bool(assets.load_extrapolation_results(assets.RESULTS_PATH)))
    expected += int("alibi" in assets.shipped_models())
    if expected:
        page.wait_for_selector(f".js-plotly-plot >> nth={expected - 1}", timeout=FIRST_LOAD_MS)
    wait_for_app(page)
    assert page.locator(".js-plotly-plot").count() == expected
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("Run live evaluation").count() == 1
    screenshot(page, "extrapolation")


def test_lesson_steps_through_with_next(page, server_url):
    """Clicking Next five times walks the lesson from step 1 to step 6, with the URL following."""
    page.goto(server_url + "/lesson")
    page.get_by_role("heading", name=f"1. {STEP_TITLES[0]}").wait_for(timeout=FIRST_LOAD_MS)
    page.wait_for_selector(".js-plotly-plot")
    for step in range(2, 7):
        page.get_by_role("button", name="Next →").click()
        page.get_by_role("heading", name=f"{step}. {STEP_TITLES[step - 1]}").wait_for(
            timeout=FIRST_LOAD_MS)
        wait_for_app(page)
        assert page.locator("[data-testid='stException']").count() == 0
        if step == 5:
            screenshot(page, "lesson")
    assert "step=6" in page.url
    assert page.get_by_role("button", name="Next →").is_disabled()
