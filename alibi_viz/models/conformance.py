"""Is this model applying ALiBi correctly? A conformance check for ALiBi checkpoints and ports.

`check_alibi(model, tokenizer)` answers, for the model and for every layer and head: is the
positional bias the model really applies the one its config says it should, in prefill and in
cached decoding, with left padding too? And when it is not, which bug explains it?

The applied-bias probe. Feed one token repeated T times. A model without position embeddings
then keeps every position's hidden state identical in every layer (each attention output is
a weighted average of identical values), so every head's content score q.k is one constant
and its pre-softmax logits are that constant plus exactly the bias it applies. Attention
probabilities therefore give the applied bias back: log p_ij - log p_ii = b(i - j) - b(0).
That reads what the model really computes, bugs included, in its own attention path (eager:
`output_attentions`; sdpa: the inputs of torch's scaled_dot_product_attention, recorded and
softmaxed in float64 as sdpa does). The check verifies the identical-states premise on the
probe itself and raises AlibiVizError when it fails (a model that also adds learned or
sinusoidal positions). From each head's averaged curve y(d) = b(d) - b(0) it fits, weighting
each distance by the queries that saw it, the measured slope m (y = a - m d), the offset a (a
jump between d = 0 and d = 1) and a clip point (y stops changing after N tokens).

Diagnose the model first, then the heads. The whole set of measured slopes of a layer is fitted
to the explanations a port can have, simplest first, and the first that fits every head is the
diagnosis (`AlibiCheck.diagnosis`, a list of `Finding`s; layers with the same explanation are
merged):

  conforms      the configured slopes (in the architecture's documented form, below).
  missing       no positional bias at all.
  missing       also: whole tensor-parallel shards (k blocks of n/k heads) adding no bias.
  missing       also: ALiBi on some heads only, heads 1..k with the k-head schedule and no
                bias on the rest (x-transformers' alibi_num_heads).
  scaled        one constant factor k for every head: k = 2 is "the bias is added twice"
                (transformers' eager Falcon does this), k = 1/sqrt(head_dim) "divided by
                sqrt(head_dim)" (a Falcon-RW port), k = sqrt(head_dim) "multiplied by it".
  sign_flipped  k < 0: the bias grows with distance; also with another schedule or order
                (the sign flipped and the slopes reversed).
  schedule      another schedule: the geometric formula 2^(-8h/n) of the paper instead of the
                official rule (they differ when n is not a power of two), the first n slopes of
                another head count's schedule (e.g. truncated from the next power of two), or
                another max_bias (named before another head count's schedule whose first
                slopes are the same: the cause before the coincidence), the schedule for
                n/k heads repeated k times (each
                tensor-parallel shard built its own); also with one of the named factors above.
  permuted      the configured slopes in another head order: reversed, sorted, or permuted
                (which head got which slope is in the evidence).
Orthogonal to the slopes, per layer:
  offset        y(d) jumps between d = 0 and d = 1: every key but the query's own gets a
                constant. When it is an integer c times each head's slope, the distance is off
                by c for every key but the query's own. A distance off by one for every key,
                the diagonal included, is a constant per row: harmless, invisible to softmax
                and to this probe, and it passes as it should.
  clipped       the bias stops growing after N tokens (in every head whose probe reaches N).
Every query row, too (`row_measures`): where the slopes conform but the worst row's attention
differs from exact ALiBi by more than the dtype's rounding explains (`tv_tolerance`), a note
gives its total variation and where it is (a 16-bit model rounding +m j far from zero at a long
probe); `kernel_check` makes that a finding of its own.
Heads that no explanation covers keep a verdict of their own (conforms, missing, sign_flipped,
permuted: another head's slope, or scaled: its own ratio). `HeadCheck.verdict` is the verdict
of the finding that covers the head ("conforms" for a head whose slope happens to be right).

Expected slopes are the configured schedule in the form the architecture documents, from
this project's own rule (`rule_slopes`: `alibi_slopes`, the official rule of fairseq's
get_slopes; MPT's schedule with the config's alibi_bias_max; Falcon's slopes rounded to
bfloat16 as its builder rounds them, `round_to_bfloat16`), never from transformers' builders,
which are the code a model under test runs: m_h for BLOOM and MPT (bias added unscaled), and
m_h / sqrt(d) for Falcon with alibi=True (the original Falcon-RW code: softmax((QK^T + alibi) /
sqrt(d))). The tests check the rule against transformers' builders and fairseq for 1-128
heads. At run time the installed transformers' builder is compared with the rule, and where it
disagrees that is a finding of its own ("builder": "Your transformers' BLOOM builder gives 2x
the official slopes"). transformers' MPT ignores the config's alibi_bias_max and always
applies 8: the check expects the config's value and says what the config asks, what
transformers does and what the model does. transformers' eager Falcon adds the bias twice, so
it is diagnosed `scaled` by 2, with the reason; its sdpa path conforms. Any other causal LM
whose attention can be read is checked against `expected=` (slopes, or a schedule name of
`alibi_slopes`); an attention kernel or a bias tensor alone, with `kernel_check`.

Resolution (`Thresholds`, in `AlibiCheck.thresholds`). What the probe can tell apart depends
on the dtype, and every tolerance is derived from it (eps: the dtype's machine epsilon; the
probabilities are read in the model's dtype on the eager path, recomputed in float64 on sdpa):
  slope_rtol    max(2^-10, 2 eps, 2 u) relative, u the schedule's own rounding (Falcon's
                bfloat16 slopes: 2^-8; exact schedules: 0). Bugs move slopes by 8 % or more
                (two neighbouring slopes of 64 heads), a factor 2 or a sign.
  slope_atol    the floor of each head's resolution: 1e-6 + eps/64 of the probabilities'
                dtype. Each head's own resolution (`HeadCheck.resolution`) is the larger of
                this, RESOLUTION_SE standard errors of its fitted slope (from the fit's
                residuals), RESOLUTION_SPREAD times the spread of its slope between the
                probe's tokens (PROBE_TOKENS: the bias is the same for each, the content is
                not; the measured slope is their median) and the bias's own rounding (eps m_h
                at the probe's far keys, over the distances read): what the probe really
                measured (a 16-bit model rounds its probabilities and hidden states; content
                logits far larger than the bias leave it a few bits). A head read coarser than UNJUDGED_FRACTION of its
                expected slope is "inconclusive", never "conforms"; when nothing else is
                found, so is the model (exit status 3 on the command line).
  offset_tol    max(2^-10, 32 eps of the probabilities' dtype, u x the steepest slope).
  min_log_prob  log of the dtype's smallest normal probability: farther keys, whose
                probabilities are subnormal or zero (fp16 underflows after a few tens of
                tokens in the steep heads), are not read; nor are distances seen by fewer
                than `min_queries` queries.
  decode_rtol   per layer, on logits, relative to max(1, max |logits|): 2^9 eps for float32
                (fp32 sums of products round at every step) and 4 eps (bfloat16) or 8 eps
                (float16), whose products torch accumulates in float32 and rounds once.
  attention_tol 2 x decode_rtol, absolute, on the first layer's attention rows.

Prefill vs decode: the same text through one full forward and token by token through the KV
cache (`use_cache=True`, transformers' `cache`), comparing logits and each layer's attention row;
a batch of two texts of different lengths, the shorter left-padded, against each text alone,
both in one forward and decoded token by token through the cache with the mask growing (where
a port counts the pads in the new token's position, HF transformers #26380); and the decode
step's own bias row, probed as the prefill's (the repeated token, its last DECODE_STEPS
positions fed one at a time) and diagnosed with the same explanations (a new key without
bias, decode-only slopes, ...). The first layer sees identical inputs on both paths, so its attention rows must agree
to the dtype's rounding; deeper layers inherit the rounding differences of the layers before
them (which grow fast in random models) and are reported, not judged; the logits are judged
with a tolerance that grows with depth. decode=False skips all of this (the tokenizer is then
not needed, and `AlibiCheck.decode` is None).

The command line `alibi-viz check MODEL` (alibi_viz/cli.py) runs this check for CI.

The code follows the method's stages: `conformance_probe` (what was measured: per head, per
query row, and the thresholds), `conformance_diagnosis` (the explanations, in the order they
are tried), `conformance_report` (verdicts, findings, their sentences, JSON); this module holds
what is particular to a model (its expected slopes, its attention paths, decoding) and
`check_alibi`. `kernel_check` uses the same three stages for a kernel or a bias tensor.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from unittest import mock

import numpy as np
import torch

from alibi_viz.alibi import alibi_slopes, check_int, round_to_bfloat16
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, formatted, ngettext
from alibi_viz.models import layer_slopes
from alibi_viz.models.conformance_diagnosis import (
    RESOLUTION_SE,
    diagnose,
    explain_slopes,
    given_slopes,
    slopes_close,
)
from alibi_viz.models.conformance_probe import (
    DECODE_EPS,
    MIN_QUERIES,
    Thresholds,
    fit_head,
    head_curves,
    row_measures,
    thresholds,
    tv_tolerance,
)
from alibi_viz.models.conformance_report import (
    MODEL_VERDICTS,
    VERDICT_TITLES,
    VERDICTS,
    AlibiCheck,
    DecodeCheck,
    Finding,
    HeadCheck,
    finite,
    order_phrase,
    schedule_phrase,
)
from alibi_viz.models.loading import model_alibi_slopes

__all__ = ["DECODE_EPS", "MIN_QUERIES", "MODEL_VERDICTS", "VERDICTS", "VERDICT_TITLES",
           "AlibiCheck", "DecodeCheck", "Finding", "HeadCheck", "Thresholds", "builder_finding",
           "check_alibi", "expected_slopes", "mpt_bias_max_note", "probe_bias", "rule_slopes",
           "thresholds"]

PROBE_LENGTH = 128
DECODE_STEPS = 16  # the decode probe reads this many cached steps' bias rows
PROBE_TOKENS = ("a", "e", "t")  # the probe's tokens: the first one's fit, the others' spread
FALCON_ROUNDING = 2.0**-8  # Falcon's builder rounds slopes and m*j to bfloat16 (unit roundoff)
DEFAULT_TEXTS = ("def add(a, b):\n    return a + b\n", "x = [i * i for i in range(9)]")

# ----------------------------------------------------------------------------- expected bias

def _num_heads(model) -> int:
    return int(model.config.num_attention_heads)


def _head_dim(model) -> int:
    config = model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // _num_heads(model))


def _mpt_bias_max(config) -> float:
    """MPT's configured alibi_bias_max (its attn_config; 8 when unset)."""
    attn = getattr(config, "attn_config", None)
    value = getattr(attn, "alibi_bias_max", None) if attn is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 8.0


