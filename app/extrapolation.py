"""Extrapolation lab: train short, test long, with the shipped ALiBi, learned and RoPE models."""

import time
from pathlib import Path

import streamlit as st

from alibi_viz import assets, data
from alibi_viz.errors import AlibiVizError
from alibi_viz.evaluate import (
    DEFAULT_STRIDE,
    LENGTHS,
    PROTOCOLS,
    evaluation_stream,
    load_eval_model,
    perplexity,
)
from alibi_viz.extrapolation_plots import (
    extrapolation_attention_figure,
    extrapolation_summary,
    implied_attention_map,
    live_plan,
    live_token_cap,
    mass_beyond,
    model_label,
    perplexity_figure,
    results_table,
    train_length,
)
from alibi_viz.heads import attention_maps
from alibi_viz.params import Param

import ui

PREFIX = "xl"
LONG_FACTOR = 8            # the attention maps compare the training length with 8x that length
FALLBACK_TRAIN_LEN = 128   # used (and said) when neither training.json nor the results know it
LIVE_STREAM_TOKENS = 2 * max(LENGTHS) + DEFAULT_STRIDE  # enough held-out ids for any live plan


# ----------------------------------------------------------------------------- cached work

@st.cache_resource(max_entries=3, show_spinner="Loading the model for evaluation...")
def eval_model(path: str, stamp: tuple):
    """The model exactly as `python -m alibi_viz.evaluate` loads it (sdpa where the
    architecture has it, eager for BLOOM), so a live run repeats the shipped computation."""
    return load_eval_model(Path(path))


@st.cache_data(max_entries=2, show_spinner=False)
def held_out_ids(n_tokens: int):
    """The first n_tokens + 1 ids of the held-out stream the shipped numbers were measured on."""
    return evaluation_stream(n_tokens)


@st.cache_resource(max_entries=2, show_spinner="Running the ALiBi model on the text...")
def alibi_attention(path: str, stamp: tuple, n_tokens: int):
    """Every layer's attention on the long example's first n_tokens tokens.

    A resource rather than cache_data: at 1,024 tokens the maps are 4 layers x 8 heads x
    1,024^2 float32 = 128 MiB, which cache_data would copy on every read. Never mutated.
    """
    model, tokenizer, _ = ui.cached_model(path, stamp)
    return attention_maps(model, tokenizer, data.long_example(), max_tokens=n_tokens)


@st.cache_data(max_entries=32, show_spinner=False)
def attention_view(path: str, stamp: tuple, train_len: int, layer: int, head: int, slope):
    """(figure, share of attention beyond the training length: model, bias alone, T)."""
    short = alibi_attention(path, stamp, train_len)
    long = alibi_attention(path, stamp, LONG_FACTOR * train_len)
    short_map = short.maps[layer - 1][head - 1]  # (L, L)
    long_map = long.maps[layer - 1][head - 1]    # (T, T)
    fig = extrapolation_attention_figure(short_map, long_map, train_len, layer, head, slope)
    T = long_map.shape[0]
    beyond = mass_beyond(long_map, train_len)
    beyond_bias = mass_beyond(implied_attention_map(slope, T), train_len) if slope else None
    return fig, beyond, beyond_bias, T


@st.cache_data(max_entries=16, show_spinner=False)
def results_figure(results: dict):
    return perplexity_figure(results)


# ----------------------------------------------------------------------------- controls

def share(x: float) -> str:
    """A fraction as a percentage: "52%", "2.1%", "0.031%", or "under 0.01%"."""
    percent = 100 * x
    if percent < 0.01:
        return "under 0.01%"
    return f"{percent:.0f}%" if percent >= 10 else f"{percent:.2g}%"


def model_info(path):
    """(info, error message) of the ALiBi model through the shared model cache."""
    if path is None:
        return None, ("The shipped ALiBi model is missing (assets/models/alibi). Train it with "
                      "`python -m alibi_viz.train --arch alibi --out assets/models/alibi`.")
    try:
        _, _, info = ui.cached_model(str(path), ui.model_stamp(str(path)))
    except AlibiVizError as exc:
        return None, f"The shipped ALiBi model could not be loaded: {exc}"
    return info, None


def controls_ui(names: list[str], num_layers: int, num_heads: int):
    """Sidebar controls, seeded from the URL on the first run. Returns their values."""
    default_model = assets.DEFAULT_MODEL if assets.DEFAULT_MODEL in names else names[0]
    ui.seed_from_url(PREFIX, [
        Param("model", "choice", default_model, choices=tuple(names)),
        Param("length", "choice", 1024, choices=LENGTHS),
        Param("layer", "int", 1, 1, num_layers),
        Param("head", "int", num_heads, 1, num_heads),
    ])
    with st.sidebar:
        st.header("Extrapolation lab")
        st.subheader("Live evaluation")
        model = st.selectbox("Model", names, key="xl_model", format_func=model_label,
                             help="Which shipped model to re-evaluate live.")
        length = st.select_slider("Evaluation length (tokens)", LENGTHS, key="xl_length",
                                  help="Window length of the live run: 128 (the training "
                                       "length) up to 4,096 (32x).")
        st.subheader("ALiBi attention maps")
        layer = st.selectbox("Layer", list(range(1, num_layers + 1)), key="xl_layer")
        head = st.selectbox("Head", list(range(1, num_heads + 1)), key="xl_head",
                            help="Head 1 has the steepest slope (looks closest); the last head "
                                 "the gentlest.")
    return model, int(length), int(layer), int(head)


