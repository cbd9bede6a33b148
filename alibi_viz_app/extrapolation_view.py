"""The Extrapolation lab's longer blocks: the live run's controls, the reading notes, the
paper beside ours, answer boxes, captions, and section 6 (learnable slopes) whole.

Each function draws one block from shipped results or values the page measured (or returns
its text), so `app_pages/extrapolation.py` reads as its seven sections in order. Nothing here
computes: every number comes from an `alibi_viz` call (the user's own planted span from
`models.reach.own_span`). Every string is translated when drawn (module
level holds only `N_` marks), so a block follows the page's language on every run; the
page's caches stay on the page, whose spinners are translated each run.
"""

from __future__ import annotations

import streamlit as st

from alibi_viz import assets, data, paper
from alibi_viz.assets import model_label, train_hint
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.extrapolation import (
    copy_heads_figure,
    learnable_perplexity_figure,
    learned_slopes_figure,
    rescale_figure,
    win_half_figure,
)
from alibi_viz.i18n import N_, _, number, significant, small_percent
from alibi_viz.models.context_reach import COPY_SPAN, own_span
from alibi_viz.models.scoring import live_token_cap
from alibi_viz.results import learnable_slopes
from alibi_viz.results.evaluation import (
    DEFAULT_STRIDE,
    LENGTHS,
    PROTOCOLS,
    extrapolation_summary,
    in_distribution_ranking,
    key_result,
    paper_comparison,
    protocol_name,
    relative_change,
    results_details,
    results_table,
    seeds_sentence,
    signed,
)
from alibi_viz.results.reach import reach_setting, reach_summary
from alibi_viz.results.rescale import scale_label
from alibi_viz_app import ui

LONG_FACTOR = 8  # the attention maps and the answers compare the training length with 8x it
HALF_PX = 300  # a figure in one of two columns on a 1024 px screen with the sidebar open

# The paper's method names (alibi_viz.paper.TABLE2) as the table shows them.
PAPER_METHODS = {"sinusoidal": N_("sinusoidal"), "rotary": N_("rotary"), "T5 bias": N_("T5 bias"),
                 "ALiBi": "ALiBi"}

VERDICTS = {  # what the paired interval of learnable / fixed says (learnable_slopes.verdict)
    "worse": N_("worse than with fixed slopes (the interval lies above 1)"),
    "better": N_("better than with fixed slopes (the interval lies below 1)"),
    "same": N_("no measurable difference (the interval includes 1)"),
}


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


# ----------------------------------------------------------------------------- 0, 1: results

def intro_ui(train_seq_len: int) -> None:
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


def results_summary_ui(results: dict, train_seq_len: int) -> None:
    """The key result, unfolded; then, folded, every protocol's sentences, the reading notes,
    the paper beside ours, and the table. Raises AlibiVizError on results it cannot read."""
    key = key_result(results) if "alibi" in results["models"] else None
    if key:
        st.markdown(key)
        st.caption(seeds_sentence(results))
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
        passages = protocols.get("sliding", {}).get("passages")
        text += " " + (_("Each non-overlapping number rests on the first {nonoverlapping} "
                         "tokens of the text, each sliding one on {sliding} tokens in {passages} "
                         "passages spread through it; the error bars are 95% intervals "
                         "(Student's t) over {chunks} disjoint chunks of the first and over the "
                         "passages of the second. They cover which text was scored, not "
                         "training randomness: the crosses are runs trained with other seeds."
                         ).format(nonoverlapping=number(scored["nonoverlapping"]),
                                  sliding=number(scored["sliding"]), passages=number(passages),
                                  chunks=number(results.get("chunks", 0)))
                       if passages else
                       _("Each non-overlapping number rests on {nonoverlapping} scored tokens, "
                         "each sliding one on {sliding}; the error bars are 95% intervals over "
                         "{chunks} disjoint chunks of them.").format(
            nonoverlapping=number(scored["nonoverlapping"]), sliding=number(scored["sliding"]),
            chunks=results.get("chunks", "?")))
    targets = {p: protocols.get(p, {}).get("targets") for p in PROTOCOLS}
    if passages:
        text += " " + _("The two protocols score different stretches of the text, so compare "
                        "each protocol's curve across lengths, not the value of one with the "
                        "value of the other.")
    elif all(targets.values()):
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
    (`results.extrapolation.paper_comparison`), every number in the page's language."""
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


