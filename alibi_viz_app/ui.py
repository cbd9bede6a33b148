"""Small Streamlit helpers shared by the pages: URL state, figures, downloads.

Only display code lives here; everything a page shows is computed in `alibi_viz`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import threading
import time
from typing import NoReturn

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from alibi_viz import i18n
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures import still
from alibi_viz.figures.extrapolation import perplexity_figure, reach_figure
from alibi_viz.figures.lesson import projector_figure
from alibi_viz.figures.render import PAGE_WIDTH_PX, figure_spec, sendable, with_toolbar_room
from alibi_viz.i18n import _
from alibi_viz_app.query_params import UrlParam, parse_param

STATE_KEYS = "_url_state_keys"  # widget keys registered by seed_from_url
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def _seeded_flag(prefix: str) -> str:
    return f"_{prefix}_seeded"


def first_visit(prefix: str) -> bool:
    """True until `seed_from_url(prefix, ...)` has run in this session: the page's first run,
    when its controls still come from the URL."""
    return not st.session_state.get(_seeded_flag(prefix))


def seed_from_url(prefix: str, specs: list[UrlParam]) -> bool:
    """Set each control's state from the URL on a session's first visit to the page.

    Widget keys are f"{prefix}_{name}". Bad URL values fall back to defaults with a visible
    warning. The keys are registered for `keep_page_state`, which carries their values across
    visits to other pages. Returns True on that first visit (the values just came from the URL).
    """
    flag = _seeded_flag(prefix)
    keys = [f"{prefix}_{spec.name}" for spec in specs]
    seeding = first_visit(prefix)
    if seeding:
        warnings = []
        for spec, key in zip(specs, keys, strict=True):
            value, warning = parse_param(spec, st.query_params.get_all(spec.name) or None)
            st.session_state[key] = value
            if warning:
                warnings.append(warning)
        st.session_state[flag] = True
        st.session_state[f"_{prefix}_url_warnings"] = warnings
        st.session_state[STATE_KEYS] = [*st.session_state.get(STATE_KEYS, []), *keys]
    for spec, key in zip(specs, keys, strict=True):
        if key not in st.session_state:
            st.session_state[key] = spec.default
    return seeding


def keep_page_state() -> None:
    """Keep every page's controls while another page is shown (main.py calls this each run).

    Streamlit deletes the state of widgets that a run does not draw, so visiting another page
    would reset a page's controls. Assigning a key to itself at the start of every run hands
    its value to Session State for that run, so it survives: Streamlit's documented way to
    carry widget values between pages.
    """
    for key in st.session_state.get(STATE_KEYS, []):
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def show_url_warnings(prefix: str) -> None:
    """Show (once) the warnings collected when the URL was read."""
    for warning in st.session_state.pop(f"_{prefix}_url_warnings", []):
        st.warning(_("URL parameter ignored: {warning}").format(warning=warning), icon="⚠️")


def labels(options, label=None):
    """A widget's format_func whose texts are written now, in this run's language: `options`
    a {value: English name} table (the names are translated) or any values with `label(value)`
    writing each. Streamlit and AppTest may call a format_func later, outside the script
    thread where the run's language is set, so it must not translate by itself."""
    if label is None:
        texts = {value: _(name) for value, name in options.items()}
    else:
        texts = {value: label(value) for value in options}
    return texts.__getitem__


LANG_PARAM = UrlParam("lang", "choice", i18n.DEFAULT_LANGUAGE, choices=tuple(i18n.LANGUAGES))
LANG_KEY = "app_lang"  # the sidebar switch's key


def choose_language() -> str:
    """Set this run's language. main.py calls it first thing in every run, then draws the
    switch (`language_switch`) where the settings go (`place_settings`).

    The session's first run takes the URL's `lang`, else the browser's Accept-Language, else
    English; after that the switch decides, and `write_url` keeps it in the URL, so a shared
    link opens in the same language. A bad `lang` falls back with a warning.
    """
    if LANG_KEY not in st.session_state:
        raw = st.query_params.get_all("lang") or None
        value, warning = parse_param(LANG_PARAM, raw)
        if raw is None:
            value = i18n.negotiate(st.context.headers.get("Accept-Language")) or value
        st.session_state[LANG_KEY] = value
        st.session_state["_lang_warning"] = warning
    else:  # a widget's value survives a run that does not draw it only if handed back
        st.session_state[LANG_KEY] = st.session_state[LANG_KEY]
    return i18n.set_language(st.session_state[LANG_KEY])


