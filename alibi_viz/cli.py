"""alibi-viz on the command line: the ALiBi conformance check, for CI, and a report on a model.

    alibi-viz check MODEL [--dtype float32|bfloat16|float16] [--attn eager|sdpa]
                          [--no-decode] [--json FILE]
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
--json     also write the report as JSON to FILE (schema below).

Exit status: 0 the model conforms; 1 it does not (the report says why); 2 a usage or load error
(a one-line message on stderr, never a traceback), including a model the check cannot read
(not ALiBi, a path its architecture lacks, weights offloaded to disk).

The output is English whatever the language settings: it is meant for CI logs.

`report` writes one self-contained HTML file (default report.html) that opens offline, for a
pull request: the model's facts and position scheme, its slopes against the schedules, the
conformance check (verdict grid, diagnosis, per-head table), the head gallery and every
layer's attention on a sample text (`alibi_viz.report`; English). --text or --text-file give
the sample text (default: a held-out Python module shipped with alibi-viz), --tokens its
length (default 256); --dtype, --attn and --no-decode as for `check`. Exit status: 0 written
(whatever the verdict: the report says it), 2 a usage, load or write error (one line on
stderr).

JSON report, schema "alibi-viz.conformance/1" (layers and heads are 0-based; numbers that are
not finite, NaN or infinite outputs, are null):

    schema          "alibi-viz.conformance/1"
    model           MODEL as given; path: the folder it resolved to
    architecture    e.g. "BloomForCausalLM"; model_type: e.g. "bloom"
    dtype, attn     what was checked: "float32" ..., "eager" or "sdpa"
    conforms        true or false (the exit status is 0 or 1 accordingly)
    verdict         "conforms", a head verdict (scaled, sign_flipped, schedule, permuted, offset,
                    missing, clipped), "decode" or "padding": the first finding's
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
    schedule        the standard schedule the applied slopes follow, or null
    probe_length    tokens in the probe
    thresholds      every tolerance used: dtype, read_dtype, eps, schedule_rounding, slope_rtol,
                    slope_atol, offset_tol, min_log_prob, min_queries, decode_rtol,
                    attention_tol (alibi_viz.models.conformance.Thresholds)
    heads           one object per head: layer, head, ok, verdict, expected_slope,
                    applied_slope, ratio, offset, clip_at (or null), detail, reach
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
import time
import warnings

SCHEMA = "alibi-viz.conformance/1"
DTYPE_NAMES = ("float32", "bfloat16", "float16")
DEFAULT_REPORT_TOKENS, MAX_REPORT_TOKENS = 256, 2048
EXIT_CONFORMS, EXIT_DOES_NOT_CONFORM, EXIT_ERROR = 0, 1, 2


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
    check.add_argument("--json", metavar="FILE", default=None,
                       help="also write the report as JSON to FILE")
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


def _quiet() -> None:
    """No progress bars, warnings or downloads: stderr is for our one-line errors."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def human_report(report: dict) -> str:
    """The short text report of a JSON report: verdict, diagnosis, per-head table, decode and
    padding results, thresholds and notes."""
    lines = [f"alibi-viz check {report['model']}",
             f"  {report['architecture']} ({report['model_type']}), {report['dtype']}, "
             f"{report['attn']} attention, probe of {report['probe_length']} tokens",
             f"  expected: {report['expected_form']}"]
    if report["conforms"]:
        lines.append("verdict: CONFORMS")
    else:
        lines.append(f"verdict: DOES NOT CONFORM ({report['verdict']})")
        lines += [f"  - {finding['summary']}" for finding in report["diagnosis"]]
    lines.append("heads:")
    lines.append(f"  {'layer':>5} {'head':>4}  {'verdict':<12} {'expected':>10} {'applied':>10} "
                 f"{'ratio':>7} {'offset':>8} {'clip':>5}  detail")
    for h in report["heads"]:
        lines.append(f"  {h['layer'] + 1:>5} {h['head'] + 1:>4}  {h['verdict']:<12} "
                     f"{_number(h['expected_slope']):>10} {_number(h['applied_slope']):>10} "
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


def check(model: str, dtype: str = "float32", attn: str | None = None, decode: bool = True) -> dict:
    """Load MODEL and check it: the JSON report (module docstring). Raises AlibiVizError
    (ModelLoadError included) when it cannot."""
    start = time.perf_counter()
    import torch

    from alibi_viz import i18n
    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.loading import load_model

    i18n.set_language("en")  # CI logs are English
    net, tokenizer, info = load_model(model, dtype=getattr(torch, dtype))
    result = check_alibi(net, tokenizer, decode=decode, attn=attn)
    report = {"schema": SCHEMA, "model": model, "path": info.path,
              "architecture": info.architecture, **result.to_dict()}
    report["seconds"] = round(time.perf_counter() - start, 3)
    report["versions"] = _versions()
    return report


def _versions() -> dict:
    """{alibi_viz, torch, transformers} versions (alibi_viz None when not installed)."""
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
    import torch

    from alibi_viz import i18n
    from alibi_viz.errors import AlibiVizError
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
    from alibi_viz.errors import AlibiVizError

    try:
        if args.command == "report":
            written = write_html_report(args)
        else:
            report = check(args.model, args.dtype, args.attn, decode=not args.no_decode)
    except (AlibiVizError, UsageError) as exc:
        print(f"alibi-viz: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 (CI wants one line, never a traceback)
        print(f"alibi-viz: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    if args.command == "report":
        print(f"alibi-viz report: wrote {written['path']} ({written['bytes'] / 2**20:.1f} MB) "
              f"in {written['seconds']:.1f} s; {written['verdict']}")
        return EXIT_CONFORMS
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(report, handle, indent=2, allow_nan=False)
                handle.write("\n")
        except OSError as exc:
            print(f"alibi-viz: error: cannot write {args.json}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_ERROR
    print(human_report(report))
    return EXIT_CONFORMS if report["conforms"] else EXIT_DOES_NOT_CONFORM


if __name__ == "__main__":
    sys.exit(main())
