"""Is this model applying ALiBi correctly? A conformance check for ALiBi checkpoints.

`check_alibi(model, tokenizer)` answers, for every layer and head: is the positional bias the
model really applies the one its config says it should, in prefill and in cached decoding,
with left padding too?

The applied-bias probe. Feed one token repeated T times. A model without position embeddings
then keeps every position's hidden state identical in every layer (each attention output is
a weighted average of identical values), so every head's content score q.k is one constant
and its pre-softmax logits are that constant plus exactly the bias it applies. Attention
probabilities therefore give the applied bias back: log p_ij - log p_ii = b(i - j) - b(0).
That reads what the model really computes, bugs included, in its own attention path (eager:
`output_attentions`; sdpa: the inputs of torch's scaled_dot_product_attention, recorded and
softmaxed as sdpa does). `tests/test_conformance.py` checks the identical-states claim.

From the averaged curve y(d) = b(d) - b(0) of each head the check fits the applied slope and
names one verdict:

  conforms      slope within tolerance of the expected one.
  scaled        slope = ratio x expected, the ratio the same for every head (e.g. 1/sqrt(d)
                or 2/sqrt(d)); with a ratio that varies per head, the slopes follow another
                schedule (`AlibiCheck.schedule` says which).
  sign_flipped  the bias grows with distance instead of falling.
  permuted      the head applies another head's expected slope (which one is in `detail`).
  offset        y(d) jumps between d = 0 and d = 1: a constant added to every key but the
                query's own, which changes attention. A constant added to a whole row is
                harmless, invisible to softmax and to this probe, and passes as it should.
  missing       no bias at all.
  clipped       the bias stops growing after N tokens (`clip_at`).

Expected slopes are the config's documented form: the official schedule m_h for BLOOM and MPT
(bias added unscaled), and m_h / sqrt(d) for Falcon with alibi=True (the original Falcon-RW
code: softmax((QK^T + alibi) / sqrt(d))). transformers' eager Falcon adds the bias twice, so it
is flagged `scaled` with ratio 2 and the reason.

Prefill vs decode: the same text through one full forward and token by token through the KV
cache (`use_cache=True`, transformers' `cache`), comparing logits and each layer's attention row; and a batch of two
texts of different lengths, the shorter left-padded, against each text alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import torch

from alibi_viz.alibi import SCHEDULES, alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, formatted, ngettext

VERDICTS = ("conforms", "scaled", "sign_flipped", "permuted", "offset", "missing", "clipped")
# Verdict names as the app shows them (translated where shown: `_(VERDICT_TITLES[v])`).
VERDICT_TITLES = {"conforms": N_("conforms"), "scaled": N_("scaled"),
                  "sign_flipped": N_("sign flipped"), "permuted": N_("permuted"),
                  "offset": N_("offset"), "missing": N_("missing"), "clipped": N_("clipped")}
PROBE_LENGTH = 128
SLOPE_RTOL = 1e-3  # fp32: the probe reads slopes to about 1e-6; bugs move them by 2x or more
SLOPE_RTOL_16BIT = 0.05
OFFSET_TOL = 1e-3  # logits: a jump between d = 0 and d = 1 bigger than this is an offset
# Prefill vs decode tolerances on logits and attention, by dtype. float32: the full and the
# cached paths sum the same products in another order, about 1e-6 relative on logits of
# order 10; 1e-4 leaves 10x margin. 16-bit: every layer rounds its output to 8 (bf16) or 11
# (fp16) bits, and the two paths round differently; 0.1 logits still catches a wrong bias,
# which moves logits by whole units.
DECODE_TOL = {torch.float32: 1e-4, torch.float64: 1e-8, torch.bfloat16: 0.1, torch.float16: 0.1}
DEFAULT_TEXTS = ("def add(a, b):\n    return a + b\n", "x = [i * i for i in range(9)]")


@dataclass
class HeadCheck:
    """One head's verdict. Slopes are per token, on the pre-softmax logits."""

    layer: int
    head: int
    ok: bool
    verdict: str
    expected_slope: float
    applied_slope: float
    ratio: float
    offset: float
    clip_at: int | None = None
    detail: str = ""


@dataclass
class DecodeCheck:
    """Largest absolute differences, cached decoding and left padding vs one full forward."""

    logits: float
    layers: list[float]
    padding_logits: float
    padding_layers: list[float]
    tolerance: float
    ok: bool
    padding_ok: bool