def rule_slopes(model) -> np.ndarray | None:
    """The slopes m_h (heads,) that this project's own rule gives for the model's config,
    before any 1/sqrt(d) scaling, or None for an architecture without ALiBi: `alibi_slopes`
    (the official rule of fairseq's get_slopes) for BLOOM, MPT's schedule with the config's
    alibi_bias_max, and for Falcon the official slopes rounded to bfloat16 as its builder
    does (`round_to_bfloat16`). Never computed with transformers' builders: those are what a
    model under test runs, so they are checked against this rule (`builder_finding`), and the
    tests check this rule against them and against fairseq."""
    config = model.config
    heads = _num_heads(model)
    if config.model_type == "bloom":
        return alibi_slopes(heads)
    if config.model_type == "mpt":
        return alibi_slopes(heads, "mpt", _mpt_bias_max(config))
    if config.model_type == "falcon" and getattr(config, "alibi", False):
        return round_to_bfloat16(alibi_slopes(heads))
    return None


def expected_slopes(model) -> tuple[np.ndarray, str, str | None]:
    """(expected per-token slopes (heads,), or (layers, heads) for a model whose layers have
    their own (`layer_slopes`), the form in words, a warning or None) for the model's config,
    in the form the architecture documents (see the module docstring), from this project's
    own rule (`rule_slopes`), never from the code under test."""
    config = model.config
    kind = config.model_type
    if kind == "bloom" and layer_slopes.from_config(config) is not None:
        return (layer_slopes.from_config(config), _("BLOOM with per-layer slopes from config.json "
                                               "(alibi_viz_slopes): m[layer, h] added unscaled"),
                None)
    if kind == "bloom":
        return rule_slopes(model), _("BLOOM: m_h added unscaled (official schedule)"), None
    if kind == "mpt":
        return (rule_slopes(model), _("MPT: m_h added unscaled (alibi_bias_max {value})").format(
            value=formatted(_mpt_bias_max(config), "g")), None)
    if kind == "falcon" and getattr(config, "alibi", False):
        expected = rule_slopes(model) / math.sqrt(_head_dim(model))
        return (expected, _("Falcon-RW: m_h/sqrt(d) (bias inside the 1/sqrt(d) scaling)"), None)
    raise AlibiVizError(_("'{kind}' is not an ALiBi architecture this check knows (BLOOM, MPT, "
                          "Falcon with alibi=True): pass the slopes it should apply with "
                          "expected= (alibi-viz check --expected).").format(kind=kind))


