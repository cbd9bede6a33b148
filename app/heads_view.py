"""The views shared by *Model heads* and *Inspect a model*: text, layer and head, three figures.

A page calls, in order:

    heads_view.seed(PREFIX, PARAMS)          # once per session: controls from the URL
    loaded = heads_view.load(folder)         # model via ui.cached_model; errors shown, None
    text = heads_view.text_ui(PREFIX)        # example picker + text area (capped)
    choice = heads_view.controls_ui(PREFIX, loaded.info)   # layer, head, colours, max tokens
    ui.write_url({... page's own ..., **heads_view.url_values(PREFIX, choice, text)})
    heads_view.show(PREFIX, loaded, text, choice)          # grid, one head's row, statistics

Widget keys are f"{prefix}_{name}", so the two pages keep separate state. Everything drawn is
computed by `alibi_viz.model_plots`; arrays are cached at display resolution (a few MB per
text), never the full attention maps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from alibi_viz import data
from alibi_viz.assets import training_info
from alibi_viz.errors import AlibiVizError, ModelLoadError
from alibi_viz.heads import score_decomposition
from alibi_viz.loading import resolve_model_path
from alibi_viz.model_plots import (
    COLOR_SCALES,
    analyze_heads,
    attention_grid_figure,
    decomposition_figure,
    decomposition_view,
    head_statistics_figure,
    training_length,
)
from alibi_viz.params import Param

import ui

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 20_000    # a longer paste is cut here (tokens are capped further below)
URL_TEXT_CHARS = 500       # texts up to this long go into the shareable URL
MAX_TOKENS = 2048          # the most tokens a page runs the model on
DEFAULT_MAX_TOKENS = 512
MAX_INDEX = 1024           # layer and head numbers the URL may name (checked against the model)
EXAMPLE_SLUGS = ("prose", "code", "long")  # URL names of data.example_texts(), in its order
CUSTOM = "custom"
MODEL_TITLES = {"alibi": "ALiBi (BLOOM)", "learned": "learned positions (GPT-2)",
                "rope": "RoPE (LLaMA)"}  # the shipped models, as the pages name them

VIEW_PARAMS = [
    Param("layer", "int", 1, 1, MAX_INDEX),
    Param("head", "int", 1, 1, MAX_INDEX),
    Param("color", "choice", "log", choices=COLOR_SCALES),
    Param("tokens", "int", DEFAULT_MAX_TOKENS, 8, MAX_TOKENS),
    Param("example", "choice", "prose", choices=(*EXAMPLE_SLUGS, CUSTOM)),
    Param("text", "text", ""),
]


@dataclass
class Choice:
    """What the controls say: 0-based layer and head, colour scale, token cap."""

    layer: int
    head: int
    scale: str
    max_tokens: int


@dataclass
class Loaded:
    """A model ready to inspect. key identifies it for the caches: (folder, files' stamp)."""

    model: object
    tokenizer: object
    info: object
    key: tuple
    training_length: int | None
    folder: str


# ----------------------------------------------------------------------------- state

@st.cache_data(show_spinner=False)
def examples() -> dict[str, str]:
    """URL slug -> (title, text) of the ready examples."""
    try:
        found = data.example_texts()
    except AlibiVizError:  # no held-out file long enough: the two short examples only
        found = {"Prose (short)": data.PROSE_EXAMPLE, "Code (short)": data.CODE_EXAMPLE}
    return {slug: (title, text) for slug, (title, text) in zip(EXAMPLE_SLUGS, found.items(),
                                                                 strict=False)}


def _key(prefix: str, name: str) -> str:
    return f"{prefix}_{name}"


def seed(prefix: str, params: list[Param]) -> None:
    """Set the controls from the URL once per session and fill in the text (ui.keep_page_state
    carries them across visits to other pages)."""
    ui.seed_from_url(prefix, params)
    flag = f"_{prefix}_text_seeded"
    if not st.session_state.get(flag):
        st.session_state[flag] = True
        if st.session_state[_key(prefix, "text")]:
            st.session_state[_key(prefix, "example")] = CUSTOM
        else:
            slug = st.session_state[_key(prefix, "example")]
            slug = slug if slug in examples() else EXAMPLE_SLUGS[0]
            st.session_state[_key(prefix, "example")] = slug
            st.session_state[_key(prefix, "text")] = examples()[slug][1]


# ----------------------------------------------------------------------------- model

def load(path) -> Loaded | None:
    """Load the model folder `path` through the shared cache; on failure show what is wrong
    and what to do, and return None. A folder whose files changed (removed, replaced,
    corrupted) since it was cached is loaded, and checked, again."""
    try:
        folder = resolve_model_path(path)
        stamp = ui.model_stamp(str(folder))
        model, tokenizer, info = ui.cached_model(str(folder), stamp)
    except ModelLoadError as exc:
        st.error(f"Could not load the model. {exc}", icon="🚫")
        return None
    except (OSError, RuntimeError, ValueError) as exc:  # e.g. files vanishing while read
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        st.error(f"Could not load the model ({type(exc).__name__}: {first}). Check that the "
                 "folder is complete and readable, then reload the page.", icon="🚫")
        return None
    try:
        training = training_info(folder)
    except (OSError, ValueError):  # a damaged training.json only loses the training length
        training = {}
    return Loaded(model, tokenizer, info, (str(folder), stamp), training_length(info, training),
                  str(folder))


# ----------------------------------------------------------------------------- controls

def _pick_example(prefix: str) -> None:
    """Callback of the example picker: put the chosen example in the text area."""
    slug = st.session_state[_key(prefix, "example")]
    if slug in examples():
        st.session_state[_key(prefix, "text")] = examples()[slug][1]


def _edited_text(prefix: str) -> None:
    """Callback of the text area: cut a huge paste in the session state itself (so it is not
    kept, nor sent back to the browser), and mark the text as the user's own."""
    key = _key(prefix, "text")
    text = st.session_state[key]
    if len(text) > MAX_TEXT_CHARS:
        st.session_state[key] = text[:MAX_TEXT_CHARS]
        st.session_state[f"_{prefix}_cut_from"] = len(text)
    slug = st.session_state[_key(prefix, "example")]
    if slug in examples() and examples()[slug][1] != st.session_state[key]:
        st.session_state[_key(prefix, "example")] = CUSTOM


def text_ui(prefix: str) -> str:
    """Example picker and text area. Returns the text, cut to MAX_TEXT_CHARS with a warning."""
    titles = {slug: title for slug, (title, _) in examples().items()} | {CUSTOM: "Your own text"}
    if st.session_state.get(_key(prefix, "example")) not in titles:
        st.session_state[_key(prefix, "example")] = CUSTOM
    left, right = st.columns([1, 3])
    left.selectbox("Example", list(titles), key=_key(prefix, "example"),
                   format_func=titles.__getitem__, on_change=_pick_example, args=(prefix,),
                   help="Ready texts: prose, code, and a long held-out Python module.")
    text = right.text_area(
        "Text", key=_key(prefix, "text"), height=110, on_change=_edited_text, args=(prefix,),
        help=f"Type or paste any text (up to {MAX_TEXT_CHARS:,} characters are kept).")
    cut_from = st.session_state.pop(f"_{prefix}_cut_from", None)
    if len(text) > MAX_TEXT_CHARS:  # not cut by the callback (set by code, not typed)
        cut_from, text = len(text), text[:MAX_TEXT_CHARS]
    if cut_from:
        st.warning(f"The text had {cut_from:,} characters; only the first {MAX_TEXT_CHARS:,} are "
                   "kept (and the model reads at most the token limit in the sidebar).", icon="✂️")
    return text


def _in_range(prefix: str, name: str, count: int, what: str) -> None:
    """Reset layer/head to 1 with a warning when it does not exist in this model."""
    key = _key(prefix, name)
    value = st.session_state.get(key, 1)
    if not isinstance(value, int) or not 1 <= value <= count:
        st.warning(f"{what.capitalize()} {value} is out of range for this model ({what}s 1-{count}): "
                   f"showing {what} 1.", icon="⚠️")
        st.session_state[key] = 1


def controls_ui(prefix: str, info) -> Choice:
    """Layer and head (checked against the model) above the maps, colours and token cap in
    the sidebar. Returns the choice with 0-based layer and head."""
    _in_range(prefix, "layer", info.num_layers, "layer")
    _in_range(prefix, "head", info.num_heads, "head")
    with st.sidebar:
        max_tokens = st.number_input(
            "Max tokens", 8, MAX_TOKENS, step=64, key=_key(prefix, "tokens"),
            help=f"The model reads at most this many tokens of the text (8-{MAX_TOKENS:,}).")
        scale = st.radio("Colours", COLOR_SCALES, key=_key(prefix, "color"), horizontal=True,
                         help="log: log10 of the attention, which shows ALiBi's linear decay as "
                              "a straight gradient; linear: the probability itself.")
    slopes = info.slopes
    left, mid, _ = st.columns([1, 2, 3])
    layer = left.selectbox("Layer", list(range(1, info.num_layers + 1)), key=_key(prefix, "layer"),
                           help="Which layer's heads to draw (1 is the first).")
    head = mid.selectbox(
        "Head", list(range(1, info.num_heads + 1)), key=_key(prefix, "head"),
        format_func=lambda h: f"head {h}" + (f" (m = {slopes[h - 1]:.3g})" if slopes else ""),
        help="The head whose scores are split into content and bias below.")
    return Choice(layer=int(layer) - 1, head=int(head) - 1, scale=scale, max_tokens=int(max_tokens))


def url_values(prefix: str, choice: Choice, text: str) -> dict:
    """The shareable part of the view: layer, head, colours, token cap, and the example's
    name or (when short) the text itself."""
    values = {"layer": choice.layer + 1, "head": choice.head + 1, "color": choice.scale,
              "tokens": choice.max_tokens}
    slug = st.session_state.get(_key(prefix, "example"))
    if slug in examples() and examples()[slug][1] == text:
        values["example"] = slug
    elif len(text) <= URL_TEXT_CHARS:
        values["text"] = text
    return values


# ----------------------------------------------------------------------------- cached data

@st.cache_data(max_entries=4, show_spinner="Running the model on the text...")
def cached_analysis(_model, _tokenizer, model_key: tuple, text: str, max_tokens: int, slopes):
    return analyze_heads(_model, _tokenizer, text, max_tokens=max_tokens, slopes=slopes)


@st.cache_data(max_entries=6, show_spinner="Splitting the scores into content and bias...")
def cached_decomposition(_model, _tokenizer, model_key: tuple, text: str, max_tokens: int,
                         layer: int):
    dec = score_decomposition(_model, _tokenizer, text, layer, max_tokens=max_tokens)
    return decomposition_view(dec)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_grid_figure(_analysis, model_key, text, max_tokens, layer, head, scale, marker, slopes):
    return attention_grid_figure(_analysis.layers[layer], _analysis.tokens, layer, slopes=slopes,
                                 selected=head, training_length=marker, scale=scale)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_row_figure(_view, model_key, text, max_tokens, layer, head, scale, marker, slope):
    return decomposition_figure(_view, head, slope=slope, training_length=marker, scale=scale)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_stats_figure(_analysis, model_key, text, max_tokens, slopes, layer, head):
    return head_statistics_figure(_analysis.stats, _analysis.seq_len, selected=(layer, head))


# ----------------------------------------------------------------------------- views

def _failed(exc: Exception) -> str:
    if isinstance(exc, AlibiVizError):
        return str(exc)
    return (f"The model could not run on this text ({type(exc).__name__}). Try fewer tokens "
            "(sidebar), or reload the page.")


def show(prefix: str, loaded: Loaded, text: str, choice: Choice) -> None:
    """The grid of every head of the chosen layer, the chosen head's decomposition row and the
    head statistics, with notes on truncation and the training length.

    Bad input is reported by the library as AlibiVizError and shown as it is; anything else
    is a bug, logged with its traceback on the server and shown as one plain sentence."""
    try:
        _show(prefix, loaded, text, choice)
    except Exception:  # the page's last line of defence: never a traceback in the browser
        logger.exception("heads view failed (text of %d characters, %s)", len(text), choice)
        st.error("Something went wrong while drawing the heads (the details are in the "
                 "server log). Try another text, layer or head, or reload the page.", icon="🐞")


def _show(prefix: str, loaded: Loaded, text: str, choice: Choice) -> None:
    info = loaded.info
    name = Path(loaded.folder).name or "model"
    slopes = info.effective_slopes
    marker = loaded.training_length
    try:
        analysis = cached_analysis(loaded.model, loaded.tokenizer, loaded.key, text,
                                   choice.max_tokens, slopes)
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        st.warning(_failed(exc), icon="✍️")
        return
    T = analysis.seq_len
    facts = f"{T:,} tokens"
    if marker:
        facts += f"; trained on {marker:,}-token windows"
    st.caption(facts + ". Labels: ␣ space, ⏎ newline, ⇥ tab.")
    if analysis.truncated:
        st.info(analysis.truncated, icon="✂️")
    if marker and T > marker:
        st.info(f"The input ({T:,} tokens) is longer than the training length ({marker:,}): the "
                f"red dashed lines mark position {marker:,}. Queries below the line attend over "
                "more keys, and keys further away, than the model ever saw in training.",
                icon="📏")

    tag = f"{name}_L{choice.layer + 1}_h{choice.head + 1}_T{T}"
    st.subheader(f"1. Every head of layer {choice.layer + 1}")
    grid = cached_grid_figure(analysis, loaded.key, text, choice.max_tokens, choice.layer,
                              choice.head, choice.scale, marker, info.slopes)
    ui.show_figure(grid, f"attention_{tag}", key=f"{prefix}_fig_grid")

    st.subheader(f"2. Head {choice.head + 1}: content, bias, masked total, attention")
    try:
        view = cached_decomposition(loaded.model, loaded.tokenizer, loaded.key, text,
                                    choice.max_tokens, choice.layer)
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        st.info(_failed(exc), icon="ℹ️")
    else:
        slope = info.slopes[choice.head] if info.slopes else None
        row = cached_row_figure(view, loaded.key, text, choice.max_tokens, choice.layer,
                                choice.head, choice.scale, marker, slope)
        ui.show_figure(row, f"decomposition_{tag}", key=f"{prefix}_fig_row")
        if view.truncated and view.seq_len < T:
            st.caption(f"Decomposition: {view.truncated}")
        st.caption(
            f"How this model adds its position bias: `{view.bias_form}`. The masked total is "
            "what the softmax sees (grey: keys after the query); softmax of it reproduces "
            f"the model's own attention to {view.max_abs_error:.1e}.")

    st.subheader("3. Head statistics")
    stats = cached_stats_figure(analysis, loaded.key, text, choice.max_tokens, slopes,
                                choice.layer, choice.head)
    ui.show_figure(stats, f"head_statistics_{name}_T{T}", key=f"{prefix}_fig_stats")
    st.markdown(
        "**Effective slope**: the slope m of the straight line that best fits log attention "
        "against distance (one intercept per query). A head that only followed its ALiBi bias "
        "would sit on y = x; above it, its content makes it more local; below it, it looks "
        "further than its bias alone. **Mean distance**: how far back, on average, each query "
        "looks; the crosses are what the bias alone would give for this text length.")
