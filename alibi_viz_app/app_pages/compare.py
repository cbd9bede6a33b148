"""Compare positional methods: ALiBi beside T5 buckets, sinusoidal, RoPE, KERPLE and Sandwich."""

import math

import numpy as np
import streamlit as st

from alibi_viz import paper
from alibi_viz.alibi import MODE_NAMES
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.compare import (
    check_selection,
    format_params,
    score_display_values,
    score_matrices_figure,
    score_vs_distance_figure,
)
from alibi_viz.i18n import N_, _, number
from alibi_viz.positional import DEFAULT_METHODS, KIND_NAMES, METHODS
from alibi_viz_app import ui
from alibi_viz_app.export import to_npy_bytes
from alibi_viz_app.query_params import UrlParam, parse_methods

PREFIX = "cmp"
MAX_LEN = 65_536
MODES = ("causal", "symmetric")
XSCALES = ("linear", "log")
XSCALE_NAMES = {"linear": N_("linear"), "log": N_("log")}


def param_key(method: str, name: str) -> str:
    """URL name of a method's parameter, e.g. "alibi.slope" (its widget key is "cmp_alibi.slope")."""
    return f"{method}.{name}"


def method_param_specs() -> list[UrlParam]:
    """One URL parameter per method parameter, with the range METHODS gives it."""
    specs = []
    for method in METHODS.values():
        for p in method.params:
            key = param_key(method.name, p.name)
            if p.kind == "bool":
                specs.append(UrlParam(key, "choice", p.default, choices=(True, False)))
            else:
                specs.append(UrlParam(key, p.kind, p.default, p.low, p.high))
    return specs


PARAMS = [
    UrlParam("methods", "text", ",".join(DEFAULT_METHODS)),
    UrlParam("len", "int", 512, 1, MAX_LEN),
    UrlParam("mode", "choice", "causal", choices=MODES),
    UrlParam("xscale", "choice", "linear", choices=XSCALES),
    *method_param_specs(),
]
DEFAULTS = {spec.name: spec.default for spec in PARAMS} | {"methods": list(DEFAULT_METHODS)}


def finish_seeding() -> None:
    """Once, right after the URL was read: turn `methods` into a list and check that each
    method's parameters go together (e.g. an even d_model); bad ones fall back to defaults."""
    flag = f"_{PREFIX}_checked"
    if st.session_state.get(flag):
        return
    warnings = []
    methods, warning = parse_methods(st.session_state[f"{PREFIX}_methods"])
    st.session_state[f"{PREFIX}_methods"] = methods
    if warning:
        warnings.append(warning)
    mode = st.session_state[f"{PREFIX}_mode"]
    for method in METHODS.values():
        keys = {p.name: f"{PREFIX}_{param_key(method.name, p.name)}" for p in method.params}
        try:
            check_selection({method.name: {n: st.session_state[k] for n, k in keys.items()}}, mode)
        except AlibiVizError as exc:
            warnings.append(_("{method}: {error} Using its default parameters.").format(
                method=_(method.label), error=exc))
            for p in method.params:
                st.session_state[keys[p.name]] = p.default
    st.session_state[flag] = True
    st.session_state[f"_{PREFIX}_more_warnings"] = warnings


def float_step(p) -> float:
    """Step of a float input: the parameter's own, else a tenth of its default's decade."""
    return float(p.step) if p.step else 10.0 ** (math.floor(math.log10(p.default)) - 1)


def method_params_ui(name: str) -> dict:
    """Inputs for one method's parameters, in a sidebar expander. Returns {param: value}."""
    method = METHODS[name]
    values = {}
    with st.expander(_("{method} parameters").format(method=_(method.label))):
        for p in method.params:
            key = f"{PREFIX}_{param_key(name, p.name)}"
            st.session_state.setdefault(key, p.default)  # e.g. after the method was deselected
            label, help_text = _(p.label), _(p.help) if p.help else None
            if p.kind == "bool":
                values[p.name] = bool(st.checkbox(label, key=key, help=help_text))
            elif p.kind == "int":
                values[p.name] = int(st.number_input(
                    label, int(p.low), int(p.high), step=int(p.step or 1), key=key,
                    help=help_text))
            else:
                values[p.name] = float(st.number_input(
                    label, float(p.low), float(p.high), step=float_step(p), format="%g",
                    key=key, help=help_text))
    return values


# The chosen methods, every one in sight: Streamlit's multiselect keeps its chips in a box of
# about five lines that scrolls (at 1024 px in Spanish it hid "Sandwich", the sixth) and cuts a
# long name with an ellipsis ("Cota de decaimient..."). Here the box grows and names wrap.
METHODS_CSS = """<style>
.st-key-cmp_methods div:has(> [data-testid='stMultiSelectTagsContainer']) { max-height: none !important; }
.st-key-cmp_methods [data-testid='stMultiSelectTagsContainer'] span {
  max-width: none !important; white-space: normal !important; overflow: visible !important; }
.st-key-cmp_methods [data-testid='stMultiSelectTagsContainer'] span:has(> span) { height: auto !important; }
</style>"""


