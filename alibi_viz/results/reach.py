"""What `python -m experiments.reach` found, read back from assets/results/reach.json: a
context-reach curve as `alibi_viz.models.context_reach.context_reach` measures it, the tests of
how its loss changes between contexts (`reach_tests`), and the sentences written from the
shipped curves and from a text's attention beyond a distance. Plain Python and numpy, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from alibi_viz import statistics
from alibi_viz.alibi import half_life
from alibi_viz.assets import model_label
from alibi_viz.i18n import N_, _, number, percent, significant, small_percent, tokens
from alibi_viz.results.evaluation import latest_gain, signed

# More context "lowers" or "raises" the loss only when a one-sided paired t test over the
# passages, Holm-corrected over the curve's whole family (`reach_tests`), finds the change to
# be at least MARGIN nats per token: the curves are read in nats to three decimals, and with
# a thousand scored tokens a change of a thousandth can pass a test without meaning anything.
MARGIN = 0.005
# What more context does past the training length (`ReachTests.past`): the class vote's stored
# values of step 7, and the words the sentences use for each.
PAST_VERDICTS = {"lowers": N_("detectably lowers the loss"),
                 "same": N_("neither lowers nor raises the loss detectably"),
                 "raises": N_("detectably raises the loss"),
                 "mixed": N_("detectably raises the loss at some contexts and lowers it at "
                             "others")}


@dataclass
class ReachResult:
    """Per-token loss of the same scored tokens against the context given (nats per token).

    contexts: (C,) tokens of context before each scored token (at least; see context_reach).
    nll: (C,) mean nll. nll_sd: (C,) sd of the per-passage means (older files: of the chunk
    means scaled to one chunk's size). tokens: scored tokens (the same at every c).
    passage_nll: (C, P) mean nll of each of the P passages the scored tokens are cut into, the
    same passages at every c; None in a file written before the passages (then no test).
    """

    contexts: np.ndarray
    nll: np.ndarray
    nll_sd: np.ndarray
    tokens: int
    passage_nll: np.ndarray | None = None

    def as_dict(self) -> dict:
        out = {"contexts": self.contexts.tolist(), "nll": np.round(self.nll, 4).tolist(),
               "nll_sd": np.round(self.nll_sd, 4).tolist(), "tokens": self.tokens}
        if self.passage_nll is not None:
            out["passage_nll"] = np.round(self.passage_nll, 4).tolist()
        return out

    @classmethod
    def from_dict(cls, entry: dict) -> ReachResult:
        """A curve as `as_dict` wrote it (assets/results/reach.json), with or without its
        per-passage losses."""
        passages = entry.get("passage_nll")
        return cls(np.array(entry["contexts"]), np.array(entry["nll"]),
                   np.array(entry["nll_sd"]), entry["tokens"],
                   None if passages is None else np.array(passages, dtype=np.float64))

    def lowest_context(self) -> int:
        """The context with the lowest mean loss (a point estimate, not a tested minimum)."""
        return int(self.contexts[int(np.argmin(self.nll))])

    def mean_intervals(self) -> np.ndarray | None:
        """(C, 2): the 95% t interval of each context's mean loss over the passages (unpaired:
        a change between two contexts is judged paired, `change`, which is much tighter); None
        without the per-passage losses."""
        if self.passage_nll is None:
            return None
        return np.array([statistics.mean_interval(row)[1:] for row in self.passage_nll])

    def change(self, a: int, b: int) -> tuple[float, float, float]:
        """Loss at context b minus loss at context a, nats per token, with its 95% paired t
        interval over the passages: (mean, low, high)."""
        where = {int(c): k for k, c in enumerate(self.contexts.tolist())}
        return statistics.mean_interval(self.passage_nll[where[b]] - self.passage_nll[where[a]])


@dataclass(frozen=True)
class ReachTests:
    """What one reach curve's tests show (`reach_tests`).

    last_gain: (a, b), among the pairs where the longer context b lowers the loss by MARGIN or
    more with significance, the one whose a is latest, with the shortest b for it; None when no
    pair does. flat_from: that b (the first context when there is no gain): from it on no
    longer context lowers the loss detectably, since such a gain would start later than a.
    past: what more context does from the training length on ("lowers", "same", "raises",
    "mixed"; `PAST_VERDICTS`), None when the curve has no context past the training length.
    gain, rest, whole: `ReachResult.change` triples, b minus a: the last gain; the longest
    context against flat_from (None when they are the same); the longest context against the
    training length (None with `past`). passages, passage_tokens: what each test is paired
    over; tests: the comparisons in the family.
    """

    name: str
    train_seq_len: int
    longest: int
    last_gain: tuple[int, int] | None
    flat_from: int
    past: str | None
    gain: tuple | None
    rest: tuple | None
    whole: tuple | None
    passages: int
    passage_tokens: int
    tests: int


def reach_tests(result: ReachResult, train_seq_len: int, name: str = "") -> ReachTests | None:
    """The family of tests on one curve's per-passage losses: for every pair of contexts a < b,
    whether b lowers the loss by MARGIN nats or more, and for every such pair from the training
    length on, whether b raises it by MARGIN or more; one-sided paired t tests over the
    passages, Holm-corrected over the whole family (family-wise error 5%). None without the
    per-passage losses."""
    nll = result.passage_nll
    contexts = [int(c) for c in result.contexts.tolist()]
    if nll is None or nll.ndim != 2 or nll.shape[1] < 2 or len(contexts) < 2:
        return None
    row = {c: nll[k] for k, c in enumerate(contexts)}
    pairs = [(a, b) for i, a in enumerate(contexts) for b in contexts[i + 1:]]
    past = [(a, b) for a, b in pairs if a >= train_seq_len]
    family = [("lowers", a, b) for a, b in pairs] + [("raises", a, b) for a, b in past]
    rejected = statistics.holm_rejected({
        (way, a, b): statistics.p_below(row[b] - row[a] if way == "lowers" else row[a] - row[b],
                                        -MARGIN) for way, a, b in family})
    found = {way: {(a, b) for w, a, b in rejected if w == way} for way in ("lowers", "raises")}
    last_gain = latest_gain(found["lowers"])
    flat = last_gain[1] if last_gain else contexts[0]
    longest = contexts[-1]
    verdict = None
    if past:
        lowers = any(a >= train_seq_len for a, _b in found["lowers"])
        verdict = ("mixed" if lowers and found["raises"] else "lowers" if lowers
                   else "raises" if found["raises"] else "same")
    return ReachTests(name=name, train_seq_len=train_seq_len, longest=longest,
                      last_gain=last_gain, flat_from=flat, past=verdict,
                      gain=result.change(*last_gain) if last_gain else None,
                      rest=result.change(flat, longest) if flat != longest else None,
                      whole=result.change(train_seq_len, longest) if past else None,
                      passages=int(nll.shape[1]), passage_tokens=int(result.tokens) // nll.shape[1],
                      tests=len(family))


def describe_change(change) -> str:
    """'+0.001 nats (95% interval −0.010 to +0.012)', in the current language."""
    mean, low, high = change
    return _("{change} nats (95% interval {low} to {high})").format(
        change=signed(mean, 3), low=signed(low, 3), high=signed(high, 3))


def reach_evidence(tests: ReachTests) -> str:
    """What a curve's tests rest on, in the current language."""
    return _("{passages} passages of {passage_tokens} tokens across the text, one training "
             "run; paired t tests, Holm over {tests}; margin {margin} nats").format(
        passages=number(tests.passages), passage_tokens=number(tests.passage_tokens),
        tests=number(tests.tests), margin=number(MARGIN, 3))


