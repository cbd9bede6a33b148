"""Extrapolation lab: train short, test long, with the shipped family of five models.

Seven sections, called in order at the foot of the page: the shipped results (1), a live re-run
(2), one ALiBi head at the training length and 8x it (3), how far back the models look (4),
rescaled slopes (5), learnable slopes (6) and which heads matter (7). The longer texts, answer
boxes and section 6 are drawn by `alibi_viz_app/extrapolation_view.py`, section 7 by `alibi_viz_app/heads_view.py`;
every number comes from `alibi_viz`.
"""

import time
from pathlib import Path

import streamlit as st

from alibi_viz import assets, data, i18n
from alibi_viz.assets import model_label, train_hint
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.extrapolation import extrapolation_attention_figure, perplexity_figure
from alibi_viz.i18n import _, number
from alibi_viz.models.attention import attention_maps, beyond_training
from alibi_viz.models.context_reach import REACH_CONTEXTS, context_reach, copy_heads
from alibi_viz.models.context_reach import attention_beyond as heads_beyond
from alibi_viz.models.loading import load_eval_model
from alibi_viz.models.scoring import evaluate_length, evaluation_stream
from alibi_viz.models.slope_scale import slope_scale
from alibi_viz.results.evaluation import DEFAULT_STRIDE, LENGTHS, protocol_name, shipped_cell
from alibi_viz.results.reach import beyond_summary
from alibi_viz.results.rescale import (
    interpolation_note,
    interpolation_scale,
    rescale_summary,
    scale_label,
)
from alibi_viz_app import extrapolation_view as view
from alibi_viz_app import heads_view, ui
from alibi_viz_app.extrapolation_view import LONG_FACTOR
from alibi_viz_app.query_params import UrlParam

PREFIX = "xl"
LIVE_STREAM_TOKENS = 2 * max(LENGTHS) + DEFAULT_STRIDE  # enough held-out ids for any live plan
# The live reach run spreads its passages through this many held-out ids (every kind has more);
# the cost is the scored tokens', not the stream's.
LIVE_REACH_STREAM = 1 << 17
REACH_LIVE_CONTEXTS = tuple(c for c in REACH_CONTEXTS if c <= 1024)
LIVE_COPY_DISTANCES = (16, 32, 64, 128, 256, 512, 1024)  # the planted-span picker's choices


# ----------------------------------------------------------------------------- cached work

@st.cache_resource(max_entries=3, show_spinner=_("Loading the model for evaluation..."))
def eval_model(path: str, stamp: tuple):
    """The model exactly as `python -m experiments.evaluate` loads it (sdpa where the
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
    maps (`models.reach.attention_beyond`)."""
    maps = alibi_attention(path, stamp, LONG_FACTOR * train_seq_len, kind).maps
    return heads_beyond(maps, train_seq_len)


@st.cache_data(max_entries=16, show_spinner=_("Running the model on a planted span..."))
def planted_copy(path: str, stamp: tuple, distance: int, kind: str):
    """`models.reach.copy_heads` of the model at `path` on one planted span of the held-out text of
    `kind`: ((layers, heads) copy attention, (first copy, repeat, control) losses)."""
    model, _tokenizer, _info = ui.cached_model(path, stamp)
    return copy_heads(model, held_out_ids(LIVE_STREAM_TOKENS, kind), distance)


# ----------------------------------------------------------------------------- controls

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
    with ui.settings():
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


# ----------------------------------------------------------------------------- sections

def shipped_results_section(results: dict, train_seq_len: int, kind: str):
    """Section 1: the chart, unless this run makes a live run (then `results_chart` draws it
    once the live run has added its star), and its text. Returns (the chart's slot, None when
    the chart is drawn, and the results, {} if they could not be read)."""
    st.subheader(_("1. Perplexity vs evaluation length (shipped results)"))
    st.markdown(_("Each model's perplexity (lower is better) on held-out text read in windows "
                  "of growing length, the training length dashed: look at which curves stay "
                  "flat or fall past the dashed line and which climb."))
    chart_slot = st.container()
    if not results:
        chart_slot.info(_("No shipped results for this text yet: assets/results/extrapolation-{kind}.json "
                          "is written by `python -m experiments.evaluate`. The live evaluation below "
                          "works without it.").format(kind=kind))
        return chart_slot, results
    if not st.session_state.get("xl_run"):  # drawn before its text: a phone shows it sooner
        results_chart(chart_slot, results, [r for r in st.session_state.get("xl_live", [])
                                            if r["kind"] == kind])
        chart_slot = None
    try:
        view.results_summary_ui(results, train_seq_len)
    except AlibiVizError as exc:
        st.error(_("The shipped results could not be read: {error}").format(error=exc))
        results = {}
    return chart_slot, results


