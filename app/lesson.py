"""Lesson: a six-step guided tour of ALiBi for a class, with a presentation mode for a projector."""

import math

import streamlit as st

from alibi_viz import alibi_slopes, assets, data
from alibi_viz.alibi import half_life, mean_distance
from alibi_viz.errors import AlibiVizError
from alibi_viz.extrapolation_plots import (
    enlarge_figure,
    extrapolation_summary,
    head_vs_bias_figure,
    implied_attention_map,
    mean_attention_distance,
    perplexity_figure,
    score_pipeline_figure,
    train_length,
)
from alibi_viz.heads import attention_maps
from alibi_viz.params import Param
from alibi_viz.plots import bias_grid_figure, decay_figure, slope_schedule_figure

import ui

PREFIX = "ls"
STEPS = (
    "Where position enters attention",
    "The bias matrix",
    "Slopes",
    "Decay and half-life",
    "A real head of the shipped model",
    "Train short, test long",
)
PRESENT_SCALE = 1.6  # figures and text grow by this much in presentation mode
PRESENT_CSS = """
<style>
html { font-size: 22px; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li {
    font-size: 1.3rem; line-height: 1.55; }
[data-testid="stCaptionContainer"] { font-size: 1.05rem; }
h1 { font-size: 2.6rem !important; }
h2, h3 { font-size: 2.0rem !important; }
.katex { font-size: 1.5em; }
</style>
"""
SLOPE_CHOICES = (0.0,) + tuple(2.0 ** -k for k in range(0, 9))  # 0 = no position at all
LESSON_HEADS = (0, 2, 4, 7)  # step 2 shows 4 of the 8 heads: m = 1/2, 1/8, 1/32, 1/256
LESSON_TEXT = data.CODE_EXAMPLE  # in the shipped models' domain: Python source


def slope_label(m: float) -> str:
    return "0 (no position)" if m == 0 else f"1/{round(1 / m)}" if m < 1 else "1"


# ----------------------------------------------------------------------------- cached figures

@st.cache_data(max_entries=16, show_spinner=False)
def pipeline_fig(slope: float):
    return score_pipeline_figure(slope, num_keys=24, seed=3)


@st.cache_data(max_entries=16, show_spinner=False)
def bias_fig(seq_len: int):
    return bias_grid_figure(alibi_slopes(8), seq_len, "causal", heads=LESSON_HEADS)


@st.cache_data(max_entries=16, show_spinner=False)
def slopes_fig(num_heads: int):
    return slope_schedule_figure(num_heads)


@st.cache_data(max_entries=16, show_spinner=False)
def decay_fig(seq_len: int):
    return decay_figure(alibi_slopes(8), seq_len, "causal")


@st.cache_data(max_entries=4, show_spinner="Running the ALiBi model on the text...")
def lesson_maps(path: str, stamp: tuple, n_tokens: int):
    """Tokens and every layer's maps for the lesson text (4 x 8 x 128^2 floats: 2 MiB)."""
    model, tokenizer, _ = ui.cached_model(path, stamp)
    return attention_maps(model, tokenizer, LESSON_TEXT, max_tokens=n_tokens)


@st.cache_data(max_entries=64, show_spinner=False)
def head_fig(path: str, stamp: tuple, n_tokens: int, layer: int, head: int, slope: float):
    attention = lesson_maps(path, stamp, n_tokens).maps[layer - 1][head - 1]
    fig = head_vs_bias_figure(attention, slope, layer, head, height=480)
    prior = implied_attention_map(slope, attention.shape[0])
    return fig, mean_attention_distance(attention), mean_attention_distance(prior)


@st.cache_data(max_entries=8, show_spinner=False)
def results_fig(results: dict, protocols: tuple):
    return perplexity_figure(results, protocols=protocols)


# ----------------------------------------------------------------------------- controls

def go_to(step: int) -> None:
    st.session_state["ls_step"] = min(len(STEPS), max(1, step))


def controls_ui():
    """Step and presentation mode, seeded from the URL (step 1..6, present=1). Returns them."""
    first_run = not st.session_state.get(f"_{PREFIX}_seeded")
    ui.seed_from_url(PREFIX, [Param("step", "int", 1, 1, len(STEPS)),
                              Param("present", "choice", "0", choices=("0", "1"))])
    if first_run:  # the URL holds "0"/"1"; the toggle wants a bool
        st.session_state["ls_present"] = st.session_state["ls_present"] == "1"
    with st.sidebar:
        st.header("Lesson")
        present = st.toggle("Presentation mode", key="ls_present",
                            help="Larger text and figures for a projector (URL: present=1).")
        step = st.radio("Steps", list(range(1, len(STEPS) + 1)), key="ls_step",
                        format_func=lambda k: f"{k}. {STEPS[k - 1]}")
    return int(step), bool(present)


