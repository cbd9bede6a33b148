"""`alibi-viz report MODEL --out report.html`: one self-contained HTML file per model (the
model's facts, slopes, conformance with its per-head table, head gallery, attention maps),
exit 0 when written and 2 on errors, bounded in size, drawn by a browser offline."""

import re
from pathlib import Path

import pytest
from helpers import run_process

from alibi_viz.models.zoo import broken_model, tiny_model
from alibi_viz.tiny_models import byte_tokenizer, save_tiny_model

ROOT = Path(__file__).resolve().parents[1]
FIGURE_SPEC = re.compile(r'<script type="application/json" class="figure-spec"')


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The report on a tiny BLOOM folder, written by the command line in a process of its
    own: (process, html)."""
    folder = tmp_path_factory.mktemp("models")
    model = save_tiny_model(folder / "bloom", "bloom")
    out = folder / "report.html"
    done = run_process("report", model, "--out", out, "--tokens", 64)
    return done, out.read_text(encoding="utf-8") if out.exists() else "", out


def test_report_is_written_with_every_section(written):
    """Exit 0, one line on stdout naming the file and verdict; the five sections, the
    per-head table as text (4 heads x 2 layers), the decode table, plotly.js once."""
    done, document, out = written
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and str(out) in done.stdout and "conforms" in done.stdout
    for heading in ("1. The model", "2. Slopes against the standard schedules",
                    "3. Conformance", "4. Head gallery", "5. Attention on a sample text"):
        assert heading in document
    assert "BloomForCausalLM" in document and "CONFORMS." in document
    assert "Every head (8)" in document and document.count("<td>conforms</td>") == 8
    assert "Computed on the eager attention path" in document
    assert "prefill vs cached decode: logits" in document
    assert len(FIGURE_SPEC.findall(document)) == 4  # slopes, verdicts, gallery, attention
    assert document.count('id="plotly-js-gzip"') == 1 and "cdn.plot.ly" not in document


def test_report_of_a_model_that_does_not_conform(tmp_path):
    """A BLOOM whose bias is added twice (the zoo), reported from Python: the diagnosis is in
    the text, the per-head table open, and the check's verdict in the title."""
    from alibi_viz.models.loading import describe_model
    from alibi_viz.report import report_html

    model = broken_model("twice")
    document = report_html(model, byte_tokenizer(), describe_model(model), name="twice",
                           text="def f(x):\n    return x\n", decode=False)
    assert "does not conform (scaled)" in document and "DOES NOT CONFORM (scaled)" in document
    assert "twice its slope" in document or "added twice" in document
    assert "<details open>" in document and "not checked" in document


def test_report_says_which_attention_path_drew_the_maps():
    """The maps of section 5 come from eager attention (the path that returns
    probabilities): the report says so, and names the sdpa path the check ran on when
    that was another."""
    from alibi_viz.models.loading import describe_model
    from alibi_viz.report import report_html

    model = tiny_model("falcon", 8)
    text = "def f(x):\n    return x\n"
    eager = report_html(model, byte_tokenizer(), describe_model(model), name="falcon",
                        text=text, decode=False, attn="eager")
    sdpa = report_html(model, byte_tokenizer(), describe_model(model), name="falcon",
                       text=text, decode=False, attn="sdpa")
    assert "Computed on the eager attention path (the one that returns probabilities)." in eager
    assert "not the sdpa path the check above ran on" in sdpa
    assert "Checked on the sdpa attention path" in sdpa
    assert "not the sdpa path" not in eager


def test_report_refuses_sdpa_for_bloom_before_loading(tmp_path, cli):
    """--attn sdpa on BLOOM (no sdpa path in transformers) is refused from config.json alone,
    before the weights are read: a folder without weights gets that message, not the
    loader's."""
    folder = save_tiny_model(tmp_path / "bloom", "bloom")
    (folder / "model.safetensors").unlink()
    done = cli("report", folder, "--out", tmp_path / "r.html", "--attn", "sdpa")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "no sdpa attention" in done.stderr and "No weights" not in done.stderr


def test_report_of_a_model_without_alibi(tmp_path, cli):
    """A GPT-2 folder: written, its position scheme said, no check to run."""
    folder = save_tiny_model(tmp_path / "gpt2", "gpt2")
    out = tmp_path / "gpt2.html"
    done = cli("report", folder, "--out", out, "--no-decode", "--text", "hello " * 20)
    assert done.returncode == 0, done.stderr
    document = out.read_text(encoding="utf-8")
    assert "no ALiBi to check" in done.stdout
    assert "No ALiBi slopes" in document and "there is no ALiBi bias to check" in document
    assert len(FIGURE_SPEC.findall(document)) == 2  # gallery, attention


@pytest.mark.parametrize("args,message", [
    (("report", "{missing}", "--out", "{out}"), "No model folder at"),
    (("report", "{model}", "--out", "{nowhere}/r.html"), "cannot write --out"),
    (("report", "{model}", "--tokens", "3"), "--tokens must be 8-2048"),
    (("report", "{model}", "--text", "a", "--text-file", "b"), "not allowed with argument"),
])
def test_errors_exit_2_with_one_line(tmp_path, args, message, cli):
    """A missing model, an unwritable --out (refused before loading), bad options: exit 2,
    one line on stderr, no traceback, nothing written."""
    model = save_tiny_model(tmp_path / "bloom", "bloom")
    names = {"missing": tmp_path / "missing", "out": tmp_path / "r.html", "model": model,
             "nowhere": tmp_path / "nowhere"}
    done = cli(*(a.format(**names) for a in args))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_report_of_a_24_layer_16_head_model_stays_under_5_mb(tmp_path):
    """24 layers x 16 heads (hidden 64) at 256 tokens: the whole file, plotly.js included,
    under 5 MB (README: about 3.5 MB)."""
    from alibi_viz.models.loading import describe_model
    from alibi_viz.report import write_report

    model = tiny_model("bloom", heads=16, layers=24, head_dim=4)
    written = write_report(model, byte_tokenizer(), describe_model(model), tmp_path / "r.html",
                           name="24x16", max_tokens=256)
    assert written["bytes"] < 5 * 2**20, written
    document = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "256 tokens" in document and "Every head (384)" in document


@pytest.mark.browser
def test_report_opens_offline_and_draws_every_figure(written, browser):
    """Opened from file:// with the network off (and any request but the file refused): every
    figure block becomes a plotly plot, the layer slider has one step per layer, no errors."""
    _done, document, out = written
    context = browser.new_context(viewport={"width": 1100, "height": 900}, offline=True)
    requests, errors = [], []
    try:
        page = context.new_page()
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
            "file://") else (requests.append(route.request.url), route.abort()))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(out.as_uri())
        expected = len(FIGURE_SPEC.findall(document))
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length == "
                               f"{expected} && !document.getElementById('figures-status')",
                               timeout=30_000)
        assert page.locator(".js-plotly-plot").count() == expected
        steps = page.evaluate("document.querySelectorAll('.js-plotly-plot')[3]"
                              ".layout.sliders[0].steps.length")
        assert steps == 2
    finally:
        context.close()
    assert not errors and not requests, (errors, requests)
