"""alibi-viz in a notebook: one call, one plotly figure, displayed inline.

    import alibi_viz
    from alibi_viz.assets import MODELS_DIR

    model, tokenizer, info = alibi_viz.load_model(MODELS_DIR / "alibi")
    alibi_viz.show_heads(model, tokenizer, "def add(a, b):\\n    return a + b\\n")
    alibi_viz.show_bias(num_heads=8, seq_len=64)
    alibi_viz.show_check(alibi_viz.check_alibi(model, tokenizer))
    alibi_viz.show_gallery(model, tokenizer)

The notebook counterparts of bertviz's `head_view(attention, tokens)` and CircuitsVis's
`attention_heads(...)`: each function runs what it needs (one forward pass, the probes, the
check) and returns a `plotly.graph_objects.Figure`. As the last expression of a Jupyter cell it
is shown inline through plotly's mime type (application/vnd.plotly.v1+json: JupyterLab,
VS Code and nbconvert draw it); `fig.write_html("heads.html")` keeps it. Building is separate
from showing, as bertviz's `html_action='return'` has it: nothing here displays by itself.

Texts follow the current language (`alibi_viz.i18n.set_language`), fitted to a notebook cell
(NOTEBOOK_WIDTH_PX wide). Layers and heads are 0-based in arguments, as in HF's
`outputs.attentions[layer][0, head]`, and 1-based in the figures, as on the app's pages.

Payloads stay bounded whatever the text's length, as on the pages: attention maps are images
at display resolution with a sparse hover grid (`figures.render`), never T x T floats (what
makes bertviz freeze beyond a few hundred tokens). All layers at once share one pixel budget
(LAYERS_PIXEL_BUDGET), so a 24-layer model gets coarser panels, not a heavier figure.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from alibi_viz.alibi import alibi_slopes
from alibi_viz.display import HOVER_CELL_BUDGET, IMAGE_PIXEL_BUDGET, stack_view
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.bias import bias_grid_figure
from alibi_viz.figures.render import figure, fit_texts, wrap_text
from alibi_viz.i18n import _, plotly_separators

NOTEBOOK_WIDTH_PX = 900        # texts are fitted to this width (a JupyterLab cell, sidebar open)
DEFAULT_MAX_TOKENS = 512       # the most tokens show_heads runs the model on, unless told
LAYERS_PIXEL_BUDGET = 1_200_000  # image pixels over every layer of a many-layer figure
LAYERS_HOVER_BUDGET = 24_000     # hover cells over every layer of it
SLIDER_PX = 90                 # room under the plot for the layer slider
COLORBAR_PX = 90               # a colour bar and its title, beside the plot


def fitted(fig: go.Figure, width: int = NOTEBOOK_WIDTH_PX) -> go.Figure:
    """`fig` with the language's number marks and its texts fitted to `width` px (changed in
    place, as `render.figure_spec` does for the pages); returns it."""
    if fig.layout.separators is None:
        fig.update_layout(separators=plotly_separators())
    fit_texts(fig, width)
    return fig


def _subtitled(fig: go.Figure, text: str, width: int = NOTEBOOK_WIDTH_PX) -> go.Figure:
    """`fig` (fitted) with plain `text` as its title's subtitle, broken to `width` px (one
    line per line of `text`) with room made for it above the plot."""
    size = 13
    shown, lines = wrap_text(html.escape(text, quote=False).replace("\n", "<br>"), size,
                             width - 20, max_lines=8)
    fig.update_layout(title_subtitle=dict(text=shown, font=dict(size=size)),
                      margin_t=(fig.layout.margin.t or 80) + round(1.3 * size * lines))
    return fig


def _info(model, info):
    """The model's ModelInfo: the one given (what load_model returned), else described now."""
    if info is not None:
        return info
    from alibi_viz.models.loading import describe_model  # heavy: torch, for a model only

    return describe_model(model)


def _check_tokenizer(tokenizer, name: str) -> None:
    if tokenizer is None or not callable(getattr(tokenizer, "encode", None)):
        raise AlibiVizError(_("{name} needs the model's tokenizer (the second value load_model "
                              "returns), got {kind}.").format(name=name,
                                                             kind=type(tokenizer).__name__))


def _layers(layer, num_layers: int) -> list[int]:
    """[layer] checked against the model (0-based), or every layer for None."""
    if layer is None:
        return list(range(num_layers))
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < num_layers:
        raise AlibiVizError(_("layer must be a whole number from 0 to {last} (0-based, as in "
                              "outputs.attentions), or None for every layer; got {value}.")
                            .format(last=num_layers - 1, value=repr(layer)))
    return [layer]