BUILDERS = {"bloom": ("BLOOM", "build_alibi_tensor"), "mpt": ("MPT", "build_mpt_alibi_tensor"),
            "falcon": ("Falcon", "build_alibi_tensor")}


def builder_finding(model) -> Finding | None:
    """A finding of its own when the installed transformers' ALiBi builder for this
    architecture disagrees with this project's rule (`rule_slopes`): e.g. "Your transformers'
    BLOOM builder (build_alibi_tensor) gives 2x the official slopes." None when they agree,
    for architectures without a builder, and for per-layer slopes. MPT's builder is called
    as transformers' MptModel calls it (alibi_bias_max 8, whatever the config says; that
    difference is reported by `mpt_bias_max_note`, not here)."""
    config = model.config
    kind = config.model_type
    if kind not in BUILDERS or (kind == "falcon" and not getattr(config, "alibi", False)):
        return None
    rule = rule_slopes(model)
    if kind == "mpt":
        rule = alibi_slopes(_num_heads(model), "mpt", 8.0)
    try:
        built = np.asarray(model_alibi_slopes(model), dtype=np.float64).reshape(-1)
    except Exception as exc:  # noqa: BLE001 (a broken builder is a finding, not a crash)
        built, error = None, f"{type(exc).__name__}: {exc}"
    name, function = BUILDERS[kind]
    import transformers  # heavy: only for a model whose builder is compared

    fields = dict(name=name, function=function, version=transformers.__version__)
    if built is None or built.shape != rule.shape or not np.isfinite(built).all():
        what = (_("fails ({error})").format(error=error) if built is None else
                _("gives {n} slopes for {heads} heads").format(n=built.size, heads=rule.size))
        return Finding("builder", _("Your transformers' {name} builder ({function}, transformers "
                                    "{version}) {what}.").format(what=what, **fields), [], 0,
                       {"builder": function})
    exact = thresholds(torch.float64, "sdpa")
    if slopes_close(built, rule, exact).all():
        return None
    explained = explain_slopes(built, rule, 1.0, _head_dim(model), exact)
    phrase = _builder_phrase(explained, built, rule)
    evidence = {"builder": function, "builder_slopes": built.tolist(),
                "rule_slopes": rule.tolist()}
    if explained is not None:
        evidence.update(explanation=explained[0], **explained[2])
    return Finding("builder", _("Your transformers' {name} builder ({function}, transformers "
                                "{version}) gives {phrase}: every model of this architecture "
                                "run by it applies that.").format(phrase=phrase, **fields),
                   [], rule.size, finite(evidence))


def _builder_phrase(explained, built, rule) -> str:
    """What a builder gives instead of the rule's slopes, in words."""
    if explained is None:
        worst = int(np.argmax(np.abs(built - rule) / np.abs(rule)))
        return _("slopes that no explanation fits (head {head}: {built} for {rule})").format(
            head=worst + 1, built=formatted(built[worst], ".4g"),
            rule=formatted(rule[worst], ".4g"))
    verdict, _key, evidence, _predicted = explained
    if verdict == "missing":
        return _("zero slopes")
    if verdict == "scaled":
        return _("{factor}x the official slopes").format(factor=formatted(evidence["factor"],
                                                                          ".4g"))
    if verdict == "sign_flipped" and "inner" not in evidence:
        return _("the official slopes with the wrong sign, times {factor}").format(
            factor=formatted(abs(evidence["factor"]), ".4g")) if abs(
                abs(evidence["factor"]) - 1) > 1e-3 else _("the official slopes with the wrong "
                                                           "sign")
    if verdict == "sign_flipped":
        return _("the official slopes with the wrong sign, and {inner}").format(
            inner=_builder_phrase((evidence["inner"], None, evidence, None), built, rule))
    if verdict == "schedule":
        return _("{schedule} instead of the official slopes").format(
            schedule=schedule_phrase(evidence, rule.size))
    return _("the official slopes in another order: {order}").format(
        order=order_phrase(evidence))


def mpt_bias_max_note(model, measured_max_bias: float | None) -> str | None:
    """For an MPT config whose alibi_bias_max is not 8: the three facts, in one sentence:
    what the config says, what transformers' MPT does (always 8), what the model does
    (`measured_max_bias`, None when its slopes follow neither). None otherwise."""
    config = model.config
    if config.model_type != "mpt" or _mpt_bias_max(config) == 8.0:
        return None
    does = (_("this model applies alibi_bias_max {value}").format(
        value=formatted(measured_max_bias, "g")) if measured_max_bias is not None else
            _("this model's slopes follow neither"))
    return _("MPT's config asks for alibi_bias_max {config}; transformers' MPT ignores it and "
             "always builds its slopes with 8; {does}.").format(
                 config=formatted(_mpt_bias_max(config), "g"), does=does)


