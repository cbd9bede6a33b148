"""Head behaviour scores: each checked on a hand-built attention pattern with a known value."""

import numpy as np
import pytest

from alibi_viz.models.behaviour import (
    BEHAVIOURS,
    HeadBehaviour,
    behaviour_scores,
    delimiter_score,
    induction_score,
    local_score,
    matching_pairs,
    newline_pairs,
    previous_token_score,
    sink_score,
    span90,
    token_pairs,
)
from alibi_viz.tiny_models import byte_tokenizer, tiny_model


def one_hot_rows(T: int, target) -> np.ndarray:
    """A causal map whose row i puts all weight on key target(i)."""
    a = np.zeros((T, T), dtype=np.float32)
    for i in range(T):
        a[i, target(i)] = 1.0
    return a


def uniform_causal(T: int) -> np.ndarray:
    return np.tril(np.ones((T, T), dtype=np.float32)) / np.arange(1, T + 1)[:, None]


def test_previous_token_head_scores_one():
    """A head that always looks one token back scores 1; one that looks at itself scores 0."""
    assert previous_token_score(one_hot_rows(10, lambda i: max(i - 1, 0))) == 1.0
    assert previous_token_score(np.eye(10, dtype=np.float32)) == 0.0


def test_local_score_of_uniform_attention():
    """Uniform causal attention over 20 tokens keeps min(i + 1, 9) / (i + 1) within 8 tokens."""
    expected = np.mean([min(i + 1, 9) / (i + 1) for i in range(20)])
    assert local_score(uniform_causal(20), k=8) == pytest.approx(expected, rel=1e-6)


def test_sink_head_scores_one():
    """All weight on the first token is a sink score of 1."""
    assert sink_score(one_hot_rows(12, lambda i: 0)) == 1.0


def test_span90_of_a_self_and_a_sink_head():
    """Attending to itself reaches 0 tokens; attending to token 0 reaches i tokens (mean)."""
    assert span90(np.eye(6, dtype=np.float32)) == 0.0
    assert span90(one_hot_rows(6, lambda i: 0)) == pytest.approx(np.mean(range(6)))


def test_induction_head_scores_one():
    """On (r, r) with period 5, attending from 5 + t to t + 1 is a perfect induction head."""
    period, T = 5, 10
    a = one_hot_rows(T, lambda i: i - period + 1 if i >= period else 0)
    assert induction_score(a, period) == 1.0
    assert induction_score(np.eye(T, dtype=np.float32), period) == 0.0


def test_matching_pairs_and_delimiter_score():
    """'f(a[b])' pairs ']' with '[' and ')' with '(', and a head that looks there scores 1."""
    pairs = matching_pairs("f(a[b])")
    assert pairs == [(5, 3), (6, 1)]
    a = np.eye(7, dtype=np.float32)
    for i, j in pairs:
        a[i] = 0
        a[i, j] = 1
    assert delimiter_score(a, pairs) == 1.0


def test_newline_pairs_link_each_line_to_the_previous():
    """Newlines at 1, 3 and 6 give the pairs (3, 1) and (6, 3)."""
    assert newline_pairs("a\nb\ncd\n") == [(3, 1), (6, 3)]


def test_token_pairs_are_character_positions_for_a_byte_tokenizer():
    """With one token per byte, token positions equal character positions."""
    assert token_pairs(byte_tokenizer(), "f(a[b])", [(5, 3), (6, 1)]) == [(5, 3), (6, 1)]


def test_behaviour_scores_cover_every_head():
    """On a tiny random BLOOM every score has one value per (layer, head), in range."""
    model = tiny_model("bloom")
    info_slopes = [0.5, 0.25, 0.125, 0.0625][: model.config.n_head]
    result = behaviour_scores(model, byte_tokenizer(), slopes=info_slopes)
    shape = (model.config.n_layer, model.config.n_head)
    for name, values in result.scores.items():
        assert values.shape == shape, name
        assert np.all((values >= 0) & (values <= 1 + 1e-6)), name
    assert result.content_kl.shape == shape and np.all(result.content_kl >= -1e-6)
    assert set(result.strongest().ravel()) <= set(BEHAVIOURS)


def test_best_head_is_the_highest_score_and_none_when_no_head_has_one():
    """best_head picks the (layer, head) of the largest score, skipping NaN; a behaviour with no
    score anywhere (all NaN, or content without slopes) has no best head."""
    scores = {b: np.full((2, 3), np.nan) for b in BEHAVIOURS if b != "content"}
    scores["previous_token"] = np.array([[0.1, np.nan, 0.3], [0.9, 0.2, 0.0]])
    behaviour = HeadBehaviour(scores=scores, sink_control=np.zeros((2, 3)),
                              span=np.zeros((2, 3)), bias_span=None, content_kl=None)
    assert behaviour.best_head("previous_token") == (1, 0)
    assert behaviour.best_head("delimiter") is None
    assert behaviour.best_head("content") is None