def language_switch() -> None:
    """The language switch, in the settings (`settings`), and the warning of a bad `lang`."""
    with settings():
        # The label names the switch in all three languages: a reader who cannot read the
        # current one can still find it.
        st.selectbox("Language · Idioma · Язык", list(i18n.LANGUAGES), key=LANG_KEY,
                     format_func=i18n.LANGUAGES.get)
    if warning := st.session_state.pop("_lang_warning", None):
        st.warning(_("URL parameter ignored: {warning}").format(warning=warning), icon="⚠️")


# A page's heading in the Settings popover at a label's size: drawn as large as the page's own
# headings, it took a third of a phone's screen.
SETTINGS_CSS = " [data-testid='stPopoverBody'] :is(h2, h3) { font-size: 1.1rem; }"


# On a phone the controls wait in a popover at the top of the page: a phone's browser draws a
# popover's widgets only once it is opened, and every widget drawn before a page's first figure
# (a sidebar's too, collapsed or not: it comes first in the page) held that figure back by
# hundreds of ms each on a phone's CPU (bench/README.md, phones).
_SETTINGS = threading.local()


def place_settings() -> None:
    """Put this run's settings box (`settings`) in place: main.py calls it before the page,
    so that on a phone the Settings popover is the page's first element."""
    _SETTINGS.box = None
    if on_phone():
        _SETTINGS.box = (get_script_run_ctx(), st.popover(_("Settings"), icon=":material/tune:"))


def settings():
    """Where a page's controls go: the sidebar, and on a phone the Settings popover at the top
    of the page (`place_settings`). A script that runs there must go to the sidebar instead:
    a popover not yet opened does not run it."""
    box = getattr(_SETTINGS, "box", None)
    if box is not None and box[0] is get_script_run_ctx():
        return box[1]
    return st.sidebar


def where_settings(sidebar: str, phone: str) -> str:
    """Of two sentences that say where a control is, the one for this screen: `sidebar` where
    the controls are in the sidebar, `phone` where they are in the Settings popover."""
    return phone if on_phone() else sidebar


@contextlib.contextmanager
def question(text: str):
    """Predict, then reveal: the question in bold, and under it a closed "Answer" box; what
    the block writes goes into the box, so a student predicts before opening it."""
    st.markdown(_("**Question.** {question}").format(question=text))
    with st.expander(_("Answer"), icon=":material/visibility:"):
        yield


def write_url(values: dict) -> None:
    """Mirror the page's controls in the URL so it can be shared (only when something changed).
    The language rides along when it is not English."""
    wanted = {k: str(v) for k, v in values.items() if v is not None}
    if (lang := i18n.get_language()) != i18n.DEFAULT_LANGUAGE:
        wanted["lang"] = lang
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    if current != {k: [v] for k, v in wanted.items()}:
        st.query_params.from_dict(wanted)


def set_url_value(name: str, value) -> None:
    """Set one value of the shareable URL (a fragment's own control: the rest of the URL
    was written by the page's last full run and stays)."""
    if st.query_params.get(name) != str(value):
        st.query_params[name] = str(value)


class Ready(go.Figure):
    """A figure dict (`render.figure_spec`) handed to st.plotly_chart as it is: Streamlit runs
    a plain dict through plotly's full validation on every rerun, and asks a Figure only for
    to_dict(). Display only: it holds no traces of its own."""

    def __init__(self, spec: dict):
        super().__init__()
        self._spec = spec

    def to_dict(self) -> dict:
        return sendable(self._spec)


def ready(fig):
    """What st.plotly_chart should get for `fig`, a figure or a figure dict (see `Ready`); a
    figure dict fitted to a page gets a strip at its top for the chart's toolbar
    (`render.with_toolbar_room`)."""
    return Ready(with_toolbar_room(fig)) if isinstance(fig, dict) else fig