def live_section(shipped: dict, results: dict, model: str, length: int, kind: str):
    """Section 2: one point of the chart, computed now, beside the shipped number. Returns
    (protocol, token cap, this session's live runs on `kind`)."""
    st.subheader(_("2. Re-run it live"))
    st.markdown(ui.where_settings(
        _("One point of the chart above, computed now: choose a model and a length in the "
          "sidebar, run it, and look at the live number beside the shipped one."),
        _("One point of the chart above, computed now: choose a model and a length in "
          "Settings, at the top of the page, run it, and look at the live number beside the "
          "shipped one.")))
    protocol, n_tokens, cap = view.live_controls_ui(length)
    st.caption(view.live_caption(model, length, protocol, cap))
    live_runs = st.session_state.setdefault("xl_live", [])
    same = (model, protocol, length, kind)
    if st.button(_("Run live evaluation"), key="xl_run", type="primary"):
        path = shipped.get(model)
        if path is None:
            st.error(_("The model {model} is not shipped (assets/models/{name}).").format(
                model=model_label(model), name=model) + " " + train_hint(model))
        else:
            bar = st.progress(0.0, text=_("Scoring {tokens} tokens in windows of {length}...")
                              .format(tokens=number(n_tokens), length=number(length)))
            try:
                net = eval_model(str(path), ui.model_stamp(str(path)))
                start = time.perf_counter()

                def advance(done, total):
                    bar.progress(done / total, text=_("window {done} of {total}").format(
                        done=number(done), total=number(total)))

                out = evaluate_length(net, length, protocol, tokens=n_tokens,
                                      stride=DEFAULT_STRIDE, max_length=length, progress=advance,
                                      kind=kind)
                seconds = time.perf_counter() - start
            except (AlibiVizError, RuntimeError, MemoryError) as exc:
                bar.empty()
                st.error(_("The live evaluation failed: {error}").format(error=exc))
            else:
                bar.progress(1.0, text=_("Done in {seconds} s").format(
                    seconds=number(seconds, 1)))
                run = {"model": model, "protocol": protocol, "length": length, "kind": kind,
                       "ppl": out["ppl"], "tokens": out["tokens"], "seconds": round(seconds, 2)}
                live_runs[:] = [r for r in live_runs if (r["model"], r["protocol"], r["length"],
                                                         r["kind"]) != same] + [run]
    current = next((r for r in reversed(live_runs)
                    if (r["model"], r["protocol"], r["length"], r["kind"]) == same), None)
    view.live_metrics_ui(current, *shipped_cell(results, model, protocol, length), model,
                         protocol, length)
    return protocol, cap, [r for r in live_runs if r["kind"] == kind]


def results_chart(chart_slot, results: dict, live_runs: list) -> None:
    """Section 1's chart, drawn into its slot (None: drawn already), with this text's live
    runs starred."""
    if not results or chart_slot is None:
        return
    try:
        fig = ui.perplexity_fig(results)
        if live_runs:
            fig = perplexity_figure(results, live=live_runs)
        with chart_slot:
            ui.show_figure(fig, "extrapolation_perplexity", key="xl_fig_results")
    except AlibiVizError as exc:
        chart_slot.error(_("The shipped results could not be drawn: {error}").format(error=exc))


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
        return
    slope = info.slopes[head - 1] if info.slopes else None
    try:
        stamp = ui.model_stamp(str(alibi_path))
        fig = attention_fig(str(alibi_path), stamp, train_seq_len, layer - 1, head - 1, slope,
                            kind)
        beyond, beyond_bias, T = attention_beyond(str(alibi_path), stamp, train_seq_len,
                                                  layer - 1, head - 1, slope, kind)
    except AlibiVizError as exc:
        st.error(str(exc))
        return
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
        text=assets.text_kind_in_sentence(kind))
    if beyond == beyond:  # not NaN
        text += " " + view.beyond_text(train_seq_len, beyond, beyond_bias, slope)
    shares = every_head_beyond(str(alibi_path), stamp, train_seq_len, kind)
    st.markdown(text + " " + beyond_summary(shares, train_seq_len, T))


