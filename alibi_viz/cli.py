"""alibi-viz on the command line: the ALiBi conformance check, for CI.

    alibi-viz check MODEL [--dtype float32|bfloat16|float16] [--attn eager|sdpa]
                          [--no-decode] [--json FILE]
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
EXIT_CONFORMS, EXIT_DOES_NOT_CONFORM, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A bad command line (argparse's complaint), reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits; we want one line, status 2
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="alibi-viz", description="See and check ALiBi models.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    check = commands.add_parser("check", help="check that a model applies ALiBi correctly",
                                description="Check that a model applies ALiBi correctly: exit "
                                            "0 if it conforms, 1 if not, 2 on errors.")
    check.add_argument("model", metavar="MODEL",
                       help="model folder or cached repo id (org/name[@revision])")
    check.add_argument("--dtype", choices=DTYPE_NAMES, default="float32",
                       help="dtype to load the weights in (default float32)")
    check.add_argument("--attn", choices=("eager", "sdpa"), default=None,
                       help="attention path to check (default: the model config's)")
    check.add_argument("--no-decode", action="store_true",
                       help="skip the prefill-vs-decode and left-padding checks")
    check.add_argument("--json", metavar="FILE", default=None,
                       help="also write the report as JSON to FILE")
    return parser


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
    import transformers

    from alibi_viz import i18n
    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.loading import load_model

    i18n.set_language("en")  # CI logs are English
    net, tokenizer, info = load_model(model, dtype=getattr(torch, dtype))
    result = check_alibi(net, tokenizer, decode=decode, attn=attn)
    report = {"schema": SCHEMA, "model": model, "path": info.path,
              "architecture": info.architecture, **result.to_dict()}
    report["seconds"] = round(time.perf_counter() - start, 3)
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("alibi-viz")
    except PackageNotFoundError:
        own = None
    report["versions"] = {"alibi_viz": own, "torch": torch.__version__,
                          "transformers": transformers.__version__}
    return report


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (module docstring)."""
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError("give a command: alibi-viz check MODEL (see alibi-viz --help)")
    except UsageError as exc:
        print(f"alibi-viz: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    _quiet()
    from alibi_viz.errors import AlibiVizError

    try:
        report = check(args.model, args.dtype, args.attn, decode=not args.no_decode)
    except AlibiVizError as exc:
        print(f"alibi-viz: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 (CI wants one line, never a traceback)
        print(f"alibi-viz: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
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
