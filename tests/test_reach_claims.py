"""The reach sentences say only what the shipped per-passage losses bear out (issue 60).

Every number in them is recomputed here from assets/results/reach.json: the paired t intervals
with scipy.stats' own t quantile, the one-sided p-values with its t distribution, and Holm's
step-down written out again, never through alibi_viz.statistics or alibi_viz.results.reach.
Sentences are read in English.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from alibi_viz import alibi_slopes, assets
from alibi_viz.assets import model_label

README = Path(__file__).resolve().parents[1] / "README.md"
REACH = assets.load_reach_results()
needs_passages = pytest.mark.skipif(
    not REACH or any("passage_nll" not in e["reach"] for e in REACH.get("models", {}).values()),
    reason="no shipped per-passage reach losses")
TRAIN = 128
N = r"\d[\d,]*(?:\.\d+)?"
S = r"[−+]\d[\d,]*(?:\.\d+)?"  # a signed number
VERDICTS = {"detectably lowers the loss": "lowers",
            "neither lowers nor raises the loss detectably": "same",
            "detectably raises the loss": "raises"}


def num(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def name_of(label: str) -> str:
    return next(n for n in REACH["models"] if model_label(n) == label)


def ch(key: str) -> str:
    """A describe_change text, its three numbers as groups key_m, key_lo, key_hi."""
    return rf"(?P<{key}_m>{S}) nats \(95% interval (?P<{key}_lo>{S}) to (?P<{key}_hi>{S})\)"


FALLS = (rf"(?P<model>.+?)'s loss falls detectably as context grows to (?P<flat>{N}) tokens "
         rf"\({ch('gain')} from (?P<start>{N}) to (?P=flat)\); from (?P=flat) to "
         rf"(?P<longest>{N}) tokens it changes by {ch('rest')}, but no gain of a longer context "
         rf"from (?P=flat) tokens on passes the corrected test\.")
PAST = (rf"Past (?P<train>{N}) tokens more context (?P<verdict>.+?): {ch('whole')} from "
        rf"(?P=train) to (?P<plongest>{N}) tokens \((?P<passages>{N}) passages of (?P<ptokens>{N}) "
        rf"tokens across the text, one training run; paired t tests, Holm over (?P<tests>{N}); "
        rf"margin (?P<margin>{N}) nats\)\.")
COPY = (rf"(?P<cmodel>.+?)'s copy gain on a repeated span is (?P<near_gain>{N}) nats/token at "
        rf"(?P<near>{N}) tokens and (?P<far_gain>{N}) at (?P<far>{N})\.")


def rows(name: str) -> dict[int, np.ndarray]:
    r = REACH["models"][name]["reach"]
    return {int(c): np.asarray(p, dtype=np.float64)
            for c, p in zip(r["contexts"], r["passage_nll"], strict=True)}


def interval(name: str, a: int, b: int) -> tuple[float, float, float]:
    """Loss at b minus loss at a, with its paired 95% t interval over the passages."""
    d = rows(name)[b] - rows(name)[a]
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return d.mean(), d.mean() - half, d.mean() + half


def p_lower(d: np.ndarray, margin: float) -> float:
    """One-sided p that the mean of d is below -margin (Student's t)."""
    t = (d.mean() + margin) / (d.std(ddof=1) / math.sqrt(d.size))
    return stats.t.cdf(t, d.size - 1)


def reference(name: str, margin: float):
    """(gains, harms, comparisons): the pairs whose longer context lowers (raises) the loss by
    `margin` nats or more, Holm over gains at every pair and harms at every pair from TRAIN."""
    r = rows(name)
    cs = sorted(r)
    pairs = [(a, b) for a in cs for b in cs if a < b]
    family = [("gain", a, b, p_lower(r[b] - r[a], margin)) for a, b in pairs]
    family += [("harm", a, b, p_lower(r[a] - r[b], margin)) for a, b in pairs if a >= TRAIN]
    found, m = set(), len(family)
    for rank, (way, a, b, p) in enumerate(sorted(family, key=lambda f: f[3])):
        if p > 0.05 / (m - rank):
            break
        found.add((way, a, b))
    return ({(a, b) for w, a, b in found if w == "gain"},
            {(a, b) for w, a, b in found if w == "harm"}, m)


def assert_change(f, key: str, truth) -> None:
    written = [num(f[f"{key}_{part}"]) for part in ("m", "lo", "hi")]
    assert written == pytest.approx(list(truth), abs=6e-4), (key, written, truth)


def check_falls(f, name: str, gains: set) -> int:
    """The falls sentence against the reference tests: returns where gains stop."""
    start = max(a for a, _b in gains)
    flat = min(b for a, b in gains if a == start)
    longest = max(rows(name))
    assert (int(num(f["start"])), int(num(f["flat"])), int(num(f["longest"]))) == (
        start, flat, longest)
    assert not [(a, b) for a, b in gains if a >= flat]  # "no gain from flat on"
    assert_change(f, "gain", interval(name, start, flat))
    assert_change(f, "rest", interval(name, flat, longest))
    return flat


def check_past(f, name: str) -> str:
    """The past-the-training-length sentence: verdict, change and evidence."""
    margin = num(f["margin"])
    gains, harms, m = reference(name, margin)
    lowers = any(a >= TRAIN for a, _b in gains)
    verdict = "mixed" if lowers and harms else "lowers" if lowers else (
        "raises" if harms else "same")
    assert VERDICTS[f["verdict"]] == verdict
    assert int(num(f["train"])) == TRAIN and int(num(f["plongest"])) == max(rows(name))
    assert int(num(f["tests"])) == m
    assert_change(f, "whole", interval(name, TRAIN, max(rows(name))))
    passages = len(REACH["models"][name]["reach"]["passage_nll"][0])
    assert int(num(f["passages"])) == passages
    assert int(num(f["ptokens"])) * passages == REACH["models"][name]["reach"]["tokens"]
    return verdict


def check_copy(f, name: str) -> None:
    gains = dict(zip(REACH["models"][name]["copy"]["distances"],
                     REACH["models"][name]["copy"]["gain"], strict=True))
    assert (int(num(f["near"])), int(num(f["far"]))) == (min(gains), max(gains))
    assert num(f["near_gain"]) == pytest.approx(gains[min(gains)], abs=6e-3)
    assert num(f["far_gain"]) == pytest.approx(gains[max(gains)], abs=6e-3)


@needs_passages
def test_reach_file_means_are_the_passages_means():
    """The curve the figure draws is the mean of the passages the tests pair."""
    for name, entry in REACH["models"].items():
        r = entry["reach"]
        assert np.mean(r["passage_nll"], axis=1) == pytest.approx(r["nll"], abs=6e-4), name


@needs_passages
def test_reach_summary_is_the_recomputed_tests():
    """Per model: where the gains a family-wise test keeps stop, with both intervals; what
    more context does past the training length, with its interval, the passages and the
    number of comparisons; the copy gains."""
    from alibi_viz.results.reach import reach_summary

    lines = reach_summary(REACH, TRAIN)
    assert len(lines) == len(REACH["models"])
    for line in lines:
        f = re.fullmatch(f"{FALLS} {PAST} {COPY}", line)
        assert f, line
        name = name_of(f["model"])
        assert name_of(f["cmodel"]) == name
        gains, _harms, _m = reference(name, num(f["margin"]))
        check_falls(f, name, gains)
        check_past(f, name)
        check_copy(f, name)


@needs_passages
def test_lesson_reach_answer_is_the_recomputed_tests():
    """Step 7's answer: ALiBi past its training length, where its gains stop, the gentlest
    head's weight that far back, every other model's verdict past 128 and its loss at the
    longest context, and the copy gains; the vote's right choice is the verdict."""
    from alibi_viz.results.reach import past_answer, reach_answer

    text = reach_answer(REACH, TRAIN, alibi_slopes(8))
    gentle = (rf"Where the tests stop detecting gains is not where the bias cuts context off: "
              rf"the gentlest head \(m = (?P<m>{N}), half-life (?P<life>{N}) tokens\) still "
              rf"gives a key (?P<back>{N}) tokens back (?P<weight>\d+)% of the weight of the "
              rf"newest one\.")
    others = (rf"Every other shipped model's loss rises detectably past (?P<otrain>{N}) tokens "
              rf"\((?P<low>{N})-(?P<high>{N}) nats at (?P<olongest>{N}) tokens, against "
              rf"(?P<own>{N}) for ALiBi\)\.")
    copy = (rf"Its copy gain is (?P<near_gain>{N}) nats at (?P<near>{N}) tokens and "
            rf"(?P<far_gain>{N}) at (?P<far>{N})\.")
    f = re.fullmatch(f"{PAST} {FALLS} {gentle} {others} {copy}", text)
    assert f, text
    assert f["model"] == "ALiBi"
    verdict = check_past(f, "alibi")
    assert past_answer(REACH, TRAIN) == (None if verdict == "mixed" else verdict)
    gains, _harms, _m = reference("alibi", num(f["margin"]))
    flat = check_falls(f, "alibi", gains)
    m = min(alibi_slopes(8))
    assert num(f["m"]) == pytest.approx(m, rel=1e-2)
    assert num(f["life"]) == round(math.log(2) / m) and int(num(f["back"])) == flat
    assert int(f["weight"]) == round(100 * math.exp(-m * flat))
    names = [n for n in REACH["models"] if n != "alibi"]
    for n in names:
        assert reference(n, num(f["margin"]))[1], n  # a harm past 128 survives the test
        assert not any(a >= TRAIN for a, _b in reference(n, num(f["margin"]))[0]), n
    far = [rows(n)[max(rows(n))].mean() for n in names]
    assert (num(f["low"]), num(f["high"])) == (pytest.approx(min(far), abs=6e-3),
                                               pytest.approx(max(far), abs=6e-3))
    assert num(f["own"]) == pytest.approx(rows("alibi")[max(rows("alibi"))].mean(), abs=6e-3)
    assert int(num(f["otrain"])) == TRAIN and int(num(f["olongest"])) == max(rows("alibi"))
    check_copy(f, "alibi")


def test_step_7_vote_offers_every_verdict_but_mixed():
    """The class vote stores the verdicts the answer is computed as."""
    from alibi_viz.results.reach import PAST_VERDICTS
    from alibi_viz_app import class_view

    assert {v for v, _label in class_view.CHOICES[7]} == set(PAST_VERDICTS) - {"mixed"}


def flat_reach(seed: int = 0) -> dict:
    """A reach file whose passages differ from one another but not between contexts beyond
    noise: no test can find a change."""
    rng = np.random.default_rng(seed)
    contexts = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    difficulty = rng.normal(1.0, 0.3, 16)
    passages = difficulty + rng.normal(0, 0.01, (len(contexts), 16))  # (C, P)
    models = {}
    for name in ("alibi", "sinusoidal"):
        models[name] = {
            "reach": {"contexts": contexts, "nll": passages.mean(axis=1).tolist(),
                      "nll_sd": passages.std(axis=1, ddof=1).tolist(), "tokens": 1024,
                      "passage_nll": passages.tolist()},
            "copy": {"distances": [16, 4064], "gain": [0.5, 0.0]}}
    return {"reach": {"contexts": contexts, "tokens": 1024, "passages": 16,
                      "passage_tokens": 64}, "models": models}


@pytest.mark.parametrize("seed", range(3))
def test_no_reach_sentence_names_a_lowest_or_a_limit_without_a_difference(seed):
    """Where the family-wise test finds no change, no sentence says "lowest", "limit" or
    "minimum", none says the loss falls or rises detectably, and the vote's right choice is
    "same"."""
    from alibi_viz.results.reach import past_answer, reach_answer, reach_summary

    reach = flat_reach(seed)
    texts = [*reach_summary(reach, TRAIN), reach_answer(reach, TRAIN, alibi_slopes(8))]
    for text in texts:
        assert not re.search(r"lowest|limit|minimum", text, re.IGNORECASE), text
        assert "falls detectably" not in text and "rises detectably" not in text, text
        assert "neither lowers nor raises the loss detectably" in text, text
    assert past_answer(reach, TRAIN) == "same"


@needs_passages
def test_no_shipped_reach_sentence_names_a_lowest_or_a_limit():
    """The shipped curves' sentences, the model cards' reach lines and the README's reach
    paragraph never name a lowest context or a limit (the tests find where gains stop being
    detected, which is not a minimum)."""
    from alibi_viz.results.reach import reach_answer, reach_summary

    texts = [*reach_summary(REACH, TRAIN), reach_answer(REACH, TRAIN, alibi_slopes(8))]
    for name in assets.MODEL_ORDER:
        card = (assets.MODELS_DIR / name / "README.md").read_text()
        texts.append(next(x for x in card.splitlines()
                          if x.startswith("On the shipped held-out text of the four kinds")))
    readme = README.read_text()
    texts.append(readme[readme.index("Reach (`assets/results/reach.json`"):].split("\n\n")[0])
    for text in texts:
        assert not re.search(r"lowest|limit|minimum", text, re.IGNORECASE), text


def test_an_older_reach_file_gets_no_interval_sentence():
    """A file written before the passages: read back, no test, no interval, no right choice."""
    from alibi_viz.results.reach import (
        ReachResult,
        past_answer,
        reach_answer,
        reach_summary,
        reach_tests,
    )

    reach = flat_reach()
    for entry in reach["models"].values():
        del entry["reach"]["passage_nll"]
    del reach["reach"]["passages"]
    r = ReachResult.from_dict(reach["models"]["alibi"]["reach"])
    assert r.passage_nll is None and reach_tests(r, TRAIN) is None
    assert r.mean_intervals() is None
    lines = reach_summary(reach, TRAIN)
    assert not any("interval" in line or "detectably" in line for line in lines)
    assert "no per-passage losses" in lines[-1]
    assert reach_answer(reach, TRAIN, alibi_slopes(8)) is None
    assert past_answer(reach, TRAIN) is None


@needs_passages
@pytest.mark.parametrize("name", assets.MODEL_ORDER)
def test_model_card_reach_line_is_the_recomputed_tests(name):
    """The card's reach line, as shipped on disk: every loss it lists, where gains stop and
    both intervals, what more context does past 128 and its interval, the comparisons."""
    card = (assets.MODELS_DIR / name / "README.md").read_text()
    line = next(x for x in card.splitlines()
                if x.startswith("On the shipped held-out text of the four kinds"))
    listed = dict(re.findall(rf"(\d+): ({N})", line.split("spread through the text):")[1]))
    means = {c: p.mean() for c, p in rows(name).items()}
    assert {int(k): num(v) for k, v in listed.items()} == pytest.approx(means, abs=6e-4)
    c = r"(?P<{0}_m>[-+]{1}) nats \(95% interval (?P<{0}_lo>[-+]{1}) to (?P<{0}_hi>[-+]{1})\)"
    f = re.search(
        rf"paired over the (?P<passages>{N}) passages: 95% t intervals, Holm-corrected over "
        rf"(?P<tests>{N}) comparisons, margin (?P<margin>{N}) nats: the loss falls detectably up "
        rf"to (?P<flat>{N}) tokens \({c.format('gain', N)} from (?P<start>{N})\); from (?P=flat) "
        rf"to (?P<longest>{N}) tokens it changes by {c.format('rest', N)}, but no gain of a "
        rf"longer context from (?P=flat) tokens on passes the corrected test; past the "
        rf"training length more context (?P<verdict>.+?) \({c.format('whole', N)} from "
        rf"(?P<train>{N}) to (?P=longest)\)\.$", line)
    assert f, line
    gains, harms, m = reference(name, num(f["margin"]))
    assert int(num(f["tests"])) == m
    check_falls(f, name, gains)
    lowers = any(a >= TRAIN for a, _b in gains)
    assert VERDICTS[f["verdict"]] == ("lowers" if lowers and not harms else "raises"
                                      if harms and not lowers else "same")
    assert_change(f, "whole", interval(name, TRAIN, max(rows(name))))


@needs_passages
def test_readme_reach_paragraph_is_the_recomputed_tests():
    """The README's reach paragraph: where each model's gains stop, ALiBi's change from there
    to 1,024 and from 128 to 1,024 with their intervals, its verdict past 128, every other
    model's harm past 128, sinusoidal's loss at 128 and 1,024, the comparisons per model."""
    readme = README.read_text()
    text = " ".join(readme[readme.index("Reach (`assets/results/reach.json`"):].split("\n\n")[0]
                    .split())
    margin = num(re.search(rf"margin ({N}) nats", text)[1])
    refs = {n: reference(n, margin) for n in REACH["models"]}
    assert {r[2] for r in refs.values()} == {int(num(re.search(
        rf"Holm-corrected over ({N}) comparisons per model", text)[1]))}
    stops = {}
    for n, (gains, _h, _m) in refs.items():
        start = max(a for a, _b in gains)
        stops[n] = min(b for a, b in gains if a == start)
    assert {n: c for n, c in stops.items() if n != "nope"} == dict.fromkeys(
        [n for n in REACH["models"] if n != "nope"], 16) and stops["nope"] == 64
    assert ("every model's loss falls detectably as context grows to 16 tokens (NoPE's to 64)"
            in text)
    assert all(not [g for g in refs[n][0] if g[0] >= stops[n]] for n in REACH["models"])
    mean, low, high = interval("alibi", 16, 1024)
    assert (f"ALiBi's loss still changes by {mean:+.3f} nats from 16 to 1,024 tokens (95% "
            f"interval {low:+.3f} to {high:+.3f})").replace("-", "−") in text
    assert f"a half-life of {math.log(2) / min(alibi_slopes(8)):.0f} tokens" in text
    gains, harms, _m = refs["alibi"]
    assert not harms and not any(a >= TRAIN for a, _b in gains)
    mean, low, high = interval("alibi", 128, 1024)
    assert ("Past 128 tokens more context neither lowers nor raises ALiBi's loss detectably "
            f"({mean:+.3f} nats from 128 to 1,024, 95% interval {low:+.3f} to "
            f"{high:+.3f})").replace("-", "−") in text
    for n in REACH["models"]:
        if n != "alibi":
            assert refs[n][1] and not any(a >= TRAIN for a, _b in refs[n][0]), n
    s = {c: p.mean() for c, p in rows("sinusoidal").items()}
    assert f"(sinusoidal {s[128]:.2f} to {s[1024]:.2f} nats from 128 to 1,024)" in text
