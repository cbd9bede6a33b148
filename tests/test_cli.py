"""The command line `alibi-viz check MODEL` for CI, run on tiny models saved to temporary
folders (in the test's process, its stdout and stderr read at the file descriptors, and as a
process of its own where a process differs: cli_runner): exit 0 for a conforming model, 1 for
one that does not, 2 for a usage or load error (one line on stderr, never a traceback), and
the JSON report's schema."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import run_process

from alibi_viz.cli import SCHEMA
from alibi_viz.models.loading import describe_model
from alibi_viz.models.zoo import tiny_model
from alibi_viz.tiny_models import byte_tokenizer

ROOT = Path(__file__).resolve().parents[1]
REV = "0123456789abcdef0123456789abcdef01234567"


def save(folder: Path, kind: str, heads: int = 8) -> Path:
    tiny_model(kind, heads).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """A Hugging Face cache holding org/bloom: a correct 8-head BLOOM under snapshots/<rev>."""
    cache = tmp_path_factory.mktemp("hub")
    repo = cache / "models--org--bloom"
    save(repo / "snapshots" / REV, "bloom")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    return cache


def test_conforming_cached_model_exits_0_with_a_json_report(hub_cache, tmp_path):
    """A correct BLOOM named by its cached repo id: exit 0, "verdict: CONFORMS", decode and
    padding results in the text, and a JSON report with the documented fields."""
    report = tmp_path / "report.json"
    # a process of its own: HF_HUB_CACHE is read when huggingface_hub is imported
    done = run_process("check", "org/bloom", "--json", report,
                       env={"HF_HUB_CACHE": str(hub_cache)})
    assert done.returncode == 0, done.stderr
    assert "verdict: CONFORMS" in done.stdout
    assert "decode: pass" in done.stdout and "padding: pass" in done.stdout
    data = json.loads(report.read_text())
    assert data["schema"] == SCHEMA and data["conforms"] is True and data["verdict"] == "conforms"
    assert data["model"] == "org/bloom" and data["architecture"] == "BloomForCausalLM"
    assert {"dtype", "attn", "diagnosis", "heads", "decode", "thresholds", "notes", "seconds",
            "versions"} <= set(data)
    config = json.loads((hub_cache / "models--org--bloom" / "snapshots" / REV / "config.json").read_text())
    assert len(data["heads"]) == config["n_layer"] * config["n_head"]  # one row per layer and head
    assert data["decode"]["ok"] is True


def test_model_that_does_not_conform_exits_1_with_its_diagnosis(tmp_path, cli):
    """transformers' eager Falcon adds its bias twice: exit 1, the diagnosis sentence, the
    per-head table, and decode marked as not checked with --no-decode."""
    folder = save(tmp_path / "falcon", "falcon")
    report = tmp_path / "falcon.json"
    done = cli("check", folder, "--no-decode", "--json", report)
    assert done.returncode == 1, done.stderr
    assert "DOES NOT CONFORM (scaled)" in done.stdout
    assert "the bias is added twice (transformers' Falcon eager path does this)" in done.stdout
    assert "decode: not checked" in done.stdout
    config = json.loads((folder / "config.json").read_text())
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    rows = [line for line in done.stdout.splitlines()
            if line.strip().startswith(tuple(f"{layer} " for layer in range(1, layers + 1)))]
    assert len(rows) == layers * heads  # the per-head table: one row per layer and head
    data = json.loads(report.read_text())
    assert data["diagnosis"][0]["evidence"]["factor_name"] == "twice" and data["decode"] is None


def test_json_report_schema_2_names_the_measured_slope(tmp_path, cli):
    """Schema alibi-viz.conformance/2: every head carries exactly the documented keys, the slope
    the probe measured as measured_slope (renamed from /1). On transformers' eager Falcon that
    is the slope the config predicts for the eager logits (ModelInfo.config_slopes, 2m/sqrt(d)),
    twice expected_slope; the text table heads its column "measured"."""
    folder = save(tmp_path / "falcon", "falcon")
    report = tmp_path / "falcon.json"
    done = cli("check", folder, "--no-decode", "--json", report)
    assert done.returncode == 1, done.stderr
    assert "measured" in done.stdout.split("heads:")[1].splitlines()[1]
    data = json.loads(report.read_text())
    assert data["schema"] == SCHEMA == "alibi-viz.conformance/2"
    assert all(set(h) == {"layer", "head", "ok", "verdict", "expected_slope", "measured_slope",
                          "ratio", "offset", "clip_at", "detail", "reach", "resolution"}
               for h in data["heads"])
    config_slopes = describe_model(tiny_model("falcon", 8)).config_slopes
    heads = len(config_slopes)
    measured = [h["measured_slope"] for h in data["heads"]]
    expected = [h["expected_slope"] for h in data["heads"]]
    np.testing.assert_allclose(measured, np.tile(config_slopes, len(measured) // heads),
                               rtol=1e-3)
    np.testing.assert_allclose(measured, 2 * np.array(expected), rtol=1e-3)


def test_sdpa_and_dtype_options_reach_the_check(tmp_path, cli):
    """--attn sdpa --dtype bfloat16 on a Falcon: its sdpa path conforms in bfloat16."""
    folder = save(tmp_path / "falcon", "falcon")
    report = tmp_path / "sdpa.json"
    done = cli("check", folder, "--attn", "sdpa", "--dtype", "bfloat16", "--json", report)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    assert (data["attn"], data["dtype"]) == ("sdpa", "bfloat16")


@pytest.mark.parametrize("args,message", [
    (("check",), "the following arguments are required: MODEL"),
    (("check", "x", "--dtype", "int8"), "invalid choice: 'int8'"),
    ((), "give a command"),
])
def test_usage_errors_exit_2_with_one_line(args, message, cli):
    """A bad command line: exit 2, one line on stderr, no usage dump, no traceback."""
    done = cli(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert done.stderr.startswith("alibi-viz: error:") and not done.stdout


def test_load_error_exits_2_with_one_line(tmp_path, cli):
    """A folder that does not exist: exit 2 and the loader's message in one line."""
    done = cli("check", tmp_path / "nowhere")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "No model folder at" in done.stderr
    assert "Traceback" not in done.stderr


