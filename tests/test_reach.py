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


def test_settled_context_checks_every_longer_context():
    """A curve lowest at 32 that rises past the tolerance at 64 and 128 and comes back settles
    at 256 (every later context within 0.01 of the lowest), not at 32; one whose longest
    context is off never settles."""
    from alibi_viz.results.reach import ReachResult

    contexts = np.array([16, 32, 64, 128, 256, 512])
    back = ReachResult(contexts, np.array([1.1, 1.0, 1.02, 1.03, 1.005, 1.008]), np.zeros(6), 8)
    assert back.lowest_context() == 32 and back.settled_context(0.01) == 256
    away = ReachResult(contexts, np.array([1.1, 1.0, 1.005, 1.03, 1.005, 1.5]), np.zeros(6), 8)
    assert away.lowest_context() == 32 and away.settled_context(0.01) is None


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
