"""The views shared by *Model heads* and *Inspect a model*: text, layer and head, three figures.

A page calls, in order:

    heads_view.seed(PREFIX, PARAMS)          # once per session: controls from the URL
    loaded = heads_view.load(folder)         # model via ui.cached_model; errors shown, None
    text = heads_view.text_ui(PREFIX)        # example picker + text area (capped)
    choice = heads_view.controls_ui(PREFIX, loaded.info)   # layer, head, colours, max tokens
    ui.write_url({... page's own ..., **heads_view.url_values(PREFIX, choice, text)})
    heads_view.show(PREFIX, loaded, text, choice)          # grid, one head's row, statistics

The grid is a canvas drawn in the browser (`canvas_maps`): no plotly on the first screen, and a
head switch in the grid sends nothing to the server. The sections after it are plotly charts,
shown when *Interactive charts* is on (a phone starts with it off: `interactive_ui`).

Widget keys are f"{prefix}_{name}", so the two pages keep separate state. Everything drawn is
computed by `alibi_viz.models.attention` (arrays, cached at display resolution: a few MB per text, never
the full attention maps) and drawn by `alibi_viz.figures.heads`. Every cache is keyed by one
`analysis_key`: the model's folder and files' stamp, a digest of the text and the token cap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import textwrap
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from alibi_viz import data, i18n
from alibi_viz.assets import SHIPPED_TRAIN_SEQ_LEN, load_ablation_results
from alibi_viz.errors import AlibiVizError, ModelLoadError
from alibi_viz.figures.heads import (
    COLOR_SCALES,
    ablation_figure,
    attention_grid_figure,
    attention_grid_maps,
    behaviour_grid_figure,
    behaviour_selection,
    decomposition_figure,
    decomposition_title,
    head_statistics_figure,
    head_statistics_labels,
    head_statistics_selection,
    highlight_html,
    labels_note,
    single_map_figure,
)
from alibi_viz.figures.render import with_fitted_layout, with_traces
from alibi_viz.figures.training import snapshot_figure
from alibi_viz.i18n import N_, _, formatted, ngettext, number, significant, tokens
from alibi_viz.models.attention import (
    BIAS_SHOWN,
    RECOMPUTE,
    analyze_heads,
    decomposition_layers,
    decomposition_views,
)
from alibi_viz.models.behaviour import BEHAVIOUR_TITLES, BEHAVIOURS, behaviour_scores
from alibi_viz.models.loading import CONVERT_CODE, resolve_model_path, train_seq_len
from alibi_viz.results.ablation import MINOR, ablation_summary
from alibi_viz.results.snapshots import SNAPSHOT_TOKENS, shipped_curves
from alibi_viz_app import canvas_maps, conformance_view, ui
from alibi_viz_app.query_params import UrlParam

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 20_000    # a longer paste is cut here (tokens are capped further below)
URL_TEXT_CHARS = 500       # texts up to this long go into the shareable URL
MAX_TOKENS = 2048          # the most tokens a page runs the model on
DEFAULT_MAX_TOKENS = 512
MAX_INDEX = 1024           # layer and head numbers the URL may name (checked against the model)
# URL names of the examples: a sentence (data.sentence_example), then data.example_texts(lang)
EXAMPLE_SLUGS = ("sentence", "prose", "code", "long", "module")
CUSTOM = "custom"
# Option texts (translated where shown: `_(TABLE[key])`).
COLOR_SCALE_TITLES = {"log": N_("log"), "linear": N_("linear")}
BIAS_SHOWN_TITLES = {"textbook": "−m(i−j)", "as_added": N_("as the model adds it")}

VIEW_PARAMS = [
    UrlParam("layer", "int", 1, 1, MAX_INDEX),
    UrlParam("head", "int", 1, 1, MAX_INDEX),
    UrlParam("color", "choice", "log", choices=COLOR_SCALES),
    UrlParam("bias", "choice", "textbook", choices=BIAS_SHOWN),
    UrlParam("tokens", "int", DEFAULT_MAX_TOKENS, 8, MAX_TOKENS),
    UrlParam("example", "choice", "sentence", choices=(*EXAMPLE_SLUGS, CUSTOM)),
    UrlParam("text", "text", ""),
]


@dataclass
class Choice:
    """What the controls say: 0-based layer and head, colour scale, token cap, bias form, and
    whether the plotly charts are shown (`interactive_ui`)."""

    layer: int
    head: int
    scale: str
    max_tokens: int
    bias_shown: str = "textbook"
    interactive: bool = True


@dataclass
class Loaded:
    """A model ready to inspect. key identifies it for the caches: (folder, files' stamp)."""

    model: object
    tokenizer: object
    info: object
    key: tuple
    train_seq_len: int | None
    folder: str


# ----------------------------------------------------------------------------- state

@st.cache_data(show_spinner=False)
def _examples(lang: str) -> dict[str, tuple[str, str]]:
    # The default is a sentence the shipped models read whole and within their training
    # length in every language (a Russian letter is two bytes): the page opens with no note.
    try:
        found = {N_("Sentence (short)"): data.sentence_example(data.page_kind(lang)),
                 **data.example_texts(data.page_kind(lang))}
    except AlibiVizError:  # the shipped held-out text is unreadable: the two short examples
        found = {N_("Sentence (short)"): data.PROSE_EXAMPLE.split(". ")[0] + ".",
                 N_("Prose (short)"): data.PROSE_EXAMPLE, N_("Code (short)"): data.CODE_EXAMPLE}
    return {slug: (title, text) for slug, (title, text) in zip(EXAMPLE_SLUGS, found.items(),
                                                                 strict=False)}


def examples() -> dict[str, tuple[str, str]]:
    """URL slug -> (title, text) of the ready examples in the page's language: short prose in
    that language, a short function, a long manual page in that language, a long Python
    module, all shipped held-out text; titles are English msgids, shown as `_(title)`."""
    return _examples(i18n.get_language())


def _key(prefix: str, name: str) -> str:
    return f"{prefix}_{name}"


def seed(prefix: str, params: list[UrlParam]) -> None:
    """Set the controls from the URL once per session and fill in the text (ui.keep_page_state
    carries them across visits to other pages)."""
    ui.seed_from_url(prefix, params)
    flag = f"_{prefix}_text_seeded"
    if not st.session_state.get(flag):
        st.session_state[flag] = True
        if st.session_state[_key(prefix, "text")]:
            st.session_state[_key(prefix, "example")] = CUSTOM
        else:
            slug = st.session_state[_key(prefix, "example")]
            slug = slug if slug in examples() else EXAMPLE_SLUGS[0]
            st.session_state[_key(prefix, "example")] = slug
            st.session_state[_key(prefix, "text")] = examples()[slug][1]


# ----------------------------------------------------------------------------- model

def code_blocks(message: str) -> str:
    """A loader's message as markdown: the pickle conversion recipe it may end with
    (`loading.CONVERT_CODE`, indented lines) as a fenced code block, not run into the text."""
    if CONVERT_CODE not in message:
        return message
    code = textwrap.dedent(CONVERT_CODE)
    return message.replace("\n" + CONVERT_CODE, f"\n\n```python\n{code}\n```\n")


def load(path) -> Loaded | None:
    """Load the model folder `path` through the shared cache; on failure show what is wrong
    and what to do, and return None. A folder whose files changed (removed, replaced,
    corrupted) since it was cached is loaded, and checked, again."""
    try:
        allow = ui.custom_paths_allowed()
        folder = resolve_model_path(path, allow)
        stamp = ui.model_stamp(str(folder))
        model, tokenizer, info = ui.cached_model(str(folder), stamp)
    except ModelLoadError as exc:
        st.error(_("Could not load the model. {error}").format(error=code_blocks(str(exc))),
                 icon="🚫")
        return None
    except (OSError, RuntimeError, ValueError) as exc:  # e.g. files vanishing while read
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        st.error(_("Could not load the model ({kind}: {error}). Check that the folder is "
                   "complete and readable, then reload the page.").format(
                       kind=type(exc).__name__, error=first), icon="🚫")
        return None
    return Loaded(model, tokenizer, info, (str(folder), stamp), train_seq_len(info),
                  str(folder))


# ----------------------------------------------------------------------------- controls

def _pick_example(prefix: str) -> None:
    """Callback of the example picker: put the chosen example in the text area."""
    slug = st.session_state[_key(prefix, "example")]
    if slug in examples():
        st.session_state[_key(prefix, "text")] = examples()[slug][1]


def _edited_text(prefix: str) -> None:
    """Callback of the text area: cut a huge paste in the session state itself (so it is not
    kept, nor sent back to the browser), and mark the text as the user's own."""
    key = _key(prefix, "text")
    text = st.session_state[key]
    if len(text) > MAX_TEXT_CHARS:
        st.session_state[key] = text[:MAX_TEXT_CHARS]
        st.session_state[f"_{prefix}_cut_from"] = len(text)
    slug = st.session_state[_key(prefix, "example")]
    if slug in examples() and examples()[slug][1] != st.session_state[key]:
        st.session_state[_key(prefix, "example")] = CUSTOM


def _example_titles(prefix: str) -> dict:
    """The example picker's titles; the chosen example's text put in the page's language when
    the language changed since it was drawn."""
    titles = ({slug: _(title) for slug, (title, _text) in examples().items()}
              | {CUSTOM: _("Your own text")})
    if st.session_state.get(_key(prefix, "example")) not in titles:
        st.session_state[_key(prefix, "example")] = CUSTOM
    slug, shown_in = st.session_state[_key(prefix, "example")], f"_{prefix}_example_lang"
    if slug in examples() and st.session_state.get(shown_in) not in (None, i18n.get_language()):
        st.session_state[_key(prefix, "text")] = examples()[slug][1]  # the language changed
    st.session_state[shown_in] = i18n.get_language()
    return titles


def text_value(prefix: str) -> str:
    """The text `text_ui` returns, before its box is drawn (a phone draws it after the maps:
    `show`'s text_box)."""
    _example_titles(prefix)
    return str(st.session_state.get(_key(prefix, "text")) or "")[:MAX_TEXT_CHARS]


def text_ui(prefix: str) -> str:
    """Example picker and text area. Returns the text, cut to MAX_TEXT_CHARS with a warning."""
    titles = _example_titles(prefix)
    left, right = st.columns([1, 3])
    left.selectbox(_("Example"), list(titles), key=_key(prefix, "example"),
                   format_func=titles.__getitem__, on_change=_pick_example, args=(prefix,),
                   help=_("Ready texts, all held out from training: a sentence and a paragraph in "
                          "the page's language, code, a long manual page and a long Python "
                          "module."))
    text = right.text_area(
        _("Text"), key=_key(prefix, "text"), height=110, on_change=_edited_text, args=(prefix,),
        help=_("Type or paste any text (up to {n} characters are kept).").format(
            n=number(MAX_TEXT_CHARS)))
    right.caption(_("The model reads your text once you click or tap outside the box."))
    cut_from = st.session_state.pop(f"_{prefix}_cut_from", None)
    if len(text) > MAX_TEXT_CHARS:  # not cut by the callback (set by code, not typed)
        cut_from, text = len(text), text[:MAX_TEXT_CHARS]
    if cut_from:
        st.warning(ui.where_settings(
            _("The text had {n} characters; only the first {kept} are kept (and the model "
              "reads at most the token limit in the sidebar)."),
            _("The text had {n} characters; only the first {kept} are kept (and the model "
              "reads at most the token limit in Settings).")).format(
                         n=number(cut_from), kept=number(MAX_TEXT_CHARS)), icon="✂️")
    return text


def _in_range(prefix: str, name: str, count: int, message: str) -> None:
    """Reset layer/head to 1 with a warning (`message`, a template of {value} and {count}) when
    it does not exist in this model."""
    key = _key(prefix, name)
    value = st.session_state.get(key, 1)
    if not isinstance(value, int) or not 1 <= value <= count:
        st.warning(message.format(value=value, count=count), icon="⚠️")
        st.session_state[key] = 1


def controls_ui(prefix: str, info) -> Choice:
    """Layer and head (checked against the model) above the maps, colours and token cap in
    the sidebar. Returns the choice with 0-based layer and head."""
    _in_range(prefix, "layer", info.num_layers,
              _("Layer {value} is out of range for this model (layers 1-{count}): showing "
                "layer 1."))
    _in_range(prefix, "head", info.num_heads,
              _("Head {value} is out of range for this model (heads 1-{count}): showing head 1."))
    with ui.settings():
        max_tokens = st.number_input(
            _("Max tokens"), 8, MAX_TOKENS, step=64, key=_key(prefix, "tokens"),
            help=_("The model reads at most this many tokens of the text (8-{n}).").format(
                n=number(MAX_TOKENS)))
        scale = st.radio(_("Colours"), COLOR_SCALES, key=_key(prefix, "color"), horizontal=True,
                         format_func=lambda s: _(COLOR_SCALE_TITLES[s]),
                         help=_("log: log10 of the attention, which shows ALiBi's linear decay "
                                "as a straight gradient; linear: the probability itself."))
        bias_shown = st.radio(
            _("Bias panel"), BIAS_SHOWN, key=_key(prefix, "bias"), horizontal=True,
            format_func=lambda b: _(BIAS_SHOWN_TITLES[b]),
            help=_("−m(i−j): the textbook bias under the causal mask. As the model adds it: "
                   "e.g. BLOOM's +m·j, which differs from −m(i−j) by m·i, the same for every "
                   "key of a row; softmax ignores that, so the attention is identical."))
    # the layer and head pickers are in the fragments they rerun (`layer_view`, `head_view`)
    layer = st.session_state.get(_key(prefix, "layer"), 1)
    head = st.session_state.get(_key(prefix, "head"), 1)
    return Choice(layer=int(layer) - 1, head=int(head) - 1, scale=scale,
                  max_tokens=int(max_tokens), bias_shown=bias_shown,
                  interactive=interactive(prefix))


def interactive(prefix: str) -> bool:
    """Whether the page shows its plotly charts (`ui.charts_shown`)."""
    return ui.charts_shown()


def interactive_ui(prefix: str) -> bool:
    """The *Interactive charts* toggle (`interactive`'s value); off, the sections drawn as
    plotly charts wait for it."""
    return ui.charts_toggle(_key(prefix, "interactive"),
                            help=_("Zoomable charts for the sections after the first: one head "
                                   "split into content and bias, the head statistics, the head "
                                   "gallery. They take seconds to load on a phone, which starts "
                                   "without them."))


def layer_ui(prefix: str, info) -> int:
    """The layer picker (0-based layer returned)."""
    left, _right = st.columns([1, 5])
    layer = left.selectbox(_("Layer"), list(range(1, info.num_layers + 1)),
                           key=_key(prefix, "layer"),
                           help=_("Which layer's heads to draw (1 is the first)."))
    return int(layer) - 1


def head_ui(prefix: str, info, layer: int) -> int:
    """The head picker (0-based head returned), with each head's slope in this layer."""
    slopes = info.slopes_of(layer)
    left, _right = st.columns([2, 3])
    head = left.selectbox(
        _("Head"), list(range(1, info.num_heads + 1)), key=_key(prefix, "head"),
        format_func=lambda h: _("head {h}").format(h=h) + (
            f" (m = {significant(slopes[h - 1])})" if slopes else ""),
        help=_("The head whose scores are split into content and bias below."))
    return int(head) - 1


def url_values(prefix: str, choice: Choice, text: str) -> dict:
    """The shareable part of the view: layer, head, colours, token cap, and the example's
    name or (when short) the text itself."""
    values = {"layer": choice.layer + 1, "head": choice.head + 1, "color": choice.scale,
              "tokens": choice.max_tokens, "bias": choice.bias_shown}
    slug = st.session_state.get(_key(prefix, "example"))
    if slug in examples() and examples()[slug][1] == text:
        values["example"] = slug
    elif len(text) <= URL_TEXT_CHARS:
        values["text"] = text
    return values


# ----------------------------------------------------------------------------- cached data
# Each cached function takes the unhashed model and text (`_loaded`, `_text`, `_analysis`) and
# one hashed `key` that determines them: the model's (folder, stamp), the text's digest and the
# token cap. The slopes and training length come from the model, so the key covers them too.
# A result that holds translated text (a figure, a truncation note) also takes `lang`, so two
# languages never share an entry. Spinners are shown by the callers, in the page's language.

def analysis_key(loaded: Loaded, text: str, max_tokens: int) -> tuple:
    """The cache key of one model run: (model key, sha256 of the text, token cap)."""
    return (loaded.key, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            int(max_tokens))


# The analyses are shared read-only by every session (cache_resource: no copy per rerun; a
# 1,024-token analysis is tens of MB, which cache_data would pickle on every head switch).
# The analysis also splits, in the same pass, the layers that `heads.decomposition_layers`
# groups with the layer first shown (`_split_layers`, in the bias form first shown): a result
# valid for every session whatever it shows first, since `decomposition` falls back to a pass
# of its own for a layer or form it lacks.
@st.cache_resource(max_entries=8, show_spinner=False)
def cached_analysis(_loaded: Loaded, _text: str, key: tuple, lang: str, _split_layers=(),
                    _bias_shown: str = "textbook", _progress=None):
    return analyze_heads(_loaded.model, _loaded.tokenizer, _text, max_tokens=key[2],
                         slopes=_loaded.info.config_slopes, info=_loaded.info,
                         split_layers=_split_layers, bias_shown=_bias_shown, progress=_progress)


def split_layers(loaded: Loaded, layer: int, max_tokens: int) -> tuple[int, ...]:
    """The layers a new text's pass splits beside its maps: `layer`'s group
    (`heads.decomposition_layers`, at the token cap), none for an architecture that cannot be
    split."""
    if loaded.model.config.model_type not in RECOMPUTE:
        return ()
    return decomposition_layers(loaded.info.num_layers, layer, max_tokens)


@st.cache_resource(max_entries=8, show_spinner=False)
def cached_decompositions(_loaded: Loaded, _text: str, key: tuple, layers: tuple,
                          bias_shown: str, lang: str):
    """`heads.decomposition_views` of `layers` in one bias form (the other one, rarely
    asked for, costs one more pass when it is), shared read-only by every session."""
    return decomposition_views(_loaded.model, _loaded.tokenizer, _text, layers,
                               max_tokens=key[2], info=_loaded.info, bias_shown=bias_shown)


def decomposition(loaded: Loaded, text: str, key: tuple, layer: int, bias_shown: str,
                  analysis):
    """The view of one layer's split: from the analysis' own pass when it split that layer in
    that form, else cached as `heads.decomposition_layers` groups it."""
    done = analysis.splits.get(layer, {})
    if bias_shown in done:
        return done[bias_shown]
    layers = decomposition_layers(loaded.info.num_layers, layer, analysis.seq_len)
    return cached_decompositions(loaded, text, key, layers, bias_shown,
                                 i18n.get_language())[layer][bias_shown]


@ui.cached_figure(max_entries=16)
def grid_figure(_analysis, _loaded: Loaded, key: tuple, layer: int, scale: str):
    """Every head of one layer, no head marked: a head switch (`head_view`) leaves it as it
    is."""
    return attention_grid_figure(_analysis.layers[layer], _analysis.tokens, layer,
                                 slopes=_loaded.info.slopes_of(layer),
                                 train_seq_len=_loaded.train_seq_len, scale=scale)


@st.cache_data(max_entries=16, show_spinner=False)
def grid_maps(_analysis, _loaded: Loaded, key: tuple, layer: int, scale: str, filename: str,
              lang: str) -> dict:
    """Every head of one layer for the canvas (`canvas_maps.data`): the 8-bit codes of the
    analysis' display-resolution maps, deflated, in the page's language."""
    maps = attention_grid_maps(_analysis.layers[layer], _analysis.tokens, layer,
                               slopes=_loaded.info.slopes_of(layer),
                               train_seq_len=_loaded.train_seq_len, scale=scale)
    return canvas_maps.data(maps, filename=filename)


def _slope(loaded: Loaded, layer: int, head: int) -> float | None:
    return loaded.info.slopes_of(layer)[head] if loaded.info.slopes else None


def _row(view, loaded: Loaded, layer: int, head: int, scale: str):
    return decomposition_figure(view, head, slope=_slope(loaded, layer, head),
                                train_seq_len=loaded.train_seq_len, scale=scale)


@ui.cached_figure(max_entries=16)
def row_layout(_view, _loaded: Loaded, key: tuple, layer: int, scale: str, bias_shown: str,
               _head: int):
    """A head's row fitted to the page, the first head asked for (`_head`, not part of the
    key): every head's row of this layer, text and colours has its layout but for the title
    and the colour ranges."""
    return _row(_view, _loaded, layer, _head, scale)


@st.cache_data(max_entries=16, show_spinner=False)
def row_figure(_view, _loaded: Loaded, key: tuple, layer: int, head: int, scale: str,
               bias_shown: str, lang: str) -> dict:
    """One head's row on the layer's fitted layout (`row_layout`): the first head of a layer
    is fitted, every later one builds its panels and fits no text."""
    fitted = row_layout(_view, _loaded, key, layer, scale, bias_shown, head)
    title = decomposition_title(layer, head, _slope(_loaded, layer, head))
    if fitted["layout"]["title"]["text"] == title:  # fitted for this very head
        return fitted
    return with_fitted_layout(_row(_view, _loaded, layer, head, scale), fitted)


@ui.cached_figure(max_entries=16)
def stats_figure(_analysis, key: tuple):
    """The statistics of every head (drawn once per text; the chosen head's rings and its
    layer's R² labels are added by `with_traces`, so a head or layer switch rebuilds
    nothing)."""
    return head_statistics_figure(_analysis.stats, _analysis.seq_len, labelled_layer=None)


@ui.cached_figure(max_entries=8)
def gallery_grid_figure(_behaviour, model_key: tuple):
    return behaviour_grid_figure(_behaviour)


NARROW_COLUMN_PX = 240  # a figure in a 2-of-5 column on a 1024 px screen with the sidebar open


@ui.cached_figure(max_entries=64, width=NARROW_COLUMN_PX)
def gallery_map_figure(_attention, model_key: tuple, cell: tuple, title: str):
    return single_map_figure(_attention, title)


@st.cache_data(max_entries=4, show_spinner=False)
def cached_behaviour(_loaded: Loaded, model_key: tuple):
    """Behaviour scores of every head (fixed probes, so keyed by the model alone)."""
    return behaviour_scores(_loaded.model, _loaded.tokenizer, slopes=_loaded.info.config_slopes)


# ----------------------------------------------------------------------------- views

def show(prefix: str, loaded: Loaded, text: str, choice: Choice, text_box: bool = False) -> None:
    """The grid of every head of the chosen layer, the chosen head's decomposition row and the
    head statistics, with notes on truncation and the training length. On a phone the layer
    picker and the *Interactive charts* toggle come after the maps, and so does the text box
    (`text_ui`) with `text_box`: what is drawn before a phone's first figure holds it back.

    Bad input is reported by the library as AlibiVizError and shown as it is; anything else
    is a bug, logged with its traceback on the server and shown as one plain sentence."""
    guarded(_show, prefix, loaded, text, choice, text_box)


def guarded(view, prefix: str, loaded: Loaded, text: str, choice: Choice, *args) -> None:
    """view(prefix, loaded, text, choice, *args), where anything but bad input is a bug:
    logged with its traceback on the server, shown as one plain sentence (the page's last line
    of defence: never a traceback in the browser)."""
    try:
        view(prefix, loaded, text, choice, *args)
    except Exception:
        logger.exception("heads view failed (text of %d characters, %s)", len(text), choice)
        st.error(_("Something went wrong while drawing the heads (the details are in the "
                   "server log). Try another text, layer or head, or reload the page."), icon="🐞")


def _show(prefix: str, loaded: Loaded, text: str, choice: Choice, text_box: bool) -> None:
    marker = loaded.train_seq_len
    key = analysis_key(loaded, text, choice.max_tokens)
    lang = i18n.get_language()
    try:
        with ui.StepProgress(lambda done, total: _(
                "Running the model on the text: layer {done} of {total}...").format(
                    done=done, total=total)) as progress:
            analysis = cached_analysis(loaded, text, key, lang,
                                       split_layers(loaded, choice.layer, choice.max_tokens),
                                       choice.bias_shown, progress)
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        st.warning(ui.failure_message(exc), icon="✍️")
        return
    T = analysis.seq_len
    facts = tokens(T)
    if marker:
        facts += "; " + _("trained on {n}-token windows").format(n=number(marker))
    st.caption(facts + ". " + labels_note(analysis.tokens))
    if analysis.truncated:
        st.info(analysis.truncated, icon="✂️")
    if marker and T > marker:
        st.info(_("The input ({n} tokens) is longer than the training length ({train}): the red "
                  "dashed lines mark position {train}. Queries below the line attend over more "
                  "keys, and keys further away, than the model ever saw in training.").format(
                      n=number(T), train=number(marker)), icon="📏")

    phone = ui.on_phone()
    choice = dataclasses.replace(choice, interactive=(interactive(prefix) if phone else
                                                      interactive_ui(prefix)))
    layer_view(prefix, loaded, text, key, analysis, choice)
    if phone:
        interactive_ui(prefix)
        if text_box:
            text_ui(prefix)
    if choice.interactive:
        gallery_ui(prefix, loaded)
    st.subheader(_("5. Conformance: is this model applying ALiBi correctly?"))
    st.markdown(_("A check, on a click, that every head adds the bias ALiBi prescribes: look at "
                  "the verdict, then at the grid for any head that is not green."))
    conformance_view.show(prefix, loaded.model, loaded.tokenizer, loaded.info, loaded.key)


@st.fragment
def layer_view(prefix: str, loaded: Loaded, text: str, key: tuple, analysis,
               choice: Choice) -> None:
    """Sections 1-3, around the layer picker: a layer switch reruns this alone (an
    st.fragment), so it re-sends the layer's grid, the chosen head's row and the statistics,
    not the text box, the gallery or the conformance check. The head picker inside it is a
    fragment of its own (`head_view`)."""
    guarded(_layer_view, prefix, loaded, text, choice, key, analysis)


def _layer_view(prefix: str, loaded: Loaded, text: str, choice: Choice, key: tuple, analysis):
    phone = ui.on_phone()  # the picker after the maps (`show`): its value read first
    layer = (int(st.session_state.get(_key(prefix, "layer"), 1)) - 1 if phone else
             layer_ui(prefix, loaded.info))  # in this fragment's rerun: the choice just made
    choice = dataclasses.replace(choice, layer=layer)
    ui.set_url_value("layer", choice.layer + 1)
    name = Path(loaded.folder).name or "model"
    st.subheader(_("1. Every head of layer {layer}").format(layer=choice.layer + 1))
    st.markdown(_("One panel per head: row i is a query, column j a key it may attend to, the "
                  "darker the more attention. Look at which heads stay on the diagonal (the "
                  "last few tokens) and which spread to the left (further back)."))
    filename = f"attention_{name}_L{choice.layer + 1}_T{analysis.seq_len}"
    canvas_maps.show(grid_maps(analysis, loaded, key, choice.layer, choice.scale, filename,
                               i18n.get_language()), key=f"{prefix}_maps_grid")
    ui.first_figure_alone()
    if phone:
        layer_ui(prefix, loaded.info)
    st.caption(_("Tap or click a head's panel, or its number, to draw it alone; *All heads* "
                 "draws them all again."))
    if not choice.interactive:  # the toggle: above the maps, on a phone after them (`show`)
        st.caption(_("One head split into content and bias, the head statistics and the head "
                     "gallery are interactive charts: turn on *Interactive charts* below to see "
                     "them.") if phone else
                   _("One head split into content and bias, the head statistics and the head "
                     "gallery are interactive charts: turn on *Interactive charts* above to see "
                     "them."))
        return
    with st.expander(_("The same maps as an interactive chart (zoom)")):
        grid = grid_figure(analysis, loaded, key, choice.layer, choice.scale)
        ui.show_figure(grid, filename, key=f"{prefix}_fig_grid")
    head_view(prefix, loaded, text, key, analysis, choice)


@st.fragment
def head_view(prefix: str, loaded: Loaded, text: str, key: tuple, analysis, choice: Choice) -> None:
    """Sections 2 and 3, around the head picker: a head switch reruns this alone (an
    st.fragment), so it re-sends the chosen head's row and the statistics' rings, not the
    grid, the gallery or the conformance check above and below it. A rerun of its own is
    outside `show`'s guard, so it has the same one."""
    guarded(_head_view, prefix, loaded, text, choice, key, analysis)


def _head_view(prefix: str, loaded: Loaded, text: str, choice: Choice, key: tuple, analysis):
    choice = dataclasses.replace(choice, head=head_ui(prefix, loaded.info, choice.layer))
    ui.set_url_value("head", choice.head + 1)
    name = Path(loaded.folder).name or "model"
    T = analysis.seq_len
    tag = f"{name}_L{choice.layer + 1}_h{choice.head + 1}_T{T}"
    st.subheader(_("2. Head {head}: content, bias, masked total, attention").format(
        head=choice.head + 1))
    st.markdown(_("The chosen head's scores split into what the tokens' content says and what "
                  "the position bias adds, then the attention they give: look at whether the "
                  "attention follows the bias panel or the content panel."))
    try:
        with st.spinner(_("Splitting the scores into content and bias...")):
            view = decomposition(loaded, text, key, choice.layer, choice.bias_shown, analysis)
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        st.info(ui.failure_message(exc), icon="ℹ️")
    else:
        row = row_figure(view, loaded, key, choice.layer, choice.head, choice.scale,
                         choice.bias_shown, i18n.get_language())
        ui.show_figure(row, f"decomposition_{tag}", key=f"{prefix}_fig_row")
        if view.truncated and view.seq_len < T:
            st.caption(_("Decomposition: {note}").format(note=view.truncated))
        shown = (_("The bias panel shows the textbook −m·(i−j), and the total is shifted by the "
                   "same constant per row, which softmax ignores.")
                 if view.bias_shown == "textbook" else
                 _("The bias panel shows the model's own numbers: a form like BLOOM's +m·j "
                   "differs from −m·(i−j) only by m·i, the same for every key of row i, so a "
                   "positive value does not mean far keys get a bonus."))
        st.caption(
            _("How this model adds its position bias: `{form}`.").format(form=_(view.bias_form))
            + " " + shown + " "
            + _("The masked total is what the softmax sees (grey: keys after the query); softmax "
                "of it reproduces the model's own attention to {error}.").format(
                    error=formatted(view.max_abs_error, ".1e")))

    st.subheader(_("3. Head statistics"))
    st.markdown(_("One dot per head, for this text: the slope fitted to its attention against "
                  "its slope from the config, and how far back it looks. Look at the R² labels: "
                  "near 1 a head follows its bias, near 0 its content decides."))
    stats = with_traces(stats_figure(analysis, key),
                        head_statistics_labels(analysis.stats, choice.layer)
                        + head_statistics_selection(analysis.stats, (choice.layer, choice.head)))
    ui.show_figure(stats, f"head_statistics_{name}_T{T}", key=f"{prefix}_fig_stats")
    with st.expander(_("What the statistics mean: fitted slope, R², content reliance, mean "
                       "distance")):
        st.markdown(_(
            "**Fitted slope**: the slope of the straight line that best fits log attention "
            "against distance, with one intercept per query. For an ALiBi head "
            "log p_ij = s_ij − m·(i−j) − log Z_i, so the fit returns m whenever the content score "
            "s is uncorrelated with distance, *however strongly content drives the head*: sitting "
            "on y = x does not mean a head follows its bias. The label is the fit's **R²**, the "
            "share of the log-attention variance that distance explains: near 1 the head is its "
            "bias; near 0 content decides, whatever the slope. **Content reliance** (ALiBi "
            "models) is the KL divergence, in nats, from the attention the bias alone would give "
            "(all content scores equal) to the head's attention, averaged over queries: 0 for a "
            "head that only follows its bias, large when content moves the weight. **Mean "
            "distance**: how far back, on average, each query looks; the crosses are what the "
            "bias alone would give for this text length."))


def _select_head(prefix: str, cell) -> None:
    st.session_state[f"{prefix}_gallery_cell"] = cell


def _clicked_cell(event) -> tuple[int, int] | None:
    """(layer, head), 0-based, of the gallery cell a plotly selection event points at."""
    try:
        points = event["selection"]["points"]
        layer, head = points[0]["customdata"][:2]
        return int(layer), int(head)
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def gallery_ui(prefix: str, loaded: Loaded) -> None:
    """Section 4: every head's strongest behaviour on fixed probe texts, "find me a head"
    buttons, and the chosen head's map with the tokens it attends to highlighted."""
    st.subheader(_("4. Head gallery: what does each head do?"))
    st.markdown(_("Every head scored on fixed probe texts for a few behaviours (looking at the "
                  "previous token, copying, matching brackets...): look at which head does what, "
                  "and click a cell to see its map."))
    try:
        with st.spinner(_("Scoring every head on the probe texts...")):
            behaviour = cached_behaviour(loaded, loaded.key)
    except (AlibiVizError, RuntimeError, MemoryError) as exc:
        st.info(ui.failure_message(exc), icon="ℹ️")
        return
    state = f"{prefix}_gallery_cell"
    strongest = behaviour.strongest()
    names = [b for b in BEHAVIOURS if b != "content" or behaviour.content_kl is not None]
    st.caption(_("Find me a head that ..."))
    titles = {b: _(BEHAVIOUR_TITLES[b]) for b in BEHAVIOURS}
    per_row = 4  # two rows of buttons: every label fits a 1024-pixel screen
    columns = [c for start in range(0, len(names), per_row) for c in st.columns(per_row)]
    for column, name in zip(columns, names, strict=False):
        best = behaviour.best_head(name)  # None: e.g. no bracket pair survives this tokenizer
        column.button(titles[name], key=f"{prefix}_find_{name}", width="stretch",
                      disabled=best is None, on_click=_select_head, args=(prefix, best))
    chart_key = f"{prefix}_fig_gallery"
    clicked = _clicked_cell(st.session_state.get(chart_key))
    if clicked is not None and clicked != st.session_state.get(f"{prefix}_gallery_click"):
        st.session_state[f"{prefix}_gallery_click"] = clicked  # a new click wins once
        st.session_state[state] = clicked
    cell = st.session_state.get(state) or (0, 0)
    grid = with_traces(gallery_grid_figure(behaviour, loaded.key),
                       behaviour_selection(cell))
    with ui.figure_box(grid, chart_key):  # a phone scrolls it sideways, as every page figure
        st.plotly_chart(ui.ready(grid), key=chart_key,
                        on_select="rerun", selection_mode="points", theme=None,
                        config={**ui.PLOT_CONFIG, **i18n.plotly_locale()}, width="stretch")
    layer, head = cell
    kind = strongest[layer, head]
    probe, query = behaviour.example(layer, head, kind)
    labels, maps = behaviour.probes[probe]
    attention = maps[layer][head]
    left, right = st.columns([2, 3])
    with left:
        title = _("Layer {layer}, head {head}: {behaviour}").format(
            layer=layer + 1, head=head + 1, behaviour=titles[kind])
        ui.show_figure(gallery_map_figure(attention, loaded.key, (layer, head), title),
                       f"gallery_L{layer + 1}_h{head + 1}", key=f"{prefix}_fig_gallery_map")
    with right:
        where = (_("**Layer {layer}, head {head}** looks most like a **{behaviour}** head. "
                   "Below, the repeated random sequence: the outlined token is the query "
                   "(position {query}); the darker a token, the more attention it gets from the "
                   "query.") if probe == "induction" else
                 _("**Layer {layer}, head {head}** looks most like a **{behaviour}** head. "
                   "Below, the code probe: the outlined token is the query (position {query}); "
                   "the darker a token, the more attention it gets from the query."))
        st.markdown(where.format(layer=layer + 1, head=head + 1, behaviour=titles[kind],
                                 query=query))
        st.html(highlight_html(labels, attention[query], query))
        st.caption(_("Scores: {scores}.").format(  # (defined in models/behaviour.py)
            scores="; ".join(behaviour.score_texts(layer, head))))


# ----------------------------------------------------------------------------- training

@ui.cached_figure(max_entries=16)
def snapshot_fig(step: int):
    return snapshot_figure(shipped_curves(), step)


def training_ui(step: int) -> None:
    """Watch heads form: the copying score of every head and the held-out loss against the
    training step (measured once on the shipped snapshots), the shown step dotted."""
    curves = shipped_curves()
    if curves is None:
        return
    st.subheader(_("Watch heads form during training"))
    st.markdown(_("The same heads at earlier steps of training: look at when the copying head "
                  "appears and how suddenly."))
    ui.show_figure(snapshot_fig(step), "training_snapshots", key=_key("mh", "fig_training"))
    layer, head = curves.best_copying_head()
    before, after, share = curves.phase_change()
    final = curves.scores["induction"][-1, layer, head]
    first = curves.scores["induction"][0, layer, head]
    st.markdown(_(
        "The strongest copying head at the end is layer {layer}, head {head}: its copying score "
        "goes from {first} at step 0 to {final} at step {last}. Its largest rise between two "
        "snapshots, from step {before} to step {after}, is {share} of its whole rise.").format(
        layer=layer + 1, head=head + 1, first=number(first, 2), final=number(final, 2),
        last=number(int(curves.steps[-1])), before=number(before), after=number(after),
        share=i18n.percent(share)) + " " + (
        # Two snapshots far apart bound the rise, not its shape: say so rather than call it a
        # jump.
        ngettext(
            "Most of it happens between two snapshots {gap} step apart, and snapshots this "
            "sparse cannot tell a sudden jump, like the phase change Olsson et al. (2022) saw in "
            "larger models, from a steady rise over that step.",
            "Most of it happens between two snapshots {gap} steps apart, and snapshots this "
            "sparse cannot tell a sudden jump, like the phase change Olsson et al. (2022) saw in "
            "larger models, from a steady rise over those {gap} steps.",
            after - before).format(gap=number(after - before))
        if share >= 0.5 else
        _("It spreads over several snapshots: on a model this small the copying head forms "
          "gradually, not in the sharp phase change Olsson et al. (2022) saw in larger "
          "models.")))
    st.caption(_("Copying score: on a random sequence of printable bytes repeated twice, the "
                 "attention from each token of the second copy to the token after its twin in "
                 "the first (Olsson et al. 2022). Held-out loss: the shipped held-out text, "
                 "{tokens} tokens of each kind in windows of {n}. Command: `python -m "
                 "experiments.snapshots`.").format(tokens=number(SNAPSHOT_TOKENS),
                                                 n=number(SHIPPED_TRAIN_SEQ_LEN)))


# ----------------------------------------------------------------------------- which heads matter

@ui.cached_figure(max_entries=8)
def ablation_fig(name: str):
    entry = load_ablation_results()["models"][name]
    return ablation_figure(entry["increase"], entry["slope"], entry["slope_kind"])


def ablation_ui(name: str, prefix: str = "mh", title: str | None = None) -> None:
    """Which heads matter: the shipped model's loss increase per silenced head against the
    head's slope (measured once, assets/results/ablation.json), and what it says in numbers."""
    results = load_ablation_results()
    entry = results.get("models", {}).get(name)
    if not entry:
        return
    st.subheader(title or _("Which heads matter?"))
    st.markdown(_("Each dot is one head: how much the model's loss rises when that head is "
                  "switched off, against its slope. Predict, then look at which slopes the "
                  "costly heads have."))
    summary = ablation_summary(entry)
    ask_ablation(summary)
    ui.show_figure(ablation_fig(name), f"ablation_{name}", key=_key(prefix, "fig_ablation"))
    st.caption(_("Each head's output zeroed in turn (Michel et al. 2019), on {windows} windows "
                 "of held-out text of the training length; {slope_kind}. Command: `python -m "
                 "experiments.ablation`.").format(
        windows=number(results["windows"]),
        slope_kind=_("slope: the ALiBi slope from the config") if entry["slope_kind"] == "applied"
        else _("slope: the decay fitted to the head's attention on the same text")))


def ablation_verdict(summary: dict) -> str:
    """What the measurement says, in numbers: the costliest head, how many cost little, the
    steep and gentle quarters and their rank correlation (it answers the question)."""
    layer, head, cost, slope = summary["top"]
    return (_(
        "Silencing layer {layer}, head {head} costs the most: +{cost} nats per token (slope "
        "{slope}). {minor} of the {heads} heads cost less than {minor_limit} when silenced. The "
        "steepest quarter of the heads by slope costs {steep} on average, the gentlest quarter "
        "{gentle}; the rank correlation of slope and cost is {rho}.").format(
        layer=layer + 1, head=head + 1, cost=number(cost, 3), slope=significant(slope, 3),
        minor=number(summary["minor"]), heads=number(summary["heads"]),
        minor_limit=number(MINOR, 2), steep=number(summary["steep"], 3),
        gentle=number(summary["gentle"], 3), rho=number(summary["rho"], 2)) + " " + (
        _("Here the steeper heads matter less, as the claim that steep heads are useless "
          "expects.") if summary["steep"] < summary["gentle"] else
        _("Here the steeper heads matter more: the claim that steep heads are useless does not "
          "hold for this model.")))


def ask_ablation(summary: dict) -> None:
    """Predict first: the question, and the answer with the verdict in numbers folded away
    until a student opens it (nothing below the chart gives it away)."""
    answer = (_("Yes: the steepest quarter costs {steep}, the gentlest {gentle} nats per token.")
              if summary["steep"] < summary["gentle"] else
              _("No: the steepest quarter costs {steep}, the gentlest {gentle} nats per token."))
    with ui.question(_("A source claims that heads whose slopes are too steep to look beyond "
                       "their neighbours end up useless. Do the steepest heads of this model "
                       "cost less when silenced than the gentlest?")):
        st.markdown(answer.format(steep=number(summary["steep"], 3),
                                  gentle=number(summary["gentle"], 3)))
        st.markdown(ablation_verdict(summary))
