"""alibi-viz on the command line: the ALiBi conformance check, for CI, and a report on a model.

    alibi-viz check MODEL [--dtype float32|bfloat16|float16] [--attn eager|sdpa]
                          [--no-decode] [--expected SCHEDULE|M1,M2,...] [--probe-length N]
                          [--summary | --all-heads] [--json FILE] [--markdown FILE]
    alibi-viz report MODEL [--out FILE] [--text TEXT | --text-file FILE] [--tokens N]
                           [--dtype ...] [--attn ...] [--no-decode]
    python -m alibi_viz.cli check MODEL ...            (the same, without the installed script)

MODEL is a model folder written by save_pretrained (config.json, safetensors weights, the
tokenizer) or a repo id in the local Hugging Face cache (`org/name` or `org/name@revision`);
`alibi_viz.models.loading.load_model` resolves both and never downloads anything. The check is
`alibi_viz.models.conformance.check_alibi`: it probes every head with one repeated token,
diagnoses the model (the simplest explanation that fits every head), then compares cached
decoding and a left-padded batch with one full forward (--no-decode skips that part).

--dtype    the dtype to load the weights in (default float32); the check's tolerances follow
           it (the report's "thresholds").
--attn     the attention path to check (default: the one the model's config uses; the loader
           picks eager). sdpa exists for Falcon only.
--expected the slopes the model should apply: a schedule name (official, geometric, mpt) or
           one number per head, comma-separated (per token, on the pre-softmax logits);
           needed for a model that is not BLOOM, MPT or Falcon with alibi=True, and it
           overrides the config of one that is.
--probe-length  tokens in the probe (16-65536, default 128): longer reaches a long-context
           clip and 16-bit rounding of the bias at large j.
--summary  print the per-head table only for the heads that do not conform (the default for
           models of more than 128 heads in all); --all-heads prints every head.
--json     also write the report as JSON to FILE (schema below).
--markdown also write a short Markdown report to FILE, for a pull-request comment: verdict,
           diagnosis, the heads that do not conform, decode and padding, thresholds.

Exit status: 0 the model conforms; 1 it does not (the report says why); 3 inconclusive (some
heads were read too coarsely to judge, and nothing else was found: the attention is dominated
by content or rounding); 2 a usage or load error (a one-line message on stderr, never a
traceback), including a model the check cannot read (not ALiBi, a path its architecture
lacks, weights offloaded to disk).

The output is English whatever the language settings: it is meant for CI logs.

`report` writes one self-contained HTML file (default report.html) that opens offline, for a
pull request: the model's facts and position scheme, its slopes against the schedules, the
conformance check (verdict grid, diagnosis, per-head table), the head gallery and every
layer's attention on a sample text (`alibi_viz.report`; English). --text or --text-file give
the sample text (default: a held-out Python module shipped with alibi-viz), --tokens its
length (default 256); --dtype, --attn and --no-decode as for `check`. Exit status: 0 written
(whatever the verdict: the report says it), 2 a usage, load or write error (one line on
stderr).

JSON report, schema "alibi-viz.conformance/2" (layers and heads are 0-based; numbers that are
not finite, NaN or infinite outputs, are null). /2 renamed each head's applied_slope of /1 to
measured_slope (the slope the probe measured, apart from the slope the config predicts);
nothing else changed:

    schema          "alibi-viz.conformance/2"
    model           MODEL as given; path: the folder it resolved to
    architecture    e.g. "BloomForCausalLM"; model_type: e.g. "bloom"
    dtype, attn     what was checked: "float32" ..., "eager" or "sdpa"
    conforms        true or false (the exit status is 0, else 1, or 3 when inconclusive)
    verdict         "conforms", a head verdict (scaled, sign_flipped, schedule, permuted, offset,
                    missing, clipped, inconclusive), "decode", "padding" or "builder" (the
                    installed transformers' ALiBi builder disagrees with the official rule):
                    the first finding's
    diagnosis       list of findings, most important first (empty when the model conforms):
                    {verdict, summary (one English sentence), layers (0-based; [] for decode
                    and padding), heads (how many it covers), evidence}, evidence holding
                    whichever apply: factor (the constant ratio), factor_name ("twice",
                    "inv_sqrt_d", "sqrt_d", "half", "inv_d" or null), schedule ("geometric" or
                    "official"), num_heads (the head count whose schedule is applied),
                    next_power_of_two (bool), max_bias, order ("reversed", "sorted_desc",
                    "sorted_asc", "permutation"), sources (per head, the 0-based head whose slope
                    it applies), distance_off_by (integer), offset (logits), clip_at (tokens),
                    counts ({verdict: heads} of what no explanation covers), logits and attention
                    (the decode or padding differences)
    expected_form   the form the expected slopes take, in words
    schedule        the standard schedule the measured slopes follow, or null
    probe_length    tokens in the probe
    thresholds      every tolerance used: dtype, read_dtype, eps, schedule_rounding, slope_rtol,
                    slope_atol, offset_tol, min_log_prob, min_queries, decode_rtol,
                    attention_tol (alibi_viz.models.conformance.Thresholds)
    heads           one object per head: layer, head, ok, verdict, expected_slope (from the
                    config, by alibi-viz's own rule), measured_slope (what the probe read),
                    ratio (measured / expected), offset, clip_at (or null), detail, reach,
                    resolution
    decode          null with --no-decode, else logits, layers (per layer), padding_logits,
                    padding_layers, logits_tolerance, attention_tolerance, ok, padding_ok
    notes           list of English sentences
    seconds         wall time of loading plus checking
    versions        {alibi_viz, torch, transformers}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
import warnings

from alibi_viz import i18n
from alibi_viz.alibi import SCHEDULES
from alibi_viz.errors import AlibiVizError

SCHEMA = "alibi-viz.conformance/2"
DTYPE_NAMES = ("float32", "bfloat16", "float16")
DEFAULT_REPORT_TOKENS, MAX_REPORT_TOKENS = 256, 2048
EXIT_CONFORMS, EXIT_DOES_NOT_CONFORM, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3
SUMMARY_HEADS = 128  # more heads than this in all: the per-head table lists only the failures
MARKDOWN_HEADS = 50  # at most this many heads in the Markdown report's table


class UsageError(Exception):
    """A bad command line (argparse's complaint), reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits; we want one line, status 2
        raise UsageError(message)


def _check_options(parser) -> None:
    """The options `check` and `report` share: how the model is loaded and what is checked."""
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="float32",
                        help="dtype to load the weights in (default float32)")
    parser.add_argument("--attn", choices=("eager", "sdpa"), default=None,
                        help="attention path to check (default: the model config's)")
    parser.add_argument("--no-decode", action="store_true",
                        help="skip the prefill-vs-decode and left-padding checks")

