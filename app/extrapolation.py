"""Extrapolation lab: train short, test long, with the shipped family of five models."""

import time
from pathlib import Path

import streamlit as st

from alibi_viz import assets, data, paper
from alibi_viz.alibi import implied_attention_map
from alibi_viz.assets import model_label
from alibi_viz.errors import AlibiVizError
from alibi_viz.evaluate import (
    DEFAULT_STRIDE,
    LENGTHS,
    PROTOCOLS,
    compare_cells,
    describe_ratio,
    evaluation_stream,
    extrapolation_summary,
    in_distribution_ranking,
    live_token_cap,
    load_eval_model,
    perplexity,
    protocol_plan,
    results_table,
    train_seq_len_of,
    useful_context,
)
from alibi_viz.extrapolation_figures import (
    copy_heads_figure,
    extrapolation_attention_figure,
    perplexity_figure,
    reach_figure,
    win_half_figure,
)
from alibi_viz.heads import attention_maps, mass_beyond
from alibi_viz.params import UrlParam
from alibi_viz.reach import (
    COPY_SPAN,
    REACH_CONTEXTS,
    context_reach,
    copy_attention,
    copy_sequences,
    plant_span,
    reach_summary,
    span_losses,
)
from app import ui

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
    beyond_bias = (mass_beyond(implied_attention_map([slope], T)[0], train_len)
                   if slope else None)
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
        return None, ("The shipped ALiBi model is missing (assets/models/alibi). "
                      + assets.TRAIN_HINT.format(name=assets.DEFAULT_MODEL))
    try:
        _, _, info = ui.cached_model(str(path), ui.model_stamp(str(path)))
    except AlibiVizError as exc:
        return None, f"The shipped ALiBi model could not be loaded: {exc}"
    return info, None