def controls_ui():
    """The controls, seeded from the URL on the first run. Returns their values."""
    ui.seed_from_url(PREFIX, PARAMS)
    finish_seeding()
    with ui.settings():
        st.html(METHODS_CSS)
        st.header(_("Compare methods"))
        methods = st.multiselect(
            _("Methods"), list(METHODS), key="cmp_methods",
            format_func=ui.labels({n: m.label for n, m in METHODS.items()}),
            help=_("Positional schemes to draw side by side."))
        seq_len = st.number_input(
            _("Sequence length"), 1, MAX_LEN, step=1, key="cmp_len",
            help=_("Tokens (1-{max}). Curves and matrices are evaluated only where drawn, so "
                   "any length is fast.").format(max=number(MAX_LEN)))
        mode = st.radio(
            _("Mode"), MODES, key="cmp_mode", horizontal=True,
            format_func=ui.labels(MODE_NAMES),
            help=_("causal: decoder, keys after the query are masked (T5 uses its decoder "
                   "buckets). symmetric: encoder, both sides (T5 splits its buckets per side)."))
        xscale = st.radio(_("Distance axis"), XSCALES, key="cmp_xscale", horizontal=True,
                          format_func=ui.labels(XSCALE_NAMES),
                          help=_("log shows short and long range at once (distances >= 1)."))
        params = {name: method_params_ui(name) for name in methods}
    return methods, int(seq_len), mode, xscale, params


def checked_selection(params: dict, mode: str) -> dict:
    """{method: params} with each method's parameters validated; a combination the library
    refuses (an odd d_model typed in, T5's max_distance within its exact buckets) is drawn
    with the defaults, with a warning."""
    selection = {}
    for name, values in params.items():
        try:
            selection |= check_selection({name: values}, mode)
        except AlibiVizError as exc:
            st.warning(_("{method}: {error} Drawing it with its default parameters.").format(
                method=_(METHODS[name].label), error=exc), icon="⚠️")
            selection[name] = METHODS[name].defaults()
    return selection


def url_state(methods, seq_len, mode, xscale, selection) -> dict:
    """What the URL holds: the main controls, and each shown method's non-default parameters."""
    state = {"methods": ",".join(methods), "len": seq_len, "mode": mode, "xscale": xscale}
    for name, values in selection.items():
        for p in METHODS[name].params:
            value = values[p.name]
            if value != p.default:
                state[param_key(name, p.name)] = str(value).lower() if p.kind == "bool" else value
    return state


def selection_key(selection: dict) -> tuple:
    """A hashable, ordered form of {method: params} for st.cache_data."""
    return tuple((name, tuple(sorted(values.items()))) for name, values in selection.items())


@ui.cached_figure(max_entries=32)
def curves_fig(key: tuple, seq_len: int, mode: str, log_distance: bool):
    return score_vs_distance_figure({name: dict(items) for name, items in key}, seq_len, mode,
                                    log_distance)


@ui.cached_figure(max_entries=32)
def matrices_fig(key: tuple, seq_len: int, mode: str):
    return score_matrices_figure({name: dict(items) for name, items in key}, seq_len, mode)


@st.cache_data(max_entries=8, show_spinner=False)
def cached_npy(key: tuple, seq_len: int, mode: str) -> bytes:
    values, _rows, _cols = score_display_values({name: dict(items) for name, items in key}, seq_len, mode)
    return to_npy_bytes(values.astype(np.float32))


methods, seq_len, mode, xscale, params = controls_ui()
st.title(_("Compare positional methods"))
st.caption(_("Each scheme reduced to one number per query-key pair that depends only on the "
             "distance d = i − j. Bias methods add it to the pre-softmax score; RoPE acts only "
             "through q·k, and sinusoidal positions are added to the input, so both get their "
             "own panel, which draws their positional part of q·k."))
ui.show_url_warnings(PREFIX)
for warning in st.session_state.pop(f"_{PREFIX}_more_warnings", []):
    st.warning(_("URL parameter ignored: {warning}").format(warning=warning), icon="⚠️")
selection = checked_selection(params, mode)
ui.write_url(url_state(methods, seq_len, mode, xscale, selection))

if not selection:
    st.info(ui.where_settings(_("Choose at least one method in the sidebar."),
                              _("Choose at least one method in Settings, at the top of the "
                                "page.")))
    ui.stop()

try:
    curve_fig = curves_fig(selection_key(selection), seq_len, mode, xscale == "log")
    matrix_fig = matrices_fig(selection_key(selection), seq_len, mode)
except AlibiVizError as exc:  # the controls keep values valid; this guards the library's checks
    st.error(str(exc))
    ui.stop()

tag = f"{'-'.join(selection)}_L{seq_len}_{mode}"
st.subheader(_("1. Contribution to the score vs distance"))
ui.show_figure(curve_fig, f"positional_vs_distance_{tag}", key="cmp_fig_curves")
st.caption(_("At long lengths ALiBi's line dwarfs the others, and that is the point: it keeps "
             "falling linearly, while T5 is flat beyond its max distance and the others fall "
             "ever more slowly (Sandwich roughly logarithmically, out to about 10,000 tokens at "
             "d' = 128). Drag on the chart to zoom, double-click to reset."))