def test_path_the_model_lacks_exits_2(tmp_path, cli):
    """--attn sdpa on BLOOM, which has no sdpa path in transformers: exit 2, one line."""
    done = cli("check", save(tmp_path / "bloom", "bloom"), "--attn", "sdpa", "--no-decode")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no sdpa attention" in done.stderr


def test_check_without_decode_needs_no_tokenizer(tmp_path, cli):
    """--no-decode checks the bias alone: a folder without tokenizer files is checked (exit
    0); without --no-decode the same folder is refused for its missing tokenizer (exit 2)."""
    folder = tmp_path / "bloom"
    tiny_model("bloom", 8).save_pretrained(folder)
    done = cli("check", folder, "--no-decode")
    assert done.returncode == 0, done.stderr
    assert "verdict: CONFORMS" in done.stdout and "not checked (--no-decode)" in done.stdout
    done = cli("check", folder)
    assert done.returncode == 2 and "Tokenizer missing" in done.stderr


def test_pickle_weights_hint_is_code_to_paste(tmp_path, cli):
    """A folder with pytorch_model.bin only: the error line, then the conversion as lines of
    their own, unindented, that compile as Python (they were squashed onto the error line
    with their '#' comments inside it)."""
    folder = save(tmp_path / "bloom", "bloom")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    done = cli("check", folder)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    first, _blank, code = done.stderr.partition("\n\n")
    assert first.startswith("alibi-viz: error: This folder has only pickle weights")
    assert "\n" not in first and "#" not in first and "from_pretrained" not in first
    assert code.splitlines()[0] == f"FOLDER = {str(folder)!r}"
    assert code.splitlines()[1].startswith("from transformers import")
    compile(code, "pasted", "exec")  # no IndentationError: ready for a Python prompt