# ----------------------------------------------------------------------------- 2: live run

def live_caption(model: str, length: int, protocol: str, cap: int) -> str:
    """What a live run re-evaluates, and why it may differ from the shipped number."""
    return _("Re-evaluates {model} at {length} tokens ({protocol}) on the same held-out stream "
             "as the shipped numbers, scoring its first tokens. To stay within seconds a live "
             "run scores at most {cap} tokens at this length (the shipped numbers score more "
             "text, see the table), so the two can differ. The longest runs are at {longest} "
             "tokens, where one window is the least that can be evaluated.").format(
        model=model_label(model), length=number(length), protocol=protocol_name(protocol),
        cap=number(cap), longest=number(max(LENGTHS)))


def live_metrics_ui(current: dict | None, shipped_ppl, shipped_tokens, model: str,
                    protocol: str, length: int) -> None:
    """The live run's perplexity (or 'not run yet') beside the shipped number, in two columns."""
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


# ----------------------------------------------------------------------------- 3: one head

def beyond_text(train_seq_len: int, beyond: float, beyond_bias: float | None, slope) -> str:
    """The share of a head's attention beyond the training length (`heads.beyond_training`),
    beside the bias alone's when the head has a slope."""
    if beyond_bias is not None:
        return _("Queries past position {train_seq_len} give **{share}** of their "
                 "attention to keys more than {train_seq_len} tokens back; the bias alone "
                 "(m={m}, all content scores equal) would give {bias}.").format(
            train_seq_len=number(train_seq_len), share=small_percent(beyond), m=significant(slope),
            bias=small_percent(beyond_bias))
    return _("Queries past position {train_seq_len} give **{share}** of their "
             "attention to keys more than {train_seq_len} tokens back.").format(
        train_seq_len=number(train_seq_len), share=small_percent(beyond))


# ----------------------------------------------------------------------------- 4: reach

@ui.cached_figure(max_entries=4)
def win_half_fig(slopes: tuple, num_keys: int):
    """The bias-alone retrieval limit per head."""
    return win_half_figure(list(slopes), num_keys)


def reach_method_ui(train_seq_len: int, longest: int) -> None:
    """How the reach is measured, folded (contexts up to `longest` tokens)."""
    with st.expander(_("How the reach is measured (contexts up to {longest} tokens)").format(
            longest=number(longest))):
        st.markdown(_(
            "Left: the loss on the same held-out tokens when each model is given at most the last "
            "c tokens before every one of them (between c − c/16 and c, so at c = {train_seq_len} "
            "no scored token is past the training length). Where a curve flattens, more context "
            "stops helping; past the training length (dashes) it may get worse. Right: retrieval. "
            "A span of held-out text is planted and repeated d tokens later; the gain is how much "
            "better the repeat is predicted than the same span at the same place when the first "
            "copy is replaced by other text. Both sit at the same positions, so a model that "
            "breaks past its training length breaks on both, and the gain measures retrieval, not "
            "position. For ALiBi a key d tokens back has to beat the bias −m·d, so the gain fades "
            "with distance.").format(train_seq_len=number(train_seq_len)))