def live_controls_ui(length: int):
    """Protocol and token count of the live run (token count capped for the length)."""
    left, right = st.columns(2)
    protocol = left.radio("Protocol", PROTOCOLS, key="xl_protocol", horizontal=True,
                          help="nonoverlapping: consecutive windows, every token scored. "
                               f"sliding: windows advance {DEFAULT_STRIDE} tokens and only the "
                               "last ones are scored, so each sees a full window of context.")
    cap = live_token_cap(length, protocol, DEFAULT_STRIDE)
    smallest = length if protocol == "nonoverlapping" else min(DEFAULT_STRIDE, length)
    smallest = min(smallest, cap)
    # a new length or protocol starts at its cap; a typed value is kept inside the new bounds
    if st.session_state.get("_xl_tokens_for") != (length, protocol):
        st.session_state["xl_tokens"] = cap
        st.session_state["_xl_tokens_for"] = (length, protocol)
    st.session_state["xl_tokens"] = min(max(int(st.session_state["xl_tokens"]), smallest), cap)
    tokens = right.number_input("Tokens to score", smallest, cap, step=smallest, key="xl_tokens",
                                help=f"At most {cap:,} at this length and protocol, so the run "
                                     "stays within seconds.")
    return protocol, int(tokens), cap


# ----------------------------------------------------------------------------- page

shipped = assets.shipped_models()
names = list(shipped) or list(assets.MODEL_ORDER)
alibi_path = shipped.get(assets.DEFAULT_MODEL)
info, alibi_error = model_info(alibi_path)
num_layers = info.num_layers if info else 64
num_heads = info.num_heads if info else 64
model, length, layer, head = controls_ui(names, num_layers, num_heads)
ui.write_url({"model": model, "length": length, "layer": layer, "head": head})

results = assets.load_extrapolation_results(assets.RESULTS_PATH)
train_len = assets.training_info(alibi_path).get("train_seq_len") if alibi_path else None
if not train_len and results:
    train_len = train_length(results)
train_len = int(train_len or FALLBACK_TRAIN_LEN)

st.title("Extrapolation lab: train short, test long")
st.caption(f"Three small models trained identically on {train_len}-token windows of Python "
           "source, differing only in how they know where a token is: ALiBi (a linear bias on "
           "the attention scores, no position embeddings), learned absolute position "
           "embeddings, and RoPE (rotated queries and keys). Then each reads held-out text in "
           f"windows of up to {max(LENGTHS):,} tokens.")
ui.show_url_warnings(PREFIX)

# 1. shipped results -------------------------------------------------------------------------
st.subheader("1. Perplexity vs evaluation length (shipped results)")
chart_slot = st.container()  # filled at the end, once a live run may have added its star
summary_slot = st.container()
if not results:
    chart_slot.info("No shipped results yet: assets/results/extrapolation.json is written by "
                    "`python -m alibi_viz.evaluate`. The live evaluation below works without it.")
else:
    with summary_slot:
        try:
            for protocol in PROTOCOLS:
                sentences = extrapolation_summary(results, protocol)
                if sentences:
                    st.markdown(f"**{protocol}.** " + " ".join(sentences))
            st.markdown(
                "How to read it. *Non-overlapping* windows score every token, but tokens early "
                "in a window see little context (the paper's \"early token curse\"), so longer "
                "windows help any model a little. The *sliding* window scores only tokens that "
                "see a full window, so it isolates what the extra context is worth. A flat "
                "line past the training length means the model does not break; it does not by "
                "itself mean the model uses the longer context (the ALiBi paper makes the same "
                "point).")
            with st.expander("Table and evaluation details"):
                st.dataframe(results_table(results), hide_index=True, key="xl_table")
                st.caption(f"{results.get('tokens_note', '')}. Corpus: "
                           f"{results.get('corpus', {}).get('source', 'unknown')}. Command: "
                           f"`{results.get('command', 'python -m alibi_viz.evaluate')}`.")
        except AlibiVizError as exc:
            st.error(f"The shipped results could not be read: {exc}")
            results = {}

