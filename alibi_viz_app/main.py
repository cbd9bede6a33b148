"""alibi-viz: the Streamlit entry point. `streamlit run alibi_viz_app/main.py` (or `make run`).

Pages are registered with st.navigation; each page file only composes widgets and calls the
`alibi_viz` library, which computes everything shown. `alibi_viz_app` is a package of the
installed project (`pip install .[app]`; `make run` installs it editable), so the pages import
`from alibi_viz_app import ui`.
"""

# First: every session's thread waits here until the first one has imported the heavy
# libraries, so no two sessions import them at once (alibi_viz_app/preload.py).
import alibi_viz_app.preload  # noqa: F401, I001

import os

import streamlit as st
import torch

from alibi_viz import assets
from alibi_viz.i18n import _
from alibi_viz_app import ui

# One thread per forward pass: a server shares its cores between sessions, and two torch
# threads on a busy 2-core machine were measured 100x slower than one (see bench/).
torch.set_num_threads(int(os.environ.get("ALIBI_VIZ_TORCH_THREADS", "1")))

# The shipped icon, where the checkout's assets are at hand; Streamlit's own otherwise.
FAVICON = str(assets.ASSETS_DIR / "favicon.png") if (assets.ASSETS_DIR / "favicon.png").is_file() else None

# A lesson opened for a projector (?present=1) starts with the sidebar collapsed; the teacher
# can still open it.
PRESENTING = st.query_params.get("present") == "1"
st.set_page_config(page_title="alibi-viz", page_icon=FAVICON,
                   layout="wide", initial_sidebar_state="collapsed" if PRESENTING else "auto")

# The language comes first: page titles, navigation and every string below depend on it.
ui.keep_page_state()
ui.choose_language()
ui.place_settings()
ui.language_switch()

PAGES = [
    st.Page("app_pages/bias_explorer.py", title=_("Bias explorer"), icon=":material/grid_on:", url_path="", default=True),
    st.Page("app_pages/compare.py", title=_("Compare positional methods"), icon=":material/compare_arrows:", url_path="compare"),
    st.Page("app_pages/model_heads.py", title=_("Model heads"), icon=":material/visibility:", url_path="model"),
    st.Page("app_pages/inspect_model.py", title=_("Inspect a model"), icon=":material/search:", url_path="inspect"),
    st.Page("app_pages/extrapolation.py", title=_("Extrapolation lab"), icon=":material/show_chart:", url_path="extrapolation"),
    st.Page("app_pages/lesson.py", title=_("Lesson"), icon=":material/school:", url_path="lesson"),
]

# Navigation names wrap instead of being cut with an ellipsis in a narrow sidebar (1024 px).
# Streamlit's own "Press Ctrl+Enter to apply" under a text box is English whatever the page's
# language and means nothing on a phone: hidden; the text boxes say in words how to apply.
st.html("<style>[data-testid='stSidebarNavLink'] span { white-space: normal !important; "
        "overflow: visible !important; text-overflow: clip !important; } "
        "[data-testid='InputInstructions'] { display: none !important; }" + ui.WIDE_CSS
        + ui.SCROLLBAR_CSS + ui.MODEBAR_CSS + ui.TABLE_CSS
        + ui.READABLE_CSS + " [data-testid='stLayoutWrapper']:has(> .st-key-alibi_touch) { display: none; }"
        + ui.SETTINGS_CSS
        + "</style>")
# The touch script in a hidden container: an element with a script is laid out, and at the top
# of every page its empty box pushed the content 16 px down (a lesson step's figure past the
# bottom of a 1024x768 projector). It tends plotly charts only, so it is sent only while they
# are shown: a phone starts without them, and its watch on every change to the page costs a
# slow CPU time before the first figure (bench/README.md, phones).
with st.container(key="alibi_touch"):
    if ui.charts_shown():
        st.html(ui.TOUCH_JS, unsafe_allow_javascript=True)
page = ui.navigation(PAGES)
if page.url_path != "lesson" and st.session_state.get("cls_watched"):
    from alibi_viz_app import class_view  # a class's student who left the Lesson: not rerun for it

    class_view.away()
with ui.timed_run(page.url_path):
    page.run()
ui.draw_what_waited()  # not reached when the run ends at a figure (ui.first_figure_alone)