def navigation_ui(step: int) -> None:
    """Previous / step indicator / Next."""
    left, middle, right = st.columns([1, 4, 1], vertical_alignment="center")
    left.button("← Previous", key="ls_prev", on_click=go_to, args=(step - 1,),
                disabled=step == 1, width="stretch")
    middle.progress(step / len(STEPS), text=f"Step {step} of {len(STEPS)}: {STEPS[step - 1]}")
    right.button("Next →", key="ls_next", on_click=go_to, args=(step + 1,),
                 disabled=step == len(STEPS), type="primary", width="stretch")


def show(fig, name: str, present: bool) -> None:
    """The step's one figure, enlarged in presentation mode."""
    if present:
        fig = enlarge_figure(fig, PRESENT_SCALE)
    ui.show_figure(fig, f"lesson_{name}", key=f"ls_fig_{name}")


# ----------------------------------------------------------------------------- the steps

def step_position(present: bool) -> None:
    st.markdown(
        "An attention head compares the current token (the **query** i) with every token it "
        "may look at (the **keys** j): the score is the dot product q·k divided by √d, and a "
        "softmax turns the scores into weights that sum to 1. Nothing in that score says how "
        "far apart i and j are: move a key elsewhere and it keeps its score. Most transformers "
        "therefore put position into the input, adding a position vector (sinusoidal or "
        "learned) to each token embedding, or rotate q and k by their positions (RoPE).")
    st.markdown(
        "**ALiBi adds no position embeddings at all.** It changes one line: before the softmax, "
        "each score gets a penalty proportional to the distance between query and key. The "
        "penalty is fixed before training, not learned, and not divided by √d.")
    st.latex(r"\text{score}_{ij} = \frac{q_i \cdot k_j}{\sqrt{d}} \;-\; m\,(i-j),"
             r"\qquad j \le i")
    slope = st.select_slider("Slope m", SLOPE_CHOICES, value=0.25, key="ls_s1_slope",
                             format_func=slope_label)
    show(pipeline_fig(slope), "position", present)
    st.caption("Made-up content scores for one query (the last token) against 24 keys. With "
               "m = 0 both attention rows are the same: a far key with a good score wins as "
               "easily as a near one. Raise m and the weight moves to recent keys.")


def step_bias(present: bool) -> None:
    st.markdown(
        "Write the penalty for every query (row i) and key (column j) and you get one matrix "
        "per head: **B_ij = −m·(i−j)**. It is 0 on the diagonal (a token and itself) and "
        "drops by m for each step back. Keys after the query are masked (grey), as in any "
        "decoder. The matrix depends only on the distance i−j, so every row looks the same, "
        "just longer; and the same matrices are added in every layer.")
    st.markdown(
        "Real code (the authors' fairseq, BLOOM) adds **+m·j** instead. For one query row "
        "that differs from −m·(i−j) by m·i, the same number for every key in the row, and a "
        "softmax ignores a constant added to a whole row: the attention is identical.")
    seq_len = st.slider("Sequence length", 4, 128, 16, key="ls_s2_len")
    show(bias_fig(seq_len), "bias", present)
    st.caption("Heads 1, 3, 5 and 8 of 8, with the paper's slopes; one colour scale for all, so "
               "a gentle head looks flat beside a steep one, as it is. Hover for the values.")


def step_slopes(present: bool) -> None:
    st.markdown(
        "Each head gets its own slope. For n heads the paper uses the geometric sequence "
        "**m_h = 2^(−8h/n)**, h = 1..n: with 8 heads, 1/2, 1/4, ..., 1/256. The first head "
        "penalises distance steeply, the last barely at all, so together the heads cover "
        "ranges from a couple of tokens to hundreds. The slopes are set before training and "
        "never change: the model has no position parameters at all.")
    st.markdown(
        "When n is not a power of two, the official code takes the slopes of the largest "
        "power of two below n and fills in the rest with every other slope of the schedule "
        "for twice that many heads, so the order zigzags: try 12 heads.")
    num_heads = st.number_input("Heads", 1, 64, 8, key="ls_s3_heads")
    show(slopes_fig(int(num_heads)), "slopes", present)


def step_decay(present: bool) -> None:
    st.markdown(
        "Suppose every key had the same content score. Then only the bias differs, and the "
        "softmax turns −m·d into weights proportional to **e^(−m·d)**: each step back "
        "multiplies a key's weight by e^(−m). The distance at which the weight halves is the "
        "head's **half-life, ln 2 / m**.")
    slopes = alibi_slopes(8)
    lives = half_life(slopes)
    st.markdown(
        f"For the 8 paper slopes that is {lives[0]:.2g} tokens for m = 1/2 up to "
        f"{lives[-1]:.0f} tokens for m = 1/256. Real content scores move weight around (a key "
        "whose score is s logits higher is worth s/m more tokens of distance), but the bias "
        "sets each head's default reach: a built-in preference for recent tokens.")
    seq_len = st.select_slider("Sequence length", [16, 32, 64, 128, 256, 512, 1024, 2048],
                               value=256, key="ls_s4_len")
    show(decay_fig(int(seq_len)), "decay", present)
    spans = mean_distance(slopes, "causal", int(seq_len))
    st.caption(f"For the last of {seq_len} tokens, the bias alone gives a mean attended "
               f"distance of {spans[0]:.2g} tokens (head 1) up to {spans[-1]:.0f} tokens "
               "(head 8).")


