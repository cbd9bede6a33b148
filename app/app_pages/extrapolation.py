"""Extrapolation lab: train short, test long, with the shipped family of five models."""

import time
from pathlib import Path

import streamlit as st

from alibi_viz import assets, data, i18n, paper
from alibi_viz.assets import model_label, train_hint
from alibi_viz.errors import AlibiVizError
from alibi_viz.evaluate import (
    DEFAULT_STRIDE,
    LENGTHS,
    PROTOCOLS,
    evaluate_length,
    evaluation_stream,
    extrapolation_summary,
    in_distribution_ranking,
    key_result,
    live_token_cap,
    load_eval_model,
    paper_comparison,
    protocol_name,
    relative_change,
    results_details,
    results_table,
    shipped_cell,
    signed,
)
from alibi_viz.figures.extrapolation import (
    copy_heads_figure,
    extrapolation_attention_figure,
    learnable_perplexity_figure,
    learned_slopes_figure,
    perplexity_figure,
    rescale_figure,
    win_half_figure,
)
from alibi_viz.i18n import N_, _, number, significant, small_percent
from alibi_viz.models.heads import attention_maps, beyond_training
from alibi_viz.models.rescale import (
    interpolation_note,
    interpolation_scale,
    rescale_summary,
    scale_label,
    slope_scale,
)
from alibi_viz.params import UrlParam
from alibi_viz.reach import (
    COPY_SPAN,
    REACH_CONTEXTS,
    beyond_summary,
    context_reach,
    copy_attention,
    copy_sequences,
    plant_span,
    reach_summary,
    span_losses,
)
from alibi_viz.reach import attention_beyond as heads_beyond
from alibi_viz.results import learnable_slopes
from app import heads_view, ui

PREFIX = "xl"
LONG_FACTOR = 8            # the attention maps compare the training length with 8x that length
LIVE_STREAM_TOKENS = 2 * max(LENGTHS) + DEFAULT_STRIDE  # enough held-out ids for any live plan
HALF_PX = 300  # a figure in one of two columns on a 1024 px screen with the sidebar open


# ----------------------------------------------------------------------------- cached work

@st.cache_resource(max_entries=3, show_spinner=_("Loading the model for evaluation..."))
def eval_model(path: str, stamp: tuple):
    """The model exactly as `python -m alibi_viz.evaluate` loads it (sdpa where the
    architecture has it, eager for BLOOM), so a live run repeats the shipped computation."""
    return load_eval_model(Path(path))


@st.cache_data(max_entries=8, show_spinner=False)
def held_out_ids(n_tokens: int, kind: str):
    """The first n_tokens + 1 ids of the held-out text of `kind` the shipped numbers were
    measured on."""
    return evaluation_stream(n_tokens, kind)


@st.cache_resource(max_entries=2, show_spinner=_("Running the ALiBi model on the text..."))
def alibi_attention(path: str, stamp: tuple, n_tokens: int, kind: str):
    """Every layer's attention on the first n_tokens tokens of the long example of `kind`.

    A resource rather than cache_data: at 1,024 tokens the maps are 4 layers x 8 heads x
    1,024^2 float32 = 128 MiB, which cache_data would copy on every read. Never mutated.
    """
    model, tokenizer, _info = ui.cached_model(path, stamp)
    return attention_maps(model, tokenizer, data.long_example(kind=kind), max_tokens=n_tokens)


@ui.cached_figure(max_entries=32)
def attention_fig(path: str, stamp: tuple, train_seq_len: int, layer: int, head: int, slope,
                  kind: str):
    """One head (0-based `layer`, `head`) at the training length beside LONG_FACTOR times it."""
    short = alibi_attention(path, stamp, train_seq_len, kind).maps[layer][head]  # (L, L)
    long = alibi_attention(path, stamp, LONG_FACTOR * train_seq_len, kind).maps[layer][head]  # (T, T)
    return extrapolation_attention_figure(short, long, train_seq_len, layer, head, slope)


@st.cache_data(max_entries=32, show_spinner=False)
def attention_beyond(path: str, stamp: tuple, train_seq_len: int, layer: int, head: int, slope,
                     kind: str):
    """(share of the long map's attention beyond the training length, the same for the bias
    alone or None without a slope, T): see `heads.beyond_training`."""
    long = alibi_attention(path, stamp, LONG_FACTOR * train_seq_len, kind).maps[layer][head]  # (T, T)
    return beyond_training(long, train_seq_len, slope)


@st.cache_data(max_entries=8, show_spinner=False)
def every_head_beyond(path: str, stamp: tuple, train_seq_len: int, kind: str):
    """(layers, heads) share of each head's attention beyond the training length in the long
    maps (`reach.attention_beyond`)."""
    maps = alibi_attention(path, stamp, LONG_FACTOR * train_seq_len, kind).maps
    return heads_beyond(maps, train_seq_len)


# ----------------------------------------------------------------------------- controls

def model_info(path):
    """(info, error message) of the ALiBi model through the shared model cache."""
    if path is None:
        return None, (_("The shipped ALiBi model is missing (assets/models/alibi).") + " "
                      + train_hint(assets.DEFAULT_MODEL))
    try:
        _model, _tokenizer, info = ui.cached_model(path)
    except AlibiVizError as exc:
        return None, _("The shipped ALiBi model could not be loaded: {error}").format(error=exc)
    return info, None