# ----------------------------------------------------------------------------- attention probes

@contextmanager
def _record_sdpa(records: list):
    """While active, every torch scaled_dot_product_attention call also appends the
    probabilities it computes, softmax(q k^T * scale + mask), (B, H, Q, K) float64."""
    original = torch.nn.functional.scaled_dot_product_attention

    def recording(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                  scale=None, enable_gqa=False, **kwargs):
        q, k = query.double(), key.double()
        if k.shape[-3] != q.shape[-3]:  # grouped or multi-query keys
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        logits = q @ k.transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
        if is_causal:
            Q, K = logits.shape[-2:]
            future = torch.ones(Q, K, dtype=torch.bool, device=logits.device).triu(K - Q + 1)
            logits = logits.masked_fill(future, -math.inf)
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                logits = logits.masked_fill(~attn_mask, -math.inf)
            else:
                logits = logits + attn_mask.double()
        records.append(torch.softmax(logits, dim=-1))
        return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                        is_causal=is_causal, scale=scale, enable_gqa=enable_gqa, **kwargs)

    with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", recording):
        yield


def _attn_of(model) -> str:
    return getattr(model.config, "_attn_implementation", None) or "eager"


@contextmanager
def _attention_path(model, attn: str | None):
    """Run the model on `attn` ("eager", "sdpa", None: its config's) while active; yields the
    path in use. Raises AlibiVizError for a path the architecture does not have."""
    current = _attn_of(model)
    wanted = attn or current
    if wanted not in ("eager", "sdpa"):
        raise AlibiVizError(_("attn must be 'eager' or 'sdpa', got {value}.").format(
            value=repr(wanted)))
    if wanted == "sdpa" and not getattr(model, "_supports_sdpa", False):
        raise AlibiVizError(_("{architecture} has no sdpa attention in transformers: only its "
                              "eager path can be checked.").format(
                                  architecture=type(model).__name__))
    model.config._attn_implementation = wanted  # read at every forward (Falcon's branches)
    try:
        yield wanted
    finally:
        model.config._attn_implementation = current


def _input_device(model) -> torch.device:
    """Where inputs go: the embeddings' device. Raises AlibiVizError for a model whose weights
    are all on the meta device (offloaded wholly to disk by accelerate)."""
    real = [p.device for p in model.parameters() if p.device.type != "meta"]
    if not real:
        raise AlibiVizError(_("Every weight of this model is offloaded to disk (device_map): the "
                              "check runs hundreds of forwards and needs the weights in memory. "
                              "Load it without device_map, or give device_map room on the CPU "
                              "or GPU (max_memory)."))
    embeddings = model.get_input_embeddings().weight.device
    return embeddings if embeddings.type != "meta" else real[0]


def _run(model, input_ids, attention_mask=None, cache=None, use_cache=False,
         hidden_states=False, body=False):
    """One forward returning (output, per-layer probabilities (B, H, Q, K)): the model's own
    (eager) or float64 ones recorded from sdpa's inputs. body: run the transformer body only
    (`base_model`: no LM head, whose vocabulary x hidden product is as large as the body's at
    bloom-560m's size), for a pass that reads the attention and not the logits."""
    eager = _attn_of(model) == "eager"
    runner = getattr(model, "base_model", model) if body else model
    records: list = []
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache,
                  cache=cache, output_hidden_states=hidden_states)  # transformers 5: `cache`
    try:
        with torch.inference_mode():
            if eager:
                out = runner(**kwargs, output_attentions=True)
                probs = list(out.attentions or [])
            else:
                with _record_sdpa(records):
                    out = runner(**kwargs)
                probs = records
    except TypeError as exc:  # a forward with other arguments: a wrapper, not the model
        if "argument" not in str(exc):
            raise
        raise AlibiVizError(_wrapper_message(model, exc)) from exc
    if not probs or probs[0] is None:
        raise AlibiVizError(_("The model returned no attention probabilities."))
    return out, probs


def _wrapper_message(model, exc: TypeError) -> str:
    """What check_alibi needs from a model whose forward does not take transformers'
    arguments, and, when it wraps a transformers model, which attribute to pass instead."""
    try:
        from transformers import PreTrainedModel  # heavy: only for this message
    except ImportError:  # pragma: no cover (transformers is a dependency)
        PreTrainedModel = ()
    inner = next((name for name, module in model.named_modules()
                  if name and isinstance(module, PreTrainedModel)), None) if isinstance(
        model, torch.nn.Module) else None
    advice = (_("It wraps a transformers model at .{path}: pass that one, "
                "check_alibi(wrapper.{path}, tokenizer).").format(path=inner)
              if inner is not None else
              _("If it wraps a transformers model, pass that model itself."))
    return _("check_alibi calls the model as transformers' causal LMs are called, "
             "model(input_ids=..., attention_mask=..., output_attentions=True), and reads the "
             "attention it returns; this {kind}'s forward does not take that ({error}). "
             "{advice}").format(
                 kind=type(model).__name__, error=str(exc).strip().splitlines()[0],
                 advice=advice)