def falls_sentence(tests: ReachTests) -> str:
    """How far more context lowers a curve's loss detectably, in the current language: up to
    where, with the last gain's interval, and that from there on no longer context lowers it."""
    values = {"model": model_label(tests.name), "margin": number(MARGIN, 3),
              "flat": number(tests.flat_from), "longest": number(tests.longest)}
    if tests.last_gain is None:
        return _("No longer context lowers {model}'s loss by {margin} nats or more "
                 "detectably.").format(**values)
    start = number(tests.last_gain[0])
    if tests.rest is None:
        return _("{model}'s loss still falls detectably at the longest context: {gain} from "
                 "{start} to {longest} tokens.").format(
            gain=describe_change(tests.gain), start=start, **values)
    return _("{model}'s loss falls detectably as context grows to {flat} tokens ({gain} from "
             "{start} to {flat}); from {flat} to {longest} tokens it changes by {rest}, but no "
             "gain of a longer context from {flat} tokens on passes the corrected test.").format(
        gain=describe_change(tests.gain), start=start, rest=describe_change(tests.rest),
        **values)


def past_sentence(tests: ReachTests) -> str | None:
    """What more context does to a curve's loss past the training length, with the change from
    the training length to the longest context and the tests' evidence, in the current
    language; None when the curve stops at the training length."""
    if tests.past is None:
        return None
    return _("Past {train_seq_len} tokens more context {verdict}: {whole} from "
             "{train_seq_len} to {longest} tokens ({evidence}).").format(
        train_seq_len=number(tests.train_seq_len),
        longest=number(tests.longest), verdict=_(PAST_VERDICTS[tests.past]),
        whole=describe_change(tests.whole), evidence=reach_evidence(tests))