def layer_slider_figure(figs: list[go.Figure], layers: list[int]) -> go.Figure:
    """One figure of several layers' figures (same layout, e.g. `attention_grid_figure` of each
    layer), the first shown and a slider under the plot to pick the others: plotly's own
    `sliders` (restyle "visible", relayout the title), so it needs no server and no widget
    library, in a notebook as in a saved HTML file. figs are fitted already."""
    specs = [fig.to_dict() for fig in figs]
    data, spans = [], []
    for i, spec in enumerate(specs):
        spans.append((len(data), len(data) + len(spec["data"])))
        data += [{**trace, "visible": i == 0} for trace in spec["data"]]
    steps = []
    for spec, layer, (start, stop) in zip(specs, layers, spans, strict=True):
        visible = [start <= k < stop for k in range(len(data))]
        title = (spec["layout"].get("title") or {}).get("text", "")
        steps.append({"label": str(layer + 1), "method": "update",
                      "args": [{"visible": visible}, {"title.text": title}]})
    layout = specs[0]["layout"]
    margin = dict(layout.get("margin") or {})
    bottom = margin.get("b", 80)
    margin["b"] = bottom + SLIDER_PX
    layout.update(margin=margin, height=(layout.get("height") or 450) + SLIDER_PX, sliders=[{
        "active": 0, "steps": steps, "x": 0, "len": 1, "y": 0, "yanchor": "top",
        "pad": {"t": bottom + 10, "b": 10},
        "currentvalue": {"prefix": _("Layer") + " ", "font": {"size": 13}}}])
    return figure(data, layout)


