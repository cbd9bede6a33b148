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
  scaled        one constant factor k for every head: k = 2 is "the bias is added twice"
                (transformers' eager Falcon does this), k = 1/sqrt(head_dim) "divided by
                sqrt(head_dim)" (a Falcon-RW port), k = sqrt(head_dim) "multiplied by it".
  sign_flipped  k < 0: the bias grows with distance; also with another schedule or order
                (the sign flipped and the slopes reversed).
  schedule      another schedule: the geometric formula 2^(-8h/n) of the paper instead of the
                official rule (they differ when n is not a power of two), the first n slopes of
                another head count's schedule (e.g. truncated from the next power of two), or
                another max_bias, the schedule for n/k heads repeated k times (each
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
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from unittest import mock

import numpy as np
import torch

from alibi_viz.alibi import SCHEDULES, alibi_slopes, check_int, round_to_bfloat16
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, formatted, ngettext
from alibi_viz.models import layer_slopes
from alibi_viz.models.loading import model_alibi_slopes

VERDICTS = ("conforms", "scaled", "sign_flipped", "schedule", "permuted", "offset", "missing",
            "clipped", "inconclusive")
# The model's verdict (AlibiCheck.verdict) is one of VERDICTS or one of these: the cached
# decoding or a padded batch differs, the installed transformers' builder is wrong.
MODEL_VERDICTS = (*VERDICTS, "decode", "padding", "builder")
# Verdict names as the app shows them (translated where shown: `_(VERDICT_TITLES[v])`).
VERDICT_TITLES = {"conforms": N_("conforms"), "scaled": N_("scaled"),
                  "sign_flipped": N_("sign flipped"), "schedule": N_("other schedule"),
                  "permuted": N_("permuted"), "offset": N_("offset"), "missing": N_("missing"),
                  "clipped": N_("clipped"), "inconclusive": N_("inconclusive")}
PROBE_LENGTH = 128
MIN_QUERIES = 16  # a distance seen by fewer queries (the probe's last ones) is not read
CLIP_TAIL = 8  # a clip is only called with at least this many flat distances after it
RESOLUTION_SE = 8.0  # a head's slope resolution: this many standard errors of its fit
UNJUDGED_FRACTION = 0.5  # a head read coarser than this part of its slope is not judged
DECODE_STEPS = 16  # the decode probe reads this many cached steps' bias rows
RESOLUTION_SPREAD = 2.0  # ... and this many times the spread of its slope between tokens
PROBE_TOKENS = ("a", "e", "t")  # the probe's tokens: the first one's fit, the others' spread
# Per layer decode tolerance on logits, in units of the dtype's eps (module docstring).
DECODE_EPS = {torch.float64: 2.0**20, torch.float32: 2.0**9, torch.bfloat16: 4.0,
              torch.float16: 8.0}
FALCON_ROUNDING = 2.0**-8  # Falcon's builder rounds slopes and m*j to bfloat16 (unit roundoff)
DEFAULT_TEXTS = ("def add(a, b):\n    return a + b\n", "x = [i * i for i in range(9)]")


@dataclass(frozen=True)
class Thresholds:
    """The probe's resolution for one model and path: every tolerance the check used, derived
    from the dtype's precision and the schedule's own rounding (module docstring)."""

    dtype: str                # the model's dtype, e.g. "bfloat16"
    read_dtype: str           # the dtype the probabilities are read in (sdpa: float64)
    eps: float                # machine epsilon of `dtype`
    schedule_rounding: float  # relative rounding of the bias builder (Falcon: 2^-8), else 0
    slope_rtol: float         # relative tolerance on slopes
    slope_atol: float         # absolute tolerance on slopes (logits per token)
    offset_tol: float         # a jump between d = 0 and d = 1 larger than this is an offset
    min_log_prob: float       # probabilities below exp(this) are not read
    min_queries: int          # distances seen by fewer queries are not read
    decode_rtol: float        # per layer, relative to max(1, max |logits|)
    attention_tol: float      # first layer's attention rows, prefill vs decode and padding


@dataclass
class HeadCheck:
    """One head: the slope it should apply, the slope the probe measured, and its verdict.
    Slopes are per token, on the pre-softmax logits; layer and head are 0-based."""

    layer: int
    head: int
    ok: bool
    verdict: str
    expected_slope: float  # from this project's rule for the config (`rule_slopes`)
    measured_slope: float  # fitted to the bias the probe reads from the model
    ratio: float
    offset: float
    clip_at: int | None = None
    detail: str = ""
    reach: int = 0  # the farthest distance the probe could read for this head
    resolution: float = 0.0  # slopes closer than this (plus slope_rtol) cannot be told apart


@dataclass
class Finding:
    """One explanation of the diagnosis: what it is, where it holds, and its evidence."""

    verdict: str          # one of MODEL_VERDICTS
    summary: str          # one sentence, in the language the check ran in
    layers: list[int]     # 0-based layers where it holds ([] for decode and padding)
    heads: int            # how many heads it covers
    evidence: dict = field(default_factory=dict)  # plain numbers and names (see the CLI schema)


@dataclass
class DecodeCheck:
    """Largest absolute differences, cached decoding and left padding vs one full forward.

    NaN or infinite outputs count as an infinite difference."""

    logits: float
    layers: list[float]
    padding_logits: float
    padding_layers: list[float]
    logits_tolerance: float     # decode_rtol x layers x max(1, max |logits|)
    attention_tolerance: float  # on the first layer's attention rows
    ok: bool
    padding_ok: bool
    # a left-padded batch decoded token by token through the cache, against each text alone
    # (included in padding_logits, padding_layers and padding_ok; apart here to tell them apart)
    padded_decode_logits: float = 0.0
    padded_decode_attention: float = 0.0

    def rows(self) -> list[tuple[str, int | None, float, float | None]]:
        """The table the app and the CLI show: (check, layer (0-based) or None for the logits,
        largest |difference|, tolerance or None where the value is shown but not judged: the
        layers after the first inherit the rounding of the layers before them). Checks are
        "decode" (prefill vs cached decoding) and "padding" (a left-padded batch)."""
        out = []
        for check, logits, layers in (("decode", self.logits, self.layers),
                                      ("padding", self.padding_logits, self.padding_layers)):
            out.append((check, None, logits, self.logits_tolerance))
            out += [(check, k, v, self.attention_tolerance if k == 0 else None)
                    for k, v in enumerate(layers)]
        return out


@dataclass
class AlibiCheck:
    """The result of `check_alibi`: heads[layer][head], the diagnosis, the decode check, and
    the context (form, path, dtype, thresholds)."""

    heads: list[list[HeadCheck]]
    decode: DecodeCheck | None
    expected_form: str
    schedule: str | None  # the standard schedule the measured slopes follow, if one does
    probe_length: int
    notes: list[str] = field(default_factory=list)
    diagnosis: list[Finding] = field(default_factory=list)  # empty when the model conforms
    attn: str = "eager"   # the attention path checked: "eager" or "sdpa"
    dtype: str = "float32"
    model_type: str = ""
    thresholds: Thresholds | None = None

    @property
    def ok(self) -> bool:
        return not self.diagnosis

    @property
    def verdict(self) -> str:
        """The model's verdict: "conforms", else the first finding's (one of MODEL_VERDICTS)."""
        return self.diagnosis[0].verdict if self.diagnosis else "conforms"

    def problems(self) -> list[str]:
        """The diagnosis as sentences, most important first ([] when the model conforms)."""
        return [f.summary for f in self.diagnosis]

    def verdicts(self) -> np.ndarray:
        """(layers, heads) array of verdict names."""
        return np.array([[h.verdict for h in row] for row in self.heads], dtype=object)

    def measured(self) -> np.ndarray:
        """(layers, heads) measured slopes."""
        return np.array([[h.measured_slope for h in row] for row in self.heads])

    def to_dict(self) -> dict:
        """Plain JSON-ready values (the schema is in alibi_viz/cli.py); non-finite numbers are
        None."""
        data = {
            "conforms": self.ok, "verdict": self.verdict, "model_type": self.model_type,
            "attn": self.attn, "dtype": self.dtype, "expected_form": self.expected_form,
            "schedule": self.schedule, "probe_length": self.probe_length,
            "diagnosis": [asdict(f) for f in self.diagnosis], "notes": list(self.notes),
            "thresholds": asdict(self.thresholds) if self.thresholds else None,
            "heads": [asdict(h) for row in self.heads for h in row],
            "decode": None,
        }
        if self.decode is not None:
            data["decode"] = {k: v for k, v in asdict(self.decode).items()}
        return _finite(data)


def _finite(value):
    """`value` with every NaN or infinite float replaced by None (JSON has neither)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


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
    if _close(built, rule, exact).all():
        return None
    explained = _explain_slopes(built, rule, 1.0, _head_dim(model), exact)
    phrase = _builder_phrase(explained, built, rule)
    evidence = {"builder": function, "builder_slopes": built.tolist(),
                "rule_slopes": rule.tolist()}
    if explained is not None:
        evidence.update(explanation=explained[0], **explained[2])
    return Finding("builder", _("Your transformers' {name} builder ({function}, transformers "
                                "{version}) gives {phrase}: every model of this architecture "
                                "run by it applies that.").format(phrase=phrase, **fields),
                   [], rule.size, _finite(evidence))


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
            schedule=_schedule_phrase(evidence, rule.size))
    return _("the official slopes in another order: {order}").format(
        order=_order_phrase(evidence))


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


def _given_slopes(expected, heads: int) -> tuple[np.ndarray, str]:
    """Expected slopes from the caller: a schedule name of `alibi_slopes` or (heads,) slopes."""
    if isinstance(expected, str):
        if expected not in SCHEDULES:
            raise AlibiVizError(_("expected must be slopes or one of {choices}, got {value}.")
                                .format(choices=", ".join(SCHEDULES), value=repr(expected)))
        return (alibi_slopes(heads, expected),
                _("the {schedule} schedule for {n} heads, as given").format(schedule=expected,
                                                                            n=heads))
    try:
        slopes = np.asarray(expected, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise AlibiVizError(_("expected must be slopes (one number per head) or a schedule "
                              "name, got {value}.").format(value=repr(expected))) from None
    if slopes.size != heads or not np.isfinite(slopes).all():
        raise AlibiVizError(_("expected has {given} finite slopes, but the model's attention has "
                              "{heads} heads.").format(given=slopes.size, heads=heads))
    return slopes, _("slopes as given")


# ----------------------------------------------------------------------------- thresholds

def thresholds(dtype: torch.dtype, attn: str, schedule_rounding: float = 0.0,
               max_slope: float = 1.0) -> Thresholds:
    """The check's tolerances for a model in `dtype` read on `attn` ("eager" or "sdpa"); the
    module docstring says where each comes from. max_slope: the steepest slope (logits per
    token) of the probe, which scales the schedule's rounding into an offset."""
    eps = float(torch.finfo(dtype).eps)
    read = dtype if attn == "eager" else torch.float64
    eps_read = float(torch.finfo(read).eps)
    decode_rtol = DECODE_EPS.get(dtype, 8.0) * eps
    return Thresholds(
        dtype=str(dtype).removeprefix("torch."), read_dtype=str(read).removeprefix("torch."),
        eps=eps, schedule_rounding=schedule_rounding,
        slope_rtol=max(2.0**-10, 2 * eps, 2 * schedule_rounding),
        slope_atol=1e-6 + eps_read / 64,
        offset_tol=max(2.0**-10, 32 * eps_read, schedule_rounding * max_slope),
        min_log_prob=math.log(torch.finfo(read).tiny), min_queries=MIN_QUERIES,
        decode_rtol=decode_rtol, attention_tol=2 * decode_rtol)


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
    with torch.inference_mode():
        if eager:
            out = runner(**kwargs, output_attentions=True)
            probs = list(out.attentions or [])
        else:
            with _record_sdpa(records):
                out = runner(**kwargs)
            probs = records
    if not probs or probs[0] is None:
        raise AlibiVizError(_("The model returned no attention probabilities."))
    return out, probs


def _curves(probs: torch.Tensor, min_log_prob: float,
            first_query: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, n) of one layer's probabilities (H, Q, T), the rows of the queries at positions
    first_query .. first_query + Q - 1 (all T of them by default): y[h, d] = mean over the
    queries i that read d of log p_{i, i-d} - log p_{i, i}; n[h, d] = how many did (both
    probabilities in the normal range of their dtype, i - d >= 0)."""
    H, Q, T = probs.shape
    logp = probs.double().log()  # zeros give -inf, which fails the range test below
    q = torch.arange(Q, device=probs.device)
    i = (first_query + q)[:, None]  # (Q, 1) query position
    j = i - torch.arange(T, device=probs.device)[None, :]  # (Q, T) key at distance d
    other = logp[:, q[:, None], j.clamp_min(0)]  # (H, Q, T) [h, i, d]: log p_{i, i-d}
    own = logp[:, q, first_query + q][:, :, None]  # (H, Q, 1): log p_{i, i}
    valid = (j >= 0) & (other >= min_log_prob) & (own >= min_log_prob)  # (H, Q, T)
    diff = torch.where(valid, other - own, torch.zeros((), dtype=logp.dtype,
                                                       device=logp.device))
    n = valid.sum(dim=1)  # (H, T)
    y = diff.sum(dim=1) / n.clamp_min(1)
    return torch.where(n > 0, y, torch.full_like(y, math.nan)), n


def _probe(model, length: int, token_id: int | None, tokenizer, min_log_prob: float,
           premise_tol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(y, n), each (layers, heads, length): the probe's curves and query counts (`_curves`).

    premise_tol: when given, the largest relative spread of the hidden states between the
    positions of the repeated token; beyond it AlibiVizError (the probe's premise fails)."""
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
        y, n = _curves(probs[k][0], min_log_prob)
        probs[k] = None  # free each layer's maps once read
        curves.append(y)
        counts.append(n)
    return torch.stack(curves).cpu().numpy(), torch.stack(counts).cpu().numpy()


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


# ----------------------------------------------------------------------------- per-head fits

def _wls(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """(slope, intercept, weighted residual sum of squares) of y = intercept + slope x."""
    W = w.sum()
    xm, ym = (w * x).sum() / W, (w * y).sum() / W
    sxx = (w * (x - xm) ** 2).sum()
    slope = (w * (x - xm) * (y - ym)).sum() / sxx if sxx > 0 else 0.0
    a = ym - slope * xm
    return float(slope), float(a), float((w * (y - a - slope * x) ** 2).sum())


def _slope_error(x: np.ndarray, w: np.ndarray, rss: float) -> float:
    """Standard error of a weighted least-squares slope from its residuals: what the probe
    really measured. The weights are query counts (y is a mean over that many queries), so
    rss / (N - 2) estimates one query's variance and the slope's is that over sum w (x - x̄)^2."""
    N = x.size
    xm = (w * x).sum() / w.sum()
    sxx = float((w * (x - xm) ** 2).sum())
    if N <= 2 or sxx <= 0:
        return math.inf
    return math.sqrt(max(rss, 0.0) / (N - 2) / sxx)


def _clip_point(x, y, w, rss_line: float, th: Thresholds) -> tuple[int | None, float, float]:
    """(N, slope, intercept) of the hinge y = a - m min(d, N) when it explains the curve far
    better than a line and the bias is flat after N (at least CLIP_TAIL distances); else
    (None, nan, nan)."""
    candidates = x[(x >= 2) & (x <= x.max() - CLIP_TAIL)]
    if candidates.size == 0:
        return None, math.nan, math.nan
    X = np.minimum(x[None, :], candidates[:, None])  # (N, D): min(d, N) for every candidate
    W = w.sum()
    xm, ym = (X * w).sum(1) / W, (w * y).sum() / W  # (N,), scalar
    sxx = (w * (X - xm[:, None]) ** 2).sum(1)
    slopes = (w * (X - xm[:, None]) * (y - ym)).sum(1) / np.where(sxx > 0, sxx, 1.0)
    rss_all = (w * (y - (ym - slopes * xm)[:, None] - slopes[:, None] * X) ** 2).sum(1)
    best = int(np.argmin(rss_all))
    n, slope, a, rss = int(candidates[best]), slopes[best], ym - slopes[best] * xm[best], \
        rss_all[best]
    tail = x >= n
    tail_slope = _wls(x[tail], y[tail], w[tail])[0]
    steep = abs(slope) > th.slope_atol
    flat = abs(tail_slope) <= max(0.1 * abs(slope), th.slope_atol)
    if steep and flat and rss <= 0.25 * rss_line:
        return n, -slope, a
    return None, math.nan, math.nan


def _fit_head(y: np.ndarray, n: np.ndarray, th: Thresholds) -> tuple[float, float, int | None,
                                                                      int, float]:
    """(measured slope, offset, clip point or None, reach, slope's standard error) of one
    head's curve, fitted over the distances d >= 1 that at least th.min_queries queries read
    (or half the most any distance got, when underflow leaves fewer: a steep head read in
    float16, or the decode probe's few queries), weighted by their count. The standard error
    comes from the fit's own residuals (`_slope_error`): inf when too few distances were read."""
    d = np.arange(y.size)
    use = (d >= 1) & (n >= min(th.min_queries, max(2, n[1:].max(initial=0) // 2)))
    if use.sum() < 2:
        return math.nan, math.nan, None, int(d[use].max()) if use.any() else 0, math.inf
    x, v, w = d[use].astype(np.float64), y[use], n[use].astype(np.float64)
    slope, a, rss = _wls(x, v, w)
    clip, clip_slope, clip_a = _clip_point(x, v, w, rss, th)
    if clip is not None:
        X = np.minimum(x, clip)
        rss_clip = float((w * (v - clip_a + clip_slope * X) ** 2).sum())
        return clip_slope, clip_a, clip, int(x.max()), _slope_error(X, w, rss_clip)
    return -slope, a, None, int(x.max()), _slope_error(x, w, rss)


# ----------------------------------------------------------------------------- diagnosis

def _close(a, b, th: Thresholds) -> np.ndarray:
    """Elementwise: are slopes a and b the same within the probe's resolution?"""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.abs(a - b) <= th.slope_rtol * np.maximum(np.abs(a), np.abs(b)) + th.slope_atol


def _factor(measured: np.ndarray, reference: np.ndarray, th: Thresholds) -> float:
    """The constant k that best maps reference onto measured, each head weighted by how
    precisely the probe reads it (so slopes below resolution barely count)."""
    w = 1.0 / (th.slope_rtol * np.abs(reference) + th.slope_atol) ** 2
    den = (w * reference * reference).sum()
    return float((w * measured * reference).sum() / den) if den > 0 else math.nan


def _named_factors(head_dim: int) -> list[tuple[str, float]]:
    """Factors a port can get wrong, in the order they are named."""
    root = math.sqrt(head_dim)
    return [("twice", 2.0), ("inv_sqrt_d", 1 / root), ("sqrt_d", root), ("half", 0.5),
            ("inv_d", 1.0 / head_dim)]


def _factor_name(k: float, head_dim: int, th: Thresholds) -> str | None:
    for name, value in _named_factors(head_dim):
        if abs(k - value) <= 2 * th.slope_rtol * abs(value) + 1e-9:
            return name
    return None


def _schedule_candidates(heads: int, scale: float, reference: np.ndarray, th: Thresholds,
                         ref_max_bias: float = 8.0):
    """(key, evidence, slopes) of the schedules a port can apply instead of the configured one,
    simplest first, each in the architecture's form (times `scale`); ones equal to the
    reference are left out."""
    out = []

    def add(key, evidence, slopes):
        slopes = slopes * scale
        if not _close(slopes, reference, th).all():
            out.append((key, evidence, slopes))

    if ref_max_bias != 8:  # MPT configured otherwise: transformers' max_bias 8 comes first
        add(("official",), {"schedule": "official", "num_heads": heads, "max_bias": 8.0,
                            "configured_max_bias": ref_max_bias}, alibi_slopes(heads))
    add(("geometric",), {"schedule": "geometric", "num_heads": heads},
        alibi_slopes(heads, "geometric"))
    add(("official",), {"schedule": "official", "num_heads": heads}, alibi_slopes(heads))
    for k in range(2, heads + 1):  # tensor parallel: k shards, each built n/k heads' slopes
        if heads % k == 0:
            add(("shards", k), {"schedule": "official", "num_heads": heads // k, "shards": k},
                np.tile(alibi_slopes(heads // k), k))
    nxt = 2 ** math.ceil(math.log2(heads))
    nxt = nxt if nxt != heads else 2 * heads
    counts = [nxt] + sorted((n for n in range(heads + 1, 4 * heads + 1) if n != nxt),
                            key=lambda n: (abs(n - heads), n))
    for n in counts:
        add(("count", n), {"schedule": "official", "num_heads": n, "next_power_of_two":
                           n == 2 ** math.ceil(math.log2(heads))}, alibi_slopes(n)[:heads])
    return out


def _max_bias_candidate(measured, configured, scale, heads, th, ref_max_bias: float = 8.0):
    """(key, evidence, slopes) of the official schedule with the max_bias that fits, or None.
    Official slopes are 2^(-max_bias x e_h): log2 of the slopes scale with max_bias.
    ref_max_bias: the configured one (MPT's alibi_bias_max; 8 elsewhere)."""
    ref = configured / scale
    if (measured <= 0).any() or (ref <= 0).any() or (ref >= 1).any():
        return None
    r = _factor(np.log2(measured / scale), np.log2(ref), th)
    if not math.isfinite(r) or r <= 0:
        return None
    max_bias = float(round(ref_max_bias * r))  # ports set a whole number (4, 8, 16, ...)
    if (abs(ref_max_bias * r - max_bias) > 0.02 * max_bias or max_bias == ref_max_bias
            or not 0 < max_bias <= 64):
        return None
    return (("max_bias", max_bias), {"schedule": "official", "max_bias": max_bias,
                                     "configured_max_bias": ref_max_bias},
            alibi_slopes(heads, "official", max_bias) * scale)


def _explain_slopes(measured, expected, scale, head_dim, th, ref_max_bias: float = 8.0):
    """(verdict, key, evidence, predicted slopes) of the simplest explanation of one layer's
    measured slopes, or None when none fits every head. ref_max_bias: the configured max_bias
    of the expected slopes (MPT's alibi_bias_max)."""
    heads = expected.size
    if _close(measured, expected, th).all():
        return "conforms", ("conforms",), {}, expected
    if _close(measured, 0.0, th).all():
        return "missing", ("missing",), {}, np.zeros_like(expected)
    shard = _explain_missing_shards(measured, expected, th)
    if shard is not None:
        return shard
    k = _factor(measured, expected, th)
    if (math.isfinite(k) and abs(k - 1) > 2 * th.slope_rtol
            and _close(measured, k * expected, th).all()):
        verdict = "sign_flipped" if k < 0 else "scaled"
        name = None if abs(abs(k) - 1) <= 2 * th.slope_rtol else _factor_name(abs(k), head_dim,
                                                                               th)
        label = name or ("one" if abs(abs(k) - 1) <= 2 * th.slope_rtol else f"{abs(k):.2g}")
        return verdict, (verdict, label), {"factor": k, "factor_name": name}, k * expected
    if (measured < 0).sum() > heads / 2:  # the bias grows with distance: what else is wrong?
        inner = _explain_slopes(-measured, expected, scale, head_dim, th, ref_max_bias)
        if inner is not None and inner[0] not in ("conforms", "missing", "scaled"):
            verdict, key, evidence, predicted = inner
            return ("sign_flipped", ("sign_flipped", *key), {**evidence, "inner": verdict},
                    -predicted)
    schedules = _schedule_candidates(heads, scale, expected, th, ref_max_bias)
    extra = _max_bias_candidate(measured, expected, scale, heads, th, ref_max_bias)
    if extra is not None:
        schedules.append(extra)
    for key, evidence, slopes in schedules:
        if _close(measured, slopes, th).all():
            return "schedule", ("schedule", *key), dict(evidence), slopes
    permutation = _explain_order(measured, expected, th)
    if permutation is not None:
        key, evidence, slopes = permutation
        return "permuted", ("permuted", *key), evidence, slopes
    for name, value in _named_factors(head_dim):  # a named factor on top of another schedule
        if value < 0:
            continue
        for key, evidence, slopes in schedules:
            if _close(measured, value * slopes, th).all():
                return ("schedule", ("schedule", *key, name),
                        {**evidence, "factor": value, "factor_name": name}, value * slopes)
        permutation = _explain_order(measured, value * expected, th)
        if permutation is not None:
            key, evidence, slopes = permutation
            return ("permuted", ("permuted", *key, name),
                    {**evidence, "factor": value, "factor_name": name}, slopes)
    return None


def _explain_missing_shards(measured, expected, th):
    """(verdict "missing", key, evidence, slopes) when the heads that apply no bias are whole
    tensor-parallel shards (k contiguous blocks of n/k heads, the fewest shards that fit) and
    every other head conforms; else None."""
    heads = expected.size
    zero = _close(measured, 0.0, th) & ~_close(expected, 0.0, th)
    if not zero.any() or zero.all() or not (zero | _close(measured, expected, th)).all():
        return None
    for k in range(2, heads // 2 + 1):  # a shard holds two heads at least
        if heads % k:
            continue
        blocks = zero.reshape(k, heads // k)
        if (blocks.all(axis=1) | ~blocks.any(axis=1)).all():
            missing = [int(b) for b in np.flatnonzero(blocks.all(axis=1))]
            predicted = np.where(zero, 0.0, expected)
            return ("missing", ("missing", "shards", k, tuple(missing)),
                    {"shards": k, "missing_shards": missing}, predicted)
    return None


def _explain_order(measured, expected, th):
    """(key, evidence, slopes) when the measured slopes are the expected ones in another head
    order: reversed, sorted, or a permutation (evidence["sources"][h]: the 0-based head whose
    expected slope head h applies); else None."""
    loose = replace(th, slope_atol=float(np.max(th.slope_atol)))  # sorting mixes the heads
    if not _close(np.sort(measured), np.sort(expected), loose).all():
        return None
    for key, slopes in (("reversed", expected[::-1]), ("sorted_desc", np.sort(expected)[::-1]),
                        ("sorted_asc", np.sort(expected))):
        if _close(measured, slopes, th).all():
            return (key,), {"order": key}, slopes.copy()
    sources = np.argsort(expected)[np.argsort(np.argsort(measured))]  # rank of measured -> head
    if (sources == np.arange(expected.size)).all() or not _close(measured, expected[sources],
                                                                 th).all():
        return None  # no head moved, or the order does not explain every head
    return ("permutation", tuple(int(s) for s in sources)), {
        "order": "permutation", "sources": [int(s) for s in sources]}, expected[sources]


def _explain_offsets(measured, offsets, th):
    """(key, evidence) of one layer's offsets: None when every offset is within tolerance;
    ("off_by", c) when offset_h = c m_h for an integer c; ("constant", a) when all are one
    constant; ("heads",) otherwise."""
    offsets = np.nan_to_num(offsets, nan=0.0)
    if (np.abs(offsets) <= th.offset_tol).all():
        return None
    den = (measured * measured).sum()
    if den > 0:
        c = round(float((measured * offsets).sum() / den))
        fit = np.abs(offsets - c * measured) <= th.offset_tol + 2 * th.slope_rtol * np.abs(
            c * measured)
        if c != 0 and fit.all():
            return ("off_by", c), {"distance_off_by": c}
    middle = float(np.median(offsets))
    if (np.abs(offsets - middle) <= th.offset_tol).all():
        return ("constant", round(middle, 3)), {"offset": middle}
    return ("heads",), {}


def _explain_clips(clips, reach):
    """(N, heads clipped) when the clipped heads stop at one N and every head whose probe
    reaches past N + CLIP_TAIL is clipped; else None."""
    points = [c for c in clips if c is not None]
    if not points:
        return None
    n = int(np.median(points))
    same = [c is not None and abs(c - n) <= max(1, n // 32) for c in clips]
    far = [r >= n + CLIP_TAIL for r in reach]
    if all(s or not f for s, f in zip(same, far, strict=True)) and sum(same) == len(points):
        return n, sum(same)
    return None


def _head_verdict(slope, expected, h, th) -> tuple[str, str]:
    """(verdict, detail) of one head that no explanation of its layer covers."""
    e = expected[h]
    if not math.isfinite(slope):
        return "missing", _("the probe could not read this head")
    if _close(slope, e, th):
        return "conforms", ""
    if _close(slope, 0.0, th):
        return "missing", _("no positional bias at all")
    if _close(slope, -e, th):
        return "sign_flipped", _("the bias grows with distance")
    for other, value in enumerate(expected):
        if other != h and _close(slope, value, th):
            return "permuted", _("applies head {head}'s slope {slope}").format(
                head=other + 1, slope=formatted(value, ".4g"))
    return "scaled", _ratio_detail(slope / e)


def _ratio_detail(ratio: float) -> str:
    return _("ratio {ratio} to the expected slope").format(ratio=formatted(ratio, ".4g"))


def _layer_list(layers: list[int]) -> str:
    return ", ".join(str(k + 1) for k in layers)


def _and_a_factor(evidence: dict, head_dim: int, context: dict) -> str:
    """" On top of that, every head applies Nx its slope: why." when the explanation found a
    constant factor besides a schedule or an order, else ""."""
    if not evidence.get("factor_name"):
        return ""
    return " " + _("On top of that, every head applies {factor}x its slope: {reason}.").format(
        factor=formatted(evidence["factor"], ".4g"),
        reason=_factor_phrase(evidence["factor_name"], evidence["factor"], head_dim,
                              context["falcon_eager"]))


def _factor_phrase(name: str | None, k: float, head_dim: int, falcon_eager: bool) -> str:
    """What a constant factor means, in words."""
    if name == "twice":
        return (_("the bias is added twice (transformers' Falcon eager path does this)")
                if falcon_eager else _("the bias is added twice"))
    if name == "inv_sqrt_d":
        return _("the bias is divided by sqrt(head_dim) = {root}").format(
            root=formatted(math.sqrt(head_dim), ".4g"))
    if name == "sqrt_d":
        return _("the bias is multiplied by sqrt(head_dim) = {root} (its 1/sqrt(d) scaling is "
                 "missing or applied the wrong way)").format(
                     root=formatted(math.sqrt(head_dim), ".4g"))
    if name == "half":
        return _("the bias is halved")
    if name == "inv_d":
        return _("the bias is divided by head_dim = {d}").format(d=head_dim)
    return _("one constant factor for every head")


def _schedule_phrase(evidence: dict, heads: int) -> str:
    """Which schedule the slopes follow, in words."""
    if evidence.get("max_bias") is not None:
        return _("the official schedule with max_bias {value} instead of {configured}").format(
            value=formatted(evidence["max_bias"], "g"),
            configured=formatted(evidence.get("configured_max_bias", 8), "g"))
    if evidence.get("schedule") == "geometric":
        return _("the paper's geometric formula 2^(-8h/n) instead of the official rule "
                 "(they differ when the head count is not a power of two)")
    n = evidence["num_heads"]
    if evidence.get("shards"):
        return _("the schedule for {n} heads, repeated {k} times (each tensor-parallel shard "
                 "built its own)").format(n=n, k=evidence["shards"])
    if n == heads:
        return _("the official rule (fairseq, BLOOM)")
    if evidence.get("next_power_of_two"):
        return _("the first {heads} slopes of the {n}-head schedule (truncated from the next "
                 "power of two)").format(heads=heads, n=n)
    return _("the first {heads} slopes of the {n}-head schedule").format(heads=heads, n=n)


def _order_phrase(evidence: dict) -> str:
    order = evidence["order"]
    if order == "reversed":
        return _("the slopes are in reverse head order")
    if order == "sorted_desc":
        return _("the slopes are sorted steepest first (the official order is not monotonic "
                 "for this head count)")
    if order == "sorted_asc":
        return _("the slopes are sorted shallowest first")
    moved = [f"{h + 1}<-{s + 1}" for h, s in enumerate(evidence["sources"]) if h != s]
    shown = ", ".join(moved[:6]) + (", ..." if len(moved) > 6 else "")
    return _("the slopes are permuted (head<-slope of head: {moves})").format(moves=shown)


def _summary(verdict: str, evidence: dict, context: dict) -> str:
    """The sentence of one finding, for every head it covers."""
    head_dim, heads = context["head_dim"], context["heads"]
    if "counts" in evidence:
        listed = ", ".join(ngettext("{n} head {verdict}", "{n} heads {verdict}", n).format(
            n=n, verdict=_(VERDICT_TITLES[v])) for v, n in evidence["counts"].items())
        return _("No single explanation fits: {counts} (see the table).").format(counts=listed)
    if verdict == "missing" and "shards" in evidence:
        size = heads // evidence["shards"]
        spans = ", ".join(f"{s * size + 1}-{(s + 1) * size}" for s in evidence["missing_shards"])
        return ngettext("Heads {spans} apply no positional bias: shard {shards} of {k} "
                        "(tensor parallel: that shard adds none), the others conform.",
                        "Heads {spans} apply no positional bias: shards {shards} of {k} "
                        "(tensor parallel: those shards add none), the others conform.",
                        len(evidence["missing_shards"])).format(
            spans=spans, k=evidence["shards"],
            shards=", ".join(str(s + 1) for s in evidence["missing_shards"]))
    if verdict == "missing":
        return _("No head applies a positional bias.")
    if verdict == "sign_flipped" and "inner" in evidence:
        inner = {k: v for k, v in evidence.items() if k != "inner"}
        return _("Every head's bias has the wrong sign (it grows with distance), and without "
                 "the sign: {inner}").format(inner=_summary(evidence["inner"], inner, context))
    if verdict in ("scaled", "sign_flipped"):
        k = evidence["factor"]
        phrase = _factor_phrase(evidence.get("factor_name"), abs(k), head_dim,
                                context["falcon_eager"])
        if verdict == "sign_flipped":
            if abs(abs(k) - 1) <= 0.05:
                return _("Every head's bias has the wrong sign: it grows with distance.")
            return _("Every head's bias has the wrong sign and {factor}x its size: {reason}.") \
                .format(factor=formatted(abs(k), ".4g"), reason=phrase)
        return _("Every head applies {factor}x its slope: {reason}.").format(
            factor=formatted(k, ".4g"), reason=phrase)
    if verdict == "schedule":
        text = _("The slopes follow {schedule}, not the configured schedule.").format(
            schedule=_schedule_phrase(evidence, heads))
        return text + _and_a_factor(evidence, head_dim, context)
    if verdict == "permuted":
        text = _("Every head applies the slope of another head: {order}.").format(
            order=_order_phrase(evidence))
        return text + _and_a_factor(evidence, head_dim, context)
    if verdict == "clipped":
        return ngettext("The bias stops growing after {n} token in every head whose probe "
                        "reaches that far.",
                        "The bias stops growing after {n} tokens in every head whose probe "
                        "reaches that far.", evidence["clip_at"]).format(n=evidence["clip_at"])
    if verdict == "offset" and "distance_off_by" in evidence:
        c = evidence["distance_off_by"]
        return ngettext("The distance is off by {n} token for every key but the query's own "
                        "({direction}): not a constant per row, so attention changes.",
                        "The distance is off by {n} tokens for every key but the query's own "
                        "({direction}): not a constant per row, so attention changes.",
                        abs(c)).format(n=abs(c), direction=_("keys look closer") if c > 0
                                       else _("keys look farther"))
    if verdict == "offset" and "offset" in evidence:
        return _("Keys other than the query's own get {offset} logits in every head: not a "
                 "constant per row, so attention changes.").format(
                     offset=formatted(evidence["offset"], "+.3g"))
    raise AssertionError(f"no summary for {verdict!r}")  # every finding kind is handled above


def _diagnose(fits, expected_all, scale, head_dim, th, context):
    """(heads[layer][head] as HeadChecks, findings, schedule) from the per-head fits:
    fits[layer][head] = (slope, offset, clip_at, reach). Each layer is explained on its own;
    layers with the same explanation make one finding; what no explanation covers is counted
    per layer."""
    groups: dict = {}  # key -> [verdict, evidence, layers, heads covered]
    unjudged_counts: list[int] = []  # per layer: heads too coarsely read to judge
    resolutions: list[np.ndarray] = []
    leftovers: list[Counter] = []  # per layer: verdicts of the heads nothing explains
    heads_out = []
    schedule = None
    expected = expected_all = np.asarray(expected_all, dtype=np.float64)

    def note(key, verdict, evidence, layer, count):
        group = groups.setdefault(key, [verdict, evidence, [], 0])
        group[2].append(layer)
        group[3] += count

    per_layer = expected.ndim == 2  # (layers, heads): each layer checked against its own
    for layer, row in enumerate(fits):
        expected = expected_all[layer] if per_layer else expected_all
        measured = np.array([f[0] for f in row])
        offsets = np.array([f[1] for f in row])
        clips = [f[2] for f in row]
        reach = [f[3] for f in row]
        # each head's resolution: the dtype's floor, what its own residuals allow, and the
        # rounding of the bias itself, m*j held in the model's dtype (eps m j at the probe's
        # far keys), spread over the distances the head was read at
        far = context.get("probe_length", 1) / np.maximum(np.array(reach, dtype=float), 1.0)
        spread = np.array([f[5] if len(f) > 5 else 0.0 for f in row])
        atol = np.maximum.reduce([np.full(len(row), th.slope_atol),
                                  RESOLUTION_SE * np.array([f[4] for f in row]),
                                  RESOLUTION_SPREAD * np.nan_to_num(spread, nan=np.inf),
                                  (th.eps + th.schedule_rounding) * np.abs(expected) * far])
        th_layer = replace(th, slope_atol=atol)
        unjudged = ~np.isfinite(measured) | (atol + th.slope_rtol * np.abs(expected)
                                            > UNJUDGED_FRACTION * np.abs(expected))
        # a head read too coarsely tells nothing about clips and offsets either
        raw_offsets = offsets
        clips = [None if unjudged[h] else c for h, c in enumerate(clips)]
        offsets = np.where(unjudged, 0.0, offsets)
        verdicts, details = ["conforms"] * len(row), [""] * len(row)
        left: Counter = Counter()
        explained = (_explain_slopes(measured, expected, scale, head_dim, th_layer,
                                     context.get("max_bias", 8.0))
                     if np.isfinite(measured).all() else None)
        if explained is not None:
            verdict, key, evidence, predicted = explained
            for h in range(len(row)):  # a head the explanation leaves as it was conforms
                if verdict != "conforms" and not math.isclose(predicted[h], expected[h],
                                                              rel_tol=1e-6):
                    verdicts[h], details[h] = verdict, _ratio_detail(measured[h] / expected[h])
            if verdict != "conforms":
                note(key, verdict, evidence, layer, sum(v != "conforms" for v in verdicts))
            if layer == 0:
                schedule = (context["schedule"] if verdict in ("conforms", "scaled",
                                                               "sign_flipped")
                            else "geometric" if key[:2] == ("schedule", "geometric") else None)
        else:
            for h in range(len(row)):
                verdicts[h], details[h] = _head_verdict(measured[h], expected, h,
                                                        replace(th, slope_atol=atol[h]))
            left.update(v for h, v in enumerate(verdicts) if v != "conforms" and not unjudged[h])
        for h in np.flatnonzero(unjudged):  # what could not be judged is not "conforms"
            if verdicts[h] in ("conforms", "permuted", "scaled", "sign_flipped") and not (
                    explained is not None and explained[0] != "conforms"):
                verdicts[h] = "inconclusive"
                details[h] = _("the probe reads this slope only to about {res} (from its "
                               "residuals): too coarse to judge it").format(
                                   res=formatted(atol[h], ".2g"))
        if unjudged.any() and left:  # content swamps this layer's probe: per-head leftovers
            for h, v in enumerate(verdicts):  # are its noise, not bugs
                if v in left:
                    verdicts[h] = "inconclusive"
                    details[h] = _("the probe reads this slope only to about {res} (from its "
                                   "residuals): too coarse to judge it").format(
                                       res=formatted(atol[h], ".2g"))
            left.clear()
        unjudged_counts.append(int(sum(v == "inconclusive" for v in verdicts)))
        resolutions.append(atol)
        clip = _explain_clips(clips, reach)
        for h, c in enumerate(clips):
            if c is not None:
                verdicts[h] = "clipped"
                details[h] = ngettext("the bias stops growing after {n} token",
                                      "the bias stops growing after {n} tokens", c).format(n=c)
        if clip is not None:
            note(("clipped", clip[0]), "clipped", {"clip_at": clip[0]}, layer, clip[1])
        else:
            left.update("clipped" for c in clips if c is not None)
        offset = _explain_offsets(np.nan_to_num(measured), offsets, th)
        if offset is not None:
            key, evidence = offset
            flagged = [h for h in range(len(row)) if abs(offsets[h]) > th.offset_tol]
            for h in flagged:
                if verdicts[h] != "clipped":
                    verdicts[h] = "offset"
                    details[h] = _("keys other than the query's own get {offset} logits: not a "
                                   "row constant").format(offset=formatted(offsets[h], "+.3g"))
            if key == ("heads",):
                left.update("offset" for _h in flagged)
            else:
                note(("offset", *key), "offset", evidence, layer, len(flagged))
        leftovers.append(left)
        heads_out.append([
            HeadCheck(layer, h, verdicts[h] == "conforms", verdicts[h], float(expected[h]),
                      float(measured[h]), float(measured[h] / expected[h]) if expected[h] else
                      math.nan, float(raw_offsets[h]), clips[h], details[h], int(reach[h]),
                      float(atol[h]))
            for h in range(len(row))])

    if sum(unjudged_counts):  # content swamps the probe somewhere: per-head leftovers of
        for layer, left in enumerate(leftovers):  # every layer are its noise, not bugs
            for h in heads_out[layer]:
                if h.verdict in left:
                    h.verdict, h.ok = "inconclusive", False
            unjudged_counts[layer] += sum(left.values())
            left.clear()
    order = {v: i for i, v in enumerate(("missing", "scaled", "sign_flipped", "schedule",
                                         "permuted", "clipped", "offset"))}
    found = [(order[verdict], layers[0], verdict, evidence, layers, count)
             for verdict, evidence, layers, count in groups.values()]
    merged: dict = {}  # the leftovers of layers with the same counts make one finding
    for layer, left in enumerate(leftovers):
        if left:
            merged.setdefault(tuple(sorted(left.items())), []).append(layer)
    for counts, layers in merged.items():
        counts = dict(sorted(counts, key=lambda item: -item[1]))
        found.append((len(order), layers[0], next(iter(counts)), {"counts": counts}, layers,
                      sum(counts.values()) * len(layers)))
    found.sort(key=lambda f: (f[0], f[1]))
    findings = []
    for _rank, _first, verdict, evidence, layers, count in found:
        text = _summary(verdict, evidence, context)
        if len(layers) != len(fits):
            text = ngettext("Layer {layers}: {finding}", "Layers {layers}: {finding}",
                            len(layers)).format(layers=_layer_list(layers), finding=text)
        findings.append(Finding(verdict, text, list(layers), int(count), _finite(dict(evidence))))
    if sum(unjudged_counts):
        findings.append(_inconclusive_finding(heads_out, unjudged_counts))
    return heads_out, findings, schedule


def _inconclusive_finding(heads_out, unjudged_counts) -> Finding:
    """The finding for heads whose slopes the probe read too coarsely to judge (their
    resolution, from the fit's residuals, is over UNJUDGED_FRACTION of the expected slope)."""
    cells = [h for row in heads_out for h in row if h.verdict == "inconclusive"]
    layers = [k for k, n in enumerate(unjudged_counts) if n]
    resolution = float(np.median([h.resolution for h in cells]))
    text = ngettext(
        "Inconclusive: the attention is dominated by content (or by rounding): the probe reads "
        "{n} head's slope only to about {res} logits per token (from what it measured), too "
        "coarse to judge it.",
        "Inconclusive: the attention is dominated by content (or by rounding): the probe reads "
        "{n} heads' slopes only to about {res} logits per token (from what it measured), too "
        "coarse to judge them.", len(cells)).format(n=len(cells), res=formatted(resolution,
                                                                                ".2g"))
    if len(heads_out) > 1:  # "33 heads" of a 32-head model: say what was counted
        text += " " + _("Counted over all {layers} layers ({total} heads).").format(
            layers=len(heads_out), total=sum(len(row) for row in heads_out))
    return Finding("inconclusive", text, layers, len(cells),
                   _finite({"resolution": resolution, "counts": {"inconclusive": len(cells)}}))


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
    (`_curves`), over the distances every step saw. y, n: (layers, heads, length)."""
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
        y, n = _curves(rows[layer], min_log_prob, first_query=first)
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
    if (np.isfinite(ratio).all() and _close(measured, expected, th).all()
            and (np.abs(ratio - mean_query) <= 1.0).all()):
        return [_("The new token's own key gets no bias (its bias row holds m*j for the cached "
                  "keys but 0 for the new one).")], {"new_key": "zero", "layer": first}
    _heads, findings, _schedule = _diagnose(fits, configured, scale, head_dim, th, context)
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
    return Finding(kind, text, [], 0, _finite({"logits": logits, "attention": attention,
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
        curves, counts = _probe(model, probe_length, None, tokenizer, base.min_log_prob,
                                premise_tol=max(1e-3, 64 * base.eps))
        heads = curves.shape[1]
        if expected is not None:
            configured, form = _given_slopes(expected, heads)
        if configured.shape[-1] != heads or configured.ndim == 2 and len(configured) != len(curves):
            raise AlibiVizError(_("The config names {config} heads, but the attention has "
                                  "{heads}.").format(config=configured.shape[-1], heads=heads))
        fits = [[_fit_head(y, n, base) for y, n in zip(layer_curves, layer_counts,
                                                       strict=True)]
                for layer_curves, layer_counts in zip(curves, counts, strict=True)]
        # the same probe with other tokens: the bias is the same, the content is not, so how
        # far their slopes spread is what the content (and its rounding) leaves unresolved
        # (the measured slope is the median of the tokens' fits, its spread the largest
        # distance from it: the smaller one passed false "scaled" heads in 16-bit models)
        slopes = [np.array([[f[0] for f in row] for row in fits])]
        for token in _other_tokens(tokenizer):
            other, other_counts = _probe(model, probe_length, token, tokenizer, base.min_log_prob)
            slopes.append(np.array([[_fit_head(y, n, base)[0] for y, n in zip(
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
        head_checks, findings, schedule = _diagnose(fits, configured, scale, head_dim, th,
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
        result = None
        if decode:
            if progress:
                progress(0.5, _("decoding token by token through the KV cache"))
            result = _decode_check(model, tokenizer, texts, th)
            dec_y, dec_n, mean_query = _decode_probe(model, probe_length, tokenizer,
                                                     base.min_log_prob)
            dec_fits = [[_fit_head(y, n, base) for y, n in zip(ly, ln, strict=True)]
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
