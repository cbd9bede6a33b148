"""alibi-viz: the Streamlit entry point. `streamlit run app/main.py` (or `make run`).

Pages are registered with st.navigation; each page file only composes widgets and calls the
`alibi_viz` library, which computes everything shown.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` puts only app/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

st.set_page_config(page_title="alibi-viz", page_icon="📐", layout="wide")

PAGES = [
    st.Page("bias_explorer.py", title="Bias explorer", icon="📐", url_path="", default=True),
    st.Page("compare.py", title="Compare positional methods", icon="⚖️", url_path="compare"),
]
page = st.navigation(PAGES)
page.run()