# 2. live run ---------------------------------------------------------------------------------
st.subheader("2. Re-run it live")
protocol, tokens, cap = live_controls_ui(length)
st.caption(f"Re-evaluates {model_label(model)} at {length:,} tokens ({protocol}) on the same "
           f"held-out stream as the shipped numbers, scoring its first tokens. To stay within "
           f"seconds a live run scores at most {cap:,} tokens at this length (the shipped "
           "numbers score more text, see the table), so the two can differ. The longest "
           "runs are at 4,096 tokens, where one window is the least that can be evaluated.")
live_runs = st.session_state.setdefault("xl_live", [])
if st.button("Run live evaluation", key="xl_run", type="primary"):
    path = shipped.get(model)
    if path is None:
        st.error(f"The model {model_label(model)} is not shipped (assets/models/{model}): "
                 f"train it with `python -m alibi_viz.train --arch {model} --out "
                 f"assets/models/{model}`.")
    else:
        bar = st.progress(0.0, text=f"Scoring {tokens:,} tokens in windows of {length:,}...")
        try:
            net = eval_model(str(path), ui.model_stamp(str(path)))
            stream = held_out_ids(LIVE_STREAM_TOKENS)
            start = time.perf_counter()

            def advance(done, total):
                bar.progress(done / total, text=f"window {done:,} of {total:,}")

            out = perplexity(net, stream, length, protocol, progress=advance,
                             **live_plan(length, protocol, tokens, DEFAULT_STRIDE))
            seconds = time.perf_counter() - start
        except (AlibiVizError, RuntimeError, MemoryError) as exc:
            bar.empty()
            st.error(f"The live evaluation failed: {exc}")
        else:
            bar.progress(1.0, text=f"Done in {seconds:.1f} s")
            run = {"model": model, "protocol": protocol, "length": length, "ppl": out["ppl"],
                   "tokens": out["tokens"], "seconds": round(seconds, 2)}
            live_runs[:] = [r for r in live_runs if (r["model"], r["protocol"], r["length"])
                            != (model, protocol, length)] + [run]

current = next((r for r in reversed(live_runs) if (r["model"], r["protocol"], r["length"])
                == (model, protocol, length)), None)
shipped_ppl = (results.get("models", {}).get(model, {}).get("perplexity", {})
               .get(protocol, {}).get(str(length))) if results else None
shipped_tokens = (results.get("models", {}).get(model, {}).get("tokens", {})
                  .get(protocol, {}).get(str(length))) if results else None
live_col, shipped_col = st.columns(2)
with live_col:
    if current:
        st.metric(f"Live: {model_label(model)}, {protocol}, {length:,} tokens",
                  f"{current['ppl']:.3f}")
        st.caption(f"{current['tokens']:,} tokens scored in {current['seconds']:.1f} s.")
    else:
        st.metric(f"Live: {model_label(model)}, {protocol}, {length:,} tokens", "not run yet")
with shipped_col:
    if shipped_ppl is not None:
        st.metric("Shipped", f"{float(shipped_ppl):.3f}")
        if shipped_tokens:
            st.caption(f"{int(shipped_tokens):,} tokens scored.")
    else:
        st.metric("Shipped", "n/a", help="No shipped number for this model, protocol and length.")

if results:
    try:
        fig = results_figure(results)
        if live_runs:
            fig = perplexity_figure(results, live=live_runs)
        with chart_slot:
            ui.show_figure(fig, "extrapolation_perplexity", key="xl_fig_results")
    except AlibiVizError as exc:
        chart_slot.error(f"The shipped results could not be drawn: {exc}")

# 3. attention maps ------------------------------------------------------------------------------
st.subheader(f"3. One ALiBi head at {train_len} and at {LONG_FACTOR * train_len:,} tokens")
if info is None:
    st.info(alibi_error)
else:
    slope = info.slopes[head - 1] if info.slopes else None
    try:
        fig, beyond, beyond_bias, T = attention_view(str(alibi_path), ui.model_stamp(str(alibi_path)),
                                                     train_len, layer, head, slope)
    except AlibiVizError as exc:
        st.error(str(exc))
    else:
        ui.show_figure(fig, f"extrapolation_attention_L{layer}_H{head}", key="xl_fig_attention")
        text = (f"The same held-out Python file, read by the ALiBi model at {train_len} tokens "
                f"(left, the training length) and at {T:,} tokens (right, {T // train_len}x). "
                "Below the dashed red line every query sees more tokens than any training "
                f"window held; left of the dotted line keys are more than {train_len} tokens "
                "back, farther than any distance seen in training. For ALiBi that is only a "
                "larger penalty on the same straight line; no new position has to be "
                "interpreted. A causal model cannot look ahead, so the left map is the top-left "
                "corner of the right one.")
        if beyond == beyond:  # not NaN
            text += (f" Queries past position {train_len} give **{share(beyond)}** of their "
                     f"attention to keys more than {train_len} tokens back")
            text += (f"; the bias alone (m={slope:.3g}, all content scores equal) would give "
                     f"{share(beyond_bias)}." if beyond_bias is not None else ".")
        st.markdown(text)
