"""Inspect a model: what a checkpoint is, how it adds position, and its heads on any text."""

import os

import streamlit as st

from alibi_viz.assets import DEFAULT_MODEL, shipped_models
from alibi_viz.errors import AlibiVizError
from alibi_viz.loading import ALLOW_CUSTOM_ENV, MODEL_ROOT_ENV
from alibi_viz.model_plots import model_info_rows, model_slopes_figure
from alibi_viz.params import Param

import heads_view
import ui

PREFIX = "im"
SOURCES = ("shipped", "folder")
SOURCE_TITLES = {"shipped": "A shipped model", "folder": "A local folder"}


@st.cache_data(max_entries=16, show_spinner=False)
def cached_slopes_figure(slopes: tuple, effective: tuple | None, name: str):
    return model_slopes_figure(slopes, effective, name=name)


def markdown_text(text: str) -> str:
    """`text` shown literally in markdown (paths and formulas hold * _ | characters)."""
    return "".join("\\" + c if c in "\\`*_{}[]<>()#+-.!|~" else c for c in str(text))


def source_ui(models: dict, default: str):
    """Shipped model or local folder, in the sidebar. Returns (source, shipped name, path)."""
    if st.session_state["im_model"] not in models:
        st.session_state["im_model"] = default
    with st.sidebar:
        st.header("Inspect a model")
        source = st.radio("Model", SOURCES, key="im_source", format_func=SOURCE_TITLES.get,
                          help="One of the models shipped with alibi-viz, or any Hugging Face "
                               "causal LM folder on this machine (written by save_pretrained).")
        name, path = None, ""
        if source == "shipped":
            if models:
                name = st.selectbox("Shipped model", list(models), key="im_model",
                                    format_func=lambda n: heads_view.MODEL_TITLES.get(n, n))
        else:
            path = st.text_input(
                "Folder", key="im_path", placeholder="/path/to/checkpoint",
                help="A folder with config.json, model.safetensors and the tokenizer. Nothing "
                     "is downloaded; only safetensors weights are read; no custom code runs.")
    return source, name, path.strip()


def info_ui(loaded) -> None:
    """The model's facts, its departures from the paper, and its slopes beside the schedules."""
    info = loaded.info
    st.subheader("The model")
    left, right = st.columns([3, 2])
    with left:
        rows = model_info_rows(info, {"train_seq_len": loaded.training_length})
        st.markdown("| property | value |\n|---|---|\n" + "\n".join(
            f"| {row['property']} | {markdown_text(row['value'])} |" for row in rows))
    with right:
        for warning in info.warnings:
            st.warning(warning, icon="⚠️")
        for note in info.notes:
            st.info(note, icon="ℹ️")
        if not info.warnings and info.positional == "alibi":
            st.success("ALiBi as in the paper: slopes from a standard schedule, the bias "
                       "added to the scores unscaled.", icon="✅")
    if info.slopes:
        try:
            fig = cached_slopes_figure(info.slopes, info.effective_slopes, info.architecture)
        except AlibiVizError as exc:
            st.info(str(exc))
        else:
            ui.show_figure(fig, f"slopes_{info.model_type}", key="im_fig_slopes")
    else:
        st.info(f"No ALiBi slopes: this model encodes position with **{info.positional}** "
                f"({info.bias_form}). Its heads are shown below all the same; the bias panel "
                "is zero.", icon="ℹ️")


st.title("Inspect a model")
st.caption("Load a checkpoint and see how it encodes position, its ALiBi slopes against the "
           "standard schedules, and then its heads on any text.")

models = shipped_models()
default = DEFAULT_MODEL if DEFAULT_MODEL in models else next(iter(models), "")
PARAMS = [Param("source", "choice", "shipped", choices=SOURCES),
          Param("model", "choice", default, choices=tuple(models) or ("",)),
          Param("path", "text", ""), *heads_view.VIEW_PARAMS]
if not st.session_state.get("_im_seeded") and st.query_params.get("path"):
    st.session_state["_im_path_in_url"] = True
heads_view.seed(PREFIX, PARAMS)
if st.session_state.pop("_im_path_in_url", False):
    st.session_state["im_source"] = "folder"
ui.show_url_warnings(PREFIX)

source, name, path = source_ui(models, default)
if source == "shipped" and not name:
    st.error("No shipped models were found in assets/models: choose *A local folder*, or train "
             "them with `python -m alibi_viz.train` (see the README).", icon="🚫")
    st.stop()
if source == "folder" and not path:
    st.info("Type the path of a model folder in the sidebar: a Hugging Face causal LM saved "
            "with save_pretrained (config.json, model.safetensors, tokenizer files).", icon="👈")
    st.stop()

target = str(models[name]) if source == "shipped" else path
restricted = ", ".join(f"`{v}={os.environ[v]}`" for v in (MODEL_ROOT_ENV, ALLOW_CUSTOM_ENV)
                       if os.environ.get(v, "").strip())
loaded = heads_view.load(target)
if loaded is None:
    st.markdown(
        "**What to check:** the folder exists on the machine running the app and holds "
        "config.json, model.safetensors (pickle `.bin` files are refused) and the tokenizer; "
        "the model is a causal language model built into transformers."
        + (f" This deployment restricts which folders can be loaded ({restricted})."
           if restricted else ""))
    ui.write_url({"source": source, "model": name, "path": path or None})
    st.stop()

info_ui(loaded)
st.subheader("Its heads on a text")
text = heads_view.text_ui(PREFIX)
choice = heads_view.controls_ui(PREFIX, loaded.info)
ui.write_url({"source": source, "model": name if source == "shipped" else None,
              "path": path or None, **heads_view.url_values(PREFIX, choice, text)})
heads_view.show(PREFIX, loaded, text, choice)