def _probe(model, length: int, token_id: int | None, tokenizer, min_log_prob: float,
           premise_tol: float | None = None, slopes: np.ndarray | None = None,
           rows: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(y, n), each (layers, heads, length): the probe's curves and query counts (`head_curves`).

    premise_tol: when given, the largest relative spread of the hidden states between the
    positions of the repeated token; beyond it AlibiVizError (the probe's premise fails).
    slopes, rows: with the expected slopes ((heads,) or (layers, heads)), each layer's worst
    query row is appended to `rows` as (total variation from exact ALiBi, head, query), all
    0-based (`row_measures`)."""
    if token_id is None:  # an ordinary token: the tokenizer's "a", else id 10
        ids = tokenizer("a", add_special_tokens=False)["input_ids"] if tokenizer else [10]
        token_id = int(ids[0])
    ids = torch.full((1, length), token_id, dtype=torch.long, device=_input_device(model))
    out, probs = _run(model, ids, hidden_states=premise_tol is not None, body=True)
    if premise_tol is not None and out.hidden_states:
        last = out.hidden_states[-1][0].double()  # (T, hidden)
        spread = float((last - last[:1]).abs().max() / last.abs().max().clamp_min(1e-30))
        if not spread <= premise_tol:
            raise AlibiVizError(_("The hidden states of one repeated token differ between "
                                  "positions (by {spread} of their size): this model also "
                                  "encodes position some other way (learned or sinusoidal "
                                  "positions?), so the probe cannot read its bias.").format(
                                      spread=formatted(spread, ".2g")))
    curves, counts = [], []
    for k in range(len(probs)):
        y, n = head_curves(probs[k][0], min_log_prob)
        layer_slopes = (slopes[k] if np.ndim(slopes) == 2 and k < len(slopes) else slopes)
        # slopes for another head count are check_alibi's typed error, raised after the probe
        if rows is not None and np.ndim(layer_slopes) == 1 and \
                len(layer_slopes) == probs[k].shape[1]:
            tv, _future = row_measures(probs[k][0], layer_slopes, first_query=0)
            worst = int(tv.argmax())
            rows.append((float(tv.max()), worst // tv.shape[1], worst % tv.shape[1]))
        probs[k] = None  # free each layer's maps once read
        curves.append(y)
        counts.append(n)
    return torch.stack(curves).cpu().numpy(), torch.stack(counts).cpu().numpy()


def _row_slopes(model, expected, configured) -> np.ndarray | None:
    """The slopes exact ALiBi has on the probe's logits, for its rows' total variation: the
    configured ones (Falcon's scaled by 1/sqrt(d)), or `expected`'s for the config's head
    count; None where those cannot be known before the probe (its errors are raised after)."""
    if configured is not None:
        return configured
    try:
        return given_slopes(expected, _num_heads(model))[0]
    except (AlibiVizError, AttributeError, TypeError, ValueError):
        return None


def _precision_note(rows: list, findings: list, dtype: torch.dtype) -> str | None:
    """The note on the probe's worst query row when its attention differs from exact ALiBi's
    by more than the dtype's rounding explains (`tv_tolerance`) and nothing else was found: a
    model in 16 bits rounds the bias (and the content) it adds far from zero, which the
    slopes, averaged over the rows, do not show. None otherwise."""
    if not rows or any(f.verdict != "inconclusive" for f in findings):
        return None
    layer = int(np.argmax([r[0] for r in rows]))
    tv, head, query = rows[layer]
    if not tv > tv_tolerance(dtype):
        return None
    return _("Precision: on the probe, query rows' attention differs from exact ALiBi by a total "
             "variation up to {tv} (layer {layer}, head {head}, query {query}): the rounding of "
             "a bias far from zero in {dtype}, as this model computes it; the slopes conform on "
             "average over the rows.").format(
                 tv=formatted(tv, ".2g"), layer=layer + 1, head=head + 1, query=query + 1,
                 dtype=str(dtype).removeprefix("torch."))


def _other_tokens(tokenizer) -> list[int]:
    """The ids of PROBE_TOKENS after the first (ids 11, 12 without a tokenizer)."""
    if tokenizer is None:
        return [11, 12]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in PROBE_TOKENS]
    first = ids[0][0] if ids[0] else None
    return list(dict.fromkeys(int(i[0]) for i in ids[1:] if i and i[0] != first))


def probe_bias(model, length: int = PROBE_LENGTH, token_id: int | None = None,
               tokenizer=None) -> np.ndarray:
    """The bias every head applies, read from one token repeated `length` times.

    Returns y of shape (layers, heads, length): y[l, h, d] = mean over queries i >= d of
    log p_{i, i-d} - log p_{i, i}, i.e. b(d) - b(0) in logits (textbook ALiBi: -m d); NaN
    where every query's probability underflows the dtype it is read in.
    """
    dtype = torch.float64 if _attn_of(model) != "eager" else next(model.parameters()).dtype
    return _probe(model, length, token_id, tokenizer, math.log(torch.finfo(dtype).tiny))[0]


# ----------------------------------------------------------------------------- decoding

def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| in float64; NaN or infinite entries count as infinite."""
    diff = (a.double() - b.double()).abs()
    if diff.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(diff, nan=math.inf).max())


def _decode_check(model, tokenizer, texts, th: Thresholds) -> DecodeCheck:
    """Full forward vs token-by-token decoding of texts[0]; left-padded batch of both texts
    vs each alone. Maxima of |difference| on logits and per layer on attention rows."""
    device = _input_device(model)
    ids = torch.tensor([tokenizer(texts[0])["input_ids"]], device=device)  # (1, T)
    full, full_probs = _run(model, ids)
    T = ids.shape[1]
    logit_diff, layer_diff = 0.0, [0.0] * len(full_probs)
    past = None
    for t in range(T):
        out, probs = _run(model, ids[:, t:t + 1], cache=past, use_cache=True)
        past = getattr(out, "cache", None)
        if past is None:
            past = getattr(out, "past_key_values", None)
        logit_diff = max(logit_diff, _max_diff(out.logits[0, -1], full.logits[0, t]))
        for layer, p in enumerate(probs):
            layer_diff[layer] = max(layer_diff[layer], _max_diff(
                p[0, :, -1, : t + 1], full_probs[layer][0, :, t, : t + 1]))

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    a = tokenizer(texts[0])["input_ids"]
    b = tokenizer(texts[1])["input_ids"]
    long, short = (a, b) if len(a) >= len(b) else (b, a)
    pad = len(long) - len(short)
    batch = torch.tensor([long, [pad_id] * pad + short], device=device)
    mask = torch.tensor([[1] * len(long), [0] * pad + [1] * len(short)], device=device)
    padded, padded_probs = _run(model, batch, attention_mask=mask)
    alone, alone_probs = _run(model, torch.tensor([short], device=device))
    pad_logits = _max_diff(padded.logits[1, pad:], alone.logits[0])
    pad_layers = [_max_diff(p[1, :, pad:, pad:], q[0])
                  for p, q in zip(padded_probs, alone_probs, strict=True)]
    dec_logits, dec_layers = _padded_decode(model, long, short, pad_id, device, full.logits[0]
                                            if long == a else None, alone)
    scale = max(1.0, float(torch.nan_to_num(full.logits.double().abs(), nan=0.0).max()))
    logits_tol = th.decode_rtol * len(full_probs) * scale
    both_logits = max(pad_logits, dec_logits)
    both_layers = [max(x, y) for x, y in zip(pad_layers, dec_layers, strict=True)]
    return DecodeCheck(logits=logit_diff, layers=layer_diff, padding_logits=both_logits,
                       padding_layers=both_layers, logits_tolerance=logits_tol,
                       attention_tolerance=th.attention_tol,
                       ok=logit_diff <= logits_tol and layer_diff[0] <= th.attention_tol,
                       padding_ok=both_logits <= logits_tol and both_layers[0] <= th.attention_tol,
                       padded_decode_logits=dec_logits, padded_decode_attention=dec_layers[0])


def _padded_decode(model, long, short, pad_id, device, long_logits, short_alone):
    """(largest |logits difference|, per layer largest |attention difference|) of a
    left-padded batch [long, pads + short] prefilled but for its last tokens and then decoded
    token by token through the cache (the attention mask growing by one each step), against
    each text's own full forward: the padded batch decoding a server does, where a port can
    count the pads in the new token's position (HF transformers #26380)."""
    steps = min(8, len(short) - 1)
    if steps < 1:
        return 0.0, [0.0] * model.config.num_hidden_layers
    pad = len(long) - len(short)
    prefix = len(short) - steps
    batch = torch.tensor([long[:-steps], [pad_id] * pad + short[:prefix]], device=device)
    mask = torch.tensor([[1] * (len(long) - steps), [0] * pad + [1] * prefix], device=device)
    if long_logits is None:
        long_logits = _run(model, torch.tensor([long], device=device))[0].logits[0]
    _out, alone_probs = _run(model, torch.tensor([short], device=device))
    out, _probs = _run(model, batch, attention_mask=mask, use_cache=True)
    past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    logit_diff, layer_diff = 0.0, [0.0] * len(alone_probs)
    for t in range(steps):
        tokens = torch.tensor([[long[len(long) - steps + t]], [short[prefix + t]]], device=device)
        mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype, device=device)], dim=1)
        out, probs = _run(model, tokens, attention_mask=mask, cache=past, use_cache=True)
        past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        i = prefix + t  # the short text's position
        logit_diff = max(logit_diff,
                         _max_diff(out.logits[1, -1], short_alone.logits[0, i]),
                         _max_diff(out.logits[0, -1], long_logits[len(long) - steps + t]))
        for layer, p in enumerate(probs):
            layer_diff[layer] = max(layer_diff[layer], _max_diff(
                p[1, :, -1, pad:], alone_probs[layer][0, :, i, : i + 1]))
    return logit_diff, layer_diff


