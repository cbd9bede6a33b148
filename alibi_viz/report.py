"""One HTML file about one model, to attach to a pull request: `alibi-viz report MODEL --out
report.html` (alibi_viz/cli.py), or `write_report(model, tokenizer, info, path)` from Python.

What it holds, in order:
  1. the model: its facts and how it encodes position (`loading.model_info_rows`), the
     departures from the paper the loader found (warnings) and what it did (notes);
  2. its slopes against the standard schedules (`figures.heads.model_slopes_figure`);
  3. the conformance check (`models.conformance.check_alibi`): verdict, diagnosis, the
     verdict grid, then as text the per-head table, prefill vs decode and left padding, and
     the thresholds used;
  4. the head gallery (`models.behaviour.behaviour_scores`): every head's strongest
     behaviour, and the best head for each behaviour as text;
  5. the attention maps of a sample text, every layer under one slider
     (`notebook.attention_layers_figure`).
A model without ALiBi gets every section that applies to it, and says why the others are empty.

English only: a report goes to reviewers, like the CLI's output goes to CI logs, whatever the
language settings (the figures are built in English too).

It opens offline from file://, alone: everything is inline. plotly.js (4.8 MB minified, more
than the report's budget by itself) is embedded once, gzip-compressed and base64-encoded
(about 2 MB), and unpacked by the browser's DecompressionStream (Chrome 80, Firefox 113,
Safari 16.4 and later); each figure is a JSON block drawn by a short script after it. The text
sections are plain HTML and read without the figures. Attention images are re-encoded with a
256-colour palette, half the bytes of the RGB PNG the pages send. For a 24-layer x 16-head model
at 256 tokens the file is 3.5 MB, 2 MB of it plotly.js (README, "Checking an ALiBi port").
"""

from __future__ import annotations

import base64
import datetime
import gzip
import html
import io
import json
import time
from pathlib import Path

import numpy as np
import plotly.io as pio
from PIL import Image
from plotly.offline import get_plotlyjs

from alibi_viz import i18n
from alibi_viz.data import long_example
from alibi_viz.errors import AlibiVizError
from alibi_viz.figures.heads import model_slopes_figure
from alibi_viz.models.attention import attention_maps
from alibi_viz.models.behaviour import BEHAVIOUR_TITLES, BEHAVIOURS, behaviour_scores
from alibi_viz.models.conformance import check_alibi
from alibi_viz.models.loading import localized, model_info_rows, train_seq_len, training_of
from alibi_viz.notebook import attention_layers_figure, fitted, show_check, show_gallery

