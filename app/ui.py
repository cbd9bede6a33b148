"""Small Streamlit helpers shared by the pages: URL state, figures, downloads.

Only display code lives here; everything a page shows is computed in `alibi_viz`.
"""

from __future__ import annotations

import streamlit as st

from alibi_viz.params import Param, parse_param

PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def seed_from_url(prefix: str, specs: list[Param]) -> None:
    """Set each control's state from the URL on a session's first visit, and keep it after.

    Widget keys are f"{prefix}_{name}". Bad URL values fall back to defaults with a visible
    warning. Streamlit forgets the state of widgets that a run does not draw, so visiting
    another page would reset this page's controls to their minimum: each run therefore keeps
    a copy of the values, and restores any that Streamlit dropped.
    """
    flag, last_key = f"_{prefix}_seeded", f"_{prefix}_last"
    if not st.session_state.get(flag):
        warnings = []
        for spec in specs:
            value, warning = parse_param(spec, st.query_params.get_all(spec.name) or None)
            st.session_state[f"{prefix}_{spec.name}"] = value
            if warning:
                warnings.append(warning)
        st.session_state[flag] = True
        st.session_state[f"_{prefix}_url_warnings"] = warnings
    last = st.session_state.get(last_key, {})
    for spec in specs:
        key = f"{prefix}_{spec.name}"
        if key not in st.session_state:
            st.session_state[key] = last.get(spec.name, spec.default)
    st.session_state[last_key] = {spec.name: st.session_state[f"{prefix}_{spec.name}"]
                                  for spec in specs}


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
