"""Bias explorer: slopes, per-head bias matrices and the decay they cause, at any size."""

import numpy as np
import streamlit as st

from alibi_viz import SCHEDULES, alibi_slopes
from alibi_viz.alibi import describe_schedule, is_power_of_two
from alibi_viz.errors import AlibiVizError
from alibi_viz.export import matrices_to_csv, to_npy_bytes
from alibi_viz.params import Param, format_head_selection, parse_head_selection
from alibi_viz.plots import (
    bias_display_values,
    bias_grid_figure,
    decay_figure,
    head_summary,
    slope_schedule_figure,
)

import ui

PREFIX = "be"
PARAMS = [
    Param("heads", "int", 8, 1, 128),
    Param("len", "int", 64, 1, 65_536),
    Param("mode", "choice", "causal", choices=("causal", "symmetric")),
    Param("schedule", "choice", "official", choices=SCHEDULES),
    Param("max_bias", "float", 8.0, 0.5, 16.0),
    Param("show", "heads", "all"),
]


@st.cache_data(max_entries=64, show_spinner=False)
def cached_slopes(num_heads: int, schedule: str, max_bias: float) -> np.ndarray:
    return alibi_slopes(num_heads, schedule, max_bias)


@st.cache_data(max_entries=32, show_spinner=False)
def cached_figures(num_heads, schedule, max_bias, seq_len, mode, heads: tuple):
    slopes = cached_slopes(num_heads, schedule, max_bias)
    return (slope_schedule_figure(num_heads, max_bias, selected=schedule),
            bias_grid_figure(slopes, seq_len, mode, list(heads)),
            decay_figure(slopes, seq_len, mode, list(heads)))


@st.cache_data(max_entries=8, show_spinner=False)
def cached_exports(num_heads, schedule, max_bias, seq_len, mode, heads: tuple):
    slopes = cached_slopes(num_heads, schedule, max_bias)
    values, rows, cols, _ = bias_display_values(slopes, seq_len, mode, list(heads))
    head_ids = [h + 1 for h in heads]
    return to_npy_bytes(values.astype(np.float32)), matrices_to_csv(values, rows, cols, head_ids)


def controls_ui():
    """The controls, seeded from the URL on the first run. Returns their values."""
    ui.seed_from_url(PREFIX, PARAMS)
    with st.sidebar:
        st.header("Bias explorer")
        num_heads = st.number_input("Heads", 1, 128, step=1, key="be_heads",
                                    help="Number of attention heads (1-128).")
        seq_len = st.number_input("Sequence length", 1, 65_536, step=1, key="be_len",
                                  help="Tokens (1-65,536). Matrices are drawn at screen "
                                       "resolution, so any length is fast.")
        mode = st.radio("Mode", ("causal", "symmetric"), key="be_mode", horizontal=True,
                        help="causal: decoder, keys after the query are masked. "
                             "symmetric: encoder, -m|i-j| both ways.")
        schedule = st.selectbox("Slope schedule", SCHEDULES, key="be_schedule",
                                help="official: fairseq/BLOOM. geometric: 2^(-8h/n) for every n. "
                                     "mpt: MPT/llm-foundry.")
        max_bias = st.number_input("Max bias", 0.5, 16.0, step=0.5, key="be_max_bias",
                                   help="The paper's 8: the last head's slope is 2^-8.")
        show = st.text_input("Heads to show", key="be_show",
                             help='"all", or a list like 1-4,8 (1-based).')
    return int(num_heads), int(seq_len), mode, schedule, float(max_bias), show


num_heads, seq_len, mode, schedule, max_bias, show = controls_ui()
heads, heads_warning = parse_head_selection(show, num_heads)
ui.write_url({"heads": num_heads, "len": seq_len, "mode": mode, "schedule": schedule,
              "max_bias": max_bias, "show": format_head_selection(heads, num_heads)})

st.title("ALiBi bias explorer")
st.caption("Attention with Linear Biases (Press, Smith & Lewis, 2021): no position embeddings; "
           "each head subtracts a penalty proportional to the query-key distance.")
ui.show_url_warnings(PREFIX)
if heads_warning:
    st.warning(heads_warning, icon="⚠️")

try:
    slopes = cached_slopes(num_heads, schedule, max_bias)
    slope_fig, grid_fig, decay_fig = cached_figures(num_heads, schedule, max_bias, seq_len, mode,
                                                    tuple(heads))
except AlibiVizError as exc:  # the controls keep values valid; this guards the library's checks
    st.error(str(exc))
    st.stop()

tag = f"h{num_heads}_L{seq_len}_{mode}_{schedule}"
st.subheader("1. Slopes")
left, right = st.columns([3, 2])
with left:
    ui.show_figure(slope_fig, f"alibi_slopes_{tag}", key="be_fig_slopes")
with right:
    note = describe_schedule(num_heads, schedule, max_bias)
    if is_power_of_two(num_heads) or schedule == "geometric":
        st.info(note)
    else:
        st.warning(note, icon="↕️")
    st.dataframe(head_summary(slopes, seq_len, mode), hide_index=True, height=260,
                 key="be_table")

st.subheader("2. Bias matrices, one per head")
ui.show_figure(grid_fig, f"alibi_bias_{tag}", key="be_fig_grid")
npy, csv = cached_exports(num_heads, schedule, max_bias, seq_len, mode, tuple(heads))
c1, c2, _ = st.columns([1, 1, 3])
c1.download_button("Download .npy", npy, f"alibi_bias_{tag}.npy", "application/octet-stream",
                   key="be_dl_npy", help="The matrices as drawn: (heads, rows, cols) float32.")
if csv is not None:
    c2.download_button("Download CSV", csv, f"alibi_bias_{tag}.csv", "text/csv", key="be_dl_csv")
else:
    c2.caption("CSV is offered up to 200,000 values; use .npy.")

st.subheader("3. Decay: what the bias alone does to attention")
ui.show_figure(decay_fig, f"alibi_decay_{tag}", key="be_fig_decay")
st.markdown(
    "If the content scores q·k were equal for every key, attention would follow the bias "
    "alone: key j gets weight proportional to e^(-m·(i-j)), a geometric decay. A head's "
    "**half-life** ln 2 / m is the distance at which that weight halves; its **90% span** is "
    "the distance holding 90% of the attention. Steep heads look at the last few tokens; "
    "shallow heads see the whole context."
)

st.subheader("4. The formulas")
st.latex(r"\mathrm{softmax}\Big(\tfrac{q_i K^\top}{\sqrt{d}} + B_i\Big),\qquad "
         r"B_{ij} = -m_h\,(i-j)\ \ (j \le i),\qquad m_h = 2^{-8h/n}")
st.latex(r"\text{symmetric: } B_{ij} = -m_h\,|i-j|")
st.markdown(
    "- **Row-constant form.** BLOOM and the authors' code add **+m·j** instead of -m·(i-j). "
    "The two differ by m·i, the same number for every key of row i, and softmax ignores a "
    "constant added to a whole row, so the attention is identical while the bias is one vector "
    "per head instead of an L×L matrix. MPT adds m·(j-(L-1)), another row constant.\n"
    "- **Not scaled by 1/√d.** The content score q·k is divided by √d; the bias is added "
    "after, unscaled, so a slope means the same number of logits per token whatever the head "
    "size. Falcon's ALiBi option (alibi=True) adds the bias before the scaling, so its heads "
    "decay at m/√d instead (see *Inspect a model*).\n"
    "- **Why it extrapolates.** The bias depends only on distance and never needs a position "
    "the model did not see, so a model trained on short sequences can be run on longer ones."
)
