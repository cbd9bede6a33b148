"""What the extrapolation experiments found, read back from
assets/results/extrapolation-<kind>.json (written by `python -m experiments.evaluate`,
experiments.evaluate), and the sentences written from it: per-token perplexity of
the shipped models at 128 .. 4,096 tokens under the two protocols the ALiBi paper
distinguishes (non-overlapping and sliding windows; `alibi_viz.models.scoring.perplexity`
says how each is scored). Plain Python and numpy: a page that only reads results loads no
model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from alibi_viz import paper, statistics
from alibi_viz.assets import TEXT_KINDS, model_label, results_train_seq_len
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import MINUS, N_, _, number, percent, tokens

PROTOCOLS = ("nonoverlapping", "sliding")
# What the page calls each protocol (English msgids; protocol_name translates).
PROTOCOL_NAMES = {"nonoverlapping": N_("nonoverlapping"), "sliding": N_("sliding")}
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
DEFAULT_STRIDE = 64
CHUNKS = 16  # scored tokens are cut into this many contiguous chunks for the spread
# A longer window "gains" on a shorter one when a one-sided paired t test, Holm-corrected over
# every pair of lengths (`gains`), finds its perplexity lower by at least MIN_GAIN (0.1%): at
# 2,048 and 4,096 tokens the ALiBi model scores nearly the same numbers, and a difference of
# 0.01% can be significant without meaning anything.
MIN_GAIN = 0.001

# Notes written into extrapolation.json in English and shown translated (results_details).
TOKENS_NOTE = N_("held-out tokens at every length: {nonoverlapping} (non-overlapping), "
                 "{sliding} (sliding)")
PASSAGES_NOTE = N_("held-out tokens at every length: {nonoverlapping} (non-overlapping: the "
                   "first of the text), {sliding} (sliding: {passages} passages of "
                   "{passage_tokens} spread through the text)")
INTERVAL_NOTE = N_("95% interval from the spread of the mean nll over {chunks} disjoint, "
                   "equal chunks of the scored tokens (alibi_viz.results.evaluation.confidence_interval)")
T_INTERVAL_NOTE = N_("95% intervals: Student's t over the mean nll of {chunks} disjoint chunks "
                     "(non-overlapping) or of the {passages} passages (sliding), paired where "
                     "two cells are compared; they cover which text was scored, not training "
                     "randomness")
CORPUS_SOURCE = N_("the shipped held-out text: {kind}")  # + HELDOUT_WHERE, not translated
HELDOUT_WHERE = " (assets/corpus/heldout, alibi_viz.data)"


def protocol_name(protocol: str) -> str:
    """A protocol as the page names it, in the current language (unknown names unchanged)."""
    return _(PROTOCOL_NAMES[protocol]) if protocol in PROTOCOL_NAMES else protocol


def signed(value: float, decimals: int) -> str:
    """`value` with its sign always written ("+0.012", "−0.300"), in the current language."""
    return (MINUS if math.copysign(1.0, value) < 0 else "+") + number(abs(value), decimals)


def relative_change(ratio: float, factor_decimals: int = 2) -> str:
    """A ratio of perplexities as a change: "+1.2%" below 2, "x2.31" from 2 on. A change under
    0.1% keeps the digits it needs ("−0.009%"), and one under 0.001% is "below 0.001%", so a
    tiny change never reads as "−0.0%"."""
    if ratio >= 2:
        return _("x{factor}").format(factor=number(ratio, factor_decimals))
    sign = MINUS if ratio < 1 else "+"
    change = abs(ratio - 1)
    if change == 0 or change >= 0.001:
        return sign + percent(change, 1)
    if change < 0.00001:
        return _("under {share}").format(share=percent(0.00001, 3))
    return sign + percent(change, min(3, -math.floor(math.log10(100 * change))))


def confidence_interval(chunk_nll) -> tuple[float, float]:
    """95% interval of a perplexity from the mean nll of equal, disjoint units of text (chunks
    or passages): exp(mean +- t * sd / sqrt(units)), Student's t with units - 1 degrees of
    freedom. Text is not independent token by token, so the spread over units (each tens to
    hundreds of tokens) is the honest one. Returns (low, high)."""
    _mean, low, high = statistics.mean_interval(chunk_nll)
    return math.exp(low), math.exp(high)


def paired_ratio_interval(chunk_a, chunk_b) -> tuple[float, float, float]:
    """Ratio of perplexity a / b on the *same* scored tokens, with a 95% t interval from the
    unit-by-unit differences of mean nll (pairing removes the text's own difficulty, so this is
    much tighter than comparing two separate intervals). Returns (ratio, low, high); the
    difference is significant when the interval excludes 1."""
    a, b = np.asarray(chunk_a, dtype=np.float64), np.asarray(chunk_b, dtype=np.float64)
    if a.shape != b.shape or a.size < 2:
        raise AlibiVizError(_("Paired chunks must have the same length, at least 2."))
    mean, low, high = statistics.mean_interval(a - b)
    return math.exp(mean), math.exp(low), math.exp(high)


def check_results(results) -> None:
    """Raise AlibiVizError unless `results` looks like what `experiments.evaluate` writes:
    {"lengths": [...], "models": {name: {"perplexity": {protocol: {"128": ppl, ...}}}}}."""
    if not isinstance(results, dict) or not results.get("models") or not results.get("lengths"):
        raise AlibiVizError(_("No extrapolation results: run `python -m experiments.evaluate` "
                              "to write assets/results/extrapolation-<kind>.json."))
    for name, entry in results["models"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("perplexity"), dict):
            raise AlibiVizError(_("The results for model {name} have no perplexities; "
                                  "re-run `python -m experiments.evaluate`.").format(
                                      name=repr(name)))


def protocols_in(results: dict) -> list[str]:
    """Protocols with at least one perplexity, in the order the evaluator uses."""
    found = []
    for entry in results["models"].values():
        for protocol in entry["perplexity"]:
            if protocol not in found:
                found.append(protocol)
    order = {"nonoverlapping": 0, "sliding": 1}
    return sorted(found, key=lambda p: (order.get(p, 2), p))


def result_curve(entry: dict, protocol: str, lengths) -> tuple[list[int], list[float]]:
    values = entry["perplexity"].get(protocol, {})
    xs = [n for n in lengths if str(n) in values and values[str(n)] is not None]
    return xs, [float(values[str(n)]) for n in xs]


def comparison_length(results: dict, train_seq_len: int, factor: int = 8) -> int:
    """The length the lesson compares with the training length: `factor` times it when the
    results hold that length, else the longest evaluated."""
    lengths = [int(n) for n in results.get("lengths", [])]
    return factor * train_seq_len if factor * train_seq_len in lengths else max(lengths)


def shipped_cell(results: dict | None, name: str, protocol: str, length: int):
    """(perplexity, tokens scored) of model `name` at `length` under `protocol` in the shipped
    results, each None where the results hold no such cell."""
    entry = (results or {}).get("models", {}).get(name, {})
    ppl = entry.get("perplexity", {}).get(protocol, {}).get(str(length))
    tokens = entry.get("tokens", {}).get(protocol, {}).get(str(length))
    return (None if ppl is None else float(ppl)), (None if tokens is None else int(tokens))


# ours per method of the paper's Table 2 (None: this project trained no T5-bias model)
PAPER_MODELS = {"sinusoidal": "sinusoidal", "rotary": "rope", "T5 bias": None, "ALiBi": "alibi"}


def paper_comparison(results: dict, train_seq_len: int) -> dict:
    """The paper's Table 2 (WikiText-103, words, L = 512, run at 3,512: 6.9x) beside this
    project's non-overlapping numbers at the evaluated length whose factor over the training
    length is nearest the paper's (bytes; 8x for the shipped lengths), so that the two ratios
    compare like with like.

    Returns {"paper_factor", "our_length", "our_factor", "rows": [{"method", "paper_short",
    "paper_long", "paper_ratio", "ours_short", "ours_long", "ours_ratio"}]}, one row per
    method of the paper's table (T5 bias included); our numbers are None where the results
    lack them or this project has no such model."""
    paper_factor = paper.TABLE2_LONG / paper.TABLE2_TRAIN_LEN
    longer = [n for n in results["lengths"] if n > train_seq_len]
    our_length = min(longer, key=lambda n: abs(n / train_seq_len - paper_factor))
    rows = []
    for method, (short, long) in paper.TABLE2.items():
        cells = results["models"].get(PAPER_MODELS.get(method), {}).get("perplexity", {}).get(
            "nonoverlapping", {})
        ours_short, ours_long = cells.get(str(train_seq_len)), cells.get(str(our_length))
        rows.append({"method": method, "paper_short": short, "paper_long": long,
                     "paper_ratio": long / short, "ours_short": ours_short,
                     "ours_long": ours_long,
                     "ours_ratio": ours_long / ours_short if ours_short and ours_long else None})
    return {"paper_factor": paper_factor, "our_length": our_length,
            "our_factor": our_length / train_seq_len, "rows": rows}


def results_table(results: dict) -> list[dict]:
    """One row per model and protocol: {"model", "protocol", "<length>": perplexity, ...},
    headers and names in the current language."""
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    rows = []
    for name, entry in results["models"].items():
        for protocol in protocols_in(results):
            xs, ys = result_curve(entry, protocol, lengths)
            if not xs:
                continue
            row = {_("model"): model_label(name), _("protocol"): protocol_name(protocol)}
            values = dict(zip(xs, ys, strict=True))
            row.update({number(n): values.get(n) for n in lengths})
            rows.append(row)
    return rows


def _rank(results: dict, protocol: str, length: int) -> list[tuple[str, float]]:
    found = []
    for name, entry in results["models"].items():
        value = entry["perplexity"].get(protocol, {}).get(str(length))
        if value is not None:
            found.append((name, float(value)))
    return sorted(found, key=lambda item: item[1])


def extrapolation_summary(results: dict, protocol: str = "nonoverlapping") -> list[str]:
    """Plain sentences on what the numbers say under `protocol`, computed from the data:
    who is best at the training length, how each model moves from there to the longest
    length, and which model is lowest at each length. Empty if the protocol or the training
    length is missing."""
    check_results(results)
    lengths = sorted(int(n) for n in results["lengths"])
    train_seq_len = results_train_seq_len(results)
    if train_seq_len is None or train_seq_len not in lengths:
        return []
    at_train = _rank(results, protocol, train_seq_len)
    if not at_train:
        return []
    # TRANSLATORS: joins a ranked list: "RoPE 3.100, then ALiBi 3.200"
    order = _(", then ").join(f"{model_label(n)} {number(v, 3)}" for n, v in at_train)
    tied = lowest_models(results, protocol, train_seq_len)
    if len(tied) > 1:
        sentences = [_("At the training length ({train_seq_len} tokens) {models} are lowest, "
                       "each within the paired 95% interval of the lowest: {order}.").format(
            train_seq_len=number(train_seq_len), order=order,
            models=", ".join(model_label(n) for n in tied))]
    else:
        sentences = [_("At the training length ({train_seq_len} tokens) the lowest perplexity "
                       "is {model}'s: {order}.").format(train_seq_len=number(train_seq_len),
                                                       model=model_label(at_train[0][0]),
                                                       order=order)]
    longest = lengths[-1]
    at_long = dict(_rank(results, protocol, longest))
    start = dict(at_train)
    moves = []
    for name, value in sorted(at_long.items(), key=lambda item: item[1]):
        if name in start:
            change = relative_change(value / start[name], factor_decimals=1)
            moves.append(f"{model_label(name)} {number(value, 3)} ({change})")
    if moves:
        sentences.append(_("At {longest} tokens ({factor}x the training length): {moves}, "
                           "relative to each model's own value at {train_seq_len}.").format(
            longest=number(longest), factor=longest // train_seq_len, moves=", ".join(moves),
            train_seq_len=number(train_seq_len)))
    runs = []  # [models, first length, last length] where those models are lowest
    for n in lengths:
        tied = lowest_models(results, protocol, n)
        if not tied:
            continue
        if runs and runs[-1][0] == tied:
            runs[-1][2] = n
        else:
            runs.append([tied, n, n])
    sentences.append(_("Lowest perplexity by length (several models where they are within the "
                       "paired 95% interval of the lowest): {runs}.").format(runs=", ".join(
        _("{model} at {lengths}").format(
            model=" ≈ ".join(model_label(name) for name in names),
            lengths=number(a) + (f"-{number(b)}" if b != a else ""))
        for names, a, b in runs)))
    return sentences


def lowest_models(results: dict, protocol: str, length: int) -> tuple[str, ...]:
    """The model lowest at `length` under `protocol`, then every other whose paired 95%
    interval against it includes 1 (the same scored tokens, so the gap is not significant);
    where the chunks are missing, the lowest alone."""
    ranked = _rank(results, protocol, length)
    if not ranked:
        return ()
    best = ranked[0][0]
    tied = [best]
    for name, _value in ranked[1:]:
        cmp = compare_cells(results, protocol, (name, length), (best, length))
        if cmp and cmp[1] <= 1:
            tied.append(name)
    return tuple(tied)


def compare_cells(results: dict, protocol: str, a: tuple[str, int], b: tuple[str, int]):
    """Perplexity ratio of cell a = (model, length) over cell b under `protocol`, with its 95%
    interval from the paired chunk nlls (the same scored tokens in both cells, so the pairing
    is exact). Returns (ratio, low, high), or None when a cell or its chunks are missing."""
    try:
        chunks = [results["models"][name]["chunk_nll"][protocol][str(length)]
                  for name, length in (a, b)]
    except (KeyError, TypeError):
        return None
    return paired_ratio_interval(*chunks)


def describe_ratio(ratio_interval) -> str:
    """'+1.2% (95% interval +0.8% to +1.6%)' or 'x2.31 (...)'; says when 1 is inside.
    In the current language."""
    ratio, low, high = ratio_interval
    values = {"change": relative_change(ratio), "low": relative_change(low),
              "high": relative_change(high)}
    if low <= 1 <= high:
        return _("{change} (95% interval {low} to {high}, not distinguishable from no "
                 "change)").format(**values)
    return _("{change} (95% interval {low} to {high})").format(**values)


@dataclass(frozen=True)
class ContextUse:
    """What one model's sliding-window curve says about the context it uses, from one test per
    pair of evaluated lengths at or past the training length (`useful_context`).

    last_gain: (a, b), the gain that starts latest among the pairs the family-wise test keeps,
    the shortest b for that a; None when no pair survives it. flat_from: that b (the training
    length when there is no gain): from it on no longer length gains on a shorter one, since a
    later gain would start later than a. Each ratio is a `paired_ratio_interval` triple, longer
    over shorter: gain (b over a), to_flat (flat_from over the training length; None when they
    are the same), rest (the longest length over flat_from; None when they are the same), whole
    (the longest length over the training length). tokens: scored tokens per length; units:
    the passages (or chunks) they are cut into; passages: whether those are passages spread
    through the text; tests: the comparisons in the family.
    """

    name: str
    protocol: str
    train_seq_len: int
    longest: int
    tokens: int | None
    last_gain: tuple[int, int] | None
    gain: tuple | None
    flat_from: int
    to_flat: tuple | None
    rest: tuple | None
    whole: tuple
    units: int = 0
    passages: bool = False
    tests: int = 0


def gains(pairs: dict) -> set:
    """The pairs (a, b) of a family {(a, b): (chunks of a, chunks of b)} where b's perplexity is
    lower than a's by MIN_GAIN or more: one-sided paired t tests on the unit-by-unit differences
    of mean nll, Holm-corrected over the whole family (family-wise error 5%)."""
    bound = math.log(1 - MIN_GAIN)
    return statistics.holm_rejected({k: statistics.p_below(np.subtract(b, a), bound)
                                     for k, (a, b) in pairs.items()})


def latest_gain(significant) -> tuple[int, int] | None:
    """Of the pairs (a, b) where a longer b gains on a shorter a, the one that starts latest,
    with the shortest b for that a: from b on nothing gains any more, since a later gain would
    start later than a. None when there is none."""
    if not significant:
        return None
    start = max(a for a, _b in significant)
    return start, min(b for a, b in significant if a == start)


def useful_context(results: dict, name: str, protocol: str = "sliding") -> ContextUse | None:
    """How far extra context helps `name` under `protocol` (sliding: every scored token sees
    nearly a full window), as a `ContextUse`; None without the data (every length from the
    training length on needs its chunks). A longer length gains on a shorter one when `gains`
    says so, over the family of every pair of those lengths (15 for 128 .. 4,096)."""
    train_seq_len = results_train_seq_len(results)
    lengths = sorted(int(x) for x in results.get("lengths", []))
    if not train_seq_len or train_seq_len not in lengths or name not in results.get("models", {}):
        return None
    lengths = lengths[lengths.index(train_seq_len):]
    try:
        chunks = {n: results["models"][name]["chunk_nll"][protocol][str(n)] for n in lengths}
    except (KeyError, TypeError):
        return None
    if len(lengths) < 2:
        return None
    family = {(a, b): (chunks[a], chunks[b]) for i, a in enumerate(lengths) for b in lengths[i + 1:]}
    ratios = {k: paired_ratio_interval(cb, ca) for k, (ca, cb) in family.items()}
    last_gain = latest_gain(gains(family))
    flat = last_gain[1] if last_gain else train_seq_len
    longest = lengths[-1]
    tokens = results["models"][name].get("tokens", {}).get(protocol, {}).get(str(longest))
    plan = results.get("protocols", {}).get(protocol, {})
    return ContextUse(name=name, protocol=protocol, train_seq_len=train_seq_len, longest=longest,
                      tokens=int(tokens) if tokens else None, last_gain=last_gain,
                      gain=ratios[last_gain] if last_gain else None, flat_from=flat,
                      to_flat=ratios.get((train_seq_len, flat)), rest=ratios.get((flat, longest)),
                      whole=ratios[(train_seq_len, longest)], units=len(chunks[longest]),
                      passages=bool(plan.get("passages")), tests=len(family))


def evidence(use: ContextUse) -> str:
    """What a `ContextUse` rests on, in the current language: the scored tokens and how they
    are spread, the training runs, the intervals and the correction."""
    values = {"tokens": number(use.tokens or 0), "units": number(use.units),
              "tests": number(use.tests)}
    if use.passages:
        where = _("{tokens} scored tokens in {units} passages spread through the text").format(
            **values)
    else:
        where = _("{tokens} scored tokens of one passage, in {units} chunks").format(**values)
    return _("{where}, one training run; paired 95% t intervals; Holm-corrected over "
             "{tests} comparisons").format(where=where, **values)


def context_use_sentence(use: ContextUse) -> str:
    """One sentence on what a sliding-window `use` shows, in the current language, with its
    evidence: where the last gain of a longer window that survives the family-wise test ends
    and that no longer window gains from there on, or that no longer window gains at all (the
    weaker sentence when the tests detect nothing). Every number is one of `use`'s intervals."""
    if use.protocol != "sliding":
        raise AlibiVizError(_("Only the sliding protocol says how much context a model uses."))
    values = {"model": model_label(use.name), "min_gain": percent(MIN_GAIN, 1),
              "train_seq_len": number(use.train_seq_len), "longest": number(use.longest),
              "flat": number(use.flat_from), "evidence": evidence(use)}
    if use.last_gain is None:
        alone = (" " + _("That interval is for this one comparison; over the family of {tests} "
                         "it is not significant.").format(tests=number(use.tests))
                 if use.whole[2] < 1 or use.whole[1] > 1 else "")
        return _("In sliding windows no length makes {model}'s perplexity lower than a "
                 "shorter length's by {min_gain} or more with significance ({evidence}): from "
                 "{train_seq_len} to {longest} tokens it changes by {whole}.").format(
            whole=describe_ratio(use.whole), **values) + alone
    start = use.last_gain[0]
    last = "" if start == use.train_seq_len else _(
        ", its last significant gain {gain} from {start} to {flat} tokens").format(
        gain=describe_ratio(use.gain), start=number(start), flat=values["flat"])
    if use.rest is None:
        return _("In sliding windows {model}'s perplexity changes by {to_flat} from "
                 "{train_seq_len} to {longest} tokens{last}: it still gains at the longest "
                 "length evaluated ({evidence}).").format(
            to_flat=describe_ratio(use.to_flat), last=last, **values)
    return _("In sliding windows {model}'s perplexity changes by {to_flat} from "
             "{train_seq_len} to {flat} tokens{last}; from {flat} tokens on no longer window is "
             "better than a shorter one by {min_gain} or more with significance ({rest} from "
             "{flat} to {longest}; {evidence}).").format(
        to_flat=describe_ratio(use.to_flat), last=last, rest=describe_ratio(use.rest),
        **values)