@dataclass
class AlibiCheck:
    """The result of `check_alibi`: heads[layer][head], the decode check, and context."""

    heads: list[list[HeadCheck]]
    decode: DecodeCheck | None
    expected_form: str
    schedule: str | None  # the standard schedule the applied slopes match, if any
    probe_length: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        heads_ok = all(h.ok for row in self.heads for h in row)
        return heads_ok and (self.decode is None or (self.decode.ok and self.decode.padding_ok))

    def verdicts(self) -> np.ndarray:
        """(layers, heads) array of verdict names."""
        return np.array([[h.verdict for h in row] for row in self.heads], dtype=object)

    def applied(self) -> np.ndarray:
        """(layers, heads) applied slopes."""
        return np.array([[h.applied_slope for h in row] for row in self.heads])


# ----------------------------------------------------------------------------- expected bias

def expected_slopes(model) -> tuple[np.ndarray, str, str | None]:
    """(expected per-token slopes (heads,), the form in words, a warning or None) for the
    model's config, in the form the architecture documents (see the module docstring)."""
    config = model.config
    kind = config.model_type
    if kind == "bloom":
        return (alibi_slopes(config.n_head), _("BLOOM: m_h added unscaled (official schedule)"),
                None)
    if kind == "mpt":
        heads = config.n_heads
        return (alibi_slopes(heads, "mpt"), _("MPT: m_h added unscaled (alibi_bias_max 8)"), None)
    if kind == "falcon" and getattr(config, "alibi", False):
        heads = config.num_attention_heads
        head_dim = config.hidden_size // heads
        expected = alibi_slopes(heads) / math.sqrt(head_dim)
        eager = getattr(config, "_attn_implementation", "eager") == "eager"
        warning = _("transformers' eager Falcon adds the ALiBi bias twice (inside "
                    "(QK^T + alibi)/sqrt(d) and again through the attention mask), so its "
                    "heads apply 2 m/sqrt(d): expect `scaled` with ratio 2 here; the sdpa path "
                    "and the original Falcon-RW code apply m/sqrt(d).") if eager else None
        return (expected, _("Falcon-RW: m_h/sqrt(d) (bias inside the 1/sqrt(d) scaling)"),
                warning)
    raise AlibiVizError(_("'{kind}' is not an ALiBi architecture this check knows (BLOOM, MPT, "
                          "Falcon with alibi=True).").format(kind=kind))


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
            future = torch.ones(Q, K, dtype=torch.bool).triu(K - Q + 1)
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


def _run(model, input_ids, attention_mask=None, cache=None, use_cache=False):
    """One forward returning (output, per-layer probabilities (B, H, Q, K)): the model's own
    float32 (eager) or float64 (recorded from sdpa's inputs)."""
    eager = getattr(model.config, "_attn_implementation", "eager") == "eager"
    records: list = []
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache,
                  cache=cache)  # transformers 5: `cache` (formerly past_key_values)
    with torch.inference_mode():
        if eager:
            out = model(**kwargs, output_attentions=True)
            probs = list(out.attentions)
        else:
            with _record_sdpa(records):
                out = model(**kwargs)
            probs = records
    if not probs or probs[0] is None:
        raise AlibiVizError(_("The model returned no attention probabilities."))
    return out, probs


def probe_bias(model, length: int = PROBE_LENGTH, token_id: int | None = None,
               tokenizer=None) -> np.ndarray:
    """The bias every head applies, read from one token repeated `length` times.

    Returns y of shape (layers, heads, length): y[l, h, d] = mean over queries i >= d of
    log p_{i, i-d} - log p_{i, i}, i.e. b(d) - b(0) in logits (textbook ALiBi: -m d).
    """
    if token_id is None:  # an ordinary token: the tokenizer's "a", else id 10
        ids = tokenizer("a", add_special_tokens=False)["input_ids"] if tokenizer else [10]
        token_id = int(ids[0])
    device = next(model.parameters()).device
    ids = torch.full((1, length), token_id, dtype=torch.long, device=device)
    _out, probs = _run(model, ids)
    curves = []
    for k in range(len(probs)):
        logp = probs[k][0].double().clamp_min(1e-300).log()  # (H, T, T)
        probs[k] = None  # free each layer's maps once read
        own = torch.diagonal(logp, dim1=1, dim2=2)  # (H, T)
        per_d = [torch.diagonal(logp, offset=-d, dim1=1, dim2=2) - own[:, d:]
                 for d in range(length)]  # each (H, T - d)
        curves.append(torch.stack([x.mean(dim=1) for x in per_d], dim=1))  # (H, T)
    return torch.stack(curves).cpu().numpy()


