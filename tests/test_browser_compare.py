"""The compare page in a real browser: renders, re-renders on input, restores a shared URL."""

import pytest
from helpers import screenshot, wait_for_app

pytestmark = pytest.mark.browser


def chart(page, index: int):
    return page.locator(".js-plotly-plot").nth(index)


def panel_titles(page) -> list[str]:
    """Panel titles drawn in the matrix mosaic (SVG text of the second chart)."""
    return chart(page, 1).locator("g.textpoint").all_text_contents()


def open_compare(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".js-plotly-plot >> nth=1")
    wait_for_app(page)


def test_shared_url_renders_and_restores(page, server_url):
    """A shared /compare URL draws both charts with exactly its methods, length and mode."""
    open_compare(page, server_url + "/compare?methods=alibi,kerple_power&len=4096"
                                    "&mode=symmetric&kerple_power.r2=1")
    assert page.get_by_label("Sequence length", exact=True).input_value() == "4096"
    assert chart(page, 0).locator("g.scatterlayer g.trace").count() == 2
    assert "symmetric" in chart(page, 0).locator(".gtitle").text_content()
    assert chart(page, 1).locator("g.imagelayer image").count() == 1
    titles = panel_titles(page)
    assert [t.split(" (÷")[0] for t in titles] == ["1. ALiBi", "2. KERPLE (power)"]
    assert page.get_by_text("URL parameter ignored").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, "compare")


def test_changing_length_rerenders(page, server_url):
    """/compare starts with the six default methods; typing 65536 tokens redraws the matrices
    downsampled and puts len=65536 in the URL."""
    open_compare(page, server_url + "/compare")
    assert len(panel_titles(page)) == 6
    box = page.get_by_label("Sequence length", exact=True)
    box.fill("65536")
    box.press("Enter")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot')[1]"
        "?.querySelector('.gtitle')?.textContent.includes('65,536x65,536')")
    assert "len=65536" in page.url


HIDDEN_METHODS_JS = """() => {
  const box = document.querySelector('.st-key-cmp_methods');
  const tags = box.querySelector('[data-testid=stMultiSelectTagsContainer]');
  const hidden = [];
  if (tags.scrollHeight > tags.clientHeight + 1) hidden.push('the chips scroll');
  for (const span of tags.querySelectorAll('span'))
    if (span.children.length === 0 && span.scrollWidth > span.clientWidth + 1)
      hidden.push('cut: ' + span.textContent);
  return hidden;
}"""


def test_every_chosen_method_is_in_sight_at_1024_in_spanish(screen, server_url):
    """The methods box in the sidebar at 1024x768 in Spanish shows every chosen method whole:
    no chip scrolled out of its box (Sandwich, the sixth, was) and no name cut short."""
    page = screen(1024, 768)
    open_compare(page, server_url + "/compare?lang=es")
    chips = page.locator(".st-key-cmp_methods [data-testid='stMultiSelectTagsContainer'] [role='group'] > *")
    assert chips.count() == 6
    assert page.evaluate(HIDDEN_METHODS_JS) == []