def _decode_probe(model, length: int, tokenizer, min_log_prob: float,
                  steps: int = DECODE_STEPS) -> tuple[np.ndarray, np.ndarray, float]:
    """(y, n, mean query position) of the decode step's bias rows: one token repeated
    `length` times, prefilled but for the last `steps`, which are then fed one at a time
    through the cache; each step's attention row is read as the prefill probe reads its rows
    (`head_curves`), over the distances every step saw. y, n: (layers, heads, length)."""
    ids = tokenizer("a", add_special_tokens=False)["input_ids"] if tokenizer else [10]
    device = _input_device(model)
    ids = torch.full((1, length), int(ids[0]), dtype=torch.long, device=device)
    out, _probs = _run(model, ids[:, : length - steps], use_cache=True, body=True)
    past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    rows = None
    first = length - steps  # the first decoded query's position
    for t in range(first, length):
        out, probs = _run(model, ids[:, t:t + 1], cache=past, use_cache=True, body=True)
        past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        if rows is None:  # (layers, heads, steps, T): the decoded rows, zero past each query
            rows = torch.zeros(len(probs), probs[0].shape[1], steps, length,
                               dtype=probs[0].dtype, device=probs[0].device)
        for layer, p in enumerate(probs):
            rows[layer, :, t - first, : t + 1] = p[0, :, -1, : t + 1]
    curves, counts = [], []
    for layer in range(rows.shape[0]):
        y, n = head_curves(rows[layer], min_log_prob, first_query=first)
        n[:, length - steps + 1:] = 0  # read only the distances every decoded row saw
        curves.append(y)
        counts.append(n)
    mean_query = (length - steps + length - 1) / 2
    return torch.stack(curves).cpu().numpy(), torch.stack(counts).cpu().numpy(), mean_query