def step_real_head(present: bool) -> None:
    path = assets.shipped_models().get(assets.DEFAULT_MODEL)
    if path is None:
        st.info("The shipped ALiBi model is missing (assets/models/alibi): train it with "
                "`python -m alibi_viz.train --arch alibi --out assets/models/alibi`.")
        return
    stamp = ui.model_stamp(str(path))
    try:
        _, _, info = ui.cached_model(str(path), stamp)
    except AlibiVizError as exc:
        st.error(f"The shipped ALiBi model could not be loaded: {exc}")
        return
    train_len = int(assets.training_info(path).get("train_seq_len") or 128)
    st.markdown(
        f"Now a trained model: the shipped ALiBi model ({info.num_layers} layers x "
        f"{info.num_heads} heads, trained on {train_len}-token windows of Python source) "
        "reading the start of a small Python function. **Left**: what the chosen head really "
        "attends to, query rows against key columns. **Right**: what its slope alone would "
        "give if every content score were equal. Where they differ, the content term q·k "
        "is at work.")
    left, right = st.columns(2)
    layer = left.selectbox("Layer", list(range(1, info.num_layers + 1)), key="ls_layer")
    head = right.selectbox("Head", list(range(1, info.num_heads + 1)),
                           index=info.num_heads - 1, key="ls_head",
                           help="Head 1 has the steepest slope, the last head the gentlest.")
    if not info.slopes:
        st.warning("This model reports no ALiBi slopes.")
        return
    slope = float(info.slopes[head - 1])
    try:
        fig, measured, prior = head_fig(str(path), stamp, train_len, layer, head, slope)
    except AlibiVizError as exc:
        st.error(str(exc))
        return
    show(fig, "real_head", present)
    T = lesson_maps(str(path), stamp, train_len).maps[0].shape[-1]
    st.caption(f"Distance from query to key, averaged over each row's attention and then over "
               f"the {T} queries: {measured:.1f} tokens for the model's head, {prior:.1f} for "
               f"the bias alone (m={slope:.3g}, half-life "
               f"{math.log(2) / slope:.3g} tokens). The text: "
               f"`{LESSON_TEXT[:60].splitlines()[0]} ...`")


def step_extrapolation(present: bool) -> None:
    results = assets.load_extrapolation_results(assets.RESULTS_PATH)
    train_len = (train_length(results) if results else None) or 128
    longest = max(results.get("lengths") or [4096]) if results else 4096
    st.markdown(
        "The point of it all. The three shipped models were trained identically on "
        f"{train_len}-token windows, differing only in position: ALiBi, learned absolute "
        f"positions, RoPE. Then each reads held-out text in windows of up to {longest:,} tokens "
        f"({longest // train_len}x). Past {train_len} the learned model meets position vectors "
        "that were never trained, and RoPE meets rotation angles between query and key that it "
        "never saw. ALiBi meets only larger distances on the same straight line.")
    if not results:
        st.info("No shipped results yet: assets/results/extrapolation.json is written by "
                "`python -m alibi_viz.evaluate`.")
        return
    choice = st.radio("Protocol", ("both", "nonoverlapping", "sliding"), horizontal=True,
                      key="ls_s6_protocol")
    protocols = ("nonoverlapping", "sliding") if choice == "both" else (choice,)
    try:
        show(results_fig(results, protocols), "extrapolation", present)
        sentences = extrapolation_summary(results, protocols[0])
    except AlibiVizError as exc:
        st.error(f"The shipped results could not be drawn: {exc}")
        return
    if sentences:
        st.markdown(f"**What these models show ({protocols[0]}).** " + " ".join(sentences))
    st.markdown(
        f"A flat line past {train_len} means a model does not break on longer inputs; it "
        "does not by itself mean it uses the extra context (compare the sliding-window "
        "panel, where every scored token sees a full window). In the paper, a 1.3-billion-"
        "parameter model trained with ALiBi on 1,024-token inputs reached, on 2,048-token "
        "inputs, the perplexity of a sinusoidal model trained on 2,048 tokens, while training "
        "11% faster and using 11% less memory.")
    st.page_link("extrapolation.py", label="Re-run it live in the Extrapolation lab", icon="📈")


STEP_VIEWS = (step_position, step_bias, step_slopes, step_decay, step_real_head,
              step_extrapolation)

# ----------------------------------------------------------------------------- page

step, present = controls_ui()
ui.write_url({"step": step, "present": 1 if present else None})
if present:
    st.html(PRESENT_CSS)
st.title("Lesson: ALiBi in six steps")
ui.show_url_warnings(PREFIX)
navigation_ui(step)
st.header(f"{step}. {STEPS[step - 1]}")
try:
    STEP_VIEWS[step - 1](present)
except AlibiVizError as exc:  # the controls keep values valid; this guards the library's checks
    st.error(str(exc))
