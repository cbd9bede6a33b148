"""The conformance check's section, shared by *Model heads* and *Inspect a model*: is this
model applying ALiBi correctly? Verdicts per head, prefill vs cached decoding, left padding,
and the precision lens. Everything is computed by `alibi_viz.models.conformance` and
`alibi_viz.precision`, and drawn by `alibi_viz.figures.heads`."""

from __future__ import annotations

import streamlit as st

from alibi_viz import i18n
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.heads import (
    FORM_TITLES,
    content_error_figure,
    precision_figure,
    verdict_grid_figure,
)
from alibi_viz.i18n import N_, _, formatted
from alibi_viz.models.conformance import VERDICT_TITLES, check_alibi
from alibi_viz.precision import DTYPES, FORMS, content_summary, default_lens, precision_lens
from alibi_viz_app import ui


@st.cache_data(max_entries=4, show_spinner=False)
def cached_check(_model, _tokenizer, model_key: tuple, lang: str):
    """The conformance check of one model (keyed by the model alone: fixed probes), its notes
    and verdict details in `lang`."""
    return check_alibi(_model, _tokenizer)


@st.cache_data(max_entries=8, show_spinner=False)
def cached_lens(num_heads: int, seq_len: int, dtype: str, form: str, head_dim: int,
                content: float | None = None):
    return precision_lens(num_heads, seq_len, dtype, form, head_dim, content=content)


def banner(check) -> tuple[str, str]:
    """("success", "warning" (inconclusive) or "error", the text) of the verdict banner: the
    diagnosis, one sentence per finding, most important first."""
    if check.ok:
        return "success", _("Conforms: every head applies the expected bias ({form}), and "
                            "cached decoding and left padding give the full forward's "
                            "numbers.").format(form=check.expected_form)
    if check.verdict == "inconclusive":
        return "warning", _("**Inconclusive.** {diagnosis}").format(
            diagnosis=" ".join(check.problems()))
    return "error", _("**Does not conform.** {diagnosis}").format(
        diagnosis=" ".join(check.problems()))


def head_rows(check) -> list[dict]:
    """Every head's verdict as `ui.table` rows (1-based layer and head; the English column
    names are msgids): what the verdict grid shows only on hover."""
    return [{N_("layer"): h.layer + 1, N_("head"): h.head + 1,
             N_("verdict"): _(VERDICT_TITLES.get(h.verdict, h.verdict)),
             N_("expected m"): h.expected_slope, N_("measured m"): h.measured_slope,
             N_("ratio"): h.ratio, N_("offset (logits)"): h.offset,
             N_("clip at"): "-" if h.clip_at is None else int(h.clip_at),
             N_("detail"): h.detail or "-"}
            for row in check.heads for h in row]


