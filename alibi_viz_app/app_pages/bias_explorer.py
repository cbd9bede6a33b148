"""Bias explorer: slopes, per-head bias matrices and the decay they cause, at any size.

The bias matrices are drawn on a canvas in the browser (`canvas_maps`), with no plotly; the
slope and decay charts are plotly charts when *Interactive charts* is on, and still pictures
when it is off (a phone starts with it off: plotly.js costs it seconds); the matrices as a
zoomable chart wait for it.
"""

import numpy as np
import streamlit as st

from alibi_viz import SCHEDULES, alibi_slopes, i18n, paper
from alibi_viz.alibi import (
    MODE_NAMES,
    SCHEDULE_NAMES,
    attention_span,
    default_query,
    describe_schedule,
    half_life,
    head_summary,
    is_power_of_two,
    last_query_mass_beyond,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.bias import (
    CLIP_LOGITS,
    COLOR_SCALES,
    bias_display_size,
    bias_display_values,
    bias_grid_figure,
    bias_grid_maps,
    dark_panels_note,
    decay_figure,
    slope_schedule_figure,
)
from alibi_viz.i18n import N_, _, ngettext, number, percent, significant
from alibi_viz.precision import content_rounding, row_constant_error_table, spacing
from alibi_viz_app import canvas_maps, ui
from alibi_viz_app.export import MAX_CSV_CELLS, matrices_to_csv, to_npy_bytes
from alibi_viz_app.query_params import UrlParam, format_head_selection, parse_head_selection

PREFIX = "be"
PARAMS = [
    UrlParam("heads", "int", 8, 1, 128),
    UrlParam("len", "int", 64, 1, 65_536),
    UrlParam("mode", "choice", "causal", choices=("causal", "symmetric")),
    UrlParam("schedule", "choice", "official", choices=SCHEDULES),
    UrlParam("max_bias", "float", 8.0, 0.5, 16.0),
    UrlParam("show", "head_selection", "all"),
    UrlParam("scale", "choice", "clipped", choices=COLOR_SCALES),
    UrlParam("decode", "choice", "0", choices=("0", "1")),
]
DECODE_QUERIES = 16  # a decoding view draws this many newest queries against every cached key
TABLE_ROWS_SHOWN = 16  # the head table is shown open up to this many heads, else in an expander
SCALE_TITLES = {"clipped": N_("one for all, clipped"), "per_head": N_("each head its own"),
                "shared": N_("one for all heads")}


@st.cache_data(max_entries=64, show_spinner=False)
def cached_slopes(num_heads: int, schedule: str, max_bias: float) -> np.ndarray:
    return alibi_slopes(num_heads, schedule, max_bias)


def query_rows(seq_len: int, decode: bool) -> int:
    """Query rows drawn: all of them, or (decoding) the newest few against every cached key."""
    return min(DECODE_QUERIES, seq_len) if decode else seq_len


SLOPES_COLUMN_PX = 360  # the slope chart's column (3 of 5) on a 1024 px screen with the sidebar open


@ui.cached_figure(max_entries=32, width=SLOPES_COLUMN_PX)
def slopes_chart(num_heads, schedule, max_bias):
    return slope_schedule_figure(num_heads, max_bias, selected=schedule)


@ui.cached_figure(max_entries=32)
def grid_chart(num_heads, schedule, max_bias, seq_len, mode, head_ids: tuple, scale, decode):
    slopes = cached_slopes(num_heads, schedule, max_bias)
    return bias_grid_figure(slopes, query_rows(seq_len, decode), mode, list(head_ids),
                            key_len=seq_len, scale=scale)


# Panels a side in the canvas grid: strips of a decoding step two to a row, many heads up to 8
# to a row (64 heads in four columns made a phone scroll through 16 screens of them).
MANY_HEADS = 16


def grid_layout(num_shown: int, decode: bool) -> dict:
    """The canvas grid's `panel_px` and `columns_max` (`canvas_maps.data`)."""
    if decode:
        return {"panel_px": 300, "columns_max": 2}
    if num_shown > MANY_HEADS:
        return {"panel_px": 80, "columns_max": 8}
    return {"panel_px": canvas_maps.GRID_PANEL_PX, "columns_max": canvas_maps.GRID_COLUMNS_MAX}


@st.cache_data(max_entries=32, show_spinner=False)
def grid_maps(num_heads, schedule, max_bias, seq_len, mode, head_ids: tuple, scale, decode,
              filename: str, lang: str) -> dict:
    """The bias matrices for the canvas (`canvas_maps.data`): 8-bit codes at display
    resolution, in the page's language (`lang` keys the cache)."""
    slopes = cached_slopes(num_heads, schedule, max_bias)
    maps = bias_grid_maps(slopes, query_rows(seq_len, decode), mode, list(head_ids),
                          key_len=seq_len, scale=scale)
    return canvas_maps.data(maps, filename=filename, **grid_layout(len(head_ids), decode))


@ui.cached_figure(max_entries=32)
def decay_chart(num_heads, schedule, max_bias, seq_len, mode, head_ids: tuple):
    return decay_figure(cached_slopes(num_heads, schedule, max_bias), seq_len, mode,
                        list(head_ids))


@st.cache_data(max_entries=8, show_spinner=False)
def cached_exports(num_heads, schedule, max_bias, seq_len, mode, head_ids: tuple, decode):
    """(.npy bytes, CSV text or None) of the matrices as drawn: made only when a download
    button is clicked (deferred data), so a rerun never serialises them."""
    slopes = cached_slopes(num_heads, schedule, max_bias)
    values, rows, cols, _heads = bias_display_values(slopes, query_rows(seq_len, decode), mode,
                                                     list(head_ids), key_len=seq_len)
    head_numbers = [h + 1 for h in head_ids]
    return to_npy_bytes(values.astype(np.float32)), matrices_to_csv(values, rows, cols, head_numbers)


def controls_ui():
    """The controls, seeded from the URL on the first run. Returns their values."""
    if ui.seed_from_url(PREFIX, PARAMS):  # the URL holds "0"/"1"; the toggle wants a bool
        st.session_state["be_decode"] = st.session_state["be_decode"] == "1"
    with ui.settings():
        st.header(_("Bias explorer"))
        num_heads = st.number_input(_("Heads"), 1, 128, step=1, key="be_heads",
                                    help=_("Number of attention heads (1-128)."))
        seq_len = st.number_input(_("Sequence length"), 1, 65_536, step=1, key="be_len",
                                  help=_("Tokens (1-{max}). Matrices are drawn at screen "
                                         "resolution, so any length is fast.").format(
                                      max=number(65_536)))
        mode = st.radio(_("Mode"), ("causal", "symmetric"), key="be_mode", horizontal=True,
                        format_func=ui.labels(MODE_NAMES),
                        help=_("causal: decoder (the paper's setting), keys after the query are "
                               "masked. symmetric: -m|i-j| both ways, for bidirectional models "
                               "(not in the paper; the authors' suggestion in their "
                               "repository)."))
        schedule = st.selectbox(_("Slope schedule"), SCHEDULES, key="be_schedule",
                                format_func=ui.labels(SCHEDULE_NAMES),
                                help=_("official: fairseq/BLOOM. geometric: 2^(-8h/n) for every "
                                       "n. mpt: MPT/llm-foundry."))
        max_bias = st.number_input(_("Max bias"), 0.5, 16.0, step=0.5, key="be_max_bias",
                                   help=_("The paper's 8. For a power-of-two head count n the "
                                          "slopes run from 2^(-8/n) down to 2^-8; other counts "
                                          "under the official rule end elsewhere (12 heads: "
                                          "2^-3.5)."))
        show = st.text_input(_("Heads to show"), key="be_show",
                             help=_('"all", or a list like 1-4,8 (1-based).'))
        scale = st.radio(_("Colour scale"), COLOR_SCALES, key="be_scale", horizontal=True,
                         format_func=ui.labels(SCALE_TITLES),
                         help=_("one for all, clipped: every head on one scale down to −{clip} "
                                "logits, where a key keeps almost no weight, so each panel "
                                "turns dark where its head stops reaching. each head its own: "
                                "every panel spans its own largest penalty, the same picture "
                                "for every slope. one for all heads: the true sizes in logits, "
                                "down to the steepest head's largest penalty.").format(
                                    clip=number(CLIP_LOGITS)))
        decode = st.toggle(_("Decoding step (KV cache)"), key="be_decode",
                           help=_("Draw only the newest {n} queries against every cached key: "
                                  "the bias rows a cached decoding step needs.").format(
                               n=DECODE_QUERIES))
    return (int(num_heads), int(seq_len), mode, schedule, float(max_bias), show, scale,
            bool(decode))


num_heads, seq_len, mode, schedule, max_bias, show, scale, decode = controls_ui()
head_ids, heads_warning = parse_head_selection(show, num_heads)
ui.write_url({"heads": num_heads, "len": seq_len, "mode": mode, "schedule": schedule,
              "max_bias": max_bias, "show": format_head_selection(head_ids, num_heads),
              "scale": scale, "decode": 1 if decode else None})

st.title(_("ALiBi bias explorer"))
# Where to start: a newcomer lands here, so the page says what ALiBi is and what it draws, and
# points to the Lesson (and a teacher to its presentation mode) before the first chart.
st.markdown(_("**ALiBi** (Attention with Linear Biases, Press, Smith & Lewis, 2021) gives a "
              "transformer no position embeddings: each attention head subtracts a penalty "
              "proportional to the query-key distance, its slope m times the distance."))
st.markdown(ui.where_settings(
    _("This page draws that penalty for any number of heads and any length: the slope of every "
      "head (1), each head's bias matrix (2) and how fast attention decays with distance (3). "
      "Change the heads and the length in the sidebar."),
    _("This page draws that penalty for any number of heads and any length: the slope of every "
      "head (1), each head's bias matrix (2) and how fast attention decays with distance (3). "
      "Change the heads and the length in Settings, at the top of the page.")))
# One link a line: side by side in two columns, their labels were cut at 1024 px in Spanish.
st.page_link("app_pages/lesson.py", label=_("New to ALiBi? Start with the Lesson"),
             icon=":material/school:")
st.page_link("app_pages/lesson.py", label=_("Teaching? The Lesson for a projector"),
             icon=":material/co_present:", query_params={"present": "1"})
ui.show_url_warnings(PREFIX)
if heads_warning:
    st.warning(heads_warning, icon="⚠️")
interactive = ui.charts_toggle("be_interactive", help=_(
    "Zoomable charts: the slope schedules, the bias matrices with exact values on hover, the "
    "decay curves. They take seconds to load on a phone, which starts with still pictures."))

tag = f"h{num_heads}_L{seq_len}_{mode}_{schedule}"
try:
    slopes = cached_slopes(num_heads, schedule, max_bias)
    maps = grid_maps(num_heads, schedule, max_bias, seq_len, mode, tuple(head_ids), scale,
                     decode, f"alibi_bias_{tag}", i18n.get_language())
    slope_fig = slopes_chart(num_heads, schedule, max_bias)
    decay_fig = decay_chart(num_heads, schedule, max_bias, seq_len, mode, tuple(head_ids))
    if interactive:
        grid_fig = grid_chart(num_heads, schedule, max_bias, seq_len, mode, tuple(head_ids),
                              scale, decode)
except AlibiVizError as exc:  # the controls keep values valid; this guards the library's checks
    st.error(str(exc))
    ui.stop()

query = default_query(seq_len, mode)
st.subheader(_("1. Slopes"))
note = describe_schedule(num_heads, schedule, max_bias)
left, right = st.columns([3, 2])
with left:
    ui.show_figure(slope_fig, f"alibi_slopes_{tag}", key="be_fig_slopes")
with right:
    if is_power_of_two(num_heads) or schedule == "geometric":
        st.info(note)
    else:
        st.warning(note, icon="↕️")
# The table under both, at the page's width (in the right column its six columns were cut at
# 1366 px). A plain table (st.dataframe's grid would add 0.2 MB of JavaScript to a first visit,
# bench/README.md), whole: in a box of fixed height it hid heads 7-8 of 8 and a phone showed
# no scrollbar, and a box that scrolls needs the keyboard's focus (axe-core's WCAG rule). Many
# heads fold into an expander that says how many rows it holds.
if num_heads <= TABLE_ROWS_SHOWN:
    ui.table(head_summary(slopes, seq_len, mode))
else:
    with st.expander(ngettext("Every head's slope, half-life and span: the table of {n} head",
                              "Every head's slope, half-life and span: the table of {n} heads",
                              num_heads).format(n=number(num_heads))):
        ui.table(head_summary(slopes, seq_len, mode))
if mode == "causal":
    st.caption(_("Span and mean distance of the bias-only attention of query i = {query}: "
                 "the last one, with every key behind it.").format(query=number(query)))
else:
    st.caption(_("Span and mean distance of the bias-only attention of query i = {query}: "
                 "the middle one, {query} keys behind and {ahead} ahead (no query of a "
                 "bidirectional sequence sees every key on both sides).").format(
        query=number(query), ahead=number(seq_len - 1 - query)))
with st.expander(_("How were the slopes chosen?")):
    st.markdown(_(
        "The paper tried about ten sets of slopes and found that slopes in (0, 1), dense near "
        "0, work well; 2^(-8h/n) is the set it kept. It also tried training the slopes as "
        "parameters, on its {parameters}M-parameter WikiText-103 model, and they did not yield "
        "strong extrapolation (section 3), so its schedule is fixed, not learned. A variant of "
        "the shipped model trains them, and in this project's small run it kept extrapolating "
        "(Extrapolation lab, section 6). Because "
        "the bias is just one number per head times a distance, fused kernels need nothing "
        "else: FlashAttention takes the per-head slopes (`alibi_slopes`) and computes the "
        "bias on the fly, which is why the closed form (and the row-constant form below) "
        "matters in practice.").format(parameters=paper.TABLE_MODEL_PARAMETERS_M))

st.subheader(_("2. Bias matrices, one per head"))
canvas_maps.show(maps, key="be_maps_grid")
st.caption(_("Tap or click a head's panel, or its number, to draw it alone; *All heads* "
             "draws them all again."))
if interactive:
    with st.expander(_("The same maps as an interactive chart (zoom)")):
        ui.show_figure(grid_fig, f"alibi_bias_{tag}", key="be_fig_grid")
dark = (dark_panels_note(slopes, seq_len, head_ids, _(SCALE_TITLES["per_head"]))
        if scale == "clipped" else None)
if dark:  # a long sequence: the steep heads' panels read as one flat colour, and why
    st.caption(dark)
export = (num_heads, schedule, max_bias, seq_len, mode, tuple(head_ids), decode)
c1, c2, _spacer = st.columns([1.5, 1.5, 2])
c1.download_button(_("Download .npy"), lambda: cached_exports(*export)[0], f"alibi_bias_{tag}.npy",
                   "application/octet-stream", key="be_dl_npy",
                   help=_("The matrices as drawn: (heads, rows, cols) float32."))
if bias_display_size(query_rows(seq_len, decode), len(head_ids), seq_len) <= MAX_CSV_CELLS:
    c2.download_button(_("Download CSV"), lambda: cached_exports(*export)[1],
                       f"alibi_bias_{tag}.csv", "text/csv", key="be_dl_csv")
else:
    c2.caption(_("CSV is offered up to 200,000 values; use .npy."))
st.markdown(ui.where_settings(_(
    "**Decoding with a KV cache.** Generating token t, a model computes one new query against "
    "the t + 1 cached keys. Its bias row is −m·(t − j), j = 0..t: the bottom row of the full "
    "matrix, the bottom-right-aligned slice when there are more keys than queries (switch on "
    "*Decoding step* in the sidebar to draw it). The bias depends only on the distance "
    "t − j, so nothing computed for earlier tokens changes as the context grows: no position "
    "is re-encoded, each step only extends the row by one key (in the row-constant form "
    "below, the new key simply gets m·t)."), _(
    "**Decoding with a KV cache.** Generating token t, a model computes one new query against "
    "the t + 1 cached keys. Its bias row is −m·(t − j), j = 0..t: the bottom row of the full "
    "matrix, the bottom-right-aligned slice when there are more keys than queries (switch on "
    "*Decoding step* in Settings, at the top of the page, to draw it). The bias depends only "
    "on the distance t − j, so nothing computed for earlier tokens changes as the context "
    "grows: no position is re-encoded, each step only extends the row by one key (in the "
    "row-constant form below, the new key simply gets m·t).")))

GENTLEST = 2.0 ** -8  # the paper's gentlest slope (8 heads, head 8)
st.subheader(_("3. Decay: what the bias alone does to attention"))
ui.show_figure(decay_fig, f"alibi_decay_{tag}", key="be_fig_decay")
st.markdown(_(
    "If the content scores q·k were equal for every key, attention would follow the bias "
    "alone: a key d tokens away gets weight proportional to e^(−m·d), a geometric decay. A "
    "head's **half-life** ln 2 / m is the distance at which that weight halves; its **90% "
    "span** is the distance holding 90% of one query's attention (the query named in the "
    "title). Steep heads look at the last few tokens; gentle heads spread further, but not "
    "without end: at m = {gentle} the bias alone holds 90% of a query's attention within "
    "{span} tokens (half-life {half_life}), however long the context.").format(
    gentle=significant(GENTLEST, 3), span=number(float(attention_span([GENTLEST])[0])),
    half_life=number(float(half_life([GENTLEST])[0]), 0)))
if mode == "symmetric":
    st.markdown(_(
        "**Symmetric ALiBi has no direction.** With −m·|i−j| alone a key d tokens to the left "
        "gets exactly the bias of a key d tokens to the right, so a bidirectional model "
        "cannot tell them apart from the bias: it needs another signal, or a slope per "
        "direction (discussed in the official repository's issue #5). T5's relative bias "
        "tells the two sides apart because it learns separate buckets for each (see "
        "*Compare*)."))
if mode == "causal" and seq_len >= 16:
    gentle = int(np.argmin(slopes))
    near = seq_len // 8
    beyond = float(last_query_mass_beyond(slopes[[gentle]], seq_len, near)[0])
    st.markdown(_(
        "**Why quality degrades gradually beyond the training length.** Distances longer "
        "than any seen in training are new to an ALiBi model too. What helps is that far keys "
        "are pushed down, while the gentle heads still spread weight far: with the bias "
        "alone, head {head} (m = {slope}) gives the last of {seq_len} queries **{share}** of "
        "its attention on keys more than {near} tokens back (as if the model had been trained "
        "on {near}-token windows and run at 8x). That weight is spread thin over keys the "
        "model never saw so far away, which dilutes the head's output gradually instead of "
        "breaking it.").format(head=gentle + 1, slope=significant(slopes[gentle], 3),
                               seq_len=number(seq_len), share=percent(beyond),
                               near=number(near)))

st.subheader(_("4. The formulas"))
st.latex(r"\mathrm{softmax}\Big(\tfrac{q_i K^\top}{\sqrt{d}} + B_i\Big),\qquad "
         r"B_{ij} = -m_h\,(i-j)\ \ (j \le i)")
st.latex(r"n = 2^k:\quad m_h = 2^{-8h/n},\ h = 1..n")
# Two lines: on one, the rule was wider than the page at 1024 px (a formula that scrolls
# sideways, out of the keyboard's reach).
st.latex(r"\text{" + _("otherwise (official rule)") + r", } c = 2^{\lfloor \log_2 n \rfloor}:")
st.latex(r"m_1..m_c = 2^{-8h/c},\quad m_{c+1}..m_n = 2^{-8(2k-1)/(2c)},\ k = 1..n-c")
st.latex(r"\text{" + _("symmetric:") + r" } B_{ij} = -m_h\,|i-j|")
bf16 = row_constant_error_table((8, 112), 2048, "bfloat16")
CONTENT_KEYS, CONTENT_SCORE = range(2040, 2048), 3.0  # head 1 (m = 1/2) at the end of 2,048 keys
content = content_rounding(8, 0, CONTENT_KEYS, CONTENT_SCORE, "bfloat16")
st.markdown("\n".join([
    "- " + _("**Row-constant form.** BLOOM and the authors' code add **+m·j** instead of "
             "−m·(i−j). Within row i the two differ by m·i, the same number for every key, and "
             "softmax ignores a constant added to a whole row, so the bias becomes one vector "
             "per head instead of an L×L matrix. Two conditions: it holds **only under the "
             "causal mask** (above the diagonal +m·j is not −m·|i−j|, so a symmetric model "
             "cannot use it), and **only in exact arithmetic**. BLOOM casts m·j to the model's "
             "dtype; in bfloat16 the gap between neighbouring numbers is {gap_low} on "
             "[512, 1,024) and {gap_high} on [1,024, 2,048), so at 2,048 "
             "tokens the bias is off by up to {error} logits with {heads} heads and "
             "{error_many} with {heads_many}, and the steepest head's last 16 keys collapse "
             "onto {distinct} distinct bias values (table below, computed with transformers' "
             "own builder). MPT adds m·(j−(L−1)), another row constant.").format(
        error=significant(bf16[0]["largest error (logits)"], 6), heads=bf16[0]["heads"],
        error_many=number(bf16[1]["largest error (logits)"], 0), heads_many=bf16[1]["heads"],
        distinct=bf16[0]["distinct values, last 16 keys of head 1"],
        gap_low=number(float(spacing([512], "bfloat16")[0]), 0),
        gap_high=number(float(spacing([1024], "bfloat16")[0]), 0)),
    "- " + _("**The content score is rounded too.** BLOOM adds the bias and q·k/√d in the "
             "model's dtype, in one call (`alibi.baddbmm(q, kᵀ, alpha=1/√d)` in "
             "`BloomAttention.forward`), so the whole score m·j + q·k/√d comes back on the grid "
             "of m·j. In bfloat16, with m = {m} at keys {first} to {last}, a content score of "
             "{content} logits reaches the softmax as {seen} (second table below, computed with "
             "torch's own baddbmm): the error is in the content, not only in the "
             "bias.").format(
        m=significant(float(alibi_slopes(8)[0])), first=number(CONTENT_KEYS[0]),
        last=number(CONTENT_KEYS[-1]), content=number(CONTENT_SCORE, 1),
        seen=_(" or ").join(number(float(v), 1) for v in sorted(set(content["seen"].tolist()),
                                                                reverse=True))),
    "- " + _("**Not scaled by 1/√d.** The content score q·k is divided by √d; the bias is added "
             "after, unscaled, so a slope means the same number of logits per token whatever "
             "the head size. Falcon's ALiBi option (alibi=True, used by Falcon-RW only) departs "
             "from this: in transformers' eager path, which alibi-viz uses, the bias sits "
             "inside (QKᵀ + bias)/√d and is added again through the attention mask, so its "
             "heads decay at **2m/√d**; the sdpa path adds it once, **m/√d**, as the original "
             "Falcon-RW code does (`softmax((QKᵀ + alibi)/√d + mask)` in tiiuae's "
             "modelling_RW.py; see *Inspect a model*)."),
    "- " + _("**Why it extrapolates.** Not because long distances are familiar: past the "
             "training length they are as new to ALiBi as to any model. Far keys are pushed "
             "down by m·d logits, so the steep heads keep their attention on distances seen in "
             "training, and the gentle heads put part of theirs beyond, on keys never seen that "
             "far away (the Extrapolation lab measures each head's share). The paper's own "
             "hypotheses (section 3): position enters every layer, through the queries and "
             "keys but not the values, and the bias is an inductive bias toward recency. The "
             "model keeps working; it does not thereby use the extra context (see the "
             "*Extrapolation lab*)."),
]))
ui.table(bf16)
ui.table([{N_("key j"): int(j), N_("bias m·j (bfloat16)"): float(b),
           N_("content score"): CONTENT_SCORE, N_("what the softmax sees"): float(v)}
          for j, b, v in zip(content["keys"], content["bias"], content["seen"], strict=True)])