def reach_results_ui(reach: dict, train_seq_len: int) -> None:
    """The shipped reach curves (assets/results/reach.json), their sentences and setting."""
    if not reach:
        st.info(_("No shipped reach results yet: assets/results/reach.json is written by "
                  "`python -m experiments.reach`."))
        return
    try:
        ui.show_figure(ui.reach_fig(reach, train_seq_len), "reach", key="xl_fig_reach")
        for line in reach_summary(reach, train_seq_len):
            st.markdown(f"- {line}")
        st.caption(_("{scored}; {samples} planted spans of {span} tokens per distance. "
                     "Command: `{command}`.").format(
            scored=reach_setting(reach), samples=reach["copy"]["samples"],
            span=reach["copy"]["span"],
            command=reach.get("command", "python -m experiments.reach")))
    except (AlibiVizError, KeyError, ValueError) as exc:
        st.error(_("The shipped reach results could not be read: {error}").format(error=exc))


def win_half_ui(slopes: tuple, num_keys: int) -> None:
    """The content score a far key needs to take half a query's attention, from the bias."""
    st.markdown(_(
        "**The retrieval limit, from the bias alone.** For a far key to take half of a "
        "query's attention, its content score must beat every other key by the amount below: "
        "m·d plus a constant, so it grows by m logits for every token of distance. Gentle "
        "heads can still retrieve from far back; steep heads cannot."))
    ui.show_figure(win_half_fig(slopes, num_keys), "win_half", key="xl_fig_win_half")


def copy_heads_ui(values, losses: tuple, model: str, distance: int) -> None:
    """Which heads copy one planted span `distance` tokens back (`models.reach.copy_heads`), with
    its losses (first copy, repeat, control)."""
    first_loss, repeat_loss, control_loss = losses
    ui.show_figure(copy_heads_figure(values, distance), "copy_heads", key="xl_fig_copy_heads",
                   width=HALF_PX)
    st.caption(_("{model}, one planted span of {span} held-out tokens: loss {first} "
                 "nats/token on the first copy, {repeat} on the repeat, {control} on "
                 "the same span where nothing precedes it to copy.").format(
        model=model_label(model), span=COPY_SPAN, first=number(first_loss, 2),
        repeat=number(repeat_loss, 2), control=number(control_loss, 2)))


def own_span_ui(path, model: str) -> None:
    """Plant your own span, folded: a span and a text, and on Measure (with `model` shipped
    at `path`) its loss on both copies and which heads copy it (`models.reach.own_span`)."""
    with st.expander(_("Plant your own span")):
        span = st.text_input(_("Span to repeat"), "return total / width", key="xl_span",
                             max_chars=200)
        between = st.text_area(_("Text between the two copies"), data.CODE_EXAMPLE,
                               key="xl_between", max_chars=20_000, height=120)
        if not (st.button(_("Measure"), key="xl_span_run") and path is not None):
            return
        try:
            net, tokenizer, _info = ui.cached_model(path)
            found = own_span(net, tokenizer, between, span)
        except (AlibiVizError, RuntimeError, MemoryError) as exc:
            st.error(str(exc))
            return
        st.markdown(_("{model}: the span is {n} tokens and its copies are {distance} "
                      "tokens apart. Loss {first} nats/token on the first copy, {repeat} "
                      "on the repeat (gain {gain}).").format(
            model=model_label(model), n=number(found.span), distance=number(found.distance),
            first=number(found.first, 2), repeat=number(found.repeat, 2),
            gain=signed(found.first - found.repeat, 2)))
        if found.heads is not None:
            ui.show_figure(copy_heads_figure(found.heads, found.distance), "copy_heads_own",
                           key="xl_fig_copy_own")


# ----------------------------------------------------------------------------- 5: rescale

@ui.cached_figure(max_entries=4)
def rescale_fig():
    return rescale_figure(assets.load_rescale_results())


def rescale_explained_ui() -> None:
    """What multiplying every slope by s does, and what s = L_train / L is."""
    st.markdown(_(
        "Multiply every slope by s when the model reads a longer input: s = 1 is the model as "
        "trained; s = L_train / L shrinks the slopes by the factor the input grew, so the farthest "
        "key gets the bias the farthest key of a training window got: position interpolation for "
        "ALiBi ({interpolation}). Smaller slopes let far keys in; whether the model then *uses* "
        "them is what the reach curve says.").format(interpolation=paper.ALIBI_INTERPOLATION))