def seed_entries(results: dict, name: str) -> dict[int, dict]:
    """{seed: results entry} of model `name`: the shipped run (seed 0 unless its entry says
    otherwise) and the runs trained again with other seeds (results["seeds"][name], written by
    `python -m experiments.evaluate --seeds`), in seed order."""
    found = {}
    entry = results.get("models", {}).get(name)
    if entry:
        found[int(entry.get("seed") or 0)] = entry
    for seed, other in (results.get("seeds") or {}).get(name, {}).items():
        found[int(seed)] = other
    return dict(sorted(found.items()))


def seed_uses(results: dict, name: str = "alibi") -> dict[int, ContextUse]:
    """`useful_context` of every training run of `name` that has the data, by seed."""
    uses = {}
    for seed, entry in seed_entries(results, name).items():
        use = useful_context({**results, "models": {**results["models"], name: entry}}, name)
        if use is not None:
            uses[seed] = use
    return uses


def seed_spread(results: dict, name: str, protocol: str) -> dict[int, dict[int, float]]:
    """{length: {seed: perplexity}} of `name` under `protocol`, every training run that has it."""
    spread = {}
    for seed, entry in seed_entries(results, name).items():
        for length, value in entry.get("perplexity", {}).get(protocol, {}).items():
            if value is not None:
                spread.setdefault(int(length), {})[seed] = float(value)
    return dict(sorted(spread.items()))


