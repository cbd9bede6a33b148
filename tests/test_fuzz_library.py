"""Fuzzing the library's public inputs: anything either works or raises AlibiVizError."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from alibi_viz import (
    AlibiVizError,
    alibi_bias,
    alibi_bias_sampled,
    alibi_slopes,
    attention_span,
    implied_attention,
    mean_distance,
)
from alibi_viz.figures.bias import bias_grid_figure, decay_figure

ANYTHING = st.one_of(
    st.integers(-10**13, 10**13), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.none(), st.booleans(), st.just([]), st.just([1, 2]),
)
SMALL_INT = st.one_of(st.integers(-5, 300), ANYTHING)


def works_or_refuses(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except AlibiVizError as exc:
        assert str(exc)  # a message for the user
        return None


@settings(max_examples=200, deadline=None)
@given(ANYTHING, st.one_of(st.sampled_from(["official", "geometric", "mpt"]), ANYTHING), ANYTHING)
def test_slopes_never_crash(num_heads, schedule, max_bias):
    """alibi_slopes on any input returns valid slopes or raises AlibiVizError."""
    slopes = works_or_refuses(alibi_slopes, num_heads, schedule, max_bias)
    if slopes is not None:
        assert np.all((slopes > 0) & np.isfinite(slopes))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), SMALL_INT, st.one_of(st.none(), SMALL_INT),
       st.one_of(st.sampled_from(["causal", "symmetric"]), ANYTHING))
def test_bias_never_crashes(num_heads, seq_len, key_len, mode):
    """alibi_bias on any seq_len/key_len/mode returns a matrix or raises AlibiVizError."""
    bias = works_or_refuses(alibi_bias, alibi_slopes(num_heads), seq_len, mode, key_len)
    if bias is not None:
        assert bias.shape[:2] == (num_heads, seq_len)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.just([0.5, 0.25]), ANYTHING), st.lists(st.integers(0, 10**6), max_size=5),
       st.lists(st.integers(0, 10**6), max_size=5), st.sampled_from(["causal", "symmetric", "x"]))
def test_sampled_never_crashes(slopes, rows, cols, mode):
    """alibi_bias_sampled on any slopes/indices works, giving one (rows, cols) matrix per
    slope, or raises AlibiVizError."""
    bias = works_or_refuses(alibi_bias_sampled, slopes, rows, cols, mode)
    if bias is not None:
        assert bias.shape == (len(slopes), len(rows), len(cols))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 128), SMALL_INT, st.sampled_from(["causal", "symmetric"]), ANYTHING)
def test_decay_functions_never_crash(num_heads, position, mode, mass):
    """Decay helpers work or raise AlibiVizError for any position, context and mass."""
    slopes = alibi_slopes(num_heads)
    works_or_refuses(implied_attention, slopes, position, mode)
    works_or_refuses(attention_span, slopes, mass, mode, position)
    works_or_refuses(mean_distance, slopes, mode, position)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 128), st.one_of(st.integers(1, 2**20), ANYTHING),
       st.sampled_from(["causal", "symmetric"]), st.one_of(st.none(), st.lists(st.integers(-2, 130), max_size=4)))
def test_figures_never_crash(num_heads, seq_len, mode, heads):
    """The page's figure builders work at any size up to 2^20 tokens or raise AlibiVizError."""
    slopes = alibi_slopes(num_heads)
    works_or_refuses(bias_grid_figure, slopes, seq_len, mode, heads)
    works_or_refuses(decay_figure, slopes, seq_len, mode, heads)
