"""Model heads and the bias explorer on a 390x844 phone: the first figure is a canvas drawn with
no plotly loaded, it fits the screen, and a head switch in it is drawn in the browser with no
script run."""

import contextlib
from urllib.parse import quote

import pytest
from helpers import PAGE_LIST, choose, page_list_positions, screenshot, wait_for_app
from playwright.sync_api import expect

from alibi_viz_app.testing import PHONE_UA

pytestmark = pytest.mark.browser

TEXT = quote("def add(a, b):\n    return a + b\n")
MAPS = ".avm"  # the component's root (playwright's selectors go through its shadow root)


@pytest.fixture
def phone(browser):
    """A fresh 390x844 touch phone's page that says it is a phone, as a real one does."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, device_scale_factor=2, user_agent=PHONE_UA)
    page = context.new_page()
    page.set_default_timeout(120_000)
    yield page
    context.close()


@contextlib.contextmanager
def script_runs(page):
    """Collect, while inside, every rerun the page asks the server for (BackMsg rerun_script)
    and every script run the server finishes (ForwardMsg script_finished): what a head switch
    costs on the server, read from the websocket itself."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    runs = {"asked": 0, "finished": 0}

    def sent(frame):
        msg = BackMsg()
        msg.ParseFromString(frame if isinstance(frame, bytes) else frame.encode())
        runs["asked"] += msg.WhichOneof("type") == "rerun_script"

    def received(frame):
        msg = ForwardMsg()
        msg.ParseFromString(frame if isinstance(frame, bytes) else frame.encode())
        runs["finished"] += msg.WhichOneof("type") == "script_finished"

    def opened(ws):
        ws.on("framesent", sent)
        ws.on("framereceived", received)

    page.on("websocket", opened)
    yield runs


NO_PLOTLY_JS = """() => ({plotly: typeof window.Plotly,
  charts: document.querySelectorAll('.js-plotly-plot, [data-testid="stPlotlyChart"]').length})"""
