"""The Extrapolation lab's measurements, against brute force."""

import math

import numpy as np

from alibi_viz.alibi import implied_attention_map
from alibi_viz.models.heads import beyond_training


def _brute_beyond(attention, distance):
    """Mean over queries i > distance of the attention on keys j < i - distance, by loops (maps are read in float32, so agreement is to about 1e-7)."""
    rows = [sum(attention[i, j] for j in range(i - distance)) for i in range(distance + 1, len(attention))]
    return sum(rows) / len(rows) if rows else math.nan


def test_beyond_training_matches_brute_force_for_a_map_and_its_bias():
    """The share beyond the training length equals a loop over keys, for a random causal map
    and for the map the bias alone draws, and T is the map's length."""
    rng = np.random.default_rng(0)
    T, L, slope = 24, 8, 0.25
    raw = np.tril(rng.random((T, T)))
    attention = raw / raw.sum(axis=1, keepdims=True)
    share, bias, length = beyond_training(attention, L, slope)
    assert length == T
    assert math.isclose(share, _brute_beyond(attention, L), rel_tol=1e-6)
    assert math.isclose(bias, _brute_beyond(implied_attention_map([slope], T)[0], L), rel_tol=1e-6)


def test_beyond_training_without_a_slope_has_no_bias_share():
    """With no slope (a head without ALiBi) there is no bias-alone share."""
    attention = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]
    assert beyond_training(attention, 2, None)[1] is None
