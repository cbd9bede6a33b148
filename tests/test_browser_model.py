"""Model heads and Inspect a model in a real browser: they render, and choosing a head redraws
its decomposition."""

import contextlib
import re
from urllib.parse import quote

import pytest
from helpers import choose, screenshot, wait_for_app
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from alibi_viz_app.query_params import MAX_PARAM_CHARS

pytestmark = pytest.mark.browser

TEXT = quote("def add(a, b):\n    return a + b\n")


def open_page(page, url: str, charts: int) -> None:
    """Go to `url` and wait until `charts` plotly charts are drawn and the script is done."""
    page.goto(url)
    page.wait_for_selector(f".js-plotly-plot >> nth={charts - 1}")
    wait_for_app(page)


def chart_title(page, index: int) -> str:
    return page.locator(".js-plotly-plot").nth(index).locator(".gtitle").first.text_content()


def test_choosing_a_head_redraws_its_decomposition(page, server_url):
    """Choosing head 5 redraws the decomposition row for head 5 and updates the URL."""
    open_page(page, f"{server_url}/model?text={TEXT}&head=1", charts=3)
    assert chart_title(page, 1).startswith("Layer 1, head 1")
    choose(page, "Head", "head 5")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot')[1]"
                           "?.querySelector('.gtitle')?.textContent.includes('head 5')")
    assert "head=5" in page.url


