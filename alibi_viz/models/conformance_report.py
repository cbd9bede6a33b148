"""The conformance check's report: verdicts, findings, their sentences and the JSON form.

`AlibiCheck` (heads, diagnosis, decode check, thresholds) with its `HeadCheck`s and `Finding`s,
and the sentence of each finding (`summary`). Head and layer numbers: fields (`HeadCheck.layer`,
`HeadCheck.head`, `Finding.layers`, evidence) are 0-based indices; every sentence numbers
layers and heads from 1, as the app's and the command line's tables do.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from alibi_viz.i18n import N_, _, formatted, ngettext
from alibi_viz.models.conformance_probe import Thresholds

VERDICTS = ("conforms", "scaled", "sign_flipped", "schedule", "permuted", "offset", "missing",
            "clipped", "inconclusive")
# The model's verdict (AlibiCheck.verdict) is one of VERDICTS or one of these: the cached
# decoding or a padded batch differs, the installed transformers' builder is wrong; a causal
# kernel attends to keys after the query, its rows' attention is off by rounding (kernel_check).
MODEL_VERDICTS = (*VERDICTS, "decode", "padding", "builder", "unmasked", "precision")
# Verdict names as the app shows them (translated where shown: `_(VERDICT_TITLES[v])`).
VERDICT_TITLES = {"conforms": N_("conforms"), "scaled": N_("scaled"),
                  "sign_flipped": N_("sign flipped"), "schedule": N_("other schedule"),
                  "permuted": N_("permuted"), "offset": N_("offset"), "missing": N_("missing"),
                  "clipped": N_("clipped"), "inconclusive": N_("inconclusive")}

@dataclass
class HeadCheck:
    """One head: the slope it should apply, the slope the probe measured, and its verdict.
    Slopes are per token, on the pre-softmax logits; layer and head are 0-based indices (every
    sentence, `detail` included, numbers them from 1)."""

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
        return finite(data)


def finite(value):
    """`value` with every NaN or infinite float replaced by None (JSON has neither)."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


# ----------------------------------------------------------------------------- sentences

def ratio_detail(ratio: float) -> str:
    return _("ratio {ratio} to the expected slope").format(ratio=formatted(ratio, ".4g"))


def layer_list(layers: list[int]) -> str:
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


def schedule_phrase(evidence: dict, heads: int) -> str:
    """Which schedule the slopes follow, in words."""
    if evidence.get("max_bias") is not None:
        text = _("the official schedule with max_bias {value} instead of {configured}").format(
            value=formatted(evidence["max_bias"], "g"),
            configured=formatted(evidence.get("configured_max_bias", 8), "g"))
        if evidence.get("same_as_num_heads"):
            text += " " + _("(the same slopes as the first {heads} of the {n}-head "
                            "schedule)").format(heads=heads, n=evidence["same_as_num_heads"])
        return text
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


def order_phrase(evidence: dict) -> str:
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


def summary(verdict: str, evidence: dict, context: dict) -> str:
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
    if verdict == "missing" and "alibi_heads" in evidence:
        k = evidence["alibi_heads"]
        return _("Heads {alibi} apply the {k}-head schedule and heads {rest} no positional bias "
                 "(ALiBi on some heads only).").format(
                     alibi=f"1-{k}" if k > 1 else "1", k=k,
                     rest=f"{k + 1}-{heads}" if heads > k + 1 else str(heads))
    if verdict == "missing":
        return _("No head applies a positional bias.")
    if verdict == "sign_flipped" and "inner" in evidence:
        inner = {k: v for k, v in evidence.items() if k != "inner"}
        return _("Every head's bias has the wrong sign (it grows with distance), and without "
                 "the sign: {inner}").format(inner=summary(evidence["inner"], inner, context))
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
            schedule=schedule_phrase(evidence, heads))
        return text + _and_a_factor(evidence, head_dim, context)
    if verdict == "permuted":
        text = _("Every head applies the slope of another head: {order}.").format(
            order=order_phrase(evidence))
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