def reach_setting(reach: dict) -> str:
    """What the shipped curves score, for a caption, in the current language: the passages
    (and the figure's bars over them), or in an older file the scored tokens."""
    setting = reach["reach"]
    if "passages" not in setting:
        return _("{scored} scored tokens, the same at every context").format(
            scored=number(setting["tokens"]))
    return _("{passages} passages of {passage_tokens} scored tokens spread through the text, "
             "the same at every context; bars: 95% t intervals of the mean over them (a change "
             "between two contexts is tested on the same passages, paired, which is much "
             "tighter)").format(
        passages=number(setting["passages"]), passage_tokens=number(setting["passage_tokens"]))


def copy_gains(entry: dict) -> tuple[int, float, int, float]:
    """(nearest distance, its copy gain, farthest distance, its gain) of one model's entry."""
    gains = dict(zip(entry["copy"]["distances"], entry["copy"]["gain"], strict=True))
    near, far = min(gains), max(gains)
    return near, gains[near], far, gains[far]


def curve_tests(reach: dict, train_seq_len: int) -> dict[str, ReachTests | None]:
    """`reach_tests` of every model's curve in the shipped results, by name."""
    return {name: reach_tests(ReachResult.from_dict(entry["reach"]), train_seq_len, name)
            for name, entry in reach.get("models", {}).items()}


def reach_summary(reach: dict, train_seq_len: int) -> list[str]:
    """Plain sentences on the shipped reach curves, in the current language, per model: how
    far more context lowers its loss detectably, what more context does past the training
    length (each with its intervals and evidence), and the copy gain at the nearest and
    farthest distance. A file without per-passage losses gets the copy gains and a note that
    no change between contexts is tested."""
    lines, untested = [], False
    for name, tests in curve_tests(reach, train_seq_len).items():
        near, near_gain, far, far_gain = copy_gains(reach["models"][name])
        copy = _("{model}'s copy gain on a repeated span is {near_gain} nats/token at {near} "
                 "tokens and {far_gain} at {far}.").format(
            model=model_label(name), near_gain=number(near_gain, 2), near=number(near),
            far_gain=number(far_gain, 2), far=number(far))
        if tests is None:
            untested = True
            lines.append(copy)
            continue
        lines.append(" ".join(s for s in (falls_sentence(tests), past_sentence(tests), copy)
                              if s))
    if untested:
        lines.append(_("These reach curves have no per-passage losses, so no change between "
                       "contexts is tested: re-run `python -m experiments.reach --parts "
                       "reach`."))
    return lines


def past_answer(reach: dict, train_seq_len: int, name: str = "alibi") -> str | None:
    """The right choice of the lesson's question on reach (step 7), a `PAST_VERDICTS` key:
    what more context does to `name`'s loss past the training length; None without the
    per-passage losses, or when the tests find it both raised and lowered."""
    entry = reach.get("models", {}).get(name)
    tests = reach_tests(ReachResult.from_dict(entry["reach"]), train_seq_len, name) \
        if entry else None
    return tests.past if tests and tests.past != "mixed" else None