def seeds_sentence(results: dict, names=("alibi", "sinusoidal"),
                   protocol: str = "nonoverlapping") -> str:
    """What the intervals cover and what the runs trained again with other seeds add, in the
    current language: at the training length and the longest, each model's perplexity over
    its seeds beside seed 0's 95% interval."""
    train_seq_len = results_train_seq_len(results)
    lengths = sorted(int(n) for n in results.get("lengths", []))
    parts = []
    for name in names:
        spread = seed_spread(results, name, protocol)
        cells = []
        for n in (train_seq_len, lengths[-1] if lengths else None):
            seeds = spread.get(n, {})
            ci = results["models"].get(name, {}).get("ci95", {}).get(protocol, {}).get(str(n))
            if len(seeds) < 2 or not ci:
                continue
            cells.append(_("{low}-{high} at {length} tokens (seed 0's interval {ci_low}-"
                           "{ci_high})").format(
                low=number(min(seeds.values()), 3), high=number(max(seeds.values()), 3),
                length=number(n), ci_low=number(ci[0], 3), ci_high=number(ci[1], 3)))
        if cells:
            parts.append(_("{model}, {runs} training runs: {cells}").format(
                model=model_label(name), runs=number(len(seed_entries(results, name))),
                cells=", ".join(cells)))
    if not parts:
        return _("Each model was trained once (seed 0): the 95% intervals cover which text was "
                 "scored, not how the model was trained.")
    return _("The 95% intervals cover which text was scored, not training randomness. Trained "
             "again with other seeds (same data, settings and steps; other initial weights and "
             "batch order), the models' perplexities ({protocol}) spread as follows. "
             "{parts}.").format(
        protocol=protocol_name(protocol), parts="; ".join(parts))