def controls_ui(names: list[str], num_layers: int, num_heads: int):
    """Sidebar controls, seeded from the URL on the first run. Returns their values."""
    default_model = assets.DEFAULT_MODEL if assets.DEFAULT_MODEL in names else names[0]
    ui.seed_from_url(PREFIX, [
        UrlParam("model", "choice", default_model, choices=tuple(names)),
        UrlParam("length", "choice", 1024, choices=LENGTHS),
        UrlParam("layer", "int", 1, 1, num_layers),
        UrlParam("head", "int", num_heads, 1, num_heads),
        UrlParam("kind", "choice", data.page_kind(i18n.get_language()), choices=data.CORPUS_KINDS),
    ])
    # Labels fixed at render time (a dict, not a function that reads the language), so the
    # options read the same wherever Streamlit formats them.
    labels = {name: model_label(name) for name in names}
    kinds = {kind: _(title) for kind, title in data.TEXT_KINDS.items()}
    with st.sidebar:
        st.header(_("Extrapolation lab"))
        kind = st.selectbox(_("Held-out text"), list(kinds), key="xl_kind",
                            format_func=kinds.get,
                            help=_("Which shipped held-out text the results, the live runs and "
                                   "the attention maps read: code, or prose in one of the three "
                                   "languages the models were trained on."))
        st.subheader(_("Live evaluation"))
        model = st.selectbox(_("Model"), names, key="xl_model", format_func=labels.get,
                             help=_("Which shipped model to re-evaluate live."))
        length = st.select_slider(_("Evaluation length (tokens)"), LENGTHS, key="xl_length",
                                  help=_("Window length of the live run: {train} (the training "
                                         "length) up to {longest} ({factor}x).").format(
                                      train=number(LENGTHS[0]), longest=number(LENGTHS[-1]),
                                      factor=LENGTHS[-1] // LENGTHS[0]))
        st.subheader(_("ALiBi attention maps"))
        layer = st.selectbox(_("Layer"), list(range(1, num_layers + 1)), key="xl_layer")
        head = st.selectbox(_("Head"), list(range(1, num_heads + 1)), key="xl_head",
                            help=_("Head 1 has the steepest slope (looks closest); the last "
                                   "head the gentlest."))
    return model, int(length), int(layer), int(head), kind


def live_controls_ui(length: int):
    """Protocol and token count of the live run (token count capped for the length)."""
    left, right = st.columns(2)
    shown = {p: protocol_name(p) for p in PROTOCOLS}  # fixed at render time, as in controls_ui
    protocol = left.radio(_("Protocol"), PROTOCOLS, key="xl_protocol", horizontal=True,
                          format_func=shown.get,
                          help=_("{nonoverlapping}: consecutive windows, every token scored. "
                                 "{sliding}: windows advance {stride} tokens and only their "
                                 "last {stride} are scored, so each scored token sees between "
                                 "L - {slack} and L tokens of context.").format(
                              nonoverlapping=protocol_name("nonoverlapping"),
                              sliding=protocol_name("sliding"), stride=DEFAULT_STRIDE,
                              slack=DEFAULT_STRIDE - 1))
    cap = live_token_cap(length, protocol, DEFAULT_STRIDE)
    smallest = length if protocol == "nonoverlapping" else min(DEFAULT_STRIDE, length)
    smallest = min(smallest, cap)
    # a new length or protocol starts at its cap; a typed value is kept inside the new bounds
    if st.session_state.get("_xl_tokens_for") != (length, protocol):
        st.session_state["xl_tokens"] = cap
        st.session_state["_xl_tokens_for"] = (length, protocol)
    st.session_state["xl_tokens"] = min(max(int(st.session_state["xl_tokens"]), smallest), cap)
    tokens = right.number_input(_("Tokens to score"), smallest, cap, step=smallest,
                                key="xl_tokens",
                                help=_("At most {cap} at this length and protocol, so the run "
                                       "stays within seconds.").format(cap=number(cap)))
    return protocol, int(tokens), cap


# ----------------------------------------------------------------------------- tables and notes

# The paper's method names (alibi_viz.paper.TABLE2) as the table shows them.
PAPER_METHODS = {"sinusoidal": N_("sinusoidal"), "rotary": N_("rotary"), "T5 bias": N_("T5 bias"),
                 "ALiBi": "ALiBi"}


def beside_the_paper() -> None:
    """What the paper's tables say beside ours: the sliding-window rows of Tables 13 and 15,
    T5's bias in Table 2 (this project has no T5-bias model), and Table 1's training speed
    and memory. Every number is an alibi_viz.paper quote."""
    train, long = paper.TABLE2_TRAIN_LEN, paper.SLIDING_LONG
    speed, memory = paper.TRAIN_SPEED, paper.TRAIN_MEMORY
    st.markdown(_(
        "**Beside the paper** ({citation}, appendix Table 2: WikiText-103, trained at "
        "L = {train_seq_len} tokens, non-overlapping windows; this project trained no T5-bias "
        "model). In the paper's sliding-window evaluation (Tables 13 and 15) the sinusoidal "
        "model goes from {short} at {train_seq_len} tokens to {long} at {length}, ALiBi from "
        "{alibi_short} to {alibi_long}. T5's bias is lowest at {t5_best_length} tokens "
        "({t5_best}), against {t5_long} at {long_length} and {t5_last} at {t5_last_length}; from "
        "{t5_oom} tokens it runs out of memory. It also trains at {t5_speed} words per second "
        "against the sinusoidal model's {sin_speed} and ALiBi's {alibi_speed}, and ALiBi needs "
        "the sinusoidal model's memory, {memory} GB (Table 1, L = {table1_length}).").format(
        citation=paper.CITATION, train_seq_len=number(train),
        short=number(paper.SLIDING_SINUSOIDAL[0], 2), long=number(paper.SLIDING_SINUSOIDAL[1], 2),
        length=number(long), alibi_short=number(paper.TABLE15_ALIBI_L512[train], 2),
        alibi_long=number(paper.TABLE15_ALIBI_L512[long], 2),
        t5_best_length=number(paper.T5_BEST.length), t5_best=number(paper.T5_BEST.value, 2),
        t5_long=number(paper.TABLE2["T5 bias"][1], 2), long_length=number(paper.TABLE2_LONG),
        t5_last=number(paper.T5_LAST.value, 2), t5_last_length=number(paper.T5_LAST.length),
        t5_oom=number(paper.T5_OOM.length), t5_speed=number(speed["T5 bias"].value),
        sin_speed=number(speed["sinusoidal"].value), alibi_speed=number(speed["ALiBi"].value),
        memory=number(memory["ALiBi"].value, 1), table1_length=number(paper.TABLE1_TRAIN_LEN)))


def paper_table(results: dict, train_seq_len: int) -> None:
    """The paper's Table 2 beside this project's numbers at a matching length factor
    (`evaluate.paper_comparison`), every number in the page's language."""
    cmp = paper_comparison(results, train_seq_len)
    paper_long = _("paper: {length} ({factor}x)").format(
        length=number(paper.TABLE2_LONG), factor=number(cmp["paper_factor"], 1))
    ours_long = _("ours: {length} ({factor}x)").format(
        length=number(cmp["our_length"]), factor=number(cmp["our_factor"], 0))
    def ours(value):  # a dash where this project has no such model (T5 bias)
        return "—" if value is None else value

    ui.table([{N_("method"): _(PAPER_METHODS.get(row["method"], row["method"])),
               _("paper: L={length}").format(length=number(paper.TABLE2_TRAIN_LEN)):
                   row["paper_short"],
               paper_long: row["paper_long"],
               N_("paper: ratio"): row["paper_ratio"],
               _("ours: {length}").format(length=number(train_seq_len)): ours(row["ours_short"]),
               ours_long: ours(row["ours_long"]),
               N_("ours: ratio"): ours(row["ours_ratio"])} for row in cmp["rows"]])
    st.caption(_("Ratios at matching factors: the paper's perplexity per word at {paper}x its "
                 "training length, ours per byte at {ours}x, the evaluated length nearest that "
                 "factor.").format(paper=number(cmp["paper_factor"], 1),
                                   ours=number(cmp["our_factor"], 0)))


def reading_notes(results: dict, train_seq_len: int) -> None:
    """How to read the two panels, with the numbers that back each sentence, and what NoPE's
    curves can and cannot say. (The key result is shown above them, unfolded; what the
    shipped slope sweep says of position interpolation answers section 5's question and is
    shown in its answer box.)"""
    stride = results.get("stride", DEFAULT_STRIDE)
    protocols = results.get("protocols", {})
    scored = {p: protocols.get(p, {}).get("tokens") for p in PROTOCOLS}
    text = _("**How to read it.** *Non-overlapping* windows score every token, but the first "
             "tokens of each window see almost no context (the paper's *early token curse*); a "
             "longer window has proportionally fewer of them, which is all it takes for a model "
             "that does not break to improve with length. The *sliding* window moves by "
             "{stride} tokens and scores only the last {stride} of each window, so every scored "
             "token sees between L − {slack} and L tokens of context. The paper slid by one "
             "token, so that each sees a full window of the evaluation length. A stride of "
             "{stride} is cheaper but not the same: at L = {train_seq_len} it is {stride} of the "
             "window's {train_seq_len} tokens, so the scored tokens there see {fewest} to "
             "{train_seq_len} tokens, less context than a full window, and part of any "
             "{train_seq_len} → {next} change in the sliding curve may come from that rather "
             "than from the longer window.").format(
        stride=stride, slack=stride - 1, train_seq_len=number(train_seq_len),
        fewest=number(train_seq_len - stride + 1), next=number(2 * train_seq_len))
    if scored["nonoverlapping"] and scored["sliding"]:
        text += " " + _("Each non-overlapping number rests on {nonoverlapping} scored tokens, "
                        "each sliding one on {sliding}; the error bars are 95% intervals over "
                        "{chunks} disjoint chunks of them.").format(
            nonoverlapping=number(scored["nonoverlapping"]), sliding=number(scored["sliding"]),
            chunks=results.get("chunks", "?"))
    targets = {p: protocols.get(p, {}).get("targets") for p in PROTOCOLS}
    if all(targets.values()):
        text += " " + _("The two protocols score different stretches of the text (non-overlapping "
                        "tokens {a1} to {a2}, sliding tokens {b1} to {b2}), so compare each "
                        "protocol's curve across lengths, not the value of one with the value "
                        "of the other.").format(
            a1=number(targets["nonoverlapping"][0]), a2=number(targets["nonoverlapping"][1]),
            b1=number(targets["sliding"][0]), b2=number(targets["sliding"][1]))
    st.markdown(text)
    if "nope" in results["models"]:
        st.markdown(_(
            "**NoPE** has no position information at all, yet a causal model can still learn "
            "where it is: the mask lets a token count how many tokens come before it (Haviv "
            "et al. 2022, Kazemnejad et al. 2023). Its curves show what that implicit position "
            "does at and beyond the training length. Do not generalise from it: on their "
            "decoder-only reasoning and arithmetic tasks Kazemnejad et al. (2023) found NoPE "
            "generalising to longer inputs better than ALiBi, rotary, T5's bias and learned "
            "positions. Which scheme extrapolates best depends on the task and the setting; "
            "this one is byte-level language modelling with a small model."))


REACH_LIVE_CONTEXTS = tuple(c for c in REACH_CONTEXTS if c <= 1024)
LIVE_COPY_DISTANCES = (16, 32, 64, 128, 256, 512, 1024)  # the planted-span picker's choices


@ui.cached_figure(max_entries=4)
def win_half_fig(slopes: tuple, num_keys: int):
    """The bias-alone retrieval limit per head."""
    return win_half_figure(list(slopes), num_keys)


@st.cache_data(max_entries=16, show_spinner=_("Running the model on a planted span..."))
def copy_heads(path: str, stamp: tuple, distance: int, kind: str):
    """Copy attention per head and the losses on one planted span of held-out text: (values,
    (first copy, repeat, control))."""
    model, _tokenizer, _info = ui.cached_model(path, stamp)
    ids, controls, first, repeat = copy_sequences(held_out_ids(LIVE_STREAM_TOKENS, kind),
                                                  distance, samples=1)
    values = copy_attention(model, ids[0].numpy(), first, repeat, COPY_SPAN)
    first_loss, repeat_loss = span_losses(model, ids[0].numpy(), first, repeat, COPY_SPAN)
    _first, control_loss = span_losses(model, controls[0].numpy(), first, repeat, COPY_SPAN)
    return values, (first_loss, repeat_loss, control_loss)


def intro_section(train_seq_len: int):
    """The page title, what the five models are, and what else differs between them."""
    st.title(_("Extrapolation lab: train short, test long"))
    st.caption(_("Five small models trained alike on {train_seq_len}-token windows of Python code "
                 "and English, Spanish and Russian prose (same backbone, data, copy curriculum, "
                 "steps and schedule), differing in how they know where a token is: {positions}. "
                 "Then each reads held-out text in windows of up to {longest} tokens.").format(
        train_seq_len=number(train_seq_len), longest=number(max(LENGTHS)),
        positions="; ".join(f"**{model_label(name)}**: {_(spec.position)}"
                            for name, spec in assets.SHIPPED.items())))
    with st.expander(_("What else differs between the five (measured, see the model cards)")):
        st.markdown("\n".join(f"- {_(d)}" for d in assets.REMAINING_DIFFERENCES))


def details_title(results: dict) -> str:
    """The folded reading notes' title, with their key number: ALiBi's sliding-window
    perplexity at the longest length evaluated (or, without it, how many models)."""
    curve = results["models"].get("alibi", {}).get("perplexity", {}).get("sliding", {})
    if curve:
        longest = max(curve, key=int)
        return _("Every model, protocol by protocol, and the paper's numbers (ALiBi, sliding "
                 "windows, {length} tokens: perplexity {ppl})").format(
            length=number(int(longest)), ppl=number(curve[longest], 2))
    return _("Every model, protocol by protocol, and the paper's numbers")


def shipped_results_section(results: dict, train_seq_len: int, alibi_path, kind: str):
    """Section 1's text (the chart is drawn at the end, once a live run may have added its
    star). Returns (the chart's slot, the results, {} if they could not be read)."""
    st.subheader(_("1. Perplexity vs evaluation length (shipped results)"))
    st.markdown(_("Each model's perplexity (lower is better) on held-out text read in windows "
                  "of growing length, the training length dashed: look at which curves stay "
                  "flat or fall past the dashed line and which climb."))
    chart_slot = st.container()  # filled at the end, once a live run may have added its star
    summary_slot = st.container()
    if not results:
        chart_slot.info(_("No shipped results for this text yet: assets/results/extrapolation-{kind}.json "
                          "is written by `python -m alibi_viz.evaluate`. The live evaluation below "
                          "works without it.").format(kind=kind))
    else:
        with summary_slot:
            try:
                key = key_result(results) if "alibi" in results["models"] else None
                if key:
                    st.markdown(key)
                # the rest folds: protocol by protocol, how to read it, beside the paper
                with st.expander(details_title(results)):
                    for protocol in PROTOCOLS:
                        sentences = extrapolation_summary(results, protocol)
                        if sentences:
                            st.markdown(f"**{protocol_name(protocol)}.** " + " ".join(sentences))
                    for sentence in in_distribution_ranking(results):
                        st.markdown(sentence)
                    reading_notes(results, train_seq_len)
                    beside_the_paper()
                    paper_table(results, train_seq_len)
                with st.expander(_("Table and evaluation details")):
                    st.dataframe(results_table(results), hide_index=True, key="xl_table")
                    st.caption(results_details(results))
            except AlibiVizError as exc:
                st.error(_("The shipped results could not be read: {error}").format(error=exc))
                results = {}
    return chart_slot, results


def attention_section(info, alibi_error, alibi_path, train_seq_len: int, layer: int, head: int,
                      kind: str):
    """Section 3: one ALiBi head (1-based `layer`, `head`) at the training length and at
    LONG_FACTOR times it, with its share of attention beyond the training length."""
    st.subheader(_("3. One ALiBi head at {short} and at {long} tokens").format(
        short=number(train_seq_len), long=number(LONG_FACTOR * train_seq_len)))
    st.markdown(_("The same head reading the same text at the training length and far beyond "
                  "it: look at whether, past the red dashed lines, it keeps its attention on "
                  "distances it saw in training."))
    if info is None:
        st.info(alibi_error)
    else:
        slope = info.slopes[head - 1] if info.slopes else None
        try:
            stamp = ui.model_stamp(str(alibi_path))
            fig = attention_fig(str(alibi_path), stamp, train_seq_len, layer - 1, head - 1, slope,
                                kind)
            beyond, beyond_bias, T = attention_beyond(str(alibi_path), stamp, train_seq_len, layer - 1,
                                                      head - 1, slope, kind)
        except AlibiVizError as exc:
            st.error(str(exc))
        else:
            ui.show_figure(fig, f"extrapolation_attention_L{layer}_H{head}", key="xl_fig_attention")
            text = _("The same held-out text ({text}), read by the ALiBi model at {train_seq_len} "
                     "tokens (left, the training length) and at {T} tokens (right, {factor}x). Below the "
                     "dashed red line every query sees more tokens than any training window held; "
                     "left of the dotted line keys are more than {train_seq_len} tokens back, farther "
                     "than any distance seen in training. For ALiBi those distances are new too, but "
                     "they only carry a larger penalty on the same straight line: the steep heads "
                     "keep their attention on distances seen in training, and the gentle ones put "
                     "part of theirs beyond. A causal model cannot look ahead, so the left map is the "
                     "top-left corner of the right one.").format(
                train_seq_len=number(train_seq_len), T=number(T), factor=T // train_seq_len,
                text=data.text_kind_in_sentence(kind))
            if beyond == beyond and beyond_bias is not None:  # not NaN
                text += " " + _("Queries past position {train_seq_len} give **{share}** of their "
                                "attention to keys more than {train_seq_len} tokens back; the bias alone "
                                "(m={m}, all content scores equal) would give {bias}.").format(
                    train_seq_len=number(train_seq_len), share=small_percent(beyond), m=significant(slope),
                    bias=small_percent(beyond_bias))
            elif beyond == beyond:
                text += " " + _("Queries past position {train_seq_len} give **{share}** of their "
                                "attention to keys more than {train_seq_len} tokens back.").format(
                    train_seq_len=number(train_seq_len), share=small_percent(beyond))
            shares = every_head_beyond(str(alibi_path), stamp, train_seq_len, kind)
            st.markdown(text + " " + beyond_summary(shares, train_seq_len, T))


@ui.cached_figure(max_entries=2)
def learned_slopes_fig():
    return learned_slopes_figure(assets.load_learnable_slopes_results())


@ui.cached_figure(max_entries=8)
def learnable_fig(kind: str):
    return learnable_perplexity_figure(assets.load_learnable_slopes_results(), kind)


VERDICTS = {  # what the paired interval of learnable / fixed says (learnable_slopes.verdict)
    "worse": N_("worse than with fixed slopes (the interval lies above 1)"),
    "better": N_("better than with fixed slopes (the interval lies below 1)"),
    "same": N_("no measurable difference (the interval includes 1)"),
}


def learnable_slopes_section(kind: str):
    """Section 6: the variant that trains its slopes against the fixed-slope model."""
    st.subheader(_("6. Learnable slopes: does training m_h help?"))
    st.markdown(_("The shipped model against a copy whose slopes were trained too: predict, "
                  "then look at the ratio of their perplexities at each length (1 means no "
                  "difference)."))
    st.markdown(_(
        "The paper fixes the slopes. It also tried training them, and found that trainable slopes "
        "did not yield strong extrapolation (section 3, on its {parameters}M-parameter "
        "WikiText-103 model). Here a variant of the shipped ALiBi model trains them: "
        "every layer's slopes are parameters, starting from the official schedule, trained with the "
        "rest of the model on the same data, batches and steps.").format(
        parameters=paper.TABLE_MODEL_PARAMETERS_M))
    variant = assets.load_learnable_slopes_results()
    if variant:
        st.markdown(learnable_slopes.run_summary(variant))
    if not variant:
        st.info(_("No shipped results yet: assets/results/learnable-slopes.json is written by "
                  "`python -m alibi_viz.models.layer_slopes`."))
    else:
        found = learnable_slopes.summary(variant, kind)
        longest = max(variant["factors"])
        with ui.question(_("The slopes were trained on {train}-token windows only. At {factor}x "
                           "that length ({length} tokens), will the learnable-slope model be better "
                           "or worse than the fixed-slope one?").format(
                train=number(variant["train_seq_len"]), factor=longest,
                length=number(longest * variant["train_seq_len"]))):
            lines = []
            for factor in (1, LONG_FACTOR, longest):
                ratio, low, high = found["ratios"][factor]
                lines.append("- " + _("{factor}x ({length} tokens): learnable / fixed perplexity "
                                      "{ratio} (95% interval {low} to {high}): {verdict}.").format(
                    factor=factor, length=number(factor * variant["train_seq_len"]),
                    ratio=number(ratio, 3), low=number(low, 3), high=number(high, 3),
                    verdict=_(VERDICTS[found["verdicts"][factor]])))
            st.markdown("\n".join(lines))
            first, last = found["ratios"][1][0], found["ratios"][longest][0]
            if found["narrows"]:
                st.markdown(_("The gap to the fixed slopes narrows with length: {first} at the "
                              "training length, {last} at {factor}x.").format(
                    first=relative_change(first), last=relative_change(last), factor=longest))
            largest = found["largest"]
            start = variant["slopes"][0][largest["layer"]][largest["head"]]
            st.markdown(_("{steeper} of the {n} slopes ended steeper than they started. The largest "
                          "move: layer {layer}, head {head}, from {start} to {end} ({factor} times "
                          "its start).").format(
                steeper=found["steeper"], n=found["slopes"], layer=largest["layer"] + 1,
                head=largest["head"] + 1, start=significant(start, 3),
                end=significant(start * (1 + largest["relative"]), 3),
                factor=number(1 + largest["relative"], 1)))
        ui.show_figure(learned_slopes_fig(), "learned_slopes", key="xl_fig_learned_slopes")
        ui.show_figure(learnable_fig(kind), "learnable_slopes", key="xl_fig_learnable")
        st.caption(_("Held-out text: {text}; the same targets for both models, intervals from 16 "
                     "disjoint chunks. The model: assets/variants/learnable-slopes (its model card "
                     "says how it was trained). Command: `{command}`.").format(
            text=data.text_kind_in_sentence(kind), command=variant["command"]))


# ----------------------------------------------------------------------------- page

shipped = assets.shipped_models()
names = list(shipped) or list(assets.MODEL_ORDER)
alibi_path = shipped.get(assets.DEFAULT_MODEL)
info, alibi_error = model_info(alibi_path)
num_layers = info.num_layers if info else 64
num_heads = info.num_heads if info else 64
model, length, layer, head, kind = controls_ui(names, num_layers, num_heads)
ui.write_url({"model": model, "length": length, "layer": layer, "head": head, "kind": kind})

results = assets.load_extrapolation_results(kind)
train_seq_len = assets.shipped_train_seq_len(alibi_path, results)

intro_section(train_seq_len)
ui.show_url_warnings(PREFIX)


# 1. shipped results -------------------------------------------------------------------------
chart_slot, results = shipped_results_section(results, train_seq_len, alibi_path, kind)

# 2. live run ---------------------------------------------------------------------------------
st.subheader(_("2. Re-run it live"))
st.markdown(_("One point of the chart above, computed now: choose a model and a length in the "
              "sidebar, run it, and look at the live number beside the shipped one."))
protocol, n_tokens, cap = live_controls_ui(length)
st.caption(_("Re-evaluates {model} at {length} tokens ({protocol}) on the same held-out stream "
             "as the shipped numbers, scoring its first tokens. To stay within seconds a live "
             "run scores at most {cap} tokens at this length (the shipped numbers score more "
             "text, see the table), so the two can differ. The longest runs are at {longest} "
             "tokens, where one window is the least that can be evaluated.").format(
    model=model_label(model), length=number(length), protocol=protocol_name(protocol),
    cap=number(cap), longest=number(max(LENGTHS))))
live_runs = st.session_state.setdefault("xl_live", [])
if st.button(_("Run live evaluation"), key="xl_run", type="primary"):
    path = shipped.get(model)
    if path is None:
        st.error(_("The model {model} is not shipped (assets/models/{name}).").format(
            model=model_label(model), name=model) + " " + train_hint(model))
    else:
        bar = st.progress(0.0, text=_("Scoring {tokens} tokens in windows of {length}...").format(
            tokens=number(n_tokens), length=number(length)))
        try:
            net = eval_model(str(path), ui.model_stamp(str(path)))
            start = time.perf_counter()

            def advance(done, total):
                bar.progress(done / total, text=_("window {done} of {total}").format(
                    done=number(done), total=number(total)))

            out = evaluate_length(net, length, protocol, tokens=n_tokens, stride=DEFAULT_STRIDE,
                                  max_length=length, progress=advance, kind=kind)
            seconds = time.perf_counter() - start
        except (AlibiVizError, RuntimeError, MemoryError) as exc:
            bar.empty()
            st.error(_("The live evaluation failed: {error}").format(error=exc))
        else:
            bar.progress(1.0, text=_("Done in {seconds} s").format(seconds=number(seconds, 1)))
            run = {"model": model, "protocol": protocol, "length": length, "kind": kind,
                   "ppl": out["ppl"],
                   "tokens": out["tokens"], "seconds": round(seconds, 2)}
            live_runs[:] = [r for r in live_runs if (r["model"], r["protocol"], r["length"],
                                                     r["kind"]) != (model, protocol, length, kind)
                            ] + [run]

current = next((r for r in reversed(live_runs) if (r["model"], r["protocol"], r["length"],
                                                   r["kind"]) == (model, protocol, length, kind)),
               None)
kind_runs = [r for r in live_runs if r["kind"] == kind]
shipped_ppl, shipped_tokens = shipped_cell(results, model, protocol, length)
live_col, shipped_col = st.columns(2)
with live_col:
    live_label = _("Live: {model}, {protocol}, {length} tokens").format(
        model=model_label(model), protocol=protocol_name(protocol), length=number(length))
    if current:
        st.metric(live_label, number(current["ppl"], 3))
        st.caption(_("{tokens} tokens scored in {seconds} s.").format(
            tokens=number(current["tokens"]), seconds=number(current["seconds"], 1)))
    else:
        st.metric(live_label, _("not run yet"))
with shipped_col:
    if shipped_ppl is not None:
        st.metric(_("Shipped"), number(shipped_ppl, 3))
        if shipped_tokens:
            st.caption(_("{n} tokens scored.").format(n=number(shipped_tokens)))
    else:
        st.metric(_("Shipped"), _("n/a"),
                  help=_("No shipped number for this model, protocol and length."))

if results:
    try:
        fig = ui.perplexity_fig(results)
        if kind_runs:
            fig = perplexity_figure(results, live=kind_runs)
        with chart_slot:
            ui.show_figure(fig, "extrapolation_perplexity", key="xl_fig_results")
    except AlibiVizError as exc:
        chart_slot.error(_("The shipped results could not be drawn: {error}").format(error=exc))

# 3. attention maps ------------------------------------------------------------------------------
attention_section(info, alibi_error, alibi_path, train_seq_len, layer, head, kind)

# 4. context reach -------------------------------------------------------------------------------
st.subheader(_("4. How far back do the models really look?"))
st.markdown(_("How much each model's prediction gains from more context (left) and from a copy "
              "of the text further back (right): look at where each curve stops improving."))
with st.expander(_("How the reach is measured (contexts up to {longest} tokens)").format(
        longest=number(max(REACH_CONTEXTS)))):
    st.markdown(_(
        "Left: the loss on the same held-out tokens when each model is given at most the last c "
        "tokens before every one of them (between c − c/16 and c, so at c = {train_seq_len} no "
        "scored token is past the training length). Where a curve flattens, more context stops "
        "helping; past the training length (dashes) it may get worse. Right: retrieval. A span of "
        "held-out text is planted and repeated d tokens later; the gain is how much better the "
        "repeat is predicted than the same span at the same place when the first copy is replaced "
        "by other text. Both sit at the same positions, so a model that breaks past its training "
        "length breaks on both, and the gain measures retrieval, not position. For ALiBi a key d "
        "tokens back has to beat the bias −m·d, so the gain fades with distance.").format(
        train_seq_len=number(train_seq_len)))
reach = assets.load_reach_results()
if not reach:
    st.info(_("No shipped reach results yet: assets/results/reach.json is written by "
              "`python -m alibi_viz.reach`."))
else:
    try:
        ui.show_figure(ui.reach_fig(reach, train_seq_len), "reach",
                       key="xl_fig_reach")
        for line in reach_summary(reach, train_seq_len):
            st.markdown(f"- {line}")
        st.caption(_("{tokens} scored tokens, the same at every context; {samples} planted spans "
                     "of {span} tokens per distance. Command: `{command}`.").format(
            tokens=number(reach["reach"]["tokens"]), samples=reach["copy"]["samples"],
            span=reach["copy"]["span"],
            command=reach.get("command", "python -m alibi_viz.reach")))
    except (AlibiVizError, KeyError, ValueError) as exc:
        st.error(_("The shipped reach results could not be read: {error}").format(error=exc))
if info is not None and info.slopes:
    st.markdown(_(
        "**The retrieval limit, from the bias alone.** For a far key to take half of a "
        "query's attention, its content score must beat every other key by the amount below: "
        "m·d plus a constant, so it grows by m logits for every token of distance. Gentle "
        "heads can still retrieve from far back; steep heads cannot."))
    ui.show_figure(win_half_fig(tuple(info.applied_slopes or info.slopes),
                                LONG_FACTOR * train_seq_len), "win_half",
                   key="xl_fig_win_half")

left, right = st.columns(2)
with left:
    st.markdown(_("**Re-run a reach curve live** ({model}, contexts up to {longest} "
                  "tokens).").format(model=model_label(model),
                                     longest=number(max(REACH_LIVE_CONTEXTS))))
    clicked = st.button(_("Run reach live"), key="xl_reach_run")
    # Two single-element slots: the run's progress bar takes the place of the last run's table
    # (an element replaced by another goes at once; in a container, the old table stayed on
    # screen, greyed, under the new progress bar until the run ended: the block twice).
    result_slot, note_slot = st.empty(), st.empty()
    if clicked:
        path = shipped.get(model)
        if path is None:
            result_slot.error(_("The model {model} is not shipped.").format(
                model=model_label(model)) + " " + train_hint(model))
        else:
            result_slot.progress(0.0, text=_("context {c} ...").format(c=1))
            try:
                start = time.perf_counter()
                live = context_reach(
                    eval_model(str(path), ui.model_stamp(str(path))),
                    held_out_ids(LIVE_STREAM_TOKENS, kind), REACH_LIVE_CONTEXTS,
                    progress=lambda done, total: result_slot.progress(
                        done / total, text=_("context {c} done").format(
                            c=number(REACH_LIVE_CONTEXTS[done - 1]))))
                seconds = time.perf_counter() - start
            except (AlibiVizError, RuntimeError, MemoryError) as exc:
                result_slot.error(_("The live reach run failed: {error}").format(error=exc))
            else:
                result_slot.dataframe(
                    [{_("context"): int(c), _("loss (nats/token)"): round(float(v), 4)}
                     for c, v in zip(live.contexts, live.nll, strict=True)],
                    hide_index=True, key="xl_reach_table")
                note_slot.caption(_("Done in {seconds} s").format(seconds=number(seconds, 1)))
with right:
    distance = st.select_slider(_("Copy distance (tokens)"), LIVE_COPY_DISTANCES, value=64,
                                key="xl_copy_distance")
    path = shipped.get(model)
    if path is not None:
        try:
            values, (first_loss, repeat_loss, control_loss) = copy_heads(
                str(path), ui.model_stamp(str(path)), int(distance), kind)
        except (AlibiVizError, RuntimeError) as exc:
            st.error(str(exc))
        else:
            ui.show_figure(copy_heads_figure(values, int(distance)), "copy_heads",
                           key="xl_fig_copy_heads", width=HALF_PX)
            st.caption(_("{model}, one planted span of {span} held-out tokens: loss {first} "
                         "nats/token on the first copy, {repeat} on the repeat, {control} on "
                         "the same span where nothing precedes it to copy.").format(
                model=model_label(model), span=COPY_SPAN, first=number(first_loss, 2),
                repeat=number(repeat_loss, 2), control=number(control_loss, 2)))

with st.expander(_("Plant your own span")):
    span = st.text_input(_("Span to repeat"), "return total / width", key="xl_span",
                         max_chars=200)
    between = st.text_area(_("Text between the two copies"), data.CODE_EXAMPLE, key="xl_between",
                           max_chars=20_000, height=120)
    path = shipped.get(model)
    if st.button(_("Measure"), key="xl_span_run") and path is not None:
        try:
            net, tokenizer, _info = ui.cached_model(path)
            ids, first, repeat, n = plant_span(tokenizer, between, span)
            first_loss, repeat_loss = span_losses(net, ids, first, repeat, n)
            values = copy_attention(net, ids, first, repeat, n) if n > 1 else None
        except (AlibiVizError, RuntimeError, MemoryError) as exc:
            st.error(str(exc))
        else:
            st.markdown(_("{model}: the span is {n} tokens and its copies are {distance} "
                          "tokens apart. Loss {first} nats/token on the first copy, {repeat} "
                          "on the repeat (gain {gain}).").format(
                model=model_label(model), n=number(n), distance=number(repeat - first),
                first=number(first_loss, 2), repeat=number(repeat_loss, 2),
                gain=signed(first_loss - repeat_loss, 2)))
            if values is not None:
                ui.show_figure(copy_heads_figure(values, repeat - first), "copy_heads_own",
                               key="xl_fig_copy_own")



def rescale_cells_ui(summary: dict) -> None:
    """Every shipped cell of the rescale sweep as a bullet: the best s and s = L_train / L
    against s = 1 (an answer: shown inside the question's box)."""
    for (cell_protocol, cell_length), c in sorted(summary["cells"].items(),
                                                  key=lambda kv: (kv[0][1], kv[0][0])):
        st.markdown("- " + _("{protocol}, {length} tokens: best s = {best} ({best_change} "
                             "against s = 1); s = L_train / L = {interp}: {interp_change}.").format(
            protocol=protocol_name(cell_protocol), length=number(cell_length),
            best=scale_label(c["best"]),
            best_change=relative_change(c["best_ratio"]), interp=scale_label(c["interpolation"]),
            interp_change=relative_change(c["interpolation_ratio"])
            if c["interpolation_ratio"] is not None else _("n/a")))


# 5. slopes rescaled at inference ------------------------------------------------------------
@ui.cached_figure(max_entries=4)
def rescale_fig():
    return rescale_figure(assets.load_rescale_results())


st.subheader(_("5. Rescaled slopes: can ALiBi be made to use a longer context?"))
st.markdown(_("The shipped ALiBi model with every slope shrunk at inference, so that far keys "
              "are penalised less: predict, then look at whether its perplexity falls."))
st.markdown(_(
    "Multiply every slope by s when the model reads a longer input: s = 1 is the model as "
    "trained; s = L_train / L shrinks the slopes by the factor the input grew, so the farthest "
    "key gets the bias the farthest key of a training window got: position interpolation for "
    "ALiBi ({interpolation}). Smaller slopes let far keys in; whether the model then *uses* "
    "them is what the reach curve says.").format(interpolation=paper.ALIBI_INTERPOLATION))
rescale = assets.load_rescale_results()
parameters = assets.training_info(alibi_path).get("parameters") if alibi_path else None
# the note states the measured change, an answer: it goes in the question's box below
note = interpolation_note(rescale, parameters) if rescale and parameters else None
if not rescale:
    st.info(_("No shipped results yet: assets/results/rescale.json is written by `python -m "
              "alibi_viz.models.rescale`."))
else:
    summary = rescale_summary(rescale)
    eight = LONG_FACTOR * rescale["train_seq_len"]
    cell = summary["cells"].get(("nonoverlapping", eight))
    reach_best = min(summary["reach"], key=lambda s: summary["reach"][s]["longest_loss"])
    with ui.question(_("At {length} tokens ({factor}x the training length), does s = L_train / "
                       "L = {interp} lower the ALiBi model's perplexity, and does more context "
                       "then keep helping it?").format(
            length=number(eight), factor=LONG_FACTOR, interp=scale_label(interpolation_scale(
                rescale["train_seq_len"], eight)))):
        if cell and cell["interpolation_ratio"] is not None:
            st.markdown(_("Non-overlapping, it changes the perplexity by {change} against s = 1 "
                          "(the best s here is {best}, {best_change}). With {longest} tokens of "
                          "context the reach curve's loss is {loss_one} nats/token at s = 1 and "
                          "{loss_best} at its best, s = {reach_best}.").format(
                change=relative_change(cell["interpolation_ratio"]), best=scale_label(cell["best"]),
                best_change=relative_change(cell["best_ratio"]),
                longest=number(summary["longest_context"]),
                loss_one=number(summary["reach"][1.0]["longest_loss"], 3),
                loss_best=number(summary["reach"][reach_best]["longest_loss"], 3),
                reach_best=scale_label(reach_best)))
        if note:
            st.markdown(note)
        rescale_cells_ui(summary)
    ui.show_figure(rescale_fig(), "rescale", key="xl_fig_rescale")
    st.caption(_("The shipped ALiBi model on the held-out text: {text}; perplexity on the "
                 "evaluation's targets (the table's, so s = 1 is the shipped row), reach on the "
                 "held-out text of the four kinds. Command: `{command}`.").format(
        text=data.text_kind_in_sentence(rescale["kind"]), command=rescale["command"]))
    if rescale["kind"] != kind:  # the sweep was run on one text: say so where another is chosen
        st.caption(_("This sweep was run on {sweep} only, not on the text chosen above ({chosen}); "
                     "the live run below reads the chosen text.").format(
            sweep=data.text_kind_in_sentence(rescale["kind"]),
            chosen=data.text_kind_in_sentence(kind)))

    alibi_folder = shipped.get(assets.DEFAULT_MODEL)
    if alibi_folder is not None:
        choices = sorted({*rescale["scales"], interpolation_scale(rescale["train_seq_len"], length)},
                         reverse=True)
        scale = st.select_slider(_("Slope scale s for a live run"), choices, value=1.0,
                                 key="xl_scale", format_func=scale_label,
                                 help=_("The live run above's length ({length}) and protocol, "
                                        "on the ALiBi model with every slope times s.").format(
                                     length=number(length)))
        clicked = st.button(_("Run ALiBi with rescaled slopes"), key="xl_scale_run")
        # single-element slots: the progress bar takes the last run's number's place at once
        result_slot, note_slot = st.empty(), st.empty()
        if clicked:
            result_slot.progress(0.0, text=_("Scoring {tokens} tokens in windows of {length}...")
                                 .format(tokens=number(cap), length=number(length)))
            try:
                net = eval_model(str(alibi_folder), ui.model_stamp(str(alibi_folder)))
                with slope_scale(net, float(scale)):
                    out = evaluate_length(
                        net, length, protocol, tokens=cap, stride=DEFAULT_STRIDE,
                        max_length=length, kind=kind,
                        progress=lambda done, total: result_slot.progress(done / total))
            except (AlibiVizError, RuntimeError, MemoryError) as exc:
                result_slot.error(_("The live evaluation failed: {error}").format(error=exc))
            else:
                result_slot.metric(_("ALiBi, s = {scale}, {length} tokens ({protocol})").format(
                    scale=scale_label(float(scale)), length=number(length),
                    protocol=protocol_name(protocol)), number(out["ppl"], 3))
                note_slot.caption(_("{tokens} tokens scored.").format(
                    tokens=number(out["tokens"])))


# 6. learnable slopes ------------------------------------------------------------------------
learnable_slopes_section(kind)

# 7. which heads matter ------------------------------------------------------------------------
heads_view.ablation_ui(assets.DEFAULT_MODEL, PREFIX, _("7. Which heads matter? Steep heads and "
                                                       "gentle ones, silenced"))