def test_weights_that_do_not_match_the_config_are_named(tmp_path, cli):
    """config.json says hidden 64, the weights hold 32: the error names the mismatched
    tensors with both shapes (transformers' own message points to a report it logged)."""
    folder = save(tmp_path / "bloom", "bloom")
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] *= 2
    (folder / "config.json").write_text(json.dumps(config))
    done = cli("check", folder, "--no-decode")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "The weights do not match config.json" in done.stderr
    assert "above report" not in done.stderr
    assert "in the weights," in done.stderr and "by config.json" in done.stderr


def test_script_is_declared():
    """pyproject.toml declares the alibi-viz script as alibi_viz.cli:main."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["alibi-viz"] == "alibi_viz.cli:main"


def test_expected_probe_length_summary_and_markdown(tmp_path, cli):
    """--expected geometric on a 12-head BLOOM (official slopes): exit 1, the schedule named;
    --probe-length reaches the check; --summary lists only the heads that do not conform;
    --markdown writes the verdict, the diagnosis and those heads for a pull request."""
    folder = save(tmp_path / "bloom12", "bloom", heads=12)
    md, report = tmp_path / "comment.md", tmp_path / "r.json"
    done = cli("check", folder, "--no-decode", "--expected", "geometric", "--probe-length",
                   "96", "--summary", "--markdown", md, "--json", report)
    assert done.returncode == 1, done.stderr
    data = json.loads(report.read_text())
    assert data["probe_length"] == 96 and data["verdict"] == "schedule", data["diagnosis"]
    config = json.loads((folder / "config.json").read_text())
    checked = config["n_layer"] * config["n_head"]
    failing = sum(h["verdict"] != "conforms" for h in data["heads"])
    assert len(data["heads"]) == checked
    assert f"heads: {checked} checked, {checked - failing} conform; the {failing} that do not:" \
        in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == failing > 0
    text = md.read_text()
    assert text.startswith("### alibi-viz check: DOES NOT CONFORM")
    assert data["diagnosis"][0]["summary"] in text and text.count("\n| ") == failing + 1


def test_conforming_model_with_summary_lists_no_heads(tmp_path, cli):
    """--summary on a conforming model: one line of counts, no per-head rows; slopes given as
    numbers with --expected are what it is checked against."""
    from alibi_viz.alibi import alibi_slopes

    folder = save(tmp_path / "bloom", "bloom")
    config = json.loads((folder / "config.json").read_text())
    slopes = ",".join(f"{m:.10g}" for m in alibi_slopes(config["n_head"]))
    done = cli("check", folder, "--no-decode", "--summary", "--expected", slopes)
    assert done.returncode == 0, done.stderr
    checked = config["n_layer"] * config["n_head"]
    assert f"heads: {checked} checked, {checked} conform (--all-heads lists them)" in done.stdout
    assert not [line for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]


@pytest.mark.parametrize("args,message", [
    (("--expected", "0.5,x"), "--expected must be one of official, geometric, mpt"),
    (("--probe-length", "8"), "--probe-length must be 16-65536"),
    (("--summary", "--all-heads"), "not allowed with argument"),
])
def test_bad_check_options_exit_2_with_one_line(args, message, cli):
    """Bad --expected, --probe-length, or --summary with --all-heads: exit 2, one line."""
    done = cli("check", "x", *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr


def test_sdpa_on_bloom_is_refused_before_loading(tmp_path, cli):
    """--attn sdpa on BLOOM is refused from config.json alone: a folder without weights gets
    that message, not the loader's (the architecture is checked first, not after a load)."""
    from alibi_viz.tiny_models import tiny_config

    folder = tmp_path / "config-only"
    tiny_config("bloom").save_pretrained(folder)
    done = cli("check", folder, "--attn", "sdpa")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "BloomForCausalLM has no sdpa attention" in done.stderr