def reach_section(info, path, model: str, train_seq_len: int, kind: str):
    """Section 4: the shipped reach curves, the bias-alone retrieval limit, a live reach run,
    which heads copy a span of held-out text, and the user's own planted span. `path`: the
    folder of the sidebar's `model`, None when it is not shipped."""
    st.subheader(_("4. How far back do the models really look?"))
    st.markdown(_("How much each model's prediction gains from more context (left) and from a "
                  "copy of the text further back (right): look at where each curve stops "
                  "improving."))
    view.reach_method_ui(train_seq_len, max(REACH_CONTEXTS))
    view.reach_results_ui(assets.load_reach_results(), train_seq_len)
    if info is not None and info.slopes:
        view.win_half_ui(tuple(info.config_slopes or info.slopes), LONG_FACTOR * train_seq_len)
    left, right = st.columns(2)
    with left:
        st.markdown(_("**Re-run a reach curve live** ({model}, contexts up to {longest} "
                      "tokens).").format(model=model_label(model),
                                         longest=number(max(REACH_LIVE_CONTEXTS))))
        clicked = st.button(_("Run reach live"), key="xl_reach_run")
        # Two single-element slots: the run's progress bar takes the place of the last run's
        # table (an element replaced by another goes at once; in a container, the old table
        # stayed on screen, greyed, under the new progress bar until the run ended).
        result_slot, note_slot = st.empty(), st.empty()
        if clicked and path is None:
            result_slot.error(_("The model {model} is not shipped.").format(
                model=model_label(model)) + " " + train_hint(model))
        elif clicked:
            result_slot.progress(0.0, text=_("context {c} ...").format(c=1))
            try:
                start = time.perf_counter()
                live = context_reach(
                    eval_model(str(path), ui.model_stamp(str(path))),
                    held_out_ids(LIVE_REACH_STREAM, kind), REACH_LIVE_CONTEXTS,
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
        distance = int(st.select_slider(_("Copy distance (tokens)"), LIVE_COPY_DISTANCES,
                                        value=64, key="xl_copy_distance"))
        if path is not None:
            try:
                values, losses = planted_copy(str(path), ui.model_stamp(str(path)), distance, kind)
            except (AlibiVizError, RuntimeError) as exc:
                st.error(str(exc))
            else:
                view.copy_heads_ui(values, losses, model, distance)
    view.own_span_ui(path, model)


def rescale_section(alibi_path, length: int, protocol: str, cap: int, kind: str):
    """Section 5: the shipped ALiBi model with every slope times s, its sweep as a question
    and its answer, and a live run at the live run's length and protocol."""
    st.subheader(_("5. Rescaled slopes: can ALiBi be made to use a longer context?"))
    st.markdown(_("The shipped ALiBi model with every slope shrunk at inference, so that far keys "
                  "are penalised less: predict, then look at whether its perplexity falls."))
    view.rescale_explained_ui()
    rescale = assets.load_rescale_results()
    parameters = assets.training_info(alibi_path).get("parameters") if alibi_path else None
    # the note states the measured change, an answer: it goes in the question's box below
    note = interpolation_note(rescale, parameters) if rescale and parameters else None
    if not rescale:
        st.info(_("No shipped results yet: assets/results/rescale.json is written by `python -m "
                  "experiments.rescale`."))
        return
    summary = rescale_summary(rescale)
    eight = LONG_FACTOR * rescale["train_seq_len"]
    with ui.question(_("At {length} tokens ({factor}x the training length), does s = L_train / "
                       "L = {interp} lower the ALiBi model's perplexity, and does more context "
                       "then keep helping it?").format(
            length=number(eight), factor=LONG_FACTOR, interp=scale_label(interpolation_scale(
                rescale["train_seq_len"], eight)))):
        view.rescale_answer_ui(summary, summary["cells"].get(("nonoverlapping", eight)), note)
    ui.show_figure(view.rescale_fig(), "rescale", key="xl_fig_rescale")
    view.rescale_captions_ui(rescale, kind)
    if alibi_path is None:
        return
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
    if not clicked:
        return
    result_slot.progress(0.0, text=_("Scoring {tokens} tokens in windows of {length}...")
                         .format(tokens=number(cap), length=number(length)))
    try:
        net = eval_model(str(alibi_path), ui.model_stamp(str(alibi_path)))
        with slope_scale(net, float(scale)):
            out = evaluate_length(net, length, protocol, tokens=cap, stride=DEFAULT_STRIDE,
                                  max_length=length, kind=kind,
                                  progress=lambda done, total: result_slot.progress(done / total))
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        result_slot.error(_("The live evaluation failed: {error}").format(error=exc))
    else:
        result_slot.metric(_("ALiBi, s = {scale}, {length} tokens ({protocol})").format(
            scale=scale_label(float(scale)), length=number(length),
            protocol=protocol_name(protocol)), number(out["ppl"], 3))
        note_slot.caption(_("{tokens} tokens scored.").format(tokens=number(out["tokens"])))


# ----------------------------------------------------------------------------- page

shipped = assets.shipped_models()
alibi_path = shipped.get(assets.DEFAULT_MODEL)
info, alibi_error = view.model_info(alibi_path)
model, length, layer, head, kind = controls_ui(list(shipped) or list(assets.MODEL_ORDER),
                                               info.num_layers if info else 64,
                                               info.num_heads if info else 64)
ui.write_url({"model": model, "length": length, "layer": layer, "head": head, "kind": kind})
results = assets.load_extrapolation_results(kind)
train_seq_len = assets.shipped_train_seq_len(alibi_path, results)

view.intro_ui(train_seq_len)
ui.show_url_warnings(PREFIX)
chart_slot, results = shipped_results_section(results, train_seq_len, kind)  # 1
protocol, cap, live_runs = live_section(shipped, results, model, length, kind)  # 2
results_chart(chart_slot, results, live_runs)  # 1's chart, with 2's live runs starred
attention_section(info, alibi_error, alibi_path, train_seq_len, layer, head, kind)  # 3
reach_section(info, shipped.get(model), model, train_seq_len, kind)  # 4
rescale_section(alibi_path, length, protocol, cap, kind)  # 5
view.learnable_slopes_section(kind)  # 6
heads_view.ablation_ui(assets.DEFAULT_MODEL, PREFIX, _("7. Which heads matter? Steep heads and "  # 7
                                                       "gentle ones, silenced"))
