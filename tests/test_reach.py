"""Reach and copy at a distance measure what their labels say (issue 23)."""

import numpy as np
import pytest
import torch

from alibi_viz import data
from alibi_viz.models import context_reach as reach
from alibi_viz.models.attention import tokenize_capped
from alibi_viz.models.context_reach import (
    COPY_PREFIX,
    COPY_SPAN,
    context_reach,
    copy_at_distance,
    copy_sequences,
)
from alibi_viz.tiny_models import byte_tokenizer, tiny_model

STREAM = data.heldout_ids("python", max_tokens=4000)


@pytest.fixture(scope="module")
def bloom():
    torch.set_num_threads(1)
    return tiny_model("bloom", vocab_size=259)


def test_copy_control_differs_only_at_the_first_copy():
    """The control is the probe with its first copy replaced by other text: same prefix, same
    filler, same repeat at the same place."""
    ids, controls, first, repeat = copy_sequences(data.heldout_ids("en"), 64, samples=4)
    assert (first, repeat) == (COPY_PREFIX, COPY_PREFIX + 64)
    same = (ids == controls).all(dim=0)
    assert not same[first:first + COPY_SPAN].all()
    assert same[:first].all() and same[first + COPY_SPAN:].all()
    assert (ids[:, first:first + COPY_SPAN] == ids[:, repeat:repeat + COPY_SPAN]).all()


def test_copy_gain_is_control_minus_repeat(bloom):
    result = copy_at_distance(bloom, data.heldout_ids("python"), [32, 64], samples=2)
    assert np.allclose(result.gain, result.control - result.repeat, atol=1e-6)


def test_context_reach_never_gives_more_than_c_tokens(bloom, monkeypatch):
    """No forward pass of a reach curve at context c is longer than c tokens, so at the
    training length no scored token is past it."""
    longest = {}
    forward = type(bloom).forward

    def recording(self, input_ids=None, **kwargs):
        longest["n"] = max(longest.get("n", 0), input_ids.shape[1])
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(type(bloom), "forward", recording)
    for c in (8, 32, 128):
        longest.clear()
        context_reach(bloom, STREAM, [c], tokens=64)
        assert longest["n"] == c


def test_a_cut_text_never_ends_inside_a_letter():
    """Cutting Russian text (two bytes a letter) at an odd token count drops the half letter
    rather than showing it as <0xD0>."""
    tokenizer = byte_tokenizer()
    cut = tokenize_capped(tokenizer, "мама мыла раму " * 10, max_tokens=7)
    assert cut.tokens == ["м", "◦", "а", "◦", "м", "◦"]
    assert tokenizer.decode(cut.ids) == "мам"


def test_heldout_mixture_holds_every_kind_near_its_share():
    """The reach stream interleaves the four kinds of held-out text by their shares."""
    docs = data.interleave({kind: list(data.heldout_documents(kind)) for kind in data.CORPUS_KINDS})
    first = docs[:60]
    share = {k: sum(d.nbytes for d in first if d.kind == k) for k in data.CORPUS_KINDS}
    total = sum(share.values())
    assert all(0.1 < v / total < 0.45 for v in share.values()), share
    ids = data.heldout_mixture_ids(max_tokens=5000)
    assert ids.size == 5000


@pytest.mark.parametrize("lang, kind", [("en", "en"), ("es", "es"), ("ru", "ru"), ("de", "en")])
def test_a_page_shows_its_own_language_first(lang, kind):
    assert data.page_kind(lang) == kind


def test_context_reach_keeps_one_mean_per_passage(bloom):
    """A reach curve scores passages spread through the stream, the same at every context:
    one mean nll per passage and context, the curve their mean, and the file keeps them."""
    from alibi_viz.results.reach import ReachResult

    r = context_reach(bloom, STREAM, [4, 16, 64], passages=4, tokens=32)
    assert r.passage_nll.shape == (3, 4) and r.tokens == 128
    assert np.allclose(r.nll, r.passage_nll.mean(axis=1))
    back = ReachResult.from_dict(r.as_dict())
    assert np.allclose(back.passage_nll, r.passage_nll, atol=1e-4)
    mean, low, high = back.change(4, 64)
    assert low < mean < high
    old = {k: v for k, v in r.as_dict().items() if k != "passage_nll"}
    assert ReachResult.from_dict(old).passage_nll is None


def test_copy_attention_reads_the_token_after_each_twin(monkeypatch):
    """copy_attention: per head, the mean over the repeat's tokens repeat + t (t < span - 1)
    of the attention to first + t + 1, read one entry at a time; a head that does exactly
    that scores 1, one that attends to itself 0."""
    T, first, repeat, span = 30, 3, 17, 6
    rng = np.random.default_rng(0)
    random = rng.random((T, T))
    random = np.tril(random) / np.tril(random).sum(axis=1, keepdims=True)
    copier = np.zeros((T, T))
    for i in range(T):
        copier[i, first + i - repeat + 1 if repeat <= i < repeat + span - 1 else 0] = 1.0
    maps = [np.stack([copier, np.eye(T), random])]  # one layer, three heads
    monkeypatch.setattr(reach, "attention_maps_of_ids", lambda model, ids: maps)
    got = reach.copy_attention(None, np.zeros(T, dtype=int), first, repeat, span)
    expected = [[np.mean([head[repeat + t, first + t + 1] for t in range(span - 1)])
                 for head in maps[0]]]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[0, 0] == 1.0 and got[0, 1] == 0.0


def test_reach_parts_keeps_what_it_does_not_measure(monkeypatch):
    """`python -m experiments.reach --parts reach` measures the reach curves again and keeps
    the copy results, their setting and their seconds from the file written before."""
    import experiments.reach as program
    from alibi_viz.errors import AlibiVizError
    from alibi_viz.results.reach import ReachResult

    def no_copy(*args, **kwargs):
        raise AssertionError("the copy results are kept, not measured")

    curve = ReachResult(np.array([1, 2]), np.array([2.0, 1.5]), np.array([0.1, 0.1]), 4,
                        passage_nll=np.array([[2.0, 2.0], [1.5, 1.5]]))
    monkeypatch.setattr(program, "load_eval_model", lambda folder: None)
    monkeypatch.setattr(program, "context_reach", lambda model, stream, contexts: curve)
    monkeypatch.setattr(program, "copy_at_distance", no_copy)
    copy = {"distances": [16], "gain": [0.5]}
    kept = {"copy": {"span": 16}, "models": {"m": {"copy": copy, "seconds": {"copy": 3.0}}}}
    out = program.evaluate_reach({"m": "folder"}, STREAM, bar=False, parts=["reach"], kept=kept)
    assert out["copy"] == {"span": 16} and out["models"]["m"]["copy"] == copy
    assert out["models"]["m"]["reach"]["passage_nll"] == [[2.0, 2.0], [1.5, 1.5]]
    assert out["models"]["m"]["seconds"]["copy"] == 3.0 and "reach" in out["models"]["m"]["seconds"]
    with pytest.raises(AlibiVizError, match="No copy results"):
        program.evaluate_reach({"m": "folder"}, STREAM, bar=False, parts=["reach"], kept={})