def reach_answer(reach: dict, train_seq_len: int, slopes, name: str = "alibi") -> str | None:
    """The lesson's answer on reach (step 7), in the current language, every clause computed
    from the shipped curves' tests and said only where they bear it out: what more context
    does to `name`'s loss past the training length; how far more context lowers it; what
    `name`'s gentlest slope (from `slopes`, (heads,)) still gives a key that far back; what
    more context does to every other model's loss past the training length; `name`'s copy
    gain at the nearest and farthest distance. None without `name`'s per-passage losses."""
    every = curve_tests(reach, train_seq_len)
    own = every.get(name)
    if own is None or own.past is None:
        return None
    parts = [past_sentence(own), falls_sentence(own)]
    m = float(np.min(slopes))
    weight = math.exp(-m * own.flat_from)
    if own.last_gain and weight > 0.5:  # the gentlest head has barely begun to decay there
        life = float(half_life([m])[0])
        parts.append(_("Where the tests stop detecting gains is not where the bias cuts "
                       "context off: the gentlest head (m = {m}, half-life {half_life}) still "
                       "gives a key {context} tokens back {weight} of the weight of the newest "
                       "one.").format(
            m=significant(m), half_life=tokens(life, number(life, 0)),
            context=number(own.flat_from), weight=percent(weight)))
    others = {n: t for n, t in every.items() if n != name and t is not None and t.past}
    if others:
        longest = {n: float(ReachResult.from_dict(reach["models"][n]["reach"]).nll[-1])
                   for n in others}
        if all(t.past == "raises" for t in others.values()):
            parts.append(_("Every other shipped model's loss rises detectably past "
                           "{train_seq_len} tokens ({low}-{high} nats at {longest} tokens, "
                           "against {own} for {model}).").format(
                train_seq_len=number(train_seq_len), longest=number(own.longest),
                low=number(min(longest.values()), 2), high=number(max(longest.values()), 2),
                own=number(float(ReachResult.from_dict(reach["models"][name]["reach"]).nll[-1]),
                           2), model=model_label(name)))
        else:
            parts.append(_("Past {train_seq_len} tokens, more context: {verdicts}.").format(
                train_seq_len=number(train_seq_len), verdicts="; ".join(
                    _("{model}: {verdict}").format(model=model_label(n),
                                                   verdict=_(PAST_VERDICTS[t.past]))
                    for n, t in others.items())))
    near, near_gain, far, far_gain = copy_gains(reach["models"][name])
    parts.append(_("Its copy gain is {near_gain} nats at {near} tokens and {far_gain} at "
                   "{far}.").format(near_gain=number(near_gain, 2), near=number(near),
                                    far_gain=number(far_gain, 2), far=number(far)))
    return " ".join(parts)


NEAR_SHARE = 0.01  # a head "keeps to training distances" when it puts less than this beyond


def beyond_summary(shares, distance: int, seq_len: int) -> str:
    """One sentence on `attention_beyond`'s (layers, heads) shares, in the current language:
    the heads that put under NEAR_SHARE of their attention beyond `distance` in every layer,
    and for each other head the range of its share over the layers."""
    shares = np.asarray(shares, dtype=np.float64)
    near = [h for h in range(shares.shape[1]) if (shares[:, h] < NEAR_SHARE).all()]
    far = [h for h in range(shares.shape[1]) if h not in near]

    def heads_text(ids):  # "1-4, 6": runs of consecutive heads, 1-based
        runs = []
        for h in ids:
            if runs and h == runs[-1][1] + 1:
                runs[-1][1] = h
            else:
                runs.append([h, h])
        return ", ".join(f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs)

    ranges = "; ".join(_("head {head} {low} to {high}").format(
        head=h + 1, low=small_percent(shares[:, h].min()), high=small_percent(shares[:, h].max()))
        for h in far)
    if near and far:
        return _("Read at {seq_len} tokens, heads {near} put under {share} of their attention "
                 "more than {distance} tokens back in every layer, the others, over the "
                 "layers: {ranges}.").format(
            seq_len=number(seq_len), near=heads_text(near), share=small_percent(NEAR_SHARE),
            distance=number(distance), ranges=ranges)
    if near:
        return _("Read at {seq_len} tokens, every head puts under {share} of its attention more "
                 "than {distance} tokens back in every layer.").format(
            seq_len=number(seq_len), share=small_percent(NEAR_SHARE), distance=number(distance))
    return _("Read at {seq_len} tokens, the share of attention more than {distance} tokens back "
             "is, over the layers: {ranges}.").format(seq_len=number(seq_len),
                                                     distance=number(distance), ranges=ranges)