def attention_layers_figure(maps, tokens: list[str], layers: list[int], *, slopes=None,
                            train_seq_len: int | None = None, scale: str = "log",
                            pixel_budget: int = LAYERS_PIXEL_BUDGET,
                            hover_budget: int = LAYERS_HOVER_BUDGET,
                            width: int = NOTEBOOK_WIDTH_PX) -> go.Figure:
    """Every head of each of `layers` (0-based), as `attention_grid_figure` draws one layer;
    several layers under one slider (`layer_slider_figure`).

    maps: one (heads, T, T) array per layer (`attention_maps(...).maps`); tokens: T labels.
    The layers share `pixel_budget` image pixels and `hover_budget` hover cells (each layer at
    most what a page gives one figure); labelled heatmaps only while every layer's panels
    together stay small (`figures.heads.use_labels`)."""
    from alibi_viz.figures.heads import attention_grid_figure, use_labels  # heavy: torch

    if not layers:
        raise AlibiVizError(_("Nothing to draw: choose at least one layer."))
    heads, T = maps[layers[0]].shape[0], maps[layers[0]].shape[-1]
    labels = use_labels(T, heads * len(layers))
    pixels = min(IMAGE_PIXEL_BUDGET, pixel_budget // len(layers))
    hover = min(HOVER_CELL_BUDGET, hover_budget // len(layers))
    figs = []
    for layer in layers:
        view = stack_view(maps[layer], side=T if labels else None, pixel_budget=pixels,
                          hover_side=max(2, int(math.sqrt(hover / heads))), reduce="max")
        figs.append(_snug(fitted(attention_grid_figure(
            view, tokens, layer, slopes=_layer_row(slopes, layer), train_seq_len=train_seq_len, scale=scale,
            labels=labels), width), width))
    return figs[0] if len(figs) == 1 else layer_slider_figure(figs, layers)


def _layer_row(slopes, layer: int):
    """The (heads,) slopes of `layer` from (heads,) or (layers, heads) slopes (or None)."""
    if slopes is None or np.ndim(slopes) == 1:
        return slopes
    return slopes[layer]


def _snug(fig: go.Figure, width: int) -> go.Figure:
    """A mosaic figure (one image, square pixels: `render.matrix_grid_figure`) as tall as its
    panels are at `width` px, so no band of white stands above and below them."""
    layout = fig.layout
    if layout.yaxis.scaleanchor != "x" or not layout.xaxis.range or not layout.yaxis.range:
        return fig
    margin = {side: getattr(layout.margin, side) or 0 for side in "lrtb"}
    across = abs(layout.xaxis.range[1] - layout.xaxis.range[0])
    down = abs(layout.yaxis.range[1] - layout.yaxis.range[0])
    plot = max(100, width - margin["l"] - margin["r"] - COLORBAR_PX)
    fig.update_layout(height=round(plot * down / across) + margin["t"] + margin["b"])
    return fig


def show_heads(model, tokenizer, text: str, layer: int | None = None, *,
               max_tokens: int | None = DEFAULT_MAX_TOKENS, scale: str = "log",
               info=None) -> go.Figure:
    """Every head's attention on `text`: one layer (0-based `layer`), or every layer under a
    slider (None, the default). One eager forward pass (`models.heads.attention_maps`: at most
    `max_tokens` tokens, within a 1 GiB budget for the maps); panel titles hold the ALiBi
    slopes m, and dashed red lines mark the training length when the text is longer.

    scale: "log" (log10 attention, where ALiBi's linear decay is a straight gradient) or
    "linear". info: the ModelInfo load_model returned (else the model is described again).
    What was cut from the text, if anything, is the figure's subtitle."""
    # heavy: torch, imported with the first model's figure (show_bias needs none)
    from alibi_viz.models.attention import attention_maps
    from alibi_viz.models.loading import train_seq_len

    _check_tokenizer(tokenizer, "show_heads")
    info = _info(model, info)
    layers = _layers(layer, info.num_layers)
    result = attention_maps(model, tokenizer, text, max_tokens=max_tokens, info=info)
    fig = attention_layers_figure(result.maps, result.tokens, layers, slopes=info.slopes,
                                  train_seq_len=train_seq_len(info), scale=scale)
    return _subtitled(fig, result.truncated) if result.truncated else fig


def show_bias(num_heads: int, seq_len: int, mode: str = "causal", *,
              schedule: str = "official", max_bias: float = 8.0,
              scale: str = "clipped") -> go.Figure:
    """The ALiBi bias matrices of `num_heads` heads over `seq_len` tokens, one panel per head
    (the Bias explorer's grid): slopes from `alibi_slopes(num_heads, schedule, max_bias)`; mode
    "causal" (-m(i-j) under the causal mask) or "symmetric" (-m|i-j|); scale as
    `figures.bias.bias_grid_figure` takes it. Drawn at display resolution whatever seq_len."""
    slopes = alibi_slopes(num_heads, schedule, max_bias)
    return fitted(bias_grid_figure(slopes, seq_len, mode, scale=scale))


def check_sentence(check) -> str:
    """The verdict of an AlibiCheck in one text: "Conforms ..." or "Does not conform: " and the
    diagnosis, one finding a line (plain text, current language)."""
    if check.ok:
        return _("Conforms: every head applies the expected bias ({form}).").format(
            form=check.expected_form)
    return _("Does not conform: {diagnosis}").format(diagnosis="\n".join(check.problems()))


def show_check(check, *, width: int = NOTEBOOK_WIDTH_PX) -> go.Figure:
    """The conformance check's verdicts, layer x head (`figures.heads.verdict_grid_figure`:
    expected and measured slope of each head on hover), the diagnosis as the subtitle.

    check: what `check_alibi(model, tokenizer)` returns (an AlibiCheck). width: the width in
    px the texts are fitted to."""
    # heavy: torch, imported with the first model's figure (show_bias needs none)
    from alibi_viz.figures.heads import verdict_grid_figure
    from alibi_viz.models.conformance import AlibiCheck

    if not isinstance(check, AlibiCheck):
        raise AlibiVizError(_("show_check takes the result of check_alibi(model, tokenizer) (an "
                              "AlibiCheck), got {kind}.").format(kind=type(check).__name__))
    return _subtitled(fitted(verdict_grid_figure(check), width), check_sentence(check), width)


def show_gallery(model, tokenizer, *, info=None, behaviour=None,
                 width: int = NOTEBOOK_WIDTH_PX) -> go.Figure:
    """Every head's strongest behaviour, layer x head (previous token, local, first-token sink,
    copying, bracket matching, newline following, content-driven), every score on hover: the
    head gallery of the app (`models.behaviour.behaviour_scores` on its fixed probe texts).

    info: the ModelInfo load_model returned; behaviour: scores computed already (HeadBehaviour),
    to draw them without running the probes again. width: the width in px the texts are
    fitted to."""
    # heavy: torch, imported with the first model's figure (show_bias needs none)
    from alibi_viz.figures.heads import behaviour_grid_figure
    from alibi_viz.models.behaviour import behaviour_scores

    if behaviour is None:
        _check_tokenizer(tokenizer, "show_gallery")
        info = _info(model, info)
        behaviour = behaviour_scores(model, tokenizer, slopes=info.config_slopes)
    fig = behaviour_grid_figure(behaviour)
    fig.update_layout(title=_("Each head's strongest behaviour (hover a head for its scores)"),
                      clickmode="none")
    return fitted(fig, width)
