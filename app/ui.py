"""Small Streamlit helpers shared by the pages: URL state, figures, downloads.

Only display code lives here; everything a page shows is computed in `alibi_viz`.
"""

from __future__ import annotations

import streamlit as st

from alibi_viz.params import Param, parse_param

STATE_KEYS = "_url_state_keys"  # widget keys registered by seed_from_url
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def seed_from_url(prefix: str, specs: list[Param]) -> None:
    """Set each control's state from the URL on a session's first visit to the page.

    Widget keys are f"{prefix}_{name}". Bad URL values fall back to defaults with a visible
    warning. The keys are registered for `keep_page_state`, which carries their values across
    visits to other pages.
    """
    flag = f"_{prefix}_seeded"
    keys = [f"{prefix}_{spec.name}" for spec in specs]
    if not st.session_state.get(flag):
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
        st.warning(f"URL parameter ignored: {warning}", icon="⚠️")


def write_url(values: dict) -> None:
    """Mirror the page's controls in the URL so it can be shared (only when something changed)."""
    wanted = {k: str(v) for k, v in values.items() if v is not None}
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    if current != {k: [v] for k, v in wanted.items()}:
        st.query_params.from_dict(wanted)


def show_figure(fig, filename: str, key: str | None = None) -> None:
    """st.plotly_chart with a modebar that saves a 2x PNG named `filename`."""
    config = {**PLOT_CONFIG,
              "toImageButtonOptions": {**PLOT_CONFIG["toImageButtonOptions"], "filename": filename}}
    st.plotly_chart(fig, width="stretch", config=config, key=key, theme=None)


@st.cache_resource(max_entries=4, show_spinner="Loading the model...")
def cached_model(path: str, stamp: tuple):
    """Load a model once for all sessions: (model, tokenizer, info).

    `stamp` (see `model_stamp`) changes when the folder's files change, so a replaced or
    corrupted checkpoint is loaded (and refused) again instead of served stale.
    """
    from alibi_viz.loading import load_model

    return load_model(path)


def model_stamp(path: str) -> tuple:
    """(name, size, mtime) of the files in a model folder: the cache key of `cached_model`."""
    from pathlib import Path

    folder = Path(path)
    if not folder.is_dir():
        return ()
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns)
                        for f in folder.iterdir() if f.is_file()))