# ----------------------------------------------------------------------------- verdicts

def _fit(y: np.ndarray, upto: int) -> tuple[float, float]:
    """(slope m, intercept a) of y(d) = a - m d over d = 1 .. upto, least squares."""
    d = np.arange(1, upto + 1, dtype=np.float64)
    v = y[1:upto + 1]
    if d.size < 2:
        return float(-(v[0] if v.size else 0.0)), 0.0
    m, a = np.polyfit(d, v, 1)
    return float(-m), float(a)


def _clip_point(y: np.ndarray, slope_tol: float) -> int | None:
    """The distance N after which y stops changing while it changed before, or None."""
    steps = np.abs(np.diff(y))  # steps[d - 1] = |y(d) - y(d - 1)|
    if steps.size < 4 or steps[0] < slope_tol:
        return None
    flat = steps < 0.05 * steps[0]
    for n in range(1, steps.size):
        if flat[n:].all() and not flat[:n].any():
            return n
    return None


UNDERFLOW = -60.0  # logits: farther keys' probabilities leave float32's normal range


def judge_head(y: np.ndarray, expected: float, expected_layer: np.ndarray, head: int,
               rtol: float) -> tuple[str, float, float, int | None, str]:
    """(verdict, applied slope, offset, clip point, detail) for one head's curve y(d).

    Only distances whose bias is above UNDERFLOW logits are used: beyond, float32
    probabilities are denormal or zero and their logarithms say nothing."""
    usable = np.nonzero(y > UNDERFLOW)[0]
    y = y[: int(usable.max()) + 1] if usable.size else y[:2]
    clip = _clip_point(y, rtol * expected)
    slope, offset = _fit(y, clip if clip else y.size - 1)
    if clip is not None:
        return ("clipped", slope, offset, clip,
                ngettext("the bias stops growing after {n} token",
                         "the bias stops growing after {n} tokens", clip).format(n=clip))
    if abs(offset) > OFFSET_TOL and abs(offset) > 10 * rtol * expected:
        return ("offset", slope, offset, None,
                _("keys other than the query's own get {offset} logits: not a row constant")
                .format(offset=formatted(offset, "+.3g")))
    if abs(slope) <= rtol * expected * 10 and abs(slope) < 1e-4:
        return "missing", slope, offset, None, _("no positional bias at all")
    if math.isclose(slope, expected, rel_tol=rtol):
        return "conforms", slope, offset, None, ""
    if slope < 0 and math.isclose(-slope, expected, rel_tol=rtol):
        return "sign_flipped", slope, offset, None, _("the bias grows with distance")
    for other, value in enumerate(expected_layer):
        if other != head and math.isclose(slope, value, rel_tol=rtol):
            return ("permuted", slope, offset, None,
                    _("applies head {head}'s slope {slope}").format(head=other + 1,
                                                                    slope=formatted(value, ".4g")))
    return ("scaled", slope, offset, None,
            _("ratio {ratio} to the expected slope").format(ratio=formatted(slope / expected, ".4g")))


def _schedule_of(applied: np.ndarray, scale: float, rtol: float) -> str | None:
    """The standard schedule whose slopes (times `scale`) the applied ones match, in head
    order or as a set; None if none."""
    heads = applied.size
    for name in ("official", "geometric"):
        ref = alibi_slopes(heads, name) * scale
        if np.allclose(applied, ref, rtol=rtol) or np.allclose(np.sort(applied), np.sort(ref),
                                                                rtol=rtol):
            return name
    return None