def controls_ui(names: list[str], num_layers: int, num_heads: int):
    """Sidebar controls, seeded from the URL on the first run. Returns their values."""
    default_model = assets.DEFAULT_MODEL if assets.DEFAULT_MODEL in names else names[0]
    ui.seed_from_url(PREFIX, [
        UrlParam("model", "choice", default_model, choices=tuple(names)),
        UrlParam("length", "choice", 1024, choices=LENGTHS),
        UrlParam("layer", "int", 1, 1, num_layers),
        UrlParam("head", "int", num_heads, 1, num_heads),
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
                               f"sliding: windows advance {DEFAULT_STRIDE} tokens and only their "
                               f"last {DEFAULT_STRIDE} are scored, so each scored token sees "
                               f"between L - {DEFAULT_STRIDE - 1} and L tokens of context.")
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
    train_len = train_seq_len_of(results)
train_len = int(train_len or FALLBACK_TRAIN_LEN)

st.title("Extrapolation lab: train short, test long")
st.caption(f"Five small models trained alike on {train_len}-token windows of Python source "
           "(same backbone, data, copy curriculum, steps and schedule), differing in how they "
           "know where a token is: "
           + "; ".join(f"**{spec.label}**: {spec.position}" for spec in assets.SHIPPED.values())
           + f". Then each reads held-out text in windows of up to {max(LENGTHS):,} tokens.")
with st.expander("What else differs between the five (measured, see the model cards)"):
    st.markdown("\n".join(f"- {d}" for d in assets.REMAINING_DIFFERENCES))
ui.show_url_warnings(PREFIX)


def paper_rows(results: dict) -> list[dict]:
    """The paper's Table 2 beside this project's numbers: perplexity at the training length
    and at the longest length, and their ratio (non-overlapping windows)."""
    ours = {"sinusoidal": "sinusoidal", "rotary": "rope", "ALiBi": "alibi"}
    longest = max(results["lengths"])
    rows = []
    for method, (short, long) in paper.TABLE2.items():
        entry = results["models"].get(ours[method], {}).get("perplexity", {}).get(
            "nonoverlapping", {})
        mine_short, mine_long = entry.get(str(train_len)), entry.get(str(longest))
        rows.append({
            "method": method,
            f"paper: L={paper.TABLE2_TRAIN_LEN}": short,
            f"paper: {paper.TABLE2_LONG:,}": long,
            "paper: ratio": round(long / short, 2),
            f"ours: {train_len}": mine_short,
            f"ours: {longest:,}": mine_long,
            "ours: ratio": round(mine_long / mine_short, 2) if mine_short and mine_long else None,
        })
    return rows


def reading_notes(results: dict) -> None:
    """How to read the two panels, with the numbers that back each sentence."""
    stride = results.get("stride", DEFAULT_STRIDE)
    tokens = results.get("protocols", {})
    scored = {p: tokens.get(p, {}).get("tokens") for p in PROTOCOLS}
    longest = max(results["lengths"])
    st.markdown(
        "**How to read it.** *Non-overlapping* windows score every token, but the first "
        "tokens of each window see almost no context (the paper's *early token curse*); a "
        "longer window has proportionally fewer of them, which is all it takes for a model "
        "that does not break to improve with length. The *sliding* window moves by "
        f"{stride} tokens and scores only the last {stride} of each window, so every scored "
        f"token sees between L − {stride - 1} and L tokens of context (the paper slid by one "
        "token, so that each sees exactly L; a stride of "
        f"{stride} is this project's cheaper approximation). "
        + (f"Each non-overlapping number rests on {scored['nonoverlapping']:,} scored tokens, "
           f"each sliding one on {scored['sliding']:,}; the error bars are 95% intervals over "
           f"{results.get('chunks', '?')} disjoint chunks of them."
           if scored["nonoverlapping"] and scored["sliding"] else ""))
    use = useful_context(results, "alibi") if "alibi" in results["models"] else None
    nonover = (compare_cells(results, "nonoverlapping", ("alibi", longest), ("alibi", train_len))
               if use else None)
    if use and nonover:
        n, gain, rest = use
        st.markdown(
            f"**The key result.** In sliding windows, where every scored token sees a full "
            f"window, ALiBi's perplexity changes by {describe_ratio(gain)} from {train_len} to "
            f"{n:,} tokens and by {describe_ratio(rest)} from {n:,} to {longest:,}: it uses "
            f"about {n:,} tokens of context ({n // train_len}x its training length) and "
            f"nothing beyond. In non-overlapping windows it moves by {describe_ratio(nonover)} "
            f"from {train_len} to {longest:,}; past {n:,} tokens that is only fewer tokens "
            "paying the early token curse, not more context used. The paper reaches the same "
            "conclusion (appendix B) and finds ALiBi best near twice the training length; the "
            "copy curriculum of these models stretches their reach further (section 4).")
    if "nope" in results["models"]:
        st.markdown(
            "**NoPE** has no position information at all, yet a causal model can still learn "
            "where it is: the mask lets a token count how many tokens come before it (Haviv "
            "et al. 2022, Kazemnejad et al. 2023). Its curves show what that implicit position "
            "does at and beyond the training length.")


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
            for sentence in in_distribution_ranking(results):
                st.markdown(sentence)
            reading_notes(results)
            st.markdown(f"**Beside the paper** ({paper.CITATION}, appendix Table 2: "
                        f"WikiText-103, trained at L = {paper.TABLE2_TRAIN_LEN} tokens, "
                        "non-overlapping windows). The paper's sliding-window evaluation keeps "
                        "ALiBi flat while the sinusoidal model goes from "
                        f"{paper.SLIDING_SINUSOIDAL[0]} to {paper.SLIDING_SINUSOIDAL[1]} at "
                        f"{paper.SLIDING_LONG:,} tokens.")
            st.dataframe(paper_rows(results), hide_index=True, key="xl_paper")
            with st.expander("Table and evaluation details"):
                st.dataframe(results_table(results), hide_index=True, key="xl_table")
                st.caption(f"{results.get('tokens_note', '')}. {results.get('interval', '')}. "
                           f"Corpus: {results.get('corpus', {}).get('source', 'unknown')}. "
                           f"Command: `{results.get('command', 'python -m alibi_viz.evaluate')}`.")
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
        st.error(f"The model {model_label(model)} is not shipped (assets/models/{model}). "
                 + assets.TRAIN_HINT.format(name=model))
    else:
        bar = st.progress(0.0, text=f"Scoring {tokens:,} tokens in windows of {length:,}...")
        try:
            net = eval_model(str(path), ui.model_stamp(str(path)))
            stream = held_out_ids(LIVE_STREAM_TOKENS)
            start = time.perf_counter()

            def advance(done, total):
                bar.progress(done / total, text=f"window {done:,} of {total:,}")

            out = perplexity(net, stream, length, protocol, progress=advance,
                             stride=DEFAULT_STRIDE,
                             **protocol_plan(protocol, tokens, max_length=length))
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
                "back, farther than any distance seen in training. For ALiBi those distances "
                "are new too, but they only carry a larger penalty on the same straight line, "
                "so most attention stays on distances seen in training. A causal model cannot "
                "look ahead, so the left map is the top-left corner of the right one.")
        if beyond == beyond:  # not NaN
            text += (f" Queries past position {train_len} give **{share(beyond)}** of their "
                     f"attention to keys more than {train_len} tokens back")
            text += (f"; the bias alone (m={slope:.3g}, all content scores equal) would give "
                     f"{share(beyond_bias)}." if beyond_bias is not None else ".")
        st.markdown(text)