def _decode_row_sentences(fits, configured, scale, head_dim, th, context, mean_query,
                          prefill):
    """(the decode probe's diagnosis as sentences, in the prefill probe's explanations;
    evidence), ([], {}) when the decode step's bias row is what the prefill's is (`prefill`:
    its HeadChecks, whatever their verdict: a bug of both paths is the prefill's finding). A
    new key whose bias is missing (every head's offset m_h x the query's position) is named as
    that."""
    measured = np.array([[f[0] for f in row] for row in fits])
    offsets = np.array([[f[1] for f in row] for row in fits])
    before = np.array([[h.measured_slope for h in row] for row in prefill])
    before_offsets = np.array([[h.offset for h in row] for row in prefill])
    resolution = np.array([[h.resolution for h in row] for row in prefill])
    se = np.array([[f[4] for f in row] for row in fits])
    same = np.abs(measured - before) <= (th.slope_rtol * np.abs(before) + resolution
                                        + RESOLUTION_SE * np.nan_to_num(se, nan=np.inf))
    same &= np.abs(np.nan_to_num(offsets - before_offsets)) <= th.offset_tol
    if same.all():
        return [], {}
    # the first layer whose decode row differs is judged; the layers after it read hidden
    # states that differ already (as the decode check judges only the first layer)
    first = int(np.flatnonzero(~same.all(axis=1))[0])
    fits, measured, offsets = fits[first:first + 1], measured[first:first + 1], \
        offsets[first:first + 1]
    if np.ndim(configured) == 2:
        configured = configured[first:first + 1]
    expected = np.broadcast_to(configured, measured.shape)
    ratio = offsets / np.where(expected != 0, expected, np.nan)
    if (np.isfinite(ratio).all() and slopes_close(measured, expected, th).all()
            and (np.abs(ratio - mean_query) <= 1.0).all()):
        return [_("The new token's own key gets no bias (its bias row holds m*j for the cached "
                  "keys but 0 for the new one).")], {"new_key": "zero", "layer": first}
    _heads, findings, _schedule = diagnose(fits, configured, scale, head_dim, th, context)
    findings = [f for f in findings if f.verdict != "inconclusive"]
    for f in findings:
        f.layers = [first]
    prefix = (ngettext("Layer {layers}: {finding}", "Layers {layers}: {finding}", 1).format
              if len(prefill) > 1 else lambda layers, finding: finding)
    return ([prefix(layers=first + 1, finding=f.summary) for f in findings] or
            [prefix(layers=first + 1, finding=_("The bias row differs from the prefill's, "
                                                "and no explanation fits."))],
            {"layer": first, "row": [asdict(f) for f in findings]})


def _decode_finding(kind: str, logits: float, attention: float, named=(), evidence=None,
                    batch: bool = False) -> Finding:
    """The finding of a failed prefill-vs-decode ("decode") or left-padding ("padding") check.
    named: the decode probe's sentences on the decode step's bias row; batch: the failure is
    in the left-padded batch's cached decoding, not its prefill."""
    if not (math.isfinite(logits) and math.isfinite(attention)):
        text = (_("Cached decoding makes the outputs NaN or infinite (an overflow in this "
                  "dtype?).") if kind == "decode" else
                _("Left padding makes the outputs NaN or infinite (an overflow in the padded "
                  "rows, in this dtype?)."))
    else:
        template = (_("Cached decoding differs from the full forward (logits by {logits}, "
                      "first layer's attention by {attention}).") if kind == "decode" else
                    _("Left padding changes the outputs (logits by {logits}, first layer's "
                      "attention by {attention})."))
        if batch:
            template = _("Decoding a left-padded batch through the cache differs from each text "
                         "alone (logits by {logits}, first layer's attention by {attention}): "
                         "the new token's position may count the pads (HF transformers #26380).")
        text = template.format(logits=formatted(logits, ".3g"),
                               attention=formatted(attention, ".3g"))
    if named:
        text += " " + _("The decode step's bias row, probed as the prefill's: {diagnosis}").format(
            diagnosis=" ".join(named))
    return Finding(kind, text, [], 0, finite({"logits": logits, "attention": attention,
                                               "padded_decode": batch, **(evidence or {})}))


# ----------------------------------------------------------------------------- the check

PORT_NEEDS = N_(
    "check_alibi needs a transformers-style causal LM: a .config with num_attention_heads (and "
    "model_type, or pass expected=), a forward(input_ids, attention_mask=None, "
    "output_attentions=True) whose output has .attentions, one (batch, heads, query, key) "
    "tensor per layer (eager); for attn='sdpa', a class attribute _supports_sdpa = True and "
    "attention through torch's scaled_dot_product_attention. {missing} For a bare attention "
    "function use check_kernel(fn, num_heads, head_dim); for a bias tensor, check_bias(bias).")


def _check_port(model) -> None:
    """Raise AlibiVizError saying what a port needs when `model` is not a transformers-style
    causal LM (a plain nn.Module has no .config)."""
    config = getattr(model, "config", None)
    if config is None:
        missing = _("This {kind} has no .config.").format(kind=type(model).__name__)
    elif not isinstance(getattr(config, "num_attention_heads", None), int):
        missing = _("Its config has no num_attention_heads.")
    elif not callable(getattr(model, "get_input_embeddings", None)):
        missing = _("It has no get_input_embeddings().")
    else:
        return
    raise AlibiVizError(_(PORT_NEEDS).format(missing=missing))