REPORT_WIDTH_PX = 960          # figures are fitted to this width (the page's column)
DEFAULT_TOKENS = 256           # tokens of the sample text
# Attention maps, over every layer together (a 24 x 16 model gets panels of about 70 px, a
# hover cell every 24 tokens): about 1.5 MB whatever the model.
REPORT_PIXEL_BUDGET = 2_000_000
REPORT_HOVER_BUDGET = 12_000

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1000px; padding: 0 16px 48px; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.6em 0; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 2px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #666; font-size: 0.9em; } .figure { margin: 0.8em 0; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #c62828; font-weight: bold; }
.warning { background: #fff4e5; border-left: 4px solid #f0a020; padding: 4px 10px; margin: 4px 0; }
.note { background: #eef4fb; border-left: 4px solid #4c78a8; padding: 4px 10px; margin: 4px 0; }
details { margin: 0.6em 0; } pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
"""

# Unpacks plotly.js, then draws every figure: a failure leaves the text and says why.
_LOADER = """
(async function () {
  const status = document.getElementById("figures-status");
  try {
    const packed = document.getElementById("plotly-js-gzip").textContent.trim();
    const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const code = await new Response(stream).text();
    window.PlotlyConfig = {MathJaxConfig: "local"};
    const script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    for (const spec of document.querySelectorAll("script.figure-spec")) {
      const figure = JSON.parse(spec.textContent);
      await Plotly.newPlot(document.getElementById(spec.dataset.target), figure.data,
                           figure.layout, {displaylogo: false, responsive: true});
    }
    status.remove();
  } catch (error) {
    status.textContent = "The figures could not be drawn (" + error + "): they need a browser "
      + "that unpacks gzip (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or "
      + "later). The text of this report reads without them.";
  }
})();
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _number(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    value = float(value)
    return f"{value:.{digits}g}" if np.isfinite(value) else str(value)


def table(rows: list[dict], numeric: tuple[str, ...] = ()) -> str:
    """`rows` (dicts with the same keys, the column names) as a plain HTML table; the columns
    named in `numeric` right-aligned and written with `_number`."""
    if not rows:
        return ""
    columns = list(rows[0])
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row[c]
            if c in numeric:
                cells.append(f'<td class="n">{_e(_number(value))}</td>')
            else:
                cells.append(f"<td>{_e('-' if value is None else value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# ----------------------------------------------------------------------------- figures

def _palette_png(uri: str) -> str:
    """A PNG data URI re-encoded with at most 256 colours (exact when the image has that few;
    the attention mosaics hold the 256 of the colour scale plus grey and white, merged into
    their nearest neighbours): about half the bytes of the RGB PNG."""
    image = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB")
    pixels = np.asarray(image).reshape(-1, 3).astype(np.uint32)
    # each colour as one number 0xRRGGBB: sorted as the (r, g, b) rows would be, and a
    # one-dimensional unique is a plain sort (np.unique(axis=0) took 0.5 s an image)
    keys, index = np.unique(pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2],
                            return_inverse=True)
    colors = np.stack([keys >> 16, keys >> 8 & 255, keys & 255], axis=1)
    if len(colors) <= 256:
        paletted = Image.fromarray(index.reshape(image.height, image.width).astype(np.uint8), "P")
        paletted.putpalette(colors.astype(np.uint8).ravel().tolist())
    else:
        paletted = image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    paletted.save(out, format="PNG", optimize=True)
    smaller = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")
    return smaller if len(smaller) < len(uri) else uri


def figure_json(fig) -> str:
    """A plotly figure as the JSON plotly.js reads (arrays base64-encoded, images paletted),
    safe inside a <script> element."""
    spec = json.loads(pio.to_json(fig, validate=False))
    for trace in spec["data"]:
        source = trace.get("source")
        if trace.get("type") == "image" and isinstance(source, str) and source.startswith(
                "data:image/png;base64,"):
            trace["source"] = _palette_png(source)
    # "<" only occurs inside strings, where \\u003c means the same: no "</script>" can end it
    return json.dumps(spec, separators=(",", ":")).replace("<", "\\u003c")


class _Figures:
    """Collects the report's figures: each becomes an empty div and a JSON block."""

    def __init__(self):
        self.count = 0

    def html(self, fig, fit: bool = True) -> str:
        """The div and JSON block of `fig`, its texts fitted to the report's width first
        (fit=False: fitted already)."""
        self.count += 1
        target = f"figure-{self.count}"
        if fit:
            fitted(fig, REPORT_WIDTH_PX)
        return (f'<div class="figure" id="{target}"></div>'
                f'<script type="application/json" class="figure-spec" data-target="{target}">'
                f"{figure_json(fig)}</script>")


def plotly_js_gzip() -> str:
    """plotly.js (the version plotly.py ships), gzip-compressed and base64-encoded."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), compresslevel=9,
                                          mtime=0)).decode("ascii")


# ----------------------------------------------------------------------------- sections

def _model_section(info, training: dict) -> str:
    rows = [{"property": r["property"], "value": r["value"]}
            for r in model_info_rows(info, training)]
    parts = ["<h2>1. The model</h2>", table(rows)]
    parts += [f'<div class="warning">{_e(localized(w))}</div>' for w in info.warnings]
    parts += [f'<div class="note">{_e(localized(n))}</div>' for n in info.notes]
    if info.positional == "alibi" and not info.warnings:
        parts.append('<div class="note">ALiBi as in the paper: slopes from a standard schedule, '
                     "the bias added to the scores unscaled.</div>")
    return "\n".join(parts)


def _slopes_section(info, figures: _Figures) -> str:
    parts = ["<h2>2. Slopes against the standard schedules</h2>"]
    if not info.slopes:
        parts.append(f"<p>No ALiBi slopes: this model encodes position with "
                     f"<b>{_e(info.positional)}</b> ({_e(info.bias_form)}).</p>")
        return "\n".join(parts)
    try:
        fig = model_slopes_figure(info.slopes, info.config_slopes, name=info.architecture)
    except AlibiVizError as exc:
        parts.append(f"<p>{_e(exc)}</p>")
    else:
        parts.append(figures.html(fig))
    return "\n".join(parts)


def _check_section(check, error: str | None, figures: _Figures) -> str:
    parts = ["<h2>3. Conformance: is this model applying ALiBi correctly?</h2>"]
    if check is None:
        parts.append(f"<p>The conformance check did not run: {_e(error)}</p>")
        return "\n".join(parts)
    data = check.to_dict()
    if check.ok:
        parts.append(f'<p><span class="ok">CONFORMS.</span> Every head applies the expected '
                     f"bias: {_e(check.expected_form)}.</p>")
    else:
        parts.append(f'<p><span class="bad">DOES NOT CONFORM ({_e(check.verdict)}).</span></p>')
        parts.append("<ul>" + "".join(f"<li>{_e(p)}</li>" for p in check.problems()) + "</ul>")
        parts.append(f"<p>Expected: {_e(check.expected_form)}.</p>")
    th = check.thresholds
    parts.append(f'<p class="meta">Checked on the {_e(check.attn)} attention path in '
                 f"{_e(check.dtype)}, probe of {check.probe_length} tokens (one token repeated); "
                 f"slopes resolved to {_number(th.slope_rtol, 2)} relative + "
                 f"{_number(th.slope_atol, 2)}, offsets to {_number(th.offset_tol, 2)} logits."
                 "</p>")
    parts += [f'<div class="warning">{_e(note)}</div>' for note in check.notes]
    parts.append(figures.html(show_check(check, width=REPORT_WIDTH_PX), fit=False))
    heads = [{"layer": h["layer"] + 1, "head": h["head"] + 1, "verdict": h["verdict"],
              "expected m": h["expected_slope"], "measured m": h["measured_slope"],
              "ratio": h["ratio"], "offset": h["offset"], "clip at": h["clip_at"],
              "detail": h["detail"] or ""} for h in data["heads"]]
    parts.append(f"<details{'' if check.ok else ' open'}><summary>Every head "
                 f"({len(heads)}): expected and measured slope per token, on the pre-softmax "
                 "logits (layers and heads 1-based)</summary>"
                 + table(heads, numeric=("layer", "head", "expected m", "measured m", "ratio",
                                         "offset", "clip at")) + "</details>")
    if check.decode is None:
        parts.append("<p>Prefill vs cached decoding and left padding: not checked.</p>")
    else:
        labels = {"decode": "prefill vs cached decode", "padding": "left padding"}
        rows = [{"check": f"{labels[kind]}: " + ("logits" if layer is None else
                                                  f"layer {layer + 1} attention"),
                 "largest |difference|": value, "tolerance": tolerance,
                 "pass": "-" if tolerance is None else ("yes" if value <= tolerance else "NO")}
                for kind, layer, value, tolerance in check.decode.rows()]
        parts.append("<p>Prefill vs cached decoding, and a left-padded batch vs each text "
                     "alone (the first layer must agree to the dtype's rounding; deeper layers "
                     "are shown, not judged):</p>"
                     + table(rows, numeric=("largest |difference|", "tolerance")))
    return "\n".join(parts)


def _gallery_section(behaviour, error: str | None, figures: _Figures) -> str:
    parts = ["<h2>4. Head gallery: what does each head do?</h2>"]
    if behaviour is None:
        parts.append(f"<p>The probes could not run: {_e(error)}</p>")
        return "\n".join(parts)
    parts.append(figures.html(show_gallery(None, None, behaviour=behaviour,
                                           width=REPORT_WIDTH_PX), fit=False))
    rows = []
    for name in BEHAVIOURS:
        best = behaviour.best_head(name)
        if best is None:
            continue
        layer, head = best
        rows.append({"behaviour": BEHAVIOUR_TITLES[name], "best head": f"layer {layer + 1}, "
                     f"head {head + 1}", "score": behaviour.values(name)[layer, head],
                     "its scores": "; ".join(behaviour.score_texts(layer, head))})
    parts.append("<p>The head that scores highest on each behaviour (definitions: "
                 "alibi_viz/models/behaviour.py; content KL in nats):</p>"
                 + table(rows, numeric=("score",)))
    return "\n".join(parts)


def _attention_section(result, info, train_seq_len, source: str, figures: _Figures,
                       checked_attn: str | None = None) -> str:
    T = len(result.tokens)
    path = "the eager attention path (the one that returns probabilities)"
    if checked_attn not in (None, "eager"):
        path += f", not the {checked_attn} path the check above ran on"
    parts = ["<h2>5. Attention on a sample text</h2>",
             f"<p>{_e(source)}: {T:,} tokens, every layer under the slider (log10 attention; "
             "rows are queries, columns keys; panels max-pooled to display resolution, exact "
             f"values on hover at sampled positions). Computed on {_e(path)}.</p>"]
    if result.truncated:
        parts.append(f'<p class="meta">{_e(result.truncated)}</p>')
    fig = attention_layers_figure(result.maps, result.tokens, list(range(info.num_layers)),
                                  slopes=info.slopes, train_seq_len=train_seq_len,
                                  pixel_budget=REPORT_PIXEL_BUDGET,
                                  hover_budget=REPORT_HOVER_BUDGET, width=REPORT_WIDTH_PX)
    parts.append(figures.html(fig, fit=False))  # fitted layer by layer
    return "\n".join(parts)


# ----------------------------------------------------------------------------- the report

def report_html(model, tokenizer, info, *, name: str, text: str | None = None,
                text_source: str | None = None, max_tokens: int = DEFAULT_TOKENS,
                decode: bool = True, attn: str | None = None, check=None,
                check_error: str | None = None, versions: dict | None = None) -> str:
    """The report on a loaded model (`load_model`'s three values) as one HTML document.

    name: what the model is called in the title (the path or repo id given). text: the sample
    text of section 5 (default: a held-out Python module shipped with alibi-viz, the same on
    every machine), cut to `max_tokens` tokens; text_source: how section 5 names it.
    decode, attn: passed to check_alibi, unless `check` (an AlibiCheck) or `check_error` (why
    it could not run) is given. versions: shown in the header. A check or probe that cannot run on this model leaves its section
    saying why; loading errors are the caller's."""
    start = time.perf_counter()
    previous = i18n.get_language()
    i18n.set_language("en")
    try:
        training = training_of(info)
        length = train_seq_len(info, training)
        if text is None:
            text = long_example(kind="python")
            text_source = text_source or "A held-out Python module (shipped with alibi-viz)"
        text_source = text_source or "The given text"
        figures = _Figures()
        behaviour_error = None
        if check is None and check_error is None and info.positional == "alibi":
            try:
                check = check_alibi(model, tokenizer, decode=decode, attn=attn)
            except (AlibiVizError, RuntimeError) as exc:
                check_error = str(exc)
        elif check is None and check_error is None:
            check_error = (f"this model encodes position with {info.positional}: there is no "
                           "ALiBi bias to check.")
        try:
            behaviour = behaviour_scores(model, tokenizer, slopes=info.config_slopes)
        except (AlibiVizError, RuntimeError) as exc:
            behaviour, behaviour_error = None, str(exc)
        result = attention_maps(model, tokenizer, text, max_tokens=max_tokens, info=info)
        sections = [
            _model_section(info, training),
            _slopes_section(info, figures),
            _check_section(check, check_error, figures),
            _gallery_section(behaviour, behaviour_error, figures),
            _attention_section(result, info, length, text_source, figures,
                               None if check is None else check.attn),
        ]
    finally:
        i18n.set_language(previous)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    seconds = time.perf_counter() - start
    versions = versions or {}
    made = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    verdict = ("" if check is None else " - conforms" if check.ok
               else f" - does not conform ({check.verdict})")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>alibi-viz report: {_e(name)}{_e(verdict)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>alibi-viz report: {_e(name)}</h1>",
        f'<p class="meta">{_e(info.architecture)} ({_e(info.model_type)}), {info.num_layers} '
        f"layers x {info.num_heads} heads; written {stamp} in {seconds:.1f} s"
        + (f" by {_e(made)}" if made else "") + ".</p>",
        '<p id="figures-status" class="meta">Drawing the figures...</p>',
        *sections,
        f'<script type="application/octet-stream" id="plotly-js-gzip">{plotly_js_gzip()}'
        "</script>",
        f"<script>{_LOADER}</script>",
        "</body></html>", ""])


def write_report(model, tokenizer, info, path, **options) -> dict:
    """Write `report_html(model, tokenizer, info, **options)` to `path` (UTF-8). Returns
    {"path", "bytes", "seconds"}. Raises OSError when the file cannot be written."""
    start = time.perf_counter()
    document = report_html(model, tokenizer, info, **options)
    path = Path(path)
    path.write_text(document, encoding="utf-8")
    return {"path": str(path), "bytes": path.stat().st_size,
            "seconds": round(time.perf_counter() - start, 3)}
