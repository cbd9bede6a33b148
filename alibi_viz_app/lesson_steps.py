"""The Lesson's nine steps (alibi_viz_app/app_pages/lesson.py lists them and moves between them): each
`step_*(step, present)` draws its text, its controls, its predict-then-reveal question and its one
figure, for a laptop, a projector (`present`) or the handout (`in_handout`).

What the steps share is here too: the figures, cached for the page and for a projector
(`step_figure`), and the question (`ask`) with its state in the session, which the page's
clicker reads (`question_open`) to reveal an answer before it moves on.
"""

import contextlib
import functools

import numpy as np
import streamlit as st

from alibi_viz import alibi_slopes, assets, data, i18n, paper
from alibi_viz.alibi import (
    alibi_bias,
    first_slope_rise,
    half_life,
    implied_attention_map,
    mean_distance,
    recent_share,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.bias import (
    CLIP_LOGITS,
    bias_grid_figure,
    decay_figure,
    slope_schedule_figure,
)
from alibi_viz.figures.extrapolation import perplexity_figure, reach_figure
from alibi_viz.figures.lesson import (
    head_vs_bias_figure,
    projector_figure,
    score_pipeline_figure,
    toy_content_scores,
)
from alibi_viz.figures.render import figure_spec
from alibi_viz.figures.training import snapshot_figure
from alibi_viz.i18n import N_, _, number, percent, significant, tokens
from alibi_viz.models.attention import attention_maps, mean_distance_against_bias
from alibi_viz.models.context_reach import REACH_CONTEXTS
from alibi_viz.models.loading import position_parameter_count
from alibi_viz.results.evaluation import (
    compare_cells,
    comparison_length,
    context_use_sentence,
    describe_ratio,
    extrapolation_summary,
    useful_context,
)
from alibi_viz.results.reach import past_answer, reach_answer, reach_setting
from alibi_viz.results.snapshots import shipped_curves
from alibi_viz_app import class_view, ui
from alibi_viz_app.lesson_cursor import (
    embedding_norm_parameters,
    half_formed,
    paper_context_rows,
    parameters_sentence,
    share_choice,
    share_verdict,
    slope_label,
    split_answer,
    trend_choice,
)

# From no bias at all (0) through the gentlest slope to the steepest: moving the slider right
# always makes the bias steeper.
SLOPE_CHOICES = (0.0,) + tuple(2.0 ** -k for k in range(8, -1, -1))
LESSON_HEADS = (0, 2, 4, 7)  # step 2 shows 4 of the 8 heads: m = 1/2, 1/8, 1/32, 1/256


def lesson_text() -> str:
    """What the real-head step reads: the short held-out paragraph in the page's language (the
    shipped models read code and prose in the three languages the app speaks)."""
    return data.prose_example(data.page_kind(i18n.get_language()))


# The evaluation protocols as the radio of step 6 shows them (values stay the results' keys).
PROTOCOL_LABELS = {"both": N_("both"), "nonoverlapping": N_("nonoverlapping"),
                   "sliding": N_("sliding")}


# ----------------------------------------------------------------------------- cached figures

def pipeline(slope: float, side_by_side: bool = False):
    return score_pipeline_figure(slope, num_keys=24, seed=3, side_by_side=side_by_side)


def bias(seq_len: int):
    return bias_grid_figure(alibi_slopes(8), seq_len, "causal", head_ids=LESSON_HEADS)


def decay(seq_len: int):
    return decay_figure(alibi_slopes(8), seq_len, "causal")


@st.cache_data(max_entries=4, show_spinner=_("Running the ALiBi model on the text..."))
def lesson_maps(path: str, stamp: tuple, n_tokens: int, text: str):
    """Tokens and every layer's maps for the lesson text (4 x 8 x 128^2 floats: 2 MiB)."""
    model, tokenizer, _info = ui.cached_model(path, stamp)
    return attention_maps(model, tokenizer, text, max_tokens=n_tokens)


def real_head(path: str, stamp: tuple, n_tokens: int, layer: int, head: int, slope: float):
    """`layer` and `head` 0-based, as everywhere in code (shown 1-based)."""
    attention = lesson_maps(path, stamp, n_tokens, lesson_text()).maps[layer][head]
    return head_vs_bias_figure(attention, slope, layer, head, height=480)


def training():
    return snapshot_figure(shipped_curves())


# The figures on a laptop's page (cached and fitted there by ui.cached_figure) ...
PAGE_FIGURES = {"position": ui.cached_figure(max_entries=16)(pipeline),
                "bias": ui.cached_figure(max_entries=16)(bias),
                "slopes": ui.cached_figure(max_entries=16)(slope_schedule_figure),
                "decay": ui.cached_figure(max_entries=16)(decay),
                "real_head": ui.cached_figure(max_entries=64)(real_head),
                "extrapolation": ui.perplexity_fig, "reach": ui.reach_fig,
                "training": ui.cached_figure(max_entries=4)(training)}
# ... and on a projector, each as tall as the room its step leaves under its text and controls:
# the figure's top measured on a 1024x768 screen in Spanish and Russian (the longest texts) and
# on a 1280x720 one in English, the lowest of them, less a few pixels. Step 1 puts its two
# panels side by side: stacked in that room, each was 40 px tall.
PROJECTOR = {"position": (lambda slope: pipeline(slope, side_by_side=True), 305),
             "bias": (bias, 315), "slopes": (slope_schedule_figure, 315),
             "decay": (decay, 315), "real_head": (real_head, 315),
             "extrapolation": (lambda results, protocols: perplexity_figure(
                 results, protocols=protocols), 365),
             "reach": (reach_figure, 315), "training": (training, 400)}
# In a class a step's figure appears on the reveal, under the question, its answer and the
# class's chart (up to 356 px for eight choices), which the reveal scrolls to the top of the
# screen (class_view.SCROLL_JS): on a 1024x768 projector that leaves it this much room.
CLASS_PROJECTOR_PX = 300


@st.cache_data(max_entries=64, show_spinner=False)
def projector_spec(lang: str, name: str, args: tuple, height: int) -> dict:
    """Step figure `name` built from `args` for a projector (`projector_figure`, `height` px
    tall), in language `lang` (the cache key; the run has set it)."""
    build, _height = PROJECTOR[name]
    return figure_spec(projector_figure(build(*args), height=height), fit=False)


def step_figure(name: str, present: bool, *args) -> dict:
    """The step's one figure, for a projector or for the page (cached either way); in a class
    on a projector, no taller than CLASS_PROJECTOR_PX. A phone in presentation mode gets the
    page's figure: a projector's, its texts fitted to a projector's width, shrinks on a 390 px
    screen to letters too small to read and side-by-side axis titles that run into each other."""
    if present and not ui.on_phone():
        height = PROJECTOR[name][1]
        if class_view.code():
            height = min(height, CLASS_PROJECTOR_PX)
        return projector_spec(i18n.get_language(), name, args, height)
    return PAGE_FIGURES[name](*args)


@st.cache_data(max_entries=64, show_spinner=False)
def head_distances(path: str, stamp: tuple, n_tokens: int, layer: int, head: int,
                   slope: float, text: str) -> tuple[float, float]:
    """(mean attended distance of the head, of its slope alone) on the lesson text."""
    attention = lesson_maps(path, stamp, n_tokens, text).maps[layer][head]
    return mean_distance_against_bias(attention, slope)


# ----------------------------------------------------------------------------- the question

# A step's question in presentation mode: "ls_asked_<step>" holds the question the step last
# asked, "ls_revealed_<step>" the question whose answer was revealed. An answer is shown only
# for the question it answers: a question changed by a control (another slope, head count,
# layer or head) is asked afresh.
ASKED, REVEALED = "ls_asked_", "ls_revealed_"


def question_open(step: int) -> bool:
    """Whether step `step` asked a question whose answer is not shown yet."""
    asked = st.session_state.get(f"{ASKED}{step}")
    return asked is not None and st.session_state.get(f"{REVEALED}{step}") != asked


def reveal(step: int) -> None:
    """Show the answer to the question step `step` asked."""
    st.session_state[f"{REVEALED}{step}"] = st.session_state.get(f"{ASKED}{step}")


def forget_questions() -> None:
    """Forget what every step asked and revealed: a step arrived at asks its question afresh."""
    for key in [k for k in st.session_state if str(k).startswith((ASKED, REVEALED))]:
        del st.session_state[key]


def in_handout() -> bool:
    """Whether this run draws the handout (every step, answers shown)."""
    return bool(st.session_state.get("ls_print"))


def chosen(label: str, value: str) -> None:
    """In the handout, the value a step's control holds, written out: on paper a widget is a
    picture of a slider (the page's lesson_handout.css hides it in print)."""
    if in_handout():
        st.markdown(f"**{label}:** {value}")


def show(fig, name: str) -> None:
    """The step's one figure (from `step_figure`: on a projector, larger fonts at the height
    its step leaves)."""
    ui.show_figure(fig, f"lesson_{name}", key=f"ls_fig_{name}")


def text(full: str, short: str, present: bool) -> None:
    """The step's explanation: the full text, or its short form on a projector."""
    st.markdown(short if present else full)


def ask(step: int, question: str, answer: str, present: bool, right: str | None = None,
        options: list[tuple[str, str]] | None = None) -> bool:
    """Predict, then reveal. In presentation mode the question comes first and the figure and
    answer only after a click (returns False until then); otherwise the figure is shown and the
    answer waits in a closed "Answer" box, so a student following on a laptop predicts first.
    In the handout the answer follows the question. The answer is computed by the step from
    the same numbers its figure draws. In a class, `right` is the class vote's right choice
    (its stored value) and `options` the vote's choices where the step computes them
    (`class_view.question`)."""
    if (shown := class_view.question(step, question, answer, present, right,
                                     options)) is not None:
        return shown  # in a class: the class's answers, revealed by the teacher
    if present and not in_handout():  # what the clicker's next reveals (`question_open`)
        st.session_state[f"{ASKED}{step}"] = question
    if in_handout() or (present and not question_open(step)):  # on paper, or revealed
        first, rest = (answer, "") if in_handout() else split_answer(answer)
        st.markdown(_("**Predict:** {question}  \n**Answer:** {answer}").format(
            question=question, answer=first))
        if rest:  # on a projector a long answer would push the step's figure off the screen
            with st.expander(_("The rest of the answer")):
                st.markdown(rest)
        return True
    if not present:  # students on laptops: the answer folded away until they open it
        with ui.question(question):
            st.markdown(answer)
        return True
    st.markdown(_("**Predict:** {question}").format(question=question))
    st.button(_("Reveal the answer"), key=f"ls_reveal_button_{step}", type="primary",
              on_click=reveal, args=(step,))
    return False


# ----------------------------------------------------------------------------- the steps

def step_position(step: int, present: bool) -> None:
    text(
        _("An attention head compares the current token (the **query** i) with every token it "
          "may look at (the **keys** j): the score is the dot product q·k divided by √d, and a "
          "softmax turns the scores into weights that sum to 1. Nothing in that score says how "
          "far apart i and j are¹: move a key elsewhere and it keeps its score. Most "
          "transformers therefore put position into the input, adding a position vector "
          "(sinusoidal or learned) to each token embedding, or rotate q and k by their "
          "positions (RoPE). **ALiBi adds no position embeddings at all.** Before the softmax, "
          "each score gets a penalty proportional to the distance between query and key, fixed "
          "before training, not learned, and not divided by √d."),
        _("The score q·k/√d ignores distance. **ALiBi** subtracts m·(i−j) before the softmax: "
          "no position embeddings, nothing learned."), present)
    if not present:  # on a projector the short text carries the formula
        # TRANSLATORS: the attention score of query i and key j, in the formula
        # score_ij = q·k/√d − m(i−j) (one word)
        score = _("score")
        ui.later(st.latex, r"\text{" + score + r"}_{ij} = \frac{q_i \cdot k_j}{\sqrt{d}} \;-\; "
                 r"m\,(i-j),\qquad j \le i")
    slope = ui.later(st.select_slider, _("Slope m"), SLOPE_CHOICES, value=0.25, key="ls_s1_slope",
                     format_func=ui.labels(SLOPE_CHOICES, slope_label))
    chosen(_("Slope m"), slope_label(slope))
    asked = class_view.class_value("ls_s1_slope", slope)  # the class's slope, in a class
    content = toy_content_scores(24, seed=3)
    share_with, share_without = recent_share(content, asked, 4), recent_share(content, 0.0, 4)
    verdict = share_verdict(share_with, share_without)
    if ask(step, _("With m = {m}, do the last 4 keys get more or less of the attention than "
                   "with no bias at all?").format(m=slope_label(asked)),
           _("{verdict}: {with_bias} with the bias, {without_bias} without (the blue and grey "
             "bars of the last 4 keys).").format(verdict=verdict, with_bias=percent(share_with),
                                                 without_bias=percent(share_without)), present,
           right=share_choice(share_with, share_without)):
        show(step_figure("position", present, slope), "position")
    if not present:
        st.caption(_("Made-up content scores for one query (the last token) against 24 keys. "
                     "With m = 0 both attention rows are the same: a far key with a good score "
                     "wins as easily as a near one. Raise m and the weight moves to recent keys. "
                     "¹ Not quite: a causal model without any position information still learns "
                     "where it is, because the mask lets each token count what comes before it "
                     "(Haviv et al. 2022); the shipped NoPE model shows it (step 6)."))


def step_bias(step: int, present: bool) -> None:
    text(
        _("Write the penalty for every query (row i) and key (column j) and you get one matrix "
          "per head: **B_ij = −m·(i−j)**. It is 0 on the diagonal (a token and itself) and "
          "drops by m for each step back. Keys after the query are masked (grey), as in any "
          "decoder. The matrix depends only on the distance i−j, so every row looks the same, "
          "just longer; and the same matrices are added in every layer. Real code (the "
          "authors' fairseq, BLOOM) adds **+m·j** instead: within a row it differs from "
          "−m·(i−j) by m·i, the same number for every key, and under the causal mask a "
          "softmax ignores that, so the attention is identical (in exact arithmetic)."),
        _("One matrix per head: **B_ij = −m·(i−j)**, 0 on the diagonal, −m per step back, "
          "masked above."), present)
    seq_len = ui.later(st.slider, _("Sequence length"), 4, 128, value=16, key="ls_s2_len")
    chosen(_("Sequence length"), number(seq_len))
    matrix = alibi_bias(alibi_slopes(8)[[0]], max(seq_len, 11))[0]  # head 1, m = 1/2
    diagonal, back = matrix[10, 10] + 0.0, float(matrix[10, 0])
    if ask(step, _("For head 1 (m = 1/2), what is the bias on the diagonal, and on the key 10 "
                   "tokens back?"),
           _("{diagonal} on the diagonal and {back} ten tokens back.").format(
               diagonal=number(diagonal), back=number(back))
           + ("" if in_handout() else " " + _("Point at the first panel (tap or hover) to read "
                                              "them.")),
           present, right=f"{diagonal:g},{back:g}"):
        show(step_figure("bias", present, seq_len), "bias")
    if not present:
        slopes = alibi_slopes(8)
        st.caption(_("Heads 1, 3, 5 and 8 of 8, with the paper's slopes, on one colour scale from "
                     "0 down to −{clip} (clipped there: a key that far down keeps almost no "
                     "weight). Head 1 (m = 1/2) reaches −{clip} {steep} tokens back; head 8 "
                     "(m = 1/256) does not reach it until {gentle} tokens back, far beyond the "
                     "{seq_len} drawn.").format(
                         clip=number(CLIP_LOGITS), steep=number(CLIP_LOGITS / slopes[0]),
                         gentle=number(CLIP_LOGITS / slopes[-1]), seq_len=number(seq_len))
                   + ("" if in_handout() else " " + _("Tap or hover for the values.")))
        st.caption(_("An encoder would use −m·|i−j| on both sides; then a key d tokens to the "
                     "left and one d tokens to the right get the same bias, so the bias alone "
                     "gives a bidirectional model no sense of direction (T5's learned buckets, "
                     "one set per side, do)."))


def step_slopes(step: int, present: bool) -> None:
    text(
        _("Each head gets its own slope. For n heads, n a power of two, the paper uses the "
          "geometric sequence **m_h = 2^(−8h/n)**, h = 1..n: with 8 heads, 1/2, 1/4, ..., "
          "1/256. The first head penalises distance steeply, the last barely at all, so "
          "together the heads cover ranges from a couple of tokens to hundreds. In the paper's "
          "ALiBi the slopes are set before training and never change, so the model has no "
          "position parameters at all (a variant that trains them is in the Extrapolation lab, "
          "section 6). "
          "When n is not a power of two, the official code takes the slopes of the largest "
          "power of two below n and fills in the rest with every other slope of the schedule "
          "for twice that many heads, so the order zigzags: try 12 heads."),
        _("Head h gets **m_h = 2^(−8h/n)**: 8 heads → 1/2 … 1/256. Other head counts "
          "interleave a second schedule."), present)
    num_heads = int(ui.later(st.number_input, _("Heads"), 1, 64, value=8, key="ls_s3_heads"))
    chosen(_("Heads"), number(num_heads))
    asked = int(class_view.class_value("ls_s3_heads", num_heads))  # the class's, in a class
    slopes = alibi_slopes(asked)
    rise = first_slope_rise(slopes)
    answer = (_("Yes: each head's slope is below the one before.") if rise is None else
              _("No: head {later} (m = {later_m}) is steeper than head {earlier} "
                "(m = {earlier_m}).").format(later=rise + 1, later_m=significant(slopes[rise]),
                                             earlier=rise,
                                             earlier_m=significant(slopes[rise - 1])))
    if ask(step, _("With {n} heads, do the slopes fall steadily from head 1 to head "
                   "{n}?").format(n=asked), answer, present,
           right="yes" if rise is None else "no"):
        show(step_figure("slopes", present, num_heads), "slopes")


def step_decay(step: int, present: bool) -> None:
    slopes = alibi_slopes(8)
    lives = half_life(slopes)
    # The 8 paper slopes are fixed, so these half-lives are too: 1.4 and 177 tokens.
    shortest, longest = significant(lives[0], 2), number(lives[-1], 0)
    text(
        _("Suppose every key had the same content score. Then only the bias differs, and the "
          "softmax turns −m·d into weights proportional to **e^(−m·d)**: each step back "
          "multiplies a key's weight by e^(−m). The distance at which the weight halves is the "
          "head's **half-life, ln 2 / m**: for the 8 paper slopes, {shortest} tokens for "
          "m = 1/2 up to {longest} tokens for m = 1/256. Real content scores move weight "
          "around (a key whose score is s logits higher makes up for s/m more tokens of distance), "
          "but the bias sets each head's default reach: a built-in preference for recent "
          "tokens.").format(shortest=shortest, longest=longest),
        _("Equal content → weights ∝ **e^(−m·d)**. Half-life **ln 2 / m**: "
          "{shortest} tokens (m = 1/2) to {longest} (m = 1/256).").format(shortest=shortest,
                                                                         longest=longest),
        present)
    seq_len = ui.later(st.select_slider, _("Sequence length"),
                       [16, 32, 64, 128, 256, 512, 1024, 2048], value=256, key="ls_s4_len")
    chosen(_("Sequence length"), number(seq_len))
    far = int(np.argmax(lives))
    if ask(step, _("Which of the 8 heads looks furthest back?"),
           _("Head {head}, the gentlest slope (m = 1/{denominator}): a half-life of "
             "{half_life}.").format(head=far + 1, denominator=round(1 / slopes[far]),
                                    half_life=tokens(lives[far], number(lives[far], 0))),
           present, right=f"h{far + 1}"):
        show(step_figure("decay", present, int(seq_len)), "decay")
    if not present:
        spans = mean_distance(slopes, "causal", int(seq_len))
        st.caption(_("For the last of {seq_len} tokens, the bias alone gives a mean attended "
                     "distance of {near} tokens (head 1) up to {far} tokens (head 8).").format(
                         seq_len=seq_len, near=significant(spans[0], 2),
                         far=number(spans[-1], 0)))


def step_real_head(step: int, present: bool) -> None:
    path = assets.shipped_models().get(assets.DEFAULT_MODEL)
    if path is None:
        st.info(_("The shipped ALiBi model is missing (assets/models/alibi).") + " "
                + _(assets.TRAIN_HINT).format(name=assets.DEFAULT_MODEL))
        return
    stamp = ui.model_stamp(str(path))
    try:
        _model, _tokenizer, info = ui.cached_model(str(path), stamp)
    except AlibiVizError as exc:
        st.error(_("The shipped ALiBi model could not be loaded: {error}").format(error=exc))
        return
    train_seq_len = assets.shipped_train_seq_len(path)
    text(
        _("Now a trained model: the shipped ALiBi model ({layers} layers x {heads} heads, "
          "trained on {train_seq_len}-token windows of Python code and of English, Spanish and "
          "Russian prose) reading the start of a paragraph it never saw in training. **Left**: "
          "what the chosen head really attends to, query rows against key columns. **Right**: "
          "what its slope alone would give if every content score were equal. Where they "
          "differ, the content term q·k is at work.").format(
              layers=info.num_layers, heads=info.num_heads, train_seq_len=train_seq_len),
        _("The shipped ALiBi model on a paragraph. Left: a real head. Right: its slope "
          "alone."), present)
    left, right = st.columns(2)
    layer = left.selectbox(_("Layer"), list(range(1, info.num_layers + 1)), key="ls_layer")
    head = right.selectbox(_("Head"), list(range(1, info.num_heads + 1)),
                           index=info.num_heads - 1, key="ls_head",
                           help=_("Head 1 has the steepest slope, the last head the gentlest."))
    chosen(_("Layer"), str(layer))
    chosen(_("Head"), str(head))
    if not info.slopes:
        st.warning(_("This model reports no ALiBi slopes."))
        return
    # In a class the question is the class's layer and head; the figure is this page's own.
    asked_layer, asked_head = (int(class_view.class_value(key, value)) for key, value in
                               (("ls_layer", layer), ("ls_head", head)))
    if not (1 <= asked_layer <= info.num_layers and 1 <= asked_head <= info.num_heads):
        asked_layer, asked_head = layer, head
    slope = float(info.slopes[head - 1])
    asked_slope = float(info.slopes[asked_head - 1])
    try:
        fig = step_figure("real_head", present, str(path), stamp, train_seq_len, layer - 1,
                          head - 1, slope)
        measured, prior = head_distances(str(path), stamp, train_seq_len, asked_layer - 1,
                                         asked_head - 1, asked_slope, lesson_text())
    except AlibiVizError as exc:
        st.error(str(exc))
        return
    life = float(half_life([asked_slope])[0])
    verdict = distance_verdict(measured, prior)
    answer = _("{direction}: on average {measured} back, against {prior} for the bias alone "
               "(m = {m}, half-life {half_life}).").format(
        direction=_(dict(class_view.CHOICES[5])[verdict]),
        measured=tokens(measured, number(measured, 1)), prior=number(prior, 1),
        m=significant(asked_slope), half_life=tokens(life, significant(life)))
    if ask(step, _("Does layer {layer}, head {head} look further back than its slope alone, "
                   "as far (±{margin}) or nearer?").format(
                       layer=asked_layer, head=asked_head, margin=percent(SAME_DISTANCE)),
           answer, present, right=verdict):
        show(fig, "real_head")
    if not present:
        st.caption(_("Distance from query to key, averaged over each row's attention and then "
                     "over the queries. The text: `{start} ...`").format(
                         start=lesson_text()[:60].splitlines()[0]))


# A head looks "about as far" back as its slope alone when the two mean distances differ by
# less than this share of the slope's: a tenth of a token in thirty is no verdict.
SAME_DISTANCE = 0.05


def distance_verdict(measured: float, prior: float) -> str:
    """Step 5's answer as class_view.CHOICES[5] stores it: "further", "same" or "nearer"."""
    if abs(measured - prior) < SAME_DISTANCE * prior:
        return "same"
    return "further" if measured > prior else "nearer"


def step_extrapolation(step: int, present: bool) -> None:
    results = assets.load_extrapolation_results(data.page_kind(i18n.get_language()))
    train_seq_len = assets.shipped_train_seq_len(results=results)
    longest = max(results.get("lengths") or [4096]) if results else 4096
    text(
        _("The point of it all. Five shipped models were trained alike on {train_seq_len}-token "
          "windows (same backbone, data and schedule; the remaining differences are listed in "
          "the Extrapolation lab): ALiBi, sinusoidal, rotary (RoPE) and learned positions, and "
          "NoPE with no position information at all. Then each reads held-out text in windows "
          "of up to {longest} tokens ({factor}x). Past {train_seq_len} the learned model meets "
          "position vectors that were never trained, the sinusoidal one meets table rows it "
          "never saw added to its embeddings, and RoPE meets rotation angles between query and "
          "key that it never saw. ALiBi meets only larger distances on the same straight "
          "line.").format(train_seq_len=train_seq_len, longest=number(longest),
                          factor=longest // train_seq_len),
        _("Trained on {train_seq_len} tokens, read at up to {longest}: which models "
          "survive?").format(train_seq_len=train_seq_len, longest=number(longest)),
        present)
    if not results:
        st.info(_("No shipped results yet: assets/results/extrapolation.json is written by "
                  "`python -m experiments.evaluate`."))
        return
    factor = comparison_length(results, train_seq_len) // train_seq_len
    moves, trends = [], []
    for name in ("alibi", "sinusoidal"):
        cmp = compare_cells(results, "nonoverlapping", (name, factor * train_seq_len),
                            (name, train_seq_len))
        if cmp:
            moves.append(f"{assets.model_label(name)} {describe_ratio(cmp)}")
            trends.append(trend_choice(cmp[0]))
    right = ",".join(trends) if len(trends) == 2 else None
    verdict = dict(class_view.choices(step)).get(right)
    choice = "both" if not present else "nonoverlapping"
    if not present:
        choice = st.radio(_("Protocol"), ("both", "nonoverlapping", "sliding"), horizontal=True,
                          key="ls_s6_protocol",
                          format_func=ui.labels(PROTOCOL_LABELS))
        chosen(_("Protocol"), _(PROTOCOL_LABELS[choice]))
    protocols = ("nonoverlapping", "sliding") if choice == "both" else (choice,)
    if ask(step, _("At {factor}x the training length, does ALiBi's perplexity go up or down? "
                   "And the sinusoidal model's?").format(factor=factor),
           (f"{verdict}. " if verdict else "")
           + (_("Non-overlapping windows, against each model's value at the training length: "
                "{changes}.").format(changes="; ".join(moves)) if moves
              else _("See the figure.")),
           present, right=right):
        try:
            show(step_figure("extrapolation", present, results, protocols), "extrapolation")
        except AlibiVizError as exc:
            st.error(_("The shipped results could not be drawn: {error}").format(error=exc))
            return
    if present:
        return
    sentences = extrapolation_summary(results, protocols[0])
    if sentences:
        st.markdown(_("**What these models show ({protocol}).**").format(
            protocol=_(PROTOCOL_LABELS[protocols[0]])) + " " + " ".join(sentences))
    use = useful_context(results, "alibi")
    parts = [_("A flat line past {train_seq_len} means a model does not break on longer inputs; it "
               "does not by itself mean it uses the extra context. Compare the sliding-window "
               "panel, where each scored token sees between L − {fewest} and L tokens.").format(
                   train_seq_len=train_seq_len, fewest=results.get("stride", 64) - 1)]
    if use:
        parts.append(context_use_sentence(use))
    parts.append(_("**NoPE**'s curve shows what a model with no position information makes of "
                   "it."))
    parts.append(_("In the paper, a 1.3-billion-parameter model trained with ALiBi on "
                   "1,024-token inputs reached, on 2,048-token inputs, the perplexity of a "
                   "sinusoidal model trained on 2,048 tokens, while training 11% faster and "
                   "using 11% less memory ({citation}).").format(citation=paper.CITATION))
    st.markdown(" ".join(parts))
    st.page_link("app_pages/extrapolation.py", label=_("Re-run it live in the Extrapolation lab"),
                 icon="📈")


def step_reach(step: int, present: bool) -> None:
    reach = assets.load_reach_results()
    results = assets.load_extrapolation_results(data.page_kind(i18n.get_language()))
    train_seq_len = assets.shipped_train_seq_len(results=results)
    text(
        _("Give a model only the last c tokens before each token it predicts (a token is one "
          "byte for the shipped models), and let c grow: "
          "how much does more context lower its loss, and what can the data tell apart? Left, "
          "for the shipped models on the same held-out "
          "tokens. Right, retrieval: a span of text is planted and repeated d tokens later; a "
          "model that can look back that far predicts the repeat better than the same span "
          "with nothing before it to copy. For ALiBi a key d tokens back is pushed down by m·d "
          "logits, so to win its content score must beat the other keys' by those m·d logits: "
          "retrieval fades with distance."),
        _("Left: loss vs context given. Right: the gain on a repeated span vs how far back "
          "its first copy is."), present)
    if not reach:
        st.info(_("No reach results yet: assets/results/reach.json is written by "
                  "`python -m experiments.reach`."))
        return
    path = assets.shipped_models().get(assets.DEFAULT_MODEL)
    heads = assets.training_info(path).get("heads") if path else None
    answer = (reach_answer(reach, train_seq_len, alibi_slopes(heads)) if heads else None) \
        or _("See the figure.")
    if ask(step, _("Past {train_seq_len} tokens, what does more context do to the ALiBi "
                   "model's loss?").format(train_seq_len=number(train_seq_len)),
           answer, present, right=past_answer(reach, train_seq_len)):
        try:
            show(step_figure("reach", present, reach, train_seq_len), "reach")
        except AlibiVizError as exc:
            st.error(str(exc))
            return
    if not present:
        st.page_link("app_pages/extrapolation.py", label=_("Explore reach in the Extrapolation lab"),
                     icon="🔭")
        st.caption(_("Contexts {contexts} tokens; {scored}.").format(
            contexts=", ".join(str(c) for c in REACH_CONTEXTS), scored=reach_setting(reach)))


def step_copying(step: int, present: bool) -> None:
    """Watch a copying head form: the copying scores of the ALiBi model's heads during its
    training (the shipped snapshots), after the retrieval step that needs such a head."""
    curves = shipped_curves()
    if curves is None:
        st.info(_("No training snapshots measured yet: assets/results/snapshots.json is written "
                  "by `python -m experiments.snapshots`."))
        return
    layer, head = curves.best_copying_head()
    scores = curves.scores["induction"][:, layer, head]
    text(_("Watch a copying head form. Retrieval needs a head that finds the earlier copy and "
           "attends to the token after it. Saved copies of the ALiBi model during its training "
           "show when its heads learned it: the copying score of every head (left) and the "
           "held-out loss (right) at each saved step."),
         _("A copying head forming during training."), present)
    half = half_formed(scores)  # the first saved step past half the final score
    saved = [int(k) for k in curves.steps]  # the class votes on one of the saved steps
    if ask(step, _("At which saved step does the best copying head (layer {layer}, head {head}) "
                   "first pass half its final score?").format(layer=layer + 1, head=head + 1),
           _("Step {step}: its score is {score} there, {final} at the end.").format(
               step=number(int(curves.steps[half])), score=number(float(scores[half]), 2),
               final=number(float(scores[-1]), 2)), present,
           right=str(saved[half]), options=[(str(k), number(k)) for k in saved]):
        show(step_figure("training", present), "training")
    if not present:
        st.page_link("app_pages/model_heads.py", label=_("Move through the training steps on "
                                                         "Model heads"), icon="⏳")


# ----------------------------------------------------------------------------- the myths

def slopes_demo():
    ui.table([{N_("head"): h + 1, N_("slope m"): f"1/{round(1 / m)}"}
              for h, m in enumerate(alibi_slopes(8))])


def context_demo(folded: bool = False):
    """The paper's numbers, then the shipped model's: on a projector (`folded`) that last
    sentence waits in a closed box, as it ran past a 1024x768 screen's bottom."""
    ui.table(paper_context_rows())
    results = assets.load_extrapolation_results(data.page_kind(i18n.get_language()))
    train_seq_len = assets.results_train_seq_len(results) if results else None
    longest = max(results.get("lengths", [0])) if results else 0
    use = useful_context(results, "alibi") if train_seq_len else None
    if not use:
        st.markdown(_("No shipped results: run `python -m experiments.evaluate`."))
        return
    shipped = _("Shipped ALiBi model, trained at {train_seq_len} tokens and run at up to "
                "{longest} ({factor}x). {use}").format(
        train_seq_len=number(train_seq_len), longest=number(longest),
        factor=longest // train_seq_len, use=context_use_sentence(use))
    with st.expander(_("The rest of the answer")) if folded else contextlib.nullcontext():
        st.markdown(shipped)


def parameters_demo():
    rows = []
    for name in ("alibi", "rope"):
        path = assets.shipped_models().get(name)
        if path is None:
            continue
        model, _tokenizer, info = ui.cached_model(path)
        rows.append({N_("model"): assets.model_title(name),
                     N_("position parameters"): position_parameter_count(model),
                     N_("all parameters"): info.num_params})
    ui.table(rows)
    if len(rows) == 2:  # a sentence for the surprise: ALiBi's model has more parameters
        extra = rows[0][N_("all parameters")] - rows[1][N_("all parameters")]
        model = ui.cached_model(assets.shipped_models()["alibi"])[0]
        if sentence := parameters_sentence(extra, embedding_norm_parameters(model)):
            st.markdown(sentence)


def linear_demo():
    L = 1024
    row = implied_attention_map(alibi_slopes(8)[[-1]], L)[0, -1]  # last query, head 8
    st.markdown(_("Head 8 at {length} tokens, bias alone: the last query still weighs "
                  "every one of its {length} keys (smallest weight {smallest}, not 0), and a "
                  "causal layer computes {scores} scores per head: quadratic, as with any "
                  "softmax attention.").format(length=number(L),
                                               smallest=significant(row.min(), 2),
                                               scores=number(L * (L + 1) // 2)))


def falcon_demo():
    from transformers import FalconConfig

    st.markdown(_("transformers' `FalconConfig().alibi` is `{value}`: Falcon-7B/40B/180B "
                  "use rotary embeddings; only the Falcon-RW models set "
                  "alibi=True.").format(value=FalconConfig().alibi))


def paper_demo():
    st.markdown(_("The paper's abstract ({citation}): a 1.3B model trained on {train} tokens "
                  "\"extrapolates to input sequences of length 2048, achieving the same "
                  "perplexity as a sinusoidal position embedding model trained on inputs of "
                  "length 2048\".").format(citation=paper.CITATION,
                                             train=number(paper.TABLE3_TRAIN_LEN)))


# Each myth's computed demonstration, in the order the last step shows the myths.
DEMOS = {"slopes": slopes_demo, "context": context_demo, "parameters": parameters_demo,
         "linear": linear_demo, "falcon": falcon_demo, "paper": paper_demo}
MYTHS = len(DEMOS)  # the last step's myths, shown one at a time on a projector
PROJECTOR_DEMOS = {**DEMOS, "context": functools.partial(context_demo, folded=True)}


def myths() -> list[tuple[str, str, str]]:
    """The myths as (key, claim, fact), in this run's language; `DEMOS[key]` demonstrates
    the fact."""
    return [
        ("slopes", _("With 8 heads the slopes are 1/8, 1/16, ..., 1/1024."),
         _("They are 1/2, 1/4, ..., 1/256: m_h = 2^(−8h/n).")),
        ("context", _("Trained at {train} tokens and run at 10K+, an ALiBi model makes use of all "
                       "10K tokens.").format(train=number(paper.TABLE3_TRAIN_LEN)),
         _("It runs at 10K+ without getting worse, but that does not show it uses the extra "
           "context. The paper's L = {train} model does score better at {long} tokens than at "
           "{train} in non-overlapping windows, but a longer window has fewer of its tokens near "
           "its start, with little context before them. The authors hypothesize that the gain "
           "comes from this early token curse shrinking, not from using the longer context "
           "(the paper's appendix B). "
           "With a sliding window, where every token sees a full window of the evaluation "
           "length, no window longer than {train} scores better (Tables 3 and 15 of the "
           "paper), which fits their hypothesis.").format(train=number(paper.TABLE3_TRAIN_LEN),
                             long=number(max(paper.TABLE3_ALIBI)))),
        ("parameters", _("ALiBi is cheaper than RoPE in parameters."),
         _("Both add no parameters at all.")),
        ("linear", _("With ALiBi, attention becomes linear."),
         _("It is ordinary softmax attention over every key, quadratic in length; "
           "only the scores get a linear bias.")),
        # "Falcon uses ALiBi" would be true of Falcon-RW; a class votes the claim false, so it
        # must be false: the claim is about every Falcon model.
        ("falcon", _("All Falcon models use ALiBi."),
         _("Only the Falcon-RW models (Falcon-RW-1B and Falcon-RW-7B) do; Falcon-7B/40B/180B "
           "use rotary embeddings.")),
        ("paper", _("A 1.3B model trained at {train} matches one trained at {claimed}.").format(
            train=number(1024), claimed=number(3072)),
         _("The paper says {length}.").format(length=number(2048))),
    ]


def step_misconceptions(step: int, present: bool) -> None:
    """The myths, predict first. On a projector one at a time: the claim, then (next click or
    clicker press) the fact with its computed demonstration. Elsewhere every claim, each with
    its fact and a button for the demonstration in a closed box; in the handout every claim
    with its fact and demonstration."""
    text(_("Six claims that circulate in public explainers, each checked by a computation."),
         _("Six myths, each checked."), present)
    shown = myths()
    if present:
        k = min(st.session_state.get("ls_myth", 0), len(shown) - 1)
        key, claim, truth = shown[k]
        st.markdown(_("**Myth {k} of {n}:** {claim}").format(k=k + 1, n=len(shown), claim=claim))
        class_view.myth(k)  # in a class: the class's vote, shown with the fact
        if not st.session_state.get("ls_myth_shown"):
            st.markdown(_("True or false? Vote, then reveal."))
            st.button(_("Reveal the answer"), key="ls_myth_reveal", type="primary",
                      on_click=lambda: st.session_state.__setitem__("ls_myth_shown", True))
            return
        st.markdown(_("**Fact:** {truth}").format(truth=truth))
        PROJECTOR_DEMOS[key]()
        return
    for key, claim, truth in shown:
        with st.container(border=True):
            st.markdown(_("**Myth:** {claim}").format(claim=claim))
            if in_handout():  # on paper: the fact and its demonstration
                st.markdown(_("**Fact:** {truth}").format(truth=truth))
                DEMOS[key]()
                continue
            with st.expander(_("Answer"), icon=":material/visibility:"):
                st.markdown(_("**Fact:** {truth}").format(truth=truth))
                if st.button(_("Show me"), key=f"ls_myth_{key}"):
                    DEMOS[key]()