def key_result(results: dict, name: str = "alibi") -> str | None:
    """The lab's key result on one kind of held-out text, in the current language: what the
    sliding windows say of the context `name` uses (`context_use_sentence`, with its
    evidence), what the runs trained with other seeds find, what its non-overlapping curve
    does over the same lengths, and the paper's own sliding-window row beside it (Table 15,
    the ALiBi model trained at L = 512, words where these are bytes). None without the data."""
    use = useful_context(results, name)
    if use is None:
        return None
    # non-overlapping, over the lengths where the sliding windows detect no gain
    nonover = (compare_cells(results, "nonoverlapping", (name, use.longest), (name, use.flat_from))
               if use.flat_from != use.longest else None)
    curse = (_(": with no gain detected in the sliding windows, that is fewer tokens paying "
               "the early token curse") if nonover and nonover[2] < 1 else "")
    row = paper.TABLE15_ALIBI_L512
    values = {"use": context_use_sentence(use), "p512": number(row[512], 2),
              "p1024": number(row[1024], 2), "p3072": number(row[3072], 2)}
    paper_row = _("In the paper's sliding-window evaluation (appendix B, Table 15; perplexity "
                  "per word on WikiText-103, where these are per byte) its ALiBi model trained "
                  "at L = 512 scores {p512} at 512 tokens, {p1024} at 1,024 and {p3072} at "
                  "3,072.").format(**values)
    others = {seed: u for seed, u in seed_uses(results, name).items() if seed != min(
        seed_entries(results, name))}
    seeds = ""
    if others:
        found = [_("seed {seed}: {found}").format(
            seed=seed, found=_("gains up to {n}").format(n=tokens(u.flat_from)) if u.last_gain
            else _("no gain")) for seed, u in others.items()]
        seeds = " " + _("The same tests on the runs trained again with other seeds: "
                        "{found}.").format(found="; ".join(found))
    if use.last_gain is None:
        return _("**The key result.** {use}{seeds} In non-overlapping windows it moves by "
                 "{nonoverlapping} over the same lengths{curse}. {paper}").format(
            nonoverlapping=describe_ratio(nonover), curse=curse, seeds=seeds, paper=paper_row,
            **values)
    past = "" if nonover is None else " " + _(
        "Past {flat} tokens it moves by {nonoverlapping} in non-overlapping windows{curse}."
    ).format(flat=number(use.flat_from), nonoverlapping=describe_ratio(nonover), curse=curse)
    return _("**The key result.** {use} So on this text the tests detect gains from context up "
             "to about {flat} tokens ({factor}x {model}'s training length); past that no gain "
             "is detected, which does not show there is none.{seeds}{past} {paper}").format(
        model=model_label(name), flat=number(use.flat_from),
        factor=number(use.flat_from / use.train_seq_len), past=past, seeds=seeds,
        paper=paper_row, **values)