def rescale_answer_ui(summary: dict, cell: dict | None, note: str | None) -> None:
    """Section 5's answer (drawn inside its question's box): at LONG_FACTOR x the training
    length, s = L_train / L against s = 1 and the best s, the reach curve's best s, the
    interpolation note, then every shipped cell of the sweep as a bullet."""
    reach_best = min(summary["reach"], key=lambda s: summary["reach"][s]["longest_loss"])
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
    for (cell_protocol, cell_length), c in sorted(summary["cells"].items(),
                                                  key=lambda kv: (kv[0][1], kv[0][0])):
        st.markdown("- " + _("{protocol}, {length} tokens: best s = {best} ({best_change} "
                             "against s = 1); s = L_train / L = {interp}: {interp_change}.").format(
            protocol=protocol_name(cell_protocol), length=number(cell_length),
            best=scale_label(c["best"]),
            best_change=relative_change(c["best_ratio"]), interp=scale_label(c["interpolation"]),
            interp_change=relative_change(c["interpolation_ratio"])
            if c["interpolation_ratio"] is not None else _("n/a")))


def rescale_captions_ui(rescale: dict, kind: str) -> None:
    """Under the sweep's chart: what it was run on, and a warning when that is not `kind`."""
    st.caption(_("The shipped ALiBi model on the held-out text: {text}; perplexity on the "
                 "evaluation's targets (the table's, so s = 1 is the shipped row), reach on the "
                 "held-out text of the four kinds. Command: `{command}`.").format(
        text=assets.text_kind_in_sentence(rescale["kind"]), command=rescale["command"]))
    if rescale["kind"] != kind:  # the sweep was run on one text: say so where another is chosen
        st.caption(_("This sweep was run on {sweep} only, not on the text chosen above ({chosen}); "
                     "the live run below reads the chosen text.").format(
            sweep=assets.text_kind_in_sentence(rescale["kind"]),
            chosen=assets.text_kind_in_sentence(kind)))


# ----------------------------------------------------------------------------- 6: learnable

@ui.cached_figure(max_entries=2)
def learned_slopes_fig():
    return learned_slopes_figure(assets.load_learnable_slopes_results())


@ui.cached_figure(max_entries=8)
def learnable_fig(kind: str):
    return learnable_perplexity_figure(assets.load_learnable_slopes_results(), kind)


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
    if not variant:
        st.info(_("No shipped results yet: assets/results/learnable-slopes.json is written by "
                  "`python -m experiments.learnable_slopes`."))
        return
    st.markdown(learnable_slopes.run_summary(variant))
    found = learnable_slopes.summary(variant, kind)
    longest = max(variant["factors"])
    with ui.question(_("The slopes were trained on {train}-token windows only. At {factor}x "
                       "that length ({length} tokens), will the learnable-slope model be better "
                       "or worse than the fixed-slope one?").format(
            train=number(variant["train_seq_len"]), factor=longest,
            length=number(longest * variant["train_seq_len"]))):
        learnable_answer_ui(variant, found)
    ui.show_figure(learned_slopes_fig(), "learned_slopes", key="xl_fig_learned_slopes")
    ui.show_figure(learnable_fig(kind), "learnable_slopes", key="xl_fig_learnable")
    st.caption(_("Held-out text: {text}; the same targets for both models, intervals from 16 "
                 "disjoint chunks. The model: assets/variants/learnable-slopes (its model card "
                 "says how it was trained). Command: `{command}`.").format(
        text=assets.text_kind_in_sentence(kind), command=variant["command"]))


def learnable_answer_ui(variant: dict, found: dict) -> None:
    """Section 6's answer (`learnable_slopes.summary`): the ratio and its verdict at 1x,
    LONG_FACTOR x and the longest factor, whether the gap narrows, and the largest move."""
    longest = max(variant["factors"])
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