st.subheader(_("2. As matrices"))
ui.show_figure(matrix_fig, f"positional_matrices_{tag}", key="cmp_fig_matrices")
st.download_button(  # deferred: the bytes are made when the button is clicked
    _("Download .npy"), lambda: cached_npy(selection_key(selection), seq_len, mode),
    f"positional_matrices_{tag}.npy", "application/octet-stream", key="cmp_dl_npy",
    help=_("The matrices as drawn, unscaled: (methods, rows, cols) float32, -inf where "
           "masked."))
st.caption(_("Each panel is divided by its own largest |value| (the divisor is in its title): "
             "the methods differ by orders of magnitude, so compare shapes here and sizes in "
             "the curves above."))

st.subheader(_("3. The methods"))
st.markdown("\n".join(
    f"- **{_(METHODS[name].label)}** ({_(KIND_NAMES[METHODS[name].kind])}; "
    f"{format_params(name, values)}): {_(METHODS[name].description)} *{METHODS[name].source}.*"
    for name, values in selection.items()))

st.subheader(_("4. What the comparison shows"))
st.markdown("\n".join("- " + bullet for bullet in [
    _("**ALiBi is a fixed linear penalty.** -m·d with no learned parameters: every extra token "
      "of distance costs m logits, without limit, so far keys are down-weighted more and more "
      "but never cut off, and nothing depends on the training length."),
    _("**T5 learns one value per bucket, and is flat beyond max_distance.** Nearby distances "
      "get their own buckets, further ones log-spaced buckets, and every distance at or beyond "
      "max_distance shares the last one: T5 cannot tell 200 tokens from 20,000. The values "
      "drawn are illustrative (the ALiBi line sampled where each bucket starts); trained tables "
      "need not decay or be monotonic."),
    _("**T5's bias costs training speed.** In the ALiBi paper (Table 1, L = {length}) T5's "
      "bias trains at {t5} words per second, against {sinusoidal} for sinusoidal and {alibi} "
      "for ALiBi, and ALiBi needs the sinusoidal model's memory ({memory} GB). In its "
      "non-overlapping evaluation (Table 2) T5's bias is lowest at {best_length} tokens "
      "({best}) and runs out of memory from {oom} tokens.").format(
        length=number(paper.TABLE1_TRAIN_LEN), t5=number(paper.TRAIN_SPEED["T5 bias"].value),
        sinusoidal=number(paper.TRAIN_SPEED["sinusoidal"].value),
        alibi=number(paper.TRAIN_SPEED["ALiBi"].value),
        memory=number(paper.TRAIN_MEMORY["ALiBi"].value, 1),
        best_length=number(paper.T5_BEST.length), best=number(paper.T5_BEST.value, 2),
        oom=number(paper.T5_OOM.length)),
    _("**Sinusoidal and RoPE add nothing to the score.** RoPE acts only through q·k. "
      "Sinusoidal positions are added to the input, so they reach q·k but also the values, the "
      "MLPs and the residual stream; ALiBi's position enters every layer through the scores "
      "only, never the values, the contrast the paper's section 3 hypotheses turn on. What is "
      "drawn is the positional part of q·k in the simplest case (identity projections for "
      "sinusoidal; all-ones q and k, or RoFormer's bound, for RoPE). Their long-range \"decay\" "
      "is an average or an upper bound, not a guaranteed penalty: learned projections can make "
      "q·k large at any distance, and the sinusoidal dot product oscillates instead of decaying "
      "steadily."),
    _("**KERPLE generalises ALiBi.** Its power variant -r1·d^r2 with r2 = 1 *is* ALiBi with "
      "slope r1; r2 < 1 and the log variant -r1·log(1 + r2·d) are steep nearby and flatten "
      "far away, with r1 and r2 learned per head."),
    _("**Sandwich is ALiBi-like, derived from sinusoidal dot products.** The sinusoidal inner "
      "product, shifted to 0 at d = 0 and divided by a per-head scale, is added to the score as "
      "a bias with no learned parameters. Each frequency stops contributing once it has turned "
      "over, and the frequencies are spaced geometrically, so the bias falls roughly "
      "logarithmically with distance (at d' = 128 and scale 1, by 11 to 20 logits per decade) "
      "until its slowest frequency turns over near 10,000 tokens; only then does it ripple "
      "around -d'/(2·scale)."),
    _("**Softmax only sees differences within a row.** Adding a constant to a bias changes "
      "nothing; what matters is how fast it falls and whether it keeps falling. A bias that "
      "stops falling (T5 beyond max_distance) cannot tell far keys apart; one that falls ever "
      "more slowly (Sandwich, KERPLE-log) tells them apart less and less; ALiBi keeps "
      "penalising them in proportion to distance."),
]))