def in_distribution_ranking(results: dict, protocol: str = "nonoverlapping") -> list[str]:
    """Sentences ranking the models at the training length, each against the best one with
    the paired interval, so the page can say which gaps are real."""
    train_seq_len = results_train_seq_len(results)
    ranked = _rank(results, protocol, train_seq_len) if train_seq_len else []
    if len(ranked) < 2:
        return []
    best = ranked[0][0]
    parts = []
    for name, value in ranked[1:]:
        cmp = compare_cells(results, protocol, (name, train_seq_len), (best, train_seq_len))
        parts.append(_("{model} {value} ({change} against {best})").format(
            model=model_label(name), value=number(value, 3), change=describe_ratio(cmp),
            best=model_label(best)) if cmp else f"{model_label(name)} {number(value, 3)}")
    return [_("At the training length ({train_seq_len} tokens, {protocol}) {best} is lowest at "
              "{value}; then {others}.").format(
        train_seq_len=number(train_seq_len), protocol=protocol_name(protocol), best=model_label(best),
        value=number(ranked[0][1], 3), others="; ".join(parts))]


def results_details(results: dict) -> str:
    """The caption under the results table: tokens scored, how the intervals are made, the
    corpus and the command, in the current language (from the numbers when the file has
    them, else the notes it carries)."""
    protocols = results.get("protocols", {})
    scored = [protocols.get(p, {}).get("tokens") for p in PROTOCOLS]
    passages = protocols.get("sliding", {}).get("passages")
    if all(scored) and passages:
        tokens_note = _(PASSAGES_NOTE).format(
            nonoverlapping=number(scored[0]), sliding=number(scored[1]), passages=number(passages),
            passage_tokens=number(protocols["sliding"]["passage_tokens"]))
        interval = _(T_INTERVAL_NOTE).format(chunks=number(results.get("chunks", CHUNKS)),
                                             passages=number(passages))
    else:
        tokens_note = (_(TOKENS_NOTE).format(nonoverlapping=number(scored[0]),
                                             sliding=number(scored[1]))
                       if all(scored) else results.get("tokens_note", ""))
        interval = (_(INTERVAL_NOTE).format(chunks=results["chunks"]) if results.get("chunks")
                    else results.get("interval", ""))
    corpus = results.get("corpus", {})
    source = corpus.get("source")
    kind = corpus.get("kind")
    shown = (_(source).format(kind=_(TEXT_KINDS[kind])) + HELDOUT_WHERE
             if source and kind in TEXT_KINDS else _(source) if source else _("unknown"))
    return _("{note}. {interval}. Corpus: {corpus}. Command: `{command}`.").format(
        note=tokens_note, interval=interval, corpus=shown,
        command=results.get("command", "python -m experiments.evaluate"))


def format_table(results: dict) -> str:
    """The perplexity table as markdown: one row per model and protocol."""
    lengths = results["lengths"]
    train_seq_len = next(iter(results["models"].values()), {}).get("train_seq_len")
    lines = ["| model | protocol | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|" + "---:|" * len(lengths)]
    for name, entry in results["models"].items():
        for protocol, ppl in entry["perplexity"].items():
            lines.append(f"| {name} | {protocol} | "
                         + " | ".join(f"{ppl[str(n)]:.3f}" for n in lengths) + " |")
    return f"Train length {train_seq_len}.\n" + "\n".join(lines)