def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="alibi-viz", description="See and check ALiBi models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    check = commands.add_parser("check", help="check that a model applies ALiBi correctly",
                                description="Check that a model applies ALiBi correctly: exit "
                                            "0 if it conforms, 1 if not, 2 on errors.")
    check.add_argument("model", metavar="MODEL",
                       help="model folder or cached repo id (org/name[@revision])")
    _check_options(check)
    check.add_argument("--expected", type=_expected, default=None,
                       metavar="SCHEDULE|M1,M2,...",
                       help="expected slopes: official, geometric, mpt, or one per head")
    check.add_argument("--probe-length", type=_probe_length, default=128, metavar="N",
                       help="tokens in the probe (16-65536, default 128)")
    table = check.add_mutually_exclusive_group()
    table.add_argument("--summary", action="store_true",
                       help="list only the heads that do not conform")
    table.add_argument("--all-heads", action="store_true",
                       help="list every head (default up to 128 heads)")
    check.add_argument("--json", metavar="FILE", default=None,
                       help="also write the report as JSON to FILE")
    check.add_argument("--markdown", metavar="FILE", default=None,
                       help="also write a Markdown report to FILE (for a pull request)")
    report = commands.add_parser(
        "report", help="write a self-contained HTML report on a model",
        description="Write one HTML file about a model (facts, slopes, conformance, head "
                    "gallery, attention maps) that opens offline: exit 0 when written, 2 on "
                    "errors.")
    report.add_argument("model", metavar="MODEL",
                        help="model folder or cached repo id (org/name[@revision])")
    report.add_argument("--out", metavar="FILE", default="report.html",
                        help="the HTML file to write (default report.html)")
    sample = report.add_mutually_exclusive_group()
    sample.add_argument("--text", default=None, help="the sample text for the attention maps")
    sample.add_argument("--text-file", metavar="FILE", default=None,
                        help="read the sample text from FILE (UTF-8)")
    report.add_argument("--tokens", type=_tokens, default=DEFAULT_REPORT_TOKENS,
                        help=f"tokens of the sample text (8-{MAX_REPORT_TOKENS}, default "
                             f"{DEFAULT_REPORT_TOKENS})")
    _check_options(report)
    return parser