# How far the page reaches past the screen's right edge, and the canvas grid's columns.
FIT_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return {page: document.documentElement.scrollWidth - window.innerWidth,
          main: main.scrollWidth - main.clientWidth};
}"""


def test_a_phone_sees_model_heads_on_a_canvas_and_switches_heads_in_the_browser(phone,
                                                                                 server_url):
    """At 390x844 with a phone's user agent, /model's first figure is drawn on canvases, with
    no plotly loaded and no plotly chart in the page; its grid has two columns, every panel
    drawn, and nothing reaches past the screen's edge. A tap on a head's button draws that head
    alone and another tap another head, each a different picture, with no rerun asked of the
    server and none run; hovering names the query and key; PNG saves a PNG file."""
    with script_runs(phone) as runs:
        phone.goto(f"{server_url}/model?text={TEXT}")
        maps = phone.locator(MAPS)
        maps.and_(phone.locator("[data-drawn]")).wait_for()
        wait_for_app(phone)
        screenshot(phone, "phone_model_canvas")
        assert phone.evaluate(NO_PLOTLY_JS) == {"plotly": "undefined", "charts": 0}
        panels = maps.locator(".avm-grid canvas")
        assert panels.count() == 8  # the shipped ALiBi model's heads
        boxes = [panels.nth(k).bounding_box() for k in range(8)]
        assert all(box["width"] > 100 and box["height"] > 100 for box in boxes)
        assert len({round(box["x"]) for box in boxes}) == 2  # two columns on a phone
        assert all(box["x"] + box["width"] <= 390 for box in boxes)
        assert phone.evaluate(FIT_JS) == {"page": 0, "main": 0}

        before = dict(runs)
        drawn = int(maps.get_attribute("data-drawn"))
        one = maps.locator(".avm-one canvas")
        pictures = []
        for head in (3, 5):
            maps.locator(f"button[data-head='{head - 1}']").tap()
            expect(maps).to_have_attribute("data-head", str(head - 1))  # drawn in the tap
            assert int(maps.get_attribute("data-drawn")) > drawn
            drawn = int(maps.get_attribute("data-drawn"))
            assert maps.get_attribute("data-mode") == "one"
            pictures.append(one.evaluate("c => c.toDataURL()"))
        assert pictures[0] != pictures[1]
        one.scroll_into_view_if_needed()
        box = one.bounding_box()
        assert box["width"] > 300 and box["x"] + box["width"] <= 390
        phone.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.9)
        tip = maps.locator(".avm-tip")
        assert "query i=" in tip.inner_text() and "key j=" in tip.inner_text()
        with phone.expect_download() as saved:
            maps.locator(".avm-save").click()
        path = saved.value.path()
        assert saved.value.suggested_filename.endswith(".png")
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        phone.wait_for_timeout(500)  # a rerun, were one asked, would have begun by now
        assert runs == before
        assert phone.evaluate(NO_PLOTLY_JS) == {"plotly": "undefined", "charts": 0}
        assert phone.evaluate(FIT_JS) == {"page": 0, "main": 0}


def test_a_phone_sees_the_bias_matrices_on_a_canvas_with_no_plotly(phone, server_url):
    """At 390x844 with a phone's user agent, /'s bias matrices are drawn on canvases with no
    plotly loaded and no plotly chart in the page (*Interactive charts* starts off, in sight
    on the first screen); 8 heads in two columns, nothing past the screen's edge; the masked
    upper triangle is grey and its hover says masked, a pixel below it names the bias. 64
    heads at 4,096 tokens in the same page fit too, four to a row."""
    phone.goto(server_url)
    maps = phone.locator(MAPS)
    maps.and_(phone.locator("[data-drawn]")).wait_for()
    wait_for_app(phone)
    screenshot(phone, "phone_bias_canvas")
    assert phone.evaluate(NO_PLOTLY_JS) == {"plotly": "undefined", "charts": 0}
    toggle = phone.get_by_role("switch", name="Interactive charts")
    assert toggle.is_visible() and not toggle.is_checked()
    assert toggle.bounding_box()["y"] < 844
    panels = maps.locator(".avm-grid canvas")
    assert panels.count() == 8
    boxes = [panels.nth(k).bounding_box() for k in range(8)]
    assert len({round(box["x"]) for box in boxes}) == 2
    assert all(box["x"] + box["width"] <= 390 for box in boxes)
    assert phone.evaluate(FIT_JS) == {"page": 0, "main": 0}
    first = panels.first
    first.scroll_into_view_if_needed()
    screenshot(phone, "phone_bias_canvas_grid")
    corner = first.evaluate("c => Array.from(c.getContext('2d').getImageData("
                            "c.width - 2, 1, 1, 1).data.slice(0, 3))")
    assert corner == [215, 215, 215]  # render.MASK_RGB
    box = first.bounding_box()
    tip = maps.locator(".avm-tip")
    phone.mouse.move(box["x"] + box["width"] * 0.9, box["y"] + box["height"] * 0.1)
    assert "masked" in tip.inner_text()
    phone.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.9)
    assert "bias" in tip.inner_text() and "distance i-j=" in tip.inner_text()

    phone.goto(f"{server_url}/?heads=64&len=4096")
    maps.and_(phone.locator("[data-drawn]")).wait_for()
    wait_for_app(phone)
    panels = maps.locator(".avm-grid canvas")
    assert panels.count() == 64
    xs = {round(panels.nth(k).bounding_box()["x"]) for k in range(8)}
    assert len(xs) == 4
    panels.first.scroll_into_view_if_needed()
    screenshot(phone, "phone_bias_canvas_64")
    assert phone.evaluate(NO_PLOTLY_JS) == {"plotly": "undefined", "charts": 0}
    assert phone.evaluate(FIT_JS) == {"page": 0, "main": 0}


# Each still figure's box, title and legend against the screen: what reaches past its right
# edge, and what of a title or legend entry is cut by its own box.
STILL_FIT_JS = """() => {
  const width = document.documentElement.clientWidth, out = [];
  for (const fig of document.querySelectorAll('.avz-still')) {
    if (!fig.checkVisibility()) continue;
    const img = fig.querySelector('img'), box = img.getBoundingClientRect();
    if (!img.complete || !img.naturalWidth) out.push('picture not drawn');
    if (box.right > width + 1 || box.width < 100) out.push(`picture ${box.left}-${box.right}`);
    for (const t of fig.querySelectorAll('.avz-title, .avz-legend > span, .avz-bar')) {
      const r = t.getBoundingClientRect();
      if (r.right > width + 1 || t.scrollWidth > t.clientWidth + 1)
        out.push(`"${t.textContent.slice(0, 40)}" ${r.right}`);
    }
  }
  return out;
}"""


@pytest.mark.parametrize("path", ["lesson", "compare", "extrapolation", "inspect"])
def test_a_phone_sees_each_figure_still_with_no_plotly_and_can_turn_charts_on(phone,
                                                                               server_url, path):
    """At 390x844 with a phone's user agent, in Spanish: the page's figures are still pictures
    (SVG images made on the server) with no plotly loaded and no plotly chart; each fits the screen,
    its title and legend entries whole; the button under the first turns the charts on, and
    plotly draws them."""
    phone.goto(f"{server_url}/{path}?lang=es")
    phone.locator(".avz-still img").first.wait_for()
    wait_for_app(phone)
    screenshot(phone, f"phone_still_{path}_es")
    assert phone.evaluate(NO_PLOTLY_JS) == {"plotly": "undefined", "charts": 0}
    assert phone.evaluate(STILL_FIT_JS) == []
    assert phone.evaluate(FIT_JS) == {"page": 0, "main": 0}
    stills = phone.locator(".avz-still").count()
    phone.get_by_role("button", name="Gráficos interactivos").first.click()
    phone.locator(".js-plotly-plot .main-svg").first.wait_for()
    wait_for_app(phone)
    assert phone.locator(".avz-still").count() == 0
    assert phone.locator(".js-plotly-plot").count() >= min(stills, 1)


SIDEBAR_WIDGETS_JS = """() => document.querySelectorAll('[data-testid="stSidebar"] ' +
  ':is(input, textarea, button[role="switch"], [role="combobox"], [role="radiogroup"])').length"""


def test_a_phone_finds_the_controls_in_settings_and_gets_the_first_figure_first(phone,
                                                                               server_url):
    """At 390x844 with a phone's user agent, in Russian, on the bias explorer: the sidebar holds
    only the pages, and the controls wait in a Settings popover at the top of the page, which
    the text names; the first run ends at the first figure and the browser asks for the rest
    itself (two runs, each asked and finished), after which the bias matrices are drawn. In
    the popover, 4 heads redraw the matrices with 4 panels."""
    with script_runs(phone) as runs:
        phone.goto(f"{server_url}/?lang=ru")
        maps = phone.locator(MAPS)
        maps.and_(phone.locator("[data-drawn]")).wait_for()
        wait_for_app(phone)
        assert runs == {"asked": 2, "finished": 2}
    assert phone.evaluate(SIDEBAR_WIDGETS_JS) == 0
    assert maps.locator(".avm-grid canvas").count() == 8
    main = phone.locator("[data-testid='stMain']")
    assert "в «Настройках» вверху страницы" in main.inner_text()
    settings = phone.get_by_role("button", name="Настройки")
    box = settings.bounding_box()
    assert box["y"] < 200 and box["x"] + box["width"] <= 390
    settings.click()
    body = phone.locator("[data-testid='stPopoverBody']")
    expect(body.get_by_text("Language · Idioma · Язык")).to_be_visible()
    heads = body.get_by_role("spinbutton", name="Головы", exact=True)
    heads.fill("4")
    heads.press("Enter")
    expect(maps.locator(".avm-grid canvas")).to_have_count(4)
    screenshot(phone, "phone_settings_ru")


def test_a_phone_sees_the_maps_before_the_text_box_and_still_changes_layer_and_text(phone,
                                                                                    server_url):
    """At 390x844 with a phone's user agent, /model draws the maps first: the layer picker, the
    text box and the *Interactive charts* toggle come after them, and the page says so. Layer 2 picked there redraws the maps of layer 2 (the
    picker's rerun reads the choice just made), and a new text typed there is the one read."""
    phone.goto(f"{server_url}/model?text={TEXT}")
    maps = phone.locator(MAPS)
    maps.and_(phone.locator("[data-drawn]")).wait_for()
    wait_for_app(phone)
    text = phone.get_by_role("textbox", name="Text")
    layer = phone.locator("[data-testid='stSelectbox']").filter(has_text="Layer")
    top = maps.bounding_box()["y"]
    assert layer.bounding_box()["y"] > top and text.bounding_box()["y"] > top
    main = phone.locator("[data-testid='stMain']")
    assert "Every head of layer 1" in main.inner_text()
    choose(phone, "Layer", "2", exact=True)
    expect(main.get_by_text("Every head of layer 2")).to_be_visible()
    tokens = main.get_by_text("tokens; trained on").first.inner_text()
    text.fill("one two three four five six seven eight nine ten eleven twelve")
    text.press("Tab")
    expect(main.get_by_text("tokens; trained on").first).not_to_have_text(tokens)
    wait_for_app(phone)
    assert maps.locator(".avm-grid canvas").count() == 8
    assert "Every head of layer 2" in main.inner_text()
    assert "5. Conformance" in main.inner_text()  # the page drawn to its end
    toggle = phone.get_by_role("switch", name="Interactive charts")
    assert "turn on Interactive charts below" in main.inner_text()
    assert toggle.bounding_box()["y"] > maps.bounding_box()["y"]


# Watches a page from its first script on: the frame in which its first figure is drawn (a
# still figure's image decoded, or canvas maps drawn), and when the hidden button that asks for
# the rest of the page was clicked.
SPLIT_WATCH_JS = """(() => {
  const w = window.__split = {figure: null, click: null};
  const drawn = () => document.querySelector('[data-avm-drawn]') !== null ||
    [...document.querySelectorAll('.avz-still img')].some((i) => i.complete && i.naturalWidth > 0);
  const frame = () => { if (drawn()) w.figure = performance.now(); else requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
  document.addEventListener('click', (event) => {
    if (w.click === null && event.target.closest('.st-key-first_figure_rest')) w.click = performance.now();
  }, true);
})();"""


@contextlib.contextmanager
def first_run_elements(page):
    """The elements the page's first script run sent to the main area, out of the Settings
    popover (drawn only when opened), in order, as (type, text) pairs: read from the websocket
    until its first script_finished."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    elements, done, popovers = [], [], []

    def received(frame):
        msg = ForwardMsg()
        msg.ParseFromString(frame if isinstance(frame, bytes) else frame.encode())
        kind = msg.WhichOneof("type")
        if done or kind not in ("delta", "script_finished"):
            return
        path = list(msg.metadata.delta_path)
        if kind == "script_finished":
            done.append(True)
        elif msg.delta.WhichOneof("type") == "add_block":
            if msg.delta.add_block.WhichOneof("type") == "popover":
                popovers.append(path)
        elif (msg.delta.WhichOneof("type") == "new_element" and path[0] == 0
              and not any(path[:len(p)] == p for p in popovers)):  # the main area
            element = msg.delta.new_element
            kind = element.WhichOneof("type")
            body = getattr(element, kind)
            elements.append((kind, getattr(body, "body", "") or getattr(body, "label", "")))

    page.on("websocket", lambda ws: ws.on("framereceived", received))
    yield elements


def top(page, selector: str) -> float:
    return page.locator(f"[data-testid='stMain'] {selector}").first.bounding_box()["y"]


@pytest.mark.parametrize("path", ["lesson", "", "model"])
def test_a_phone_draws_the_first_figure_before_what_waits_for_the_rest_of_the_page(
        phone, server_url, path):
    """At 390x844 with a phone's user agent: the page's first run ends at its first figure,
    and the browser asks for the rest of the page (the hidden button's click) only once that
    figure is drawn. What would hold the figure back is not in that first run and comes with
    the rest: the page list, the button under a still figure, and on the Lesson the formula
    and the slope slider, which then take their places above the figure."""
    phone.context.add_init_script(SPLIT_WATCH_JS)
    last = {"lesson": "[data-testid='stMain'] .katex", "": "text=Interactive charts (values on hover)",
            "model": "text=5. Conformance"}[path]  # drawn by the rest of the page
    with (script_runs(phone) as runs, first_run_elements(phone) as first,
          page_list_positions(phone) as positions):
        phone.goto(f"{server_url}/{path}")
        phone.locator(last).first.wait_for()
        wait_for_app(phone)
        # /model's maps sit in a fragment: the click reruns it, which reruns the whole page
        assert runs == {"asked": 2, "finished": 3 if path == "model" else 2}
    assert positions == ["HIDDEN", "SIDEBAR"]  # the page list came with the rest of the page
    assert phone.locator(PAGE_LIST).count() == 6
    split = phone.evaluate("() => window.__split")
    assert split["figure"] is not None and split["click"] is not None, split
    assert split["click"] >= split["figure"]
    kinds = [kind for kind, _text in first]
    figure = "bidi_component" if path == "model" else "html"  # the canvas maps, or a still one
    assert kinds[-3:] == [figure, "button", "html"]  # the figure, then the split
    assert [text for kind, text in first if kind == "button"] == ["…"]  # the hidden one alone
    if path == "lesson":
        assert "slider" not in kinds and not any(text.startswith("$$") for _kind, text in first)
        figure = top(phone, ".avz-still")
        assert top(phone, ".katex") < top(phone, "[data-testid='stSlider']") < figure
        assert phone.get_by_role("button", name="Interactive charts (values on hover)").is_visible()
    elif path == "":
        assert phone.get_by_role("button", name="Interactive charts (values on hover)").first.is_visible()
    else:
        assert phone.locator(MAPS).locator(".avm-grid canvas").count() == 8


def test_a_phone_gets_the_touch_script_with_the_charts_it_tends(phone, server_url):
    """At 390x844 with a phone's user agent: while the charts are off, the script that keeps
    plotly from taking a finger's swipe is not sent (its watch on the page's changes would cost
    the first figure); turned on, the charts come with it and do not zoom on a swipe."""
    phone.goto(server_url)
    phone.locator(".avz-still img").first.wait_for()
    wait_for_app(phone)
    assert phone.evaluate("() => window.__alibiVizTouch") is None
    phone.get_by_role("button", name="Interactive charts (values on hover)").first.click()
    phone.locator(".js-plotly-plot .main-svg").first.wait_for()
    wait_for_app(phone)
    assert phone.evaluate("() => window.__alibiVizTouch") is True
    phone.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')]"
                            ".every((p) => p._fullLayout && p._fullLayout.dragmode === false)")


@pytest.mark.parametrize("how", ["present", "charts on"])
def test_a_phone_run_with_no_figure_to_end_at_still_draws_what_waited(phone, server_url, how):
    """At 390x844 with a phone's user agent, the Lesson's step 1 keeps its formula's and its
    slider's places for the rest of the page, and a phone's first run hides the page list. A
    first run that draws no figure to end at (on a projector's question not yet revealed, or
    with the charts turned on, drawn by plotly) reruns at once, and the slider (and off a
    projector the formula) and the page list are there."""
    if how == "charts on":
        phone.goto(server_url)
        phone.locator(".avz-still img").first.wait_for()
        wait_for_app(phone)
        phone.get_by_role("button", name="Interactive charts (values on hover)").first.click()
        phone.locator(".js-plotly-plot .main-svg").first.wait_for()
        wait_for_app(phone)
        phone.goto(f"{server_url}/lesson")
        phone.locator("[data-testid='stMain'] .katex").first.wait_for()
    else:
        phone.goto(f"{server_url}/lesson?present=1")
        phone.get_by_role("button", name="Reveal the answer").wait_for()
    phone.locator("[data-testid='stMain'] [data-testid='stSlider']").first.wait_for()
    wait_for_app(phone)
    assert phone.get_by_role("slider").first.is_visible()
    assert phone.locator(PAGE_LIST).count() == 6


def test_a_phone_page_that_stops_at_a_message_has_its_page_list(phone, server_url):
    """At 390x844 with a phone's user agent, a first run that stops at a message before any
    figure (Inspect a model with no folder typed yet) reruns at once, the page list shown:
    the message is where a phone's user would go to another page."""
    with page_list_positions(phone) as positions:
        phone.goto(f"{server_url}/inspect?source=folder")
        phone.get_by_text("Type the path of a model folder in Settings").wait_for()
        wait_for_app(phone)
    # the first run's hidden list may never be sent: a rerun drops what its run has not sent
    assert positions[-1] == "SIDEBAR", positions
    assert phone.locator(PAGE_LIST).count() == 6


def test_a_phone_in_presentation_mode_draws_the_pages_figure(phone, server_url):
    """At 390x844 with a phone's user agent, a Lesson step in presentation mode draws the
    figure the page draws outside it, fitted to the phone, not a projector's (its texts fitted
    to a projector's width: on a phone, letters too small to read and step 1's side-by-side
    axis titles running into each other)."""
    def stills(url: str) -> list[str]:
        phone.goto(url)
        if "present=1" in url:
            phone.get_by_role("button", name="Reveal the answer").click()
        phone.locator(".avz-still img").first.wait_for()
        wait_for_app(phone)
        return phone.locator(".avz-still img").evaluate_all("(imgs) => imgs.map((i) => i.src)")

    page_figures = stills(f"{server_url}/lesson?step=1")
    presented = stills(f"{server_url}/lesson?step=1&present=1")
    assert len(presented) == 1 and presented[0] in page_figures