def _decode_check(model, tokenizer, texts, tolerance: float) -> DecodeCheck:
    """Full forward vs token-by-token decoding of texts[0]; left-padded batch of both texts
    vs each alone. Maxima of |difference| on logits and per layer on attention rows."""
    device = next(model.parameters()).device
    ids = torch.tensor([tokenizer(texts[0])["input_ids"]], device=device)  # (1, T)
    full, full_probs = _run(model, ids)
    T = ids.shape[1]
    logit_diff, layer_diff = 0.0, [0.0] * len(full_probs)
    past = None
    for t in range(T):
        out, probs = _run(model, ids[:, t:t + 1], cache=past, use_cache=True)
        past = out.cache
        logit_diff = max(logit_diff, (out.logits[0, -1].double()
                                      - full.logits[0, t].double()).abs().max().item())
        for layer, p in enumerate(probs):
            row = p[0, :, -1, : t + 1].double()
            ref = full_probs[layer][0, :, t, : t + 1].double()
            layer_diff[layer] = max(layer_diff[layer], (row - ref).abs().max().item())

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    a = tokenizer(texts[0])["input_ids"]
    b = tokenizer(texts[1])["input_ids"]
    long, short = (a, b) if len(a) >= len(b) else (b, a)
    pad = len(long) - len(short)
    batch = torch.tensor([long, [pad_id] * pad + short], device=device)
    mask = torch.tensor([[1] * len(long), [0] * pad + [1] * len(short)], device=device)
    padded, padded_probs = _run(model, batch, attention_mask=mask)
    alone, alone_probs = _run(model, torch.tensor([short], device=device))
    pad_logits = (padded.logits[1, pad:].double() - alone.logits[0].double()).abs().max().item()
    pad_layers = [(p[1, :, pad:, pad:].double() - q[0].double()).abs().max().item()
                  for p, q in zip(padded_probs, alone_probs, strict=True)]
    return DecodeCheck(logits=logit_diff, layers=layer_diff, padding_logits=pad_logits,
                       padding_layers=pad_layers, tolerance=tolerance,
                       ok=logit_diff <= tolerance and max(layer_diff) <= tolerance,
                       padding_ok=pad_logits <= tolerance and max(pad_layers) <= tolerance)


def check_alibi(model, tokenizer=None, probe_length: int = PROBE_LENGTH, texts=DEFAULT_TEXTS,
                decode: bool = True,
                progress: Callable[[float, str], None] | None = None) -> AlibiCheck:
    """Check every layer and head of an ALiBi model against its config (module docstring).

    tokenizer: needed for the prefill-vs-decode check (decode=True). progress(fraction, what)
    is called as the check goes. Raises AlibiVizError for a model that is not ALiBi.
    """
    model.eval()
    expected, form, warning = expected_slopes(model)
    if model.config.model_type == "mpt":  # its bias is built at max_seq_len keys, no more
        probe_length = min(probe_length, int(model.config.max_seq_len))
    dtype = next(model.parameters()).dtype
    rtol = SLOPE_RTOL if dtype in (torch.float32, torch.float64) else SLOPE_RTOL_16BIT
    if progress:
        progress(0.05, _("probing the bias with one repeated token"))
    curves = probe_bias(model, probe_length, tokenizer=tokenizer)  # (L, H, T)
    heads = []
    for layer, layer_curves in enumerate(curves):
        row = []
        for h, y in enumerate(layer_curves):
            verdict, slope, offset, clip, detail = judge_head(y, float(expected[h]), expected, h,
                                                              rtol)
            row.append(HeadCheck(layer, h, verdict == "conforms", verdict, float(expected[h]),
                                 slope, slope / float(expected[h]), offset, clip, detail))
        heads.append(row)
    applied = np.array([[h.applied_slope for h in row] for row in heads])
    base = float(expected[0] / alibi_slopes(expected.size)[0])
    ratios = applied / expected
    schedule = _schedule_of(applied[0], base, rtol)
    notes = [warning] if warning else []
    if schedule is None:
        scale = float(np.median(ratios))
        if np.allclose(ratios, scale, rtol=rtol) and not math.isclose(scale, 1, rel_tol=rtol):
            schedule = _schedule_of(applied[0], base * scale, rtol)
            if schedule:
                notes.append(_("The slopes follow the {schedule} schedule scaled by {scale}.")
                             .format(schedule=schedule, scale=formatted(scale, ".4g")))
    elif schedule != "official":
        notes.append(_("The slopes follow the {schedule} schedule, not the official one "
                       "({official}) the config implies.").format(schedule=schedule,
                                                                  official=SCHEDULES[0]))
    result = None
    if decode:
        if tokenizer is None:
            raise AlibiVizError("The prefill-vs-decode check needs the tokenizer.")
        if progress:
            progress(0.5, _("decoding token by token through the KV cache"))
        result = _decode_check(model, tokenizer, texts, DECODE_TOL.get(dtype, 0.1))
    if progress:
        progress(1.0, _("done"))
    return AlibiCheck(heads=heads, decode=result, expected_form=form, schedule=schedule,
                      probe_length=probe_length, notes=notes)