def _tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens must be a whole number, got {text!r}") from None
    if not 8 <= value <= MAX_REPORT_TOKENS:
        raise argparse.ArgumentTypeError(f"--tokens must be 8-{MAX_REPORT_TOKENS}, got {value}")
    return value


def _expected(text: str):
    """--expected: a schedule name, or comma-separated positive slopes."""
    if text in SCHEDULES:
        return text
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--expected must be one of {', '.join(SCHEDULES)} or comma-separated numbers, got "
            f"{text!r}") from None
    if not all(v == v and abs(v) != float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"--expected slopes must be finite, got {text!r}")
    return values


def _probe_length(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--probe-length must be a whole number, got {text!r}") from None
    if not 16 <= value <= 65536:
        raise argparse.ArgumentTypeError(f"--probe-length must be 16-65536, got {value}")
    return value


def _quiet() -> None:
    """No progress bars, warnings or downloads: stderr is for our one-line errors."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    import transformers  # heavy (seconds): only once a command runs, never for --help

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def verdict_line(report: dict) -> str:
    """CONFORMS, INCONCLUSIVE or DOES NOT CONFORM (verdict), as the text report prints it."""
    if report["conforms"]:
        return "CONFORMS"
    if report["verdict"] == "inconclusive":
        return "INCONCLUSIVE"
    return f"DOES NOT CONFORM ({report['verdict']})"


def exit_status(report: dict) -> int:
    """0 conforms, 1 does not, 3 inconclusive (module docstring)."""
    if report["conforms"]:
        return EXIT_CONFORMS
    return EXIT_INCONCLUSIVE if report["verdict"] == "inconclusive" else EXIT_DOES_NOT_CONFORM


def markdown_report(report: dict) -> str:
    """A short Markdown report for a pull-request comment: verdict, diagnosis, the heads that
    do not conform (at most MARKDOWN_HEADS), decode and padding, thresholds."""
    lines = [f"### alibi-viz check: {verdict_line(report)}", "",
             f"`{report['model']}`: {report['architecture']} ({report['model_type']}), "
             f"{report['dtype']}, {report['attn']} attention, probe of {report['probe_length']} "
             f"tokens. Expected: {report['expected_form']}.", ""]
    lines += [f"- {finding['summary']}" for finding in report["diagnosis"]]
    failing = [h for h in report["heads"] if h["verdict"] != "conforms"]
    lines += ["", f"{len(report['heads']) - len(failing)} of {len(report['heads'])} heads "
              "conform."]
    if failing:
        lines += ["", "| layer | head | verdict | expected | measured | ratio | detail |",
                  "|---:|---:|---|---:|---:|---:|---|"]
        lines += [f"| {h['layer'] + 1} | {h['head'] + 1} | {h['verdict']} | "
                  f"{_number(h['expected_slope'])} | {_number(h['measured_slope'])} | "
                  f"{_number(h['ratio'])} | {h['detail'].replace('|', '/') or '-'} |"
                  for h in failing[:MARKDOWN_HEADS]]
        if len(failing) > MARKDOWN_HEADS:
            lines.append(f"\n... and {len(failing) - MARKDOWN_HEADS} more (see the JSON report).")
    decode = report["decode"]
    lines.append("")
    if decode is None:
        lines.append("Decode and padding: not checked (--no-decode).")
    else:
        lines.append(f"Decode: {'pass' if decode['ok'] else 'FAIL'} (logits "
                     f"{_number(decode['logits'])}, tolerance "
                     f"{_number(decode['logits_tolerance'])}); padding: "
                     f"{'pass' if decode['padding_ok'] else 'FAIL'} (logits "
                     f"{_number(decode['padding_logits'])}).")
    lines += [f"Note: {note}" for note in report["notes"]]
    versions = report.get("versions") or {}
    lines += ["", f"<sub>alibi-viz {versions.get('alibi_viz')}, torch {versions.get('torch')}, "
              f"transformers {versions.get('transformers')}, {report['seconds']:.1f} s</sub>"]
    return "\n".join(lines) + "\n"


def human_report(report: dict, summary: bool | None = None) -> str:
    """The short text report of a JSON report: verdict, diagnosis, per-head table (summary:
    only the heads that do not conform; None: so when there are more than SUMMARY_HEADS),
    decode and padding results, thresholds and notes."""
    if summary is None:
        summary = len(report["heads"]) > SUMMARY_HEADS
    lines = [f"alibi-viz check {report['model']}",
             f"  {report['architecture']} ({report['model_type']}), {report['dtype']}, "
             f"{report['attn']} attention, probe of {report['probe_length']} tokens",
             f"  expected: {report['expected_form']}"]
    lines.append(f"verdict: {verdict_line(report)}")
    lines += [f"  - {finding['summary']}" for finding in report["diagnosis"]]
    failing = [h for h in report["heads"] if h["verdict"] != "conforms"]
    listed = report["heads"] if not summary else failing
    if summary:
        lines.append(f"heads: {len(report['heads'])} checked, "
                     f"{len(report['heads']) - len(failing)} conform"
                     + (f"; the {len(failing)} that do not:" if failing else "")
                     + ("" if failing else " (--all-heads lists them)"))
    else:
        lines.append("heads:")
    if listed:
        lines.append(f"  {'layer':>5} {'head':>4}  {'verdict':<12} {'expected':>10} "
                     f"{'measured':>10} {'ratio':>7} {'offset':>8} {'clip':>5}  detail")
    for h in listed:
        lines.append(f"  {h['layer'] + 1:>5} {h['head'] + 1:>4}  {h['verdict']:<12} "
                     f"{_number(h['expected_slope']):>10} {_number(h['measured_slope']):>10} "
                     f"{_number(h['ratio']):>7} {_number(h['offset']):>8} "
                     f"{h['clip_at'] if h['clip_at'] is not None else '-':>5}  {h['detail']}")
    decode = report["decode"]
    if decode is None:
        lines.append("decode: not checked (--no-decode)")
    else:
        def verdict(ok):
            return "pass" if ok else "FAIL"
        lines.append(f"decode: {verdict(decode['ok'])}: prefill vs cached decode, logits "
                     f"{_number(decode['logits'])} (tolerance {_number(decode['logits_tolerance'])}"
                     f"), first layer's attention {_number(decode['layers'][0])} (tolerance "
                     f"{_number(decode['attention_tolerance'])}); per layer: "
                     + ", ".join(_number(v) for v in decode["layers"]))
        lines.append(f"padding: {verdict(decode['padding_ok'])}: left-padded batch vs alone, "
                     f"logits {_number(decode['padding_logits'])}, first layer's attention "
                     f"{_number(decode['padding_layers'][0])}; per layer: "
                     + ", ".join(_number(v) for v in decode["padding_layers"]))
    th = report["thresholds"]
    lines.append(f"thresholds ({th['dtype']}, probabilities read in {th['read_dtype']}): slopes "
                 f"{_number(th['slope_rtol'])} relative + {_number(th['slope_atol'])}, offset "
                 f"{_number(th['offset_tol'])}, decode {_number(th['decode_rtol'])} x layers x "
                 f"logits scale, attention {_number(th['attention_tol'])}")
    lines += [f"note: {note}" for note in report["notes"]]
    lines.append(f"time: {report['seconds']:.1f} s")
    return "\n".join(lines)


def _sdpa_first(model: str) -> None:
    """--attn sdpa on an architecture without an sdpa path: refuse from its config, before the
    weights load (seconds). Anything unclear is left to the loader and the check."""
    try:
        # heavy: transformers, and torch through the loader; not imported for --help
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        from alibi_viz.models.loading import resolve_model_path

        folder = resolve_model_path(model)
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
        cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type])
    except Exception:  # noqa: BLE001 (the loader reports a bad folder better)
        return
    if not getattr(cls, "_supports_sdpa", False):
        raise AlibiVizError(f"{cls.__name__} has no sdpa attention in transformers: only its "
                            "eager path can be checked.")


def check(model: str, dtype: str = "float32", attn: str | None = None, decode: bool = True,
          expected=None, probe_length: int = 128) -> dict:
    """Load MODEL and check it: the JSON report (module docstring). Raises AlibiVizError
    (ModelLoadError included) when it cannot."""
    start = time.perf_counter()
    if attn == "sdpa":
        _sdpa_first(model)
    # heavy: torch, transformers and the models, imported once a check runs, not for --help
    import torch

    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.loading import load_model

    i18n.set_language("en")  # CI logs are English
    net, tokenizer, info = load_model(model, dtype=getattr(torch, dtype), need_tokenizer=decode)
    result = check_alibi(net, tokenizer, decode=decode, attn=attn, expected=expected,
                         probe_length=probe_length)
    report = {"schema": SCHEMA, "model": model, "path": info.path,
              "architecture": info.architecture, **result.to_dict()}
    report["seconds"] = round(time.perf_counter() - start, 3)
    report["versions"] = _versions()
    return report


def _versions() -> dict:
    """{alibi_viz, torch, transformers} versions (alibi_viz None when not installed)."""
    # importlib.metadata (50 ms), torch, transformers: once a command has run, not for --help
    from importlib.metadata import PackageNotFoundError, version

    import torch
    import transformers

    try:
        own = version("alibi-viz")
    except PackageNotFoundError:
        own = None
    return {"alibi_viz": own, "torch": torch.__version__,
            "transformers": transformers.__version__}


def write_html_report(args) -> dict:
    """`alibi-viz report`: load MODEL, write the HTML report to --out. Returns
    write_report's {"path", "bytes", "seconds"} plus the verdict line. Raises AlibiVizError
    (ModelLoadError included) or OSError."""
    start = time.perf_counter()
    if args.attn == "sdpa":
        _sdpa_first(args.model)
    # heavy: torch, the models and the report's plotly, imported once a report runs
    import torch

    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.loading import load_model
    from alibi_viz.report import write_report

    folder = os.path.dirname(os.path.abspath(args.out))
    if os.path.isdir(args.out) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write --out {args.out}: "
                         + ("it is a folder" if os.path.isdir(args.out) else
                            f"no writable folder {folder}"))
    text, source = args.text, "The given text" if args.text is not None else None
    if args.text_file is not None:
        try:
            with open(args.text_file, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --text-file {args.text_file}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        source = f"The text of {os.path.basename(args.text_file)}"
    i18n.set_language("en")  # the report is English, like the CI logs
    net, tokenizer, info = load_model(args.model, dtype=getattr(torch, args.dtype))
    check = check_error = None
    if info.positional == "alibi":
        try:
            check = check_alibi(net, tokenizer, decode=not args.no_decode, attn=args.attn)
        except AlibiVizError as exc:
            if args.attn is not None:  # asked for a path this architecture lacks
                raise
            check_error = str(exc)  # e.g. weights offloaded: the report says so
    try:
        written = write_report(net, tokenizer, info, args.out, name=args.model, text=text,
                               text_source=source, max_tokens=args.tokens, check=check,
                               check_error=check_error, versions=_versions())
    except OSError as exc:
        raise UsageError(f"cannot write --out {args.out}: {exc.strerror or exc}") from None
    written["verdict"] = ("no ALiBi to check" if check is None and info.positional != "alibi"
                          else "check could not run" if check is None
                          else "conforms" if check.ok else f"does not conform ({check.verdict})")
    written["seconds"] = round(time.perf_counter() - start, 3)
    return written


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _error_text(exc: BaseException, model: str | None = None) -> str:
    """The error in one line; code to paste (the loader's conversion recipe) follows it as a
    block of its own lines, ready for a Python prompt, FOLDER set to MODEL's folder."""
    from alibi_viz.models.loading import CONVERT_CODE  # heavy (torch): only on an error

    text = str(exc)
    if CONVERT_CODE not in text:
        return _one_line(exc)
    folder = (repr(os.path.abspath(model)) if model and os.path.isdir(model)
              else '"path/to/the/model/folder"')
    return (_one_line(text.replace(CONVERT_CODE, "")) + "\n\n" + f"FOLDER = {folder}\n"
            + textwrap.dedent(CONVERT_CODE) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (module docstring)."""
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError("give a command: alibi-viz check MODEL or alibi-viz report MODEL "
                             "(see alibi-viz --help)")
    except UsageError as exc:
        print(f"alibi-viz: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    _quiet()
    try:
        if args.command == "report":
            written = write_html_report(args)
        else:
            report = check(args.model, args.dtype, args.attn, decode=not args.no_decode,
                           expected=args.expected, probe_length=args.probe_length)
    except (AlibiVizError, UsageError) as exc:
        print(f"alibi-viz: error: {_error_text(exc, args.model)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 (CI wants one line, never a traceback)
        print(f"alibi-viz: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    if args.command == "report":
        print(f"alibi-viz report: wrote {written['path']} ({written['bytes'] / 2**20:.1f} MB) "
              f"in {written['seconds']:.1f} s; {written['verdict']}")
        return EXIT_CONFORMS
    for path, write in ((args.json, lambda h: (json.dump(report, h, indent=2,
                                                         allow_nan=False), h.write("\n"))),
                        (args.markdown, lambda h: h.write(markdown_report(report)))):
        if not path:
            continue
        try:
            with open(path, "w", encoding="utf-8") as handle:
                write(handle)
        except OSError as exc:
            print(f"alibi-viz: error: cannot write {path}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_ERROR
    print(human_report(report, True if args.summary else False if args.all_heads else None))
    return exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