@contextlib.contextmanager
def runs_finished(page):
    """Collect, while inside, how each script run the server sends ends (ForwardMsg's
    script_finished: 0 a whole-page run, 3 a fragment's run alone). The listener is taken
    off the page at the end: the page is the worker's shared one (conftest.WorkerPage)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    finished = []

    def received(frame):
        msg = ForwardMsg()
        msg.ParseFromString(frame if isinstance(frame, bytes) else frame.encode())
        if msg.WhichOneof("type") == "script_finished":
            finished.append(msg.script_finished)

    def opened(ws):
        ws.on("framereceived", received)

    page.on("websocket", opened)
    try:
        yield finished
    finally:
        page.remove_listener("websocket", opened)


def test_a_layer_or_head_switch_reruns_only_its_fragment(page, server_url):
    """Choosing a layer, then a head, reruns only the fragment around its picker (the grid and
    the head sections; the head sections), never the whole page: the text box, the gallery
    and the conformance check are not rebuilt for it."""
    with runs_finished(page) as finished:
        open_page(page, f"{server_url}/model?text={TEXT}", charts=3)
        assert finished and set(finished) == {0}  # the page's own first run
        finished.clear()
        choose(page, "Layer", "2")
        page.wait_for_function("() => document.querySelector('.js-plotly-plot .gtitle')"
                               "?.textContent.startsWith('Layer 2:')")
        wait_for_app(page)
        choose(page, "Head", "head 4")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot')[1]"
                               "?.querySelector('.gtitle')?.textContent.includes('head 4')")
        wait_for_app(page)
        assert finished == [3, 3]  # FINISHED_FRAGMENT_RUN_SUCCESSFULLY, twice
        assert "layer=2" in page.url and "head=4" in page.url


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


def tick_labels(page, index: int) -> list[str]:
    """The axis tick labels of the chart at `index`, as drawn."""
    return page.locator(".js-plotly-plot").nth(index).evaluate(
        "el => [...el.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent)")


@pytest.mark.parametrize("lang, letters", [("ru", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"),
                                           ("es", "áéíóúñ")])
def test_model_heads_in_russian_or_spanish_reads_letters(page, server_url, lang, letters):
    """/model?lang=ru (es) on the paragraph in that language (example=prose): the first map's axis
    labels are its letters (a two-byte letter on its first byte, a continuation mark on the
    second), never byte codes such as <0xD0>."""
    # the paragraph: its first 40 tokens hold accented letters (the default sentence's do not)
    open_page(page, f"{server_url}/model?lang={lang}&tokens=40&example=prose", charts=3)
    labels = tick_labels(page, 0)
    assert labels and not [t for t in labels if "<0x" in t]
    assert any(ch in letters for t in labels for ch in t.lower()), labels[:40]
    screenshot(page, f"model_heads_{lang}")


def test_model_heads_renders_and_its_training_step_slider_shows_an_earlier_model(page,
                                                                                server_url):
    """/model draws the grid, the head row and the statistics with no exception. Then, on the
    same page, moving the training-step slider to its start shows the ALiBi model at step 0,
    puts step=0 in the URL, and redraws the maps and the watch-heads-form figure for that
    step. (One page load for both: the checks of the page as it loads come first.)"""
    open_page(page, f"{server_url}/model?text={TEXT}", charts=6)
    assert chart_title(page, 0).startswith("Layer 1:")
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, "model_heads")
    before = page.locator(".js-plotly-plot").nth(0).inner_html()
    slider = page.get_by_role("slider", name="Training step")
    slider.focus()
    page.keyboard.press("Home")
    page.wait_for_function("() => location.search.includes('step=0')", timeout=60_000)
    page.get_by_text("Showing the ALiBi model at training step 0").wait_for(timeout=60_000)
    wait_for_app(page)
    assert page.locator(".js-plotly-plot").nth(0).inner_html() != before
    assert page.locator(".st-key-mh_fig_training .js-plotly-plot").count() == 1
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_spanish_page_s_toolbar_and_text_box_give_no_english(page, server_url):
    """On a Spanish page plotly's own toolbar tooltips are Spanish (the chart config's
    `locales`), e.g. the reset-axes button. Then, on the same page, typing in the text box
    shows no "Press Ctrl+Enter to apply" (English, and meaningless on a phone); the page's own
    hint says how the text is applied. (One page load for both: the toolbar is read first.)"""
    open_page(page, f"{server_url}/model?lang=es&text={TEXT}", charts=3)
    titles = page.locator(".js-plotly-plot").nth(1).evaluate(
        "el => [...el.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title'))")
    assert "Restablecer los ejes" in titles or "Escala automática" in titles, titles
    assert "Reset axes" not in titles and "Autoscale" not in titles
    box = page.get_by_role("textbox", name="Texto")
    box.click()
    page.keyboard.type(" x")
    assert page.get_by_text("Press Ctrl+Enter to apply").count() == 0 or \
        not page.get_by_text("Press Ctrl+Enter to apply").first.is_visible()
    assert page.get_by_text("fuera del cuadro").count() == 1


# Records every text a progress bar shows, from the page's first moment (an init script).
PROGRESS_JS = """(() => {
  window.__progressTexts = [];
  new MutationObserver(() => {
    for (const bar of document.querySelectorAll('[data-testid="stProgress"]')) {
      const text = bar.innerText.trim();
      if (text && !window.__progressTexts.includes(text)) window.__progressTexts.push(text);
    }
  }).observe(document, {subtree: true, childList: true, characterData: true});
})();"""


def test_a_new_text_shows_its_layers_in_a_progress_bar(fresh_page, server_url):
    """A new 2,048-token text on Model heads, in Spanish: while the model runs, a progress bar
    names the layer it has reached, in the page's language, and it is gone once the maps are
    drawn. (The text is this test's own, so no other test has it in the cache; a page of its
    own, since the recording script stays on a page.)"""
    page = fresh_page
    page.add_init_script(PROGRESS_JS)
    own = "progreso de las capas: " + " ".join(str(k * 7919 % 1000) for k in range(480))
    assert len(own) < MAX_PARAM_CHARS  # a longer URL value is refused
    open_page(page, f"{server_url}/model?lang=es&tokens=2048&text={quote(own)}", charts=3)
    assert page.get_by_text("Parámetro de URL ignorado").count() == 0  # the text was taken
    assert page.locator("textarea").first.input_value() == own
    texts = page.evaluate("() => window.__progressTexts")
    assert any(re.fullmatch(r"Ejecutando el modelo sobre el texto: capa [1-4] de 4\.\.\.", t)
               for t in texts), texts
    assert page.locator("[data-testid='stProgress']").count() == 0