# 4. context reach -------------------------------------------------------------------------------
REACH_LIVE_CONTEXTS = tuple(c for c in REACH_CONTEXTS if c <= 1024)
COPY_DISTANCES = (16, 32, 64, 128, 256, 512, 1024)


@st.cache_data(max_entries=4, show_spinner=False)
def reach_fig(reach: dict, train_len: int):
    return reach_figure(reach, train_len)


@st.cache_data(max_entries=4, show_spinner=False)
def win_half_fig(slopes: tuple, num_keys: int):
    return win_half_figure(list(slopes), num_keys)


@st.cache_data(max_entries=16, show_spinner="Running the model on a planted span...")
def copy_heads(path: str, stamp: tuple, distance: int):
    """Copy attention per head and the losses on one planted span of held-out text."""
    model, _, _ = ui.cached_model(path, stamp)
    ids, first, repeat = copy_sequences(held_out_ids(LIVE_STREAM_TOKENS), distance, samples=1)
    values = copy_attention(model, ids[0].numpy(), first, repeat, COPY_SPAN)
    return values, span_losses(model, ids[0].numpy(), first, repeat, COPY_SPAN)


st.subheader("4. How far back do the models really look?")
st.markdown(
    "Left: the loss on the same held-out tokens when each model is given only the last c "
    "tokens before every one of them. Where a curve flattens, more context stops helping; "
    "past the training length (dashes) it may get worse. Right: retrieval. A span of "
    "held-out code is planted and repeated d tokens later; the gain is how much better the "
    "repeat is predicted than the first copy. For ALiBi a key d tokens back has to beat the "
    "bias −m·d, so the gain fades with distance.")
reach = assets.load_reach_results()
if not reach:
    st.info("No shipped reach results yet: assets/results/reach.json is written by "
            "`python -m alibi_viz.reach`.")
else:
    try:
        ui.show_figure(reach_fig(reach, train_len), "reach", key="xl_fig_reach")
        for line in reach_summary(reach, train_len):
            st.markdown(f"- {line}")
        st.caption(f"{reach['reach']['tokens']} scored tokens, the same at every context; "
                   f"{reach['copy']['samples']} planted spans of {reach['copy']['span']} tokens "
                   f"per distance. Command: `{reach.get('command', 'python -m alibi_viz.reach')}`.")
    except (AlibiVizError, KeyError, ValueError) as exc:
        st.error(f"The shipped reach results could not be read: {exc}")
