"""alibi-viz: the Streamlit entry point. `streamlit run app/main.py` (or `make run`).

Pages are registered with st.navigation; each page file only composes widgets and calls the
`alibi_viz` library, which computes everything shown.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` puts only app/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import torch  # noqa: E402

# One thread per forward pass: a server shares its cores between sessions, and two torch
# threads on a busy 2-core machine were measured 100x slower than one (see bench/).
torch.set_num_threads(int(os.environ.get("ALIBI_VIZ_TORCH_THREADS", "1")))

st.set_page_config(page_title="alibi-viz", page_icon=str(ROOT / "assets" / "favicon.png"), layout="wide")

PAGES = [
    st.Page("bias_explorer.py", title="Bias explorer", icon=":material/grid_on:", url_path="", default=True),
    st.Page("compare.py", title="Compare positional methods", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("model_heads.py", title="Model heads", icon=":material/visibility:", url_path="model"),
    st.Page("inspect_model.py", title="Inspect a model", icon=":material/search:", url_path="inspect"),
    st.Page("extrapolation.py", title="Extrapolation lab", icon=":material/show_chart:", url_path="extrapolation"),
    st.Page("lesson.py", title="Lesson", icon=":material/school:", url_path="lesson"),
]
import ui  # noqa: E402

ui.keep_page_state()
page = st.navigation(PAGES)
page.run()