def check_alibi(model, tokenizer=None, probe_length: int = PROBE_LENGTH, texts=DEFAULT_TEXTS,
                decode: bool = True, progress: Callable[[float, str], None] | None = None, *,
                expected: str | Sequence[float] | np.ndarray | None = None,
                attn: str | None = None) -> AlibiCheck:
    """Check every layer and head of an ALiBi model against its config (module docstring).

    tokenizer: needed for the prefill-vs-decode check. decode=False skips that check (and the
    left-padding ones and the decode probe): faster, no tokenizer needed, `AlibiCheck.decode`
    is None and the verdict rests on the probe alone. progress(fraction, what) is called as the
    check goes. probe_length: tokens in the probe (16-65,536; MPT: at most its max_seq_len).
    expected: the slopes the model should apply (heads,), per token on the pre-softmax
    logits, or a schedule name of `alibi_slopes` ("official", "geometric", "mpt") for the
    probe's head count; needed for an architecture the check does not know, and it overrides
    the config of one it knows. attn: "eager" or "sdpa", the attention path to check (default:
    what the model's config uses); `AlibiCheck.attn` says which was checked.
    The verdict is "inconclusive" (not "conforms") when some heads were read too coarsely to
    judge and nothing else was found.
    Raises AlibiVizError for a model it cannot check (not a transformers-style model: the
    message says what a port needs; no ALiBi and no `expected`; a path the architecture lacks;
    weights offloaded to disk; position encoded some other way too).
    """
    _check_port(model)
    probe_length = check_int(probe_length, "probe_length", 16, 65_536)
    model.eval()
    config = model.config
    configured = None
    if expected is None:
        configured, form, _warning = expected_slopes(model)
    if config.model_type == "mpt":  # its bias is built at max_seq_len keys, no more
        probe_length = min(probe_length, int(config.max_seq_len))
    if decode and tokenizer is None:
        raise AlibiVizError(_("The prefill-vs-decode check needs the tokenizer (or pass "
                              "decode=False)."))
    dtype = next(model.parameters()).dtype
    falcon = config.model_type == "falcon" and getattr(config, "alibi", False)
    _input_device(model)
    with _attention_path(model, attn) as path:
        base = thresholds(dtype, path, FALCON_ROUNDING if falcon else 0.0)
        if progress:
            progress(0.05, _("probing the bias with one repeated token"))
        rows: list = []  # each layer's worst query row against exact ALiBi
        curves, counts = _probe(model, probe_length, None, tokenizer, base.min_log_prob,
                                premise_tol=max(1e-3, 64 * base.eps),
                                slopes=_row_slopes(model, expected, configured),
                                rows=rows)
        heads = curves.shape[1]
        if expected is not None:
            configured, form = given_slopes(expected, heads)
        if configured.shape[-1] != heads or configured.ndim == 2 and len(configured) != len(curves):
            raise AlibiVizError(_("The config names {config} heads, but the attention has "
                                  "{heads}.").format(config=configured.shape[-1], heads=heads))
        fits = [[fit_head(y, n, base) for y, n in zip(layer_curves, layer_counts,
                                                       strict=True)]
                for layer_curves, layer_counts in zip(curves, counts, strict=True)]
        # the same probe with other tokens: the bias is the same, the content is not, so how
        # far their slopes spread is what the content (and its rounding) leaves unresolved
        # (the measured slope is the median of the tokens' fits, its spread the largest
        # distance from it: the smaller one passed false "scaled" heads in 16-bit models)
        slopes = [np.array([[f[0] for f in row] for row in fits])]
        for token in _other_tokens(tokenizer):
            other, other_counts = _probe(model, probe_length, token, tokenizer, base.min_log_prob)
            slopes.append(np.array([[fit_head(y, n, base)[0] for y, n in zip(
                layer_curves, layer_counts, strict=True)] for layer_curves, layer_counts in
                zip(other, other_counts, strict=True)]))
        slopes = np.stack(slopes)  # (tokens, layers, heads)
        median = np.median(slopes, axis=0)
        deviation = np.abs(slopes - median)
        spread = deviation.max(axis=0)
        fits = [[(float(median[k, h]) if len(slopes) > 2 else f[0], *f[1:],
                  float(spread[k, h])) for h, f in enumerate(row)]
                for k, row in enumerate(fits)]
        steepest = float(np.nanmax(np.abs([[f[0] for f in row] for row in fits] +
                                          configured.reshape(-1, heads).tolist())))
        th = thresholds(dtype, path, base.schedule_rounding, steepest)
        try:
            head_dim = _head_dim(model)
        except (AttributeError, TypeError, ZeroDivisionError):
            head_dim = 1
        scale = 1 / math.sqrt(head_dim) if (falcon and expected is None) else 1.0
        context = {"head_dim": head_dim, "heads": heads, "probe_length": probe_length,
                   "falcon_eager": falcon and
                   path == "eager", "schedule": None if configured.ndim == 2 else "official"
                   if expected is None else expected if isinstance(expected, str) else None,
                   "max_bias": _mpt_bias_max(config) if config.model_type == "mpt"
                   and expected is None else 8.0}
        head_checks, findings, schedule = diagnose(fits, configured, scale, head_dim, th,
                                                    context)
        notes = []
        if expected is None:
            built = builder_finding(model)
            if built is not None:
                findings.append(built)
            measured_max = (_mpt_bias_max(config) if not any(
                f.verdict == "schedule" for f in findings) else next(
                (f.evidence.get("max_bias") for f in findings if f.verdict == "schedule"), None))
            mpt_note = mpt_bias_max_note(model, measured_max)
            if mpt_note is not None:
                notes.append(mpt_note)
                for f in findings:
                    if f.verdict == "schedule" and f.evidence.get("max_bias") is not None:
                        f.summary += " " + mpt_note
        note = _precision_note(rows, findings, dtype)
        if note is not None:
            notes.append(note)
        result = None
        if decode:
            if progress:
                progress(0.5, _("decoding token by token through the KV cache"))
            result = _decode_check(model, tokenizer, texts, th)
            dec_y, dec_n, mean_query = _decode_probe(model, probe_length, tokenizer,
                                                     base.min_log_prob)
            dec_fits = [[fit_head(y, n, base) for y, n in zip(ly, ln, strict=True)]
                        for ly, ln in zip(dec_y, dec_n, strict=True)]
            # the new key sits at j ~ probe_length, where m*j is rounded to the dtype (and by
            # Falcon's bfloat16 builder): the decode rows' offsets carry that rounding
            dec_th = replace(th, offset_tol=max(th.offset_tol, (th.eps + th.schedule_rounding)
                                                * steepest * probe_length))
            named, row_evidence = _decode_row_sentences(dec_fits, configured, scale, head_dim,
                                                        dec_th, context, mean_query,
                                                        head_checks)
            if not result.ok or named:
                findings.append(_decode_finding("decode", result.logits, result.layers[0],
                                                named, row_evidence))
            if not result.padding_ok:
                batch = result.padded_decode_logits >= result.padding_logits  # its maximum
                findings.append(_decode_finding(
                    "padding", result.padding_logits, result.padding_layers[0], batch=batch))
        findings = ([f for f in findings if f.verdict != "inconclusive"]
                    + [f for f in findings if f.verdict == "inconclusive"])
    if progress:
        progress(1.0, _("done"))
    return AlibiCheck(heads=head_checks, decode=result, expected_form=form, schedule=schedule,
                      probe_length=probe_length, notes=notes, diagnosis=findings, attn=path,
                      dtype=th.dtype, model_type=config.model_type, thresholds=th)
