"""The conformance check's diagnosis: the explanations of what the probe measured, in order.

One layer's measured slopes are fitted to the explanations a port can have, one small
function each, tried in the order of EXPLANATIONS (`explain_slopes`; the module docstring of
alibi_viz/models/conformance.py lists them): simplest first, and where two fit equally, the
cause a config or an argument can set before the coincidence that gives the same slopes
(max_bias before "the first n slopes of another head count's schedule"). Then offsets and
clips, per layer, and each head's own verdict where no explanation covers it (`diagnose`).
tests/test_conformance_diagnosis.py gives each explanation its own case.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np

from alibi_viz.alibi import SCHEDULES, alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _, formatted, ngettext
from alibi_viz.models.conformance_probe import CLIP_TAIL, Thresholds
from alibi_viz.models.conformance_report import (
    Finding,
    HeadCheck,
    finite,
    layer_list,
    ratio_detail,
    summary,
)

RESOLUTION_SE = 8.0  # a head's slope resolution: this many standard errors of its fit
UNJUDGED_FRACTION = 0.5  # a head read coarser than this part of its slope is not judged
RESOLUTION_SPREAD = 2.0  # ... and this many times the spread of its slope between tokens
# A head expected to add no bias is judged when the probe reads its slope to within half the
# official schedule's smallest slope (2^-8 at every head count).
ZERO_SLOPE_RESOLUTION = 2.0**-9

def given_slopes(expected, heads: int) -> tuple[np.ndarray, str]:
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


# ----------------------------------------------------------------------------- diagnosis

def slopes_close(a, b, th: Thresholds) -> np.ndarray:
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
        if not slopes_close(slopes, reference, th).all():
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


def explain_slopes(measured, expected, scale, head_dim, th, ref_max_bias: float = 8.0):
    """(verdict, key, evidence, predicted slopes) of the first explanation of EXPLANATIONS
    that fits every head of one layer's measured slopes, or None when none does.
    ref_max_bias: the configured max_bias of the expected slopes (MPT's alibi_bias_max)."""
    for explain in EXPLANATIONS:
        found = explain(measured, expected, scale, head_dim, th, ref_max_bias)
        if found is not None:
            return found
    return None


def _explain_conforms(measured, expected, scale, head_dim, th, ref_max_bias):
    """The configured slopes."""
    if slopes_close(measured, expected, th).all():
        return "conforms", ("conforms",), {}, expected
    return None


def _explain_missing(measured, expected, scale, head_dim, th, ref_max_bias):
    """No positional bias in any head."""
    if slopes_close(measured, 0.0, th).all():
        return "missing", ("missing",), {}, np.zeros_like(expected)
    return None


def _explain_factor(measured, expected, scale, head_dim, th, ref_max_bias):
    """One constant factor k for every head: "scaled", or "sign_flipped" for k < 0 (named
    when it is one a port gets wrong: 2, 1/sqrt(d), ...)."""
    k = _factor(measured, expected, th)
    if not (math.isfinite(k) and abs(k - 1) > 2 * th.slope_rtol
            and slopes_close(measured, k * expected, th).all()):
        return None
    verdict = "sign_flipped" if k < 0 else "scaled"
    name = None if abs(abs(k) - 1) <= 2 * th.slope_rtol else _factor_name(abs(k), head_dim, th)
    label = name or ("one" if abs(abs(k) - 1) <= 2 * th.slope_rtol else f"{abs(k):.2g}")
    return verdict, (verdict, label), {"factor": k, "factor_name": name}, k * expected


def _explain_sign_and_more(measured, expected, scale, head_dim, th, ref_max_bias):
    """The bias grows with distance in most heads, and without the sign another explanation
    (another schedule or order) fits."""
    if (measured < 0).sum() <= expected.size / 2:
        return None
    inner = explain_slopes(-measured, expected, scale, head_dim, th, ref_max_bias)
    if inner is None or inner[0] in ("conforms", "missing", "scaled"):
        return None
    verdict, key, evidence, predicted = inner
    return ("sign_flipped", ("sign_flipped", *key), {**evidence, "inner": verdict}, -predicted)


def _schedules(measured, expected, scale, th, ref_max_bias):
    """The schedules a port can apply instead of the configured one (`_schedule_candidates`),
    with the official schedule at the max_bias that fits the measured slopes, if one does,
    before the coincidences: the first n slopes of another head count's schedule."""
    schedules = _schedule_candidates(expected.size, scale, expected, th, ref_max_bias)
    extra = _max_bias_candidate(measured, expected, scale, expected.size, th, ref_max_bias)
    if extra is not None:
        at = next((i for i, (key, _e, _s) in enumerate(schedules) if key[0] == "count"),
                  len(schedules))
        schedules.insert(at, extra)
    return schedules


def _explain_schedule(measured, expected, scale, head_dim, th, ref_max_bias):
    """Another schedule (`_schedules`, in its order); for max_bias, the head count whose
    first slopes are the same ones goes in the evidence (cause first, coincidence after)."""
    schedules = _schedules(measured, expected, scale, th, ref_max_bias)
    for key, evidence, slopes in schedules:
        if slopes_close(measured, slopes, th).all():
            evidence = dict(evidence)
            if key[0] == "max_bias":
                same = next((e["num_heads"] for k, e, other in schedules
                             if k[0] == "count" and slopes_close(other, slopes, th).all()), None)
                if same is not None:
                    evidence["same_as_num_heads"] = same
            return "schedule", ("schedule", *key), evidence, slopes
    return None


def _explain_permuted(measured, expected, scale, head_dim, th, ref_max_bias):
    """The configured slopes in another head order (`_explain_order`)."""
    permutation = _explain_order(measured, expected, th)
    if permutation is None:
        return None
    key, evidence, slopes = permutation
    return "permuted", ("permuted", *key), evidence, slopes


def _explain_factor_on_top(measured, expected, scale, head_dim, th, ref_max_bias):
    """A named factor on top of another schedule or another order."""
    schedules = _schedules(measured, expected, scale, th, ref_max_bias)
    for name, value in _named_factors(head_dim):
        for key, evidence, slopes in schedules:
            if slopes_close(measured, value * slopes, th).all():
                return ("schedule", ("schedule", *key, name),
                        {**evidence, "factor": value, "factor_name": name}, value * slopes)
        permutation = _explain_order(measured, value * expected, th)
        if permutation is not None:
            key, evidence, slopes = permutation
            return ("permuted", ("permuted", *key, name),
                    {**evidence, "factor": value, "factor_name": name}, slopes)
    return None


def _explain_partial(measured, expected, scale, head_dim, th, ref_max_bias):
    """(verdict "missing", key, evidence, slopes) of ALiBi on some heads only: heads 1..k apply
    the official schedule for k heads and heads k+1..n no bias (x-transformers'
    alibi_num_heads); else None."""
    heads = expected.size
    zero = slopes_close(measured, 0.0, th) & ~slopes_close(expected, 0.0, th)
    if not zero.any() or zero.all():
        return None
    k = int(np.argmax(zero))  # the first head without bias
    if k == 0 or not zero[k:].all():
        return None
    predicted = np.concatenate([alibi_slopes(k) * scale, np.zeros(heads - k)])
    if not slopes_close(measured, predicted, th).all():
        return None
    return ("missing", ("missing", "partial", k), {"alibi_heads": k, "num_heads": heads},
            predicted)


def _explain_missing_shards(measured, expected, scale, head_dim, th, ref_max_bias):
    """(verdict "missing", key, evidence, slopes) when the heads that apply no bias are whole
    tensor-parallel shards (k contiguous blocks of n/k heads, the fewest shards that fit) and
    every other head conforms; else None."""
    heads = expected.size
    zero = slopes_close(measured, 0.0, th) & ~slopes_close(expected, 0.0, th)
    if not zero.any() or zero.all() or not (zero | slopes_close(measured, expected, th)).all():
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


# The explanations of one layer's slopes, in the order they are tried: simplest first, and
# where two give the same slopes, the cause a config or an argument sets before the
# coincidence (inside _explain_schedule: max_bias before another head count's first slopes).
EXPLANATIONS = (_explain_conforms, _explain_missing, _explain_missing_shards, _explain_partial,
                _explain_factor, _explain_sign_and_more, _explain_schedule, _explain_permuted,
                _explain_factor_on_top)


def _explain_order(measured, expected, th):
    """(key, evidence, slopes) when the measured slopes are the expected ones in another head
    order: reversed, sorted, or a permutation (evidence["sources"][h]: the 0-based head whose
    expected slope head h applies); else None."""
    loose = replace(th, slope_atol=float(np.max(th.slope_atol)))  # sorting mixes the heads
    if not slopes_close(np.sort(measured), np.sort(expected), loose).all():
        return None
    for key, slopes in (("reversed", expected[::-1]), ("sorted_desc", np.sort(expected)[::-1]),
                        ("sorted_asc", np.sort(expected))):
        if slopes_close(measured, slopes, th).all():
            return (key,), {"order": key}, slopes.copy()
    sources = np.argsort(expected)[np.argsort(np.argsort(measured))]  # rank of measured -> head
    if (sources == np.arange(expected.size)).all() or not slopes_close(measured, expected[sources],
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
    if slopes_close(slope, e, th):
        return "conforms", ""
    if slopes_close(slope, 0.0, th):
        return "missing", _("no positional bias at all")
    if slopes_close(slope, -e, th):
        return "sign_flipped", _("the bias grows with distance")
    for other, value in enumerate(expected):
        if other != h and slopes_close(slope, value, th):
            return "permuted", _("applies head {head}'s slope {slope}").format(
                head=other + 1, slope=formatted(value, ".4g"))
    return "scaled", ratio_detail(slope / e)


def diagnose(fits, expected_all, scale, head_dim, th, context):
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
        # a head expected to add no bias has no slope to be a fraction of: it is judged
        # against an absolute resolution instead
        unjudged = ~np.isfinite(measured) | np.where(
            expected == 0, atol > ZERO_SLOPE_RESOLUTION,
            atol + th.slope_rtol * np.abs(expected) > UNJUDGED_FRACTION * np.abs(expected))
        # a head read too coarsely tells nothing about clips and offsets either
        raw_offsets = offsets
        clips = [None if unjudged[h] else c for h, c in enumerate(clips)]
        offsets = np.where(unjudged, 0.0, offsets)
        verdicts, details = ["conforms"] * len(row), [""] * len(row)
        left: Counter = Counter()
        explained = (explain_slopes(measured, expected, scale, head_dim, th_layer,
                                     context.get("max_bias", 8.0))
                     if np.isfinite(measured).all() else None)
        if explained is not None:
            verdict, key, evidence, predicted = explained
            for h in range(len(row)):  # a head the explanation leaves as it was conforms
                if verdict != "conforms" and not math.isclose(predicted[h], expected[h],
                                                              rel_tol=1e-6):
                    verdicts[h], details[h] = verdict, ratio_detail(measured[h] / expected[h])
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
        text = summary(verdict, evidence, context)
        if len(layers) != len(fits):
            text = ngettext("Layer {layers}: {finding}", "Layers {layers}: {finding}",
                            len(layers)).format(layers=layer_list(layers), finding=text)
        findings.append(Finding(verdict, text, list(layers), int(count), finite(dict(evidence))))
    if sum(unjudged_counts):
        findings.append(inconclusive_finding(heads_out, unjudged_counts))
    return heads_out, findings, schedule


def inconclusive_finding(heads_out, unjudged_counts) -> Finding:
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
                   finite({"resolution": resolution, "counts": {"inconclusive": len(cells)}}))