def show(prefix: str, model, tokenizer, info, model_key: tuple,
                     run_label: str | None = None) -> None:
    """Is this model applying ALiBi correctly? Verdicts per head, prefill vs decode, and the
    precision lens. Runs on a click (a few seconds), with a progress bar. run_label: the
    button's text (default "Run the conformance check", translated)."""
    if info.positional != "alibi":
        st.info(_("This model encodes position with {positional}: there is no ALiBi bias to "
                  "check.").format(positional=_(info.positional)), icon="ℹ️")
        return
    done = f"_{prefix}_checked"
    if st.session_state.get(done) != model_key and not st.button(
            run_label or _("Run the conformance check"), key=f"{prefix}_check_run",
            type="primary"):
        st.caption(_("Probes every head with one repeated token, decodes a text token by token "
                     "through the KV cache, and compares a left-padded batch with each text "
                     "alone."))
        return
    bar = st.progress(0.0, text=_("Checking..."))
    try:
        check = cached_check(model, tokenizer, model_key, i18n.get_language())
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        bar.empty()
        st.error(_("The conformance check could not run: {error}").format(error=ui.failure_message(exc)))
        return
    bar.empty()
    st.session_state[done] = model_key
    kind, text = banner(check)
    if kind == "success":
        st.success(text, icon="✅")
    elif kind == "warning":
        st.warning(text, icon="⚠️")
    else:
        st.error(text, icon="🚨")
    th = check.thresholds
    st.caption(_("Checked on the {attn} attention path in {dtype}. The probe resolves slopes to "
                 "{rtol} relative plus {atol}, and offsets to {offset} logits (derived from "
                 "the dtype's precision).").format(
                     attn=check.attn, dtype=check.dtype, rtol=formatted(th.slope_rtol, ".2g"),
                     atol=formatted(th.slope_atol, ".2g"),
                     offset=formatted(th.offset_tol, ".2g")))
    for note in check.notes:
        st.warning(note, icon="⚠️")
    ui.show_figure(verdict_grid_figure(check), "conformance", key=f"{prefix}_fig_conformance")
    st.caption(_("Verdicts: conforms; scaled (one constant ratio to the expected slope); sign "
                 "flipped; other schedule; permuted (another head's slope); offset (a jump "
                 "between a key at distance 0 and 1: not a row constant); missing; clipped "
                 "(stops growing). A constant added to a whole row is harmless and passes."))
    with st.expander(_("Every head as text: verdict, expected and measured slope, detail"),
                     expanded=not check.ok):
        ui.table(head_rows(check))
    if check.decode is not None:
        d = check.decode
        check_col, diff_col, tol_col, pass_col = (_("check"), _("largest |difference|"),
                                                  _("tolerance"), _("pass"))
        prefill_layer = _("prefill vs cached decode: layer {layer} attention")
        padding_layer = _("left padding: layer {layer} attention")

        labels = {("decode", None): _("prefill vs cached decode: logits"),
                  ("padding", None): _("left padding: logits")}
        layer_labels = {"decode": prefill_layer, "padding": padding_layer}
        # a deeper layer has no tolerance: its row is shown, not judged (said in words, where
        # the table showed "None" in both columns)
        not_judged = _("shown, not judged")
        rows = [{check_col: labels.get((check, layer)) or layer_labels[check].format(
                     layer=layer + 1),
                 diff_col: value,
                 tol_col: not_judged if tolerance is None else formatted(tolerance, ".3g"),
                 pass_col: not_judged if tolerance is None else
                 (_("yes") if value <= tolerance else _("no"))}
                for check, layer, value, tolerance in d.rows()]
        st.dataframe(rows, hide_index=True, key=f"{prefix}_decode_table")
        st.caption(_("The first layer sees the same inputs on both paths, so its attention must "
                     "agree to the dtype's rounding; deeper layers inherit the rounding "
                     "differences of the layers before them and are shown, not judged. The "
                     "logits' tolerance grows with the depth and the logits' scale."))
    st.markdown(_("**Precision lens.** The bias a dtype really adds, against the exact one."))
    left, mid, right, last = st.columns(4)
    default_dtype, default_form = default_lens(info.model_type, info.dtype)
    dtype = left.selectbox("dtype", list(DTYPES), index=list(DTYPES).index(default_dtype),
                           key=f"{prefix}_lens_dtype")
    form = mid.selectbox(_("form"), FORMS, index=FORMS.index(default_form),
                         key=f"{prefix}_lens_form", format_func=lambda f: _(FORM_TITLES[f]),
                         help=_("Which bias is rounded: BLOOM's m·j (softmax ignores the m·i it "
                                "differs by from −m(i−j)), the textbook −m(i−j), or Falcon's "
                                "builder, computed in bfloat16 and scaled by 1/√d."))
    length = right.select_slider(_("tokens"), [256, 512, 1024, 2048, 4096], value=2048,
                                 key=f"{prefix}_lens_len")
    content = last.number_input(_("content score (logits)"), min_value=-20.0, max_value=20.0,
                                value=3.0, step=0.5, key=f"{prefix}_lens_content",
                                help=_("A key's content score q·k/√d: what the softmax sees of "
                                       "it after the dtype's rounding is drawn below, for the "
                                       "forms m·j and −m(i−j)."))
    try:
        lens = cached_lens(info.num_heads, int(length), dtype, form, info.head_dim,
                           float(content))  # precision_lens leaves it out for Falcon's form
    except AlibiVizError as exc:
        st.error(str(exc))
        return
    ui.show_figure(precision_figure(lens), "precision", key=f"{prefix}_fig_precision")
    if "content_error" in lens:
        ui.show_figure(content_error_figure(lens, float(content)), "precision_content",
                       key=f"{prefix}_fig_precision_content")
        st.caption(content_summary(lens, float(content)))