if info is not None and info.slopes:
    st.markdown(
        "**The retrieval limit, from the bias alone.** For a far key to take half of a "
        "query's attention, its content score must beat every other key by the amount below: "
        "m·d plus a constant, so it grows by m logits for every token of distance. Gentle "
        "heads can still retrieve from far back; steep heads cannot.")
    ui.show_figure(win_half_fig(tuple(info.effective_slopes or info.slopes),
                                LONG_FACTOR * train_len), "win_half", key="xl_fig_win_half")

left, right = st.columns(2)
with left:
    st.markdown(f"**Re-run a reach curve live** ({model_label(model)}, contexts up to "
                f"{max(REACH_LIVE_CONTEXTS):,} tokens).")
    if st.button("Run reach live", key="xl_reach_run"):
        path = shipped.get(model)
        if path is None:
            st.error(f"The model {model_label(model)} is not shipped. "
                     + assets.TRAIN_HINT.format(name=model))
        else:
            bar = st.progress(0.0, text="context 1 ...")
            try:
                start = time.perf_counter()
                live = context_reach(
                    eval_model(str(path), ui.model_stamp(str(path))),
                    held_out_ids(LIVE_STREAM_TOKENS), REACH_LIVE_CONTEXTS,
                    progress=lambda done, total: bar.progress(
                        done / total, text=f"context {REACH_LIVE_CONTEXTS[done - 1]:,} done"))
                seconds = time.perf_counter() - start
            except (AlibiVizError, RuntimeError, MemoryError) as exc:
                bar.empty()
                st.error(f"The live reach run failed: {exc}")
            else:
                bar.progress(1.0, text=f"Done in {seconds:.1f} s")
                st.dataframe([{"context": int(c), "loss (nats/token)": round(float(v), 4)}
                              for c, v in zip(live.contexts, live.nll, strict=True)],
                             hide_index=True, key="xl_reach_table")
with right:
    distance = st.select_slider("Copy distance (tokens)", COPY_DISTANCES, value=64,
                                key="xl_copy_distance")
    path = shipped.get(model)
    if path is not None:
        try:
            values, (first_loss, repeat_loss) = copy_heads(str(path), ui.model_stamp(str(path)),
                                                           int(distance))
        except (AlibiVizError, RuntimeError) as exc:
            st.error(str(exc))
        else:
            ui.show_figure(copy_heads_figure(values, int(distance)), "copy_heads",
                           key="xl_fig_copy_heads")
            st.caption(f"{model_label(model)}, one planted span of {COPY_SPAN} held-out tokens: loss "
                       f"{first_loss:.2f} nats/token on the first copy, {repeat_loss:.2f} on "
                       "the repeat.")

with st.expander("Plant your own span"):
    span = st.text_input("Span to repeat", "return total / width", key="xl_span",
                         max_chars=200)
    between = st.text_area("Text between the two copies", data.CODE_EXAMPLE, key="xl_between",
                           max_chars=20_000, height=120)
    path = shipped.get(model)
    if st.button("Measure", key="xl_span_run") and path is not None:
        try:
            net, tokenizer, _ = ui.cached_model(str(path), ui.model_stamp(str(path)))
            ids, first, repeat, n = plant_span(tokenizer, between, span)
            first_loss, repeat_loss = span_losses(net, ids, first, repeat, n)
            values = copy_attention(net, ids, first, repeat, n) if n > 1 else None
        except (AlibiVizError, RuntimeError, MemoryError) as exc:
            st.error(str(exc))
        else:
            st.markdown(f"{model_label(model)}: the span is {n} tokens and its copies are "
                        f"{repeat - first:,} tokens apart. Loss {first_loss:.2f} nats/token on "
                        f"the first copy, {repeat_loss:.2f} on the repeat (gain "
                        f"{first_loss - repeat_loss:+.2f}).")
            if values is not None:
                ui.show_figure(copy_heads_figure(values, repeat - first), "copy_heads_own",
                               key="xl_fig_copy_own")