def cached_figure(max_entries: int = 16, width: int | None = None):
    """Decorator for a page's figure builder (a function returning a plotly Figure): the one
    way a figure reaches a page. Calling the decorated builder returns the figure cached per
    language (st.cache_data, `max_entries` per builder), its texts fitted to the page, or to
    `width` px for a figure in a column (`render.figure_spec`), as `show_figure` takes it.

    The builder's own arguments are the cache key, except those named with a leading `_`
    (Streamlit's rule: pass a hashed key beside them). The language and the number format
    are set here, once, so no call site can show an unfitted or wrongly localised figure.
    `projector=True` (a keyword of the decorated builder) gives the lesson's projector version
    instead (`figures.lesson.projector_figure`), cached apart."""
    def decorate(build):
        def cached(lang, projector, *args, **kwargs):
            fig = build(*args, **kwargs)
            if projector:
                return figure_spec(projector_figure(fig), fit=False)
            return figure_spec(fig, **({"width": width} if width else {}))

        # Streamlit keys a cache by the function's module and qualified name (and source, here
        # always this wrapper's), and hashes the arguments by the names in its signature: both
        # are the builder's, plus `lang`. Page scripts all run as __main__, so the builder's
        # file and line make its name unique.
        signature = inspect.signature(build)
        cached.__signature__ = signature.replace(parameters=[
            inspect.Parameter("lang", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("projector", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *signature.parameters.values()])
        code = build.__code__
        cached.__module__ = build.__module__
        cached.__qualname__ = f"{build.__qualname__}@{code.co_filename}:{code.co_firstlineno}"
        cached = st.cache_data(max_entries=max_entries, show_spinner=False)(cached)

        @functools.wraps(build)
        def figure(*args, projector: bool = False, **kwargs) -> dict:
            return cached(i18n.get_language(), bool(projector), *args, **kwargs)

        figure.clear = cached.clear
        return figure
    return decorate


# The shipped results' figures, which the Extrapolation lab and the Lesson both show: one cache
# entry for both pages.
@cached_figure(max_entries=8)
def perplexity_fig(results: dict, protocols: tuple | None = None):
    return perplexity_figure(results, protocols=protocols)


@cached_figure(max_entries=4)
def reach_fig(reach: dict, train_seq_len: int):
    return reach_figure(reach, train_seq_len)


def show_figure(fig, filename: str, key: str | None = None, width: int | None = None) -> None:
    """st.plotly_chart of a figure dict from a `cached_figure` builder, or of a plotly Figure
    built on the spot (fitted here to the page, or to `width` px for a column), with a modebar
    that saves a 2x PNG named `filename`. While the page's charts are off (`charts_shown`), the
    figure is drawn still instead (`still_figure`)."""
    if not isinstance(fig, dict):
        fig = figure_spec(fig, **({"width": width} if width else {}))
    if not charts_shown():
        still_figure(fig, key or filename)
        return
    config = {**PLOT_CONFIG, **i18n.plotly_locale(),
              "toImageButtonOptions": {**PLOT_CONFIG["toImageButtonOptions"], "filename": filename}}
    with figure_box(fig, key or filename):
        st.plotly_chart(ready(fig), width="stretch", config=config, key=key, theme=None)


def still_figure(spec: dict, key: str) -> None:
    """Figure dict `spec` drawn as a still picture (`figures.still`: SVG made here, no script
    in the browser), at a phone's width on a phone, and under it a button that turns the
    app's charts on (`charts_shown`) for hover, zoom and export."""
    width = PHONE_FIGURE_PX if on_phone() else None
    st.html(still.figure_html(spec, width=width))
    if not ends_at_first_figure():  # else the button comes with the rest of the page
        if st.button(_("Interactive charts (values on hover)"), key=f"{key}_charts_on",
                     icon=":material/touch_app:", type="tertiary"):
            st.session_state[CHARTS] = True
            st.rerun()  # the whole page, also from inside a fragment: every chart turns on
    first_figure_alone()


FIRST_DRAWN = "_first_figure_drawn"  # session state: the pages whose first run ended at a figure
REST_KEY = "first_figure_rest"  # the hidden button that asks for the rest of the page
WAITING = "_later_waiting"  # session state: the page whose run left something for its rest


def ends_at_first_figure() -> bool:
    """Whether this run ends at the next figure the page draws (`first_figure_alone`): a
    phone's first whole run of a page, outside a class's student. What a page would draw
    before its first figure may wait for the rest of the page when this is True."""
    ctx = get_script_run_ctx()
    return (ctx is not None and on_phone() and not st.session_state.get("cls_watched")
            and not ctx.fragment_ids_this_run
            and ctx.page_script_hash not in st.session_state.get(FIRST_DRAWN, set()))


def later(draw, *args, **kwargs):
    """`draw(*args, **kwargs)` (an element or a widget), or, in a run that ends at the page's
    first figure (`ends_at_first_figure`), its place kept empty for the next run to draw it: a
    widget's value is then its `key`'s in session state, else its `value` argument. For what
    is costly to draw before the first figure (a formula, a slider's scripts)."""
    if not ends_at_first_figure():
        return draw(*args, **kwargs)
    st.session_state[WAITING] = get_script_run_ctx().page_script_hash
    st.empty()
    key = kwargs.get("key")
    return st.session_state.get(key, kwargs.get("value")) if key else None


PAGE_LIST_DRAWN = "_page_list_drawn"  # session state: a run of this session drew the page list


def navigation(pages: list) -> StreamlitPage:
    """st.navigation of `pages` (main.py), its page list in the sidebar; in a phone's first
    run of a session, hidden: the list is drawn in the sidebar even while a phone's sidebar
    is closed, and drawn before the page it held the first figure back (bench/README.md,
    phones). It comes with the rest of the page (`first_figure_alone`), or at once in a run
    that ends with no figure (`draw_what_waited`); at most one run of a session hides it, so
    a page that stops before its figure has it again from its next run on."""
    hidden = (on_phone() and not st.session_state.get("cls_watched")
              and not st.session_state.get(PAGE_LIST_DRAWN))
    st.session_state[PAGE_LIST_DRAWN] = True
    page = st.navigation(pages, position="hidden" if hidden else "sidebar")
    if hidden:
        st.session_state[WAITING] = get_script_run_ctx().page_script_hash
    return page


def draw_what_waited() -> None:
    """After a page's run (main.py): a run that left places to `later`, or hid the page list
    (`navigation`), and then drew no figure to end at (a question not yet revealed, the charts
    on, an error) reruns at once, with the page no longer split, so that nothing waits for a
    rest that is never asked for."""
    ctx = get_script_run_ctx()
    if ctx is None or st.session_state.get(WAITING) != ctx.page_script_hash:
        return
    del st.session_state[WAITING]
    st.session_state.setdefault(FIRST_DRAWN, set()).add(ctx.page_script_hash)
    st.rerun()


def stop() -> NoReturn:
    """st.stop for a page that stops before its end (an error): a run that left something for
    the rest of the page (`later`, `navigation`) reruns at once instead, no longer split
    (`draw_what_waited`), so that the page list and what waited are drawn with the error."""
    draw_what_waited()
    st.stop()


def first_figure_alone() -> None:
    """Called after each figure a page draws. On a phone, a page's first run ends at its first
    figure, and the browser asks for the rest of the page once it has drawn that figure (it
    clicks a hidden button): a phone's browser draws what one run sends in one go, so every
    element after the figure held it back (bench/README.md, phones). A class's student is left
    alone: the run that follows the teacher sets controls further down the page."""
    ctx = get_script_run_ctx()
    if ctx is not None and ctx.fragment_ids_this_run and on_phone():
        if st.session_state.get(REST_KEY + "_button"):  # the button of a figure in a fragment
            st.rerun()  # reruns only the fragment: the whole page instead
        return
    if not ends_at_first_figure():
        return
    st.session_state.setdefault(FIRST_DRAWN, set()).add(ctx.page_script_hash)
    st.session_state.pop(WAITING, None)  # the rest of the page draws what waited
    with st.container(key=REST_KEY):
        st.button("…", key=REST_KEY + "_button")
    st.html(REST_JS, unsafe_allow_javascript=True)
    st.stop()


# The hidden button, clicked a frame after the figure is drawn (a still figure's image decoded,
# or canvas maps marked drawn by canvas_maps): what the rest of the page sends is drawn in the
# same frames, so an earlier click held the figure back. The button may be drawn a few frames
# after this script (Streamlit loads a widget's code on its first use). A figure not drawn in
# 600 frames (about 10 s) does not hold the page back: the button is clicked as soon as found.
REST_JS = (f"<style>.st-key-{REST_KEY} {{ display: none; }}</style><script>(() => {{"
           " const drawn = () => { const stills = [...document.querySelectorAll('.avz-still img')];"
           " return document.querySelector('[data-avm-drawn]') !== null || (stills.length > 0"
           " && stills.every((img) => img.complete && img.naturalWidth > 0)); };"
           " let frames = 1200; const ask = () => {"
           f" const button = document.querySelector('.st-key-{REST_KEY} button');"
           " if (button && (frames < 600 || drawn())) requestAnimationFrame(() => button.click());"
           " else if (--frames > 0) requestAnimationFrame(ask); };"
           " requestAnimationFrame(ask); })();</script>")


PHONE_FIGURE_PX = 360  # a still figure's own width on a phone (a 390 px screen less the page's margins)


def figure_box(spec: dict, key: str):
    """Where a chart of figure dict `spec` goes: for a figure fitted to a page's width, a
    container (key WIDE + `key`) that a phone scrolls sideways (WIDE_CSS); else none."""
    if fitted_width(spec) > PHONE_WIDTH_PX:
        return st.container(key=f"{WIDE}{key}")
    return contextlib.nullcontext()


WIDE = "wide_figure_"  # key prefix of the container of a figure fitted to the page's width
# On a screen as narrow as a phone's, a figure whose texts were fitted to the page's width keeps
# that width and scrolls sideways: squeezed to 360 px its titles, legends and tick labels ran
# into each other, and fitted to 360 px its panels had no room (both measured at 390 px).
PHONE_WIDTH_PX = 400
WIDE_CSS = (f"@media (max-width: 640px) {{ [class*='st-key-{WIDE}'] {{ overflow-x: auto; }} "
            f"[class*='st-key-{WIDE}'] [data-testid='stElementContainer'] "
            f"{{ min-width: {PAGE_WIDTH_PX}px; }} }}")  # Streamlit sizes the plot to it
# On a phone, a box that scrolls sideways (a wide figure's, a table's) shows a scrollbar that
# stays in sight: a phone's own is drawn only while a finger scrolls, and Streamlit makes every
# scrollbar transparent (scrollbar-color) but under the pointer, so a figure's title or a
# table's header cut at the screen's edge looked merely cut. Chrome draws a styled
# ::-webkit-scrollbar, taking room, once scrollbar-width and scrollbar-color are back to auto.
SCROLLERS = f"[class*='st-key-{WIDE}'], [data-testid='stTable'] > div"
SCROLLBAR_CSS = (f"@media (max-width: 640px) {{ :is({SCROLLERS}) "
                 f"{{ scrollbar-width: auto; scrollbar-color: auto; }} "
                 f":is({SCROLLERS})::-webkit-scrollbar {{ height: 10px; }} "
                 f":is({SCROLLERS})::-webkit-scrollbar-thumb "
                 f"{{ background: #8a8886; border-radius: 5px; }} "  # grey on a light track
                 f":is({SCROLLERS})::-webkit-scrollbar-track {{ background: #e8e8e8; }} }}")
# On a phone a wide figure's right end, where plotly puts its toolbar, is out of sight: there
# the toolbar sits at the left end of the strip `render.with_toolbar_room` keeps for it.
MODEBAR_CSS = (f"@media (max-width: 640px) {{ [class*='st-key-{WIDE}'] .modebar "
               f"{{ right: auto !important; left: 2px !important; }} }}")
# A markdown table's cell breaks a long word where it must (st.table's scroll instead): unbroken,
# a model's folder path widened /inspect's model table past a phone's screen, cut there with no
# scrollbar (in a checkout at /tmp/fc.PHM5/p, 8 px too wide at 390 px).
TABLE_CSS = "[data-testid='stMarkdownContainer'] td { overflow-wrap: anywhere; }"
# Captions in a grey that reads at the back of a room: Streamlit's own (the text colour at 60%
# opacity, #828180 on white) is 3.9:1 on white and 3.7:1 on a code span's #fafafa, under WCAG
# AA's 4.5:1 for small text (axe-core's color-contrast rule); this one, opaque, is 6.4:1 on
# white and 5.7:1 on the sidebar's #f0f2f6.
CAPTION_COLOR = "#5f5e5c"
READABLE_CSS = f"[data-testid='stCaptionContainer'] {{ color: {CAPTION_COLOR}; opacity: 1; }}"


# On a touch screen a swipe that starts on a chart scrolls the page: each chart is drawn with
# no drag mode (plotly's dragmode false), so plotly leaves the finger to the browser; a tap
# still shows a value, and the chart's toolbar (zoom or pan) turns exploring on for that chart
# until the page draws it anew. With a drag mode, a vertical swipe zoomed the chart ("double
# click to reset") and the page did not move (measured at 390x844 with touch emulation).
# A mouse keeps drag-to-zoom. Run once per browser tab (st.html with its script).
TOUCH_JS = """<script>
(() => {
  if (window.__alibiVizTouch || !window.matchMedia('(pointer: coarse)').matches) return;
  window.__alibiVizTouch = true;
  // A figure as the page sent it has no drag mode of its own (plot.layout.dragmode undefined):
  // set none. One the toolbar set ('zoom', 'pan') or this script set (false) is left alone.
  const calm = (plot) => {
    if (plot.layout && plot.layout.dragmode === undefined && window.Plotly)
      window.Plotly.relayout(plot, {dragmode: false});
  };
  const watch = (plot) => {
    if (plot.__alibiVizWatched || !plot.on) return;
    plot.__alibiVizWatched = true;
    plot.on('plotly_afterplot', () => calm(plot));  // drawn anew by a rerun (Plotly.react)
    calm(plot);
  };
  // One scan a frame at most: a rerun adds hundreds of nodes, each a mutation record
  let queued = false;
  const scan = () => {
    queued = false;
    document.querySelectorAll('.js-plotly-plot').forEach(watch);
  };
  new MutationObserver(() => {
    if (!queued) { queued = true; requestAnimationFrame(scan); }
  }).observe(document.body, {childList: true, subtree: true});
  scan();
})();
</script>"""


def on_phone() -> bool:
    """Whether the page is seen on a phone or a tablet: its browser says "Mobi" in its user
    agent (MDN's advice for telling a mobile browser). Such a CPU spends seconds parsing
    plotly.js before its first chart, so a page may start there with its charts on demand."""
    return "Mobi" in (st.context.headers.get("User-Agent") or "")


CHARTS = "charts_interactive"  # session state: the app's plotly charts on or off, every page


def charts_shown() -> bool:
    """Whether the app shows its plotly charts (else still pictures, or none, where a page says
    so): at first off on a phone (`on_phone`: plotly.js alone costs a phone seconds before its
    first chart) and on elsewhere; then what the user chose, on any page, for every page."""
    if CHARTS not in st.session_state:
        st.session_state[CHARTS] = not on_phone()
    return bool(st.session_state[CHARTS])


def _chose_charts(key: str) -> None:
    st.session_state[CHARTS] = bool(st.session_state[key])


def charts_toggle(key: str, help: str) -> bool:
    """The *Interactive charts* toggle `key`, showing and setting `charts_shown`; off, the
    page's plotly charts wait for it. `help` says which charts it shows."""
    st.session_state[key] = charts_shown()
    return st.toggle(_("Interactive charts"), key=key, help=help, on_change=_chose_charts,
                     args=(key,))


def fitted_width(spec: dict) -> int:
    """The width a figure dict's texts were fitted to (`render.figure_spec` records it)."""
    return int(spec.get("layout", {}).get("meta", {}).get("fitted_width", PAGE_WIDTH_PX))


def table(rows: list[dict], **kwargs) -> None:
    """A plain table (st.table: no data-grid bundle to download) of `rows`, whose keys are
    English column names marked for translation: the headers in the current language, whole
    numbers with the language's grouping, other numbers with 4 significant digits and its
    decimal mark (written here as text: a pandas Styler doing the same costs 50 ms a rerun)."""
    import pandas as pd

    from alibi_viz.i18n import formatted, significant

    def cell(value):
        if isinstance(value, (bool, str)) or value is None:
            return value
        if isinstance(value, (int, np.integer)):
            return formatted(int(value), ",")
        return significant(float(value), 4)

    frame = pd.DataFrame([{_(key): cell(value) for key, value in row.items()} for row in rows])
    st.table(frame, border="horizontal", hide_index=True, **kwargs)


class StepProgress:
    """A progress bar moved by a long computation's own steps (a model run's layers), also
    from inside a cached function: `with StepProgress(label) as progress:` then pass
    `progress` as the computation's progress(done, total) callback; label(done, total) is the
    bar's text. The bar appears once the first step is done and is gone after the block.

    An element called inside a cached function is recorded to be replayed on cache hits, and
    one on a placeholder made outside the function cannot be (CacheReplayClosureError). So the
    callback only notes the step, and a thread of this session (add_script_run_ctx, as
    Streamlit's multithreading guide describes) draws it every 0.1 s."""

    def __init__(self, label):
        self.label = label
        self.step = None  # (done, total, text), written by the callback
        self.slot = st.empty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._draw, daemon=True)
        add_script_run_ctx(self._thread, get_script_run_ctx())

    def __call__(self, done: int, total: int) -> None:
        # the text is made here, in the script's thread, which knows the page's language
        self.step = (done, total, self.label(done, total))

    def _draw(self) -> None:
        shown = None
        while not self._stop.wait(0.1):
            step = self.step
            if step is not None and step != shown and step[1]:
                shown = step
                self.slot.progress(min(1.0, step[0] / step[1]), text=step[2])

    def __enter__(self) -> StepProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.slot.empty()


def failure_message(exc: Exception) -> str:
    """What to tell the visitor when a model run failed: the library's own sentence for bad
    input (AlibiVizError), else one plain sentence (the traceback stays in the server log)."""
    if isinstance(exc, AlibiVizError):
        return str(exc)
    return where_settings(
        _("The model could not run on this text ({kind}). Try fewer tokens (sidebar), or "
          "reload the page."),
        _("The model could not run on this text ({kind}). Try fewer tokens (Settings, at the "
          "top of the page), or reload the page.")).format(kind=type(exc).__name__)


LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def server_is_local() -> bool:
    """True when Streamlit's server.address is a loopback name (`make run` passes localhost).
    Unset means Streamlit listens on every interface, so it counts as shared."""
    address = str(st.config.get_option("server.address") or "").strip().strip("[]").lower()
    return address in LOOPBACK


def custom_paths_allowed() -> bool:
    """Whether visitors may load folders and cached models other than the shipped ones.

    Safe by default when shared: an operator's explicit ALIBI_VIZ_ALLOW_CUSTOM_PATHS (1 or 0)
    decides; else a model root (ALIBI_VIZ_MODEL_ROOT) allows folders inside it; else only a
    server listening on loopback allows them.
    """
    import os

    from alibi_viz.models.loading import ALLOW_CUSTOM_ENV, MODEL_ROOT_ENV

    setting = os.environ.get(ALLOW_CUSTOM_ENV, "").strip().lower()
    if setting in ("1", "true", "yes", "on"):
        return True
    if setting in ("0", "false", "no", "off"):
        return False
    return bool(os.environ.get(MODEL_ROOT_ENV, "").strip()) or server_is_local()


def cached_model(path: str, stamp: tuple | None = None):
    """Load a model once for all sessions and pages: (model, tokenizer, info).

    One cache entry per folder and files' stamp (`model_stamp`, taken here when not given), so
    every page that shows the shipped ALiBi model holds the same object. A folder whose files
    changed is loaded (and checked) again instead of served stale."""
    path = os.path.realpath(path)  # one key whichever way a page names the folder
    stamp = model_stamp(path) if stamp is None else stamp
    with st.spinner(_("Loading the model...")):
        return _cached_model(path, stamp)


@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_model(path: str, stamp: tuple):
    """See `cached_model`. The serving policy (`custom_paths_allowed`) is fixed for a server's
    life, so it is read here rather than keyed; the loader checks the path against it again."""
    from alibi_viz.models.loading import load_model

    return load_model(path, allow_custom=custom_paths_allowed())


def model_stamp(path: str) -> tuple:
    """(name, size, mtime) of the files in a model folder: the cache key of `cached_model`."""
    from pathlib import Path

    folder = Path(path)
    if not folder.is_dir():
        return ()
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns)
                        for f in folder.iterdir() if f.is_file()))


TIMING_LOG_ENV = "ALIBI_VIZ_TIMING_LOG"  # a file: one JSON line per run (bench/bench_load.py)


@contextlib.contextmanager
def timed_run(page: str):
    """With ALIBI_VIZ_TIMING_LOG set, append one JSON line per script run to that file: which
    replica (ALIBI_VIZ_REPLICA, else the port) and session ran which page, its wall time and the
    script thread's CPU time. The server's own cost of a rerun, apart from any browser's; the
    load bench and the deployment tests read it. Costs nothing when the variable is unset."""
    path = os.environ.get(TIMING_LOG_ENV)
    if not path:
        yield
        return
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        ctx = get_script_run_ctx()
        line = {"t": time.time(), "page": page or "bias",
                "replica": os.environ.get("ALIBI_VIZ_REPLICA") or str(st.get_option("server.port")),
                "pid": os.getpid(), "session": ctx.session_id if ctx else None,
                "wall_s": round(time.perf_counter() - wall, 6),
                "cpu_s": round(time.thread_time() - cpu, 6)}
        with open(path, "a", encoding="utf-8") as f:  # one short write per line: atomic append
            f.write(json.dumps(line) + "\n")
