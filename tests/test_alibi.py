"""The ALiBi core, checked against transformers' own builders (BLOOM, MPT, Falcon)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from alibi_viz import (
    AlibiVizError,
    BudgetError,
    alibi_bias,
    alibi_bias_row_constant,
    alibi_bias_sampled,
    alibi_slopes,
    attention_span,
    half_life,
    implied_attention,
    mean_distance,
)
from alibi_viz.alibi import describe_schedule, implied_attention_map, is_power_of_two


def bloom_slopes(num_heads: int) -> np.ndarray:
    """Slopes as BLOOM builds them: the bias at key position 1 is m * 1."""
    alibi = bloom_alibi(torch.ones(1, 2), num_heads, torch.float32)  # (heads, 1, 2)
    return alibi[:, 0, 1].double().numpy()


def masked_softmax(scores: np.ndarray) -> np.ndarray:
    """Causal mask then softmax over keys, float64, for (..., L, L) scores."""
    length = scores.shape[-1]
    scores = np.where(np.tril(np.ones((length, length), bool)), scores, -np.inf)
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------- slopes vs transformers

@pytest.mark.parametrize("num_heads", range(1, 129))
def test_official_slopes_equal_bloom(num_heads):
    """The official schedule equals BLOOM's build_alibi_tensor for every head count 1..128."""
    np.testing.assert_allclose(alibi_slopes(num_heads), bloom_slopes(num_heads), rtol=1e-6)


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_mpt_slopes_equal_mpt(num_heads):
    """The mpt schedule equals the per-position step of MPT's build_mpt_alibi_tensor, 1..64 heads."""
    alibi = build_mpt_alibi_tensor(num_heads, 4, alibi_bias_max=8)  # (heads, 1, 4)
    steps = (alibi[:, 0, -1] - alibi[:, 0, -2]).double().numpy()
    np.testing.assert_allclose(alibi_slopes(num_heads, "mpt"), steps, rtol=1e-6)


def test_mpt_slopes_follow_alibi_bias_max():
    """MPT's alibi_bias_max corresponds to our max_bias."""
    alibi = build_mpt_alibi_tensor(12, 2, alibi_bias_max=4)
    np.testing.assert_allclose(alibi_slopes(12, "mpt", max_bias=4),
                               (alibi[:, 0, 1] - alibi[:, 0, 0]).double().numpy(), rtol=1e-6)


def test_mpt_and_official_coincide():
    """MPT's reordering gives exactly the official slopes for every head count (measured fact)."""
    for n in range(1, 257):
        np.testing.assert_array_equal(alibi_slopes(n, "mpt"), alibi_slopes(n))


@pytest.mark.parametrize("num_heads", [1, 4, 12, 20, 71])
def test_falcon_builder_is_official_rounded_to_bf16(num_heads):
    """Falcon builds the official slopes but multiplies in bfloat16."""
    alibi = falcon_alibi(torch.ones(1, 2), num_heads, torch.float32)  # (heads, 1, 2)
    ours = torch.tensor(alibi_slopes(num_heads)).float().bfloat16().float()
    torch.testing.assert_close(alibi[:, 0, 1], ours, rtol=0, atol=0)


def test_official_twelve_heads_not_monotonic():
    """n=12 gives 2^-1..2^-8 then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (the issue's worked example)."""
    expected = 2.0 ** -np.array([1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(alibi_slopes(12), expected)


def test_geometric_is_paper_formula():
    """geometric gives 2^(-max_bias*h/n) for any n."""
    np.testing.assert_allclose(alibi_slopes(12, "geometric"), 2.0 ** (-8 * np.arange(1, 13) / 12))
    np.testing.assert_allclose(alibi_slopes(5, "geometric", 4.0), 2.0 ** (-4 * np.arange(1, 6) / 5))


@given(st.integers(1, 1024), st.sampled_from(["official", "geometric", "mpt"]))
def test_slopes_in_unit_interval(num_heads, schedule):
    """Every schedule gives slopes in (0, 1]."""
    slopes = alibi_slopes(num_heads, schedule)
    assert slopes.shape == (num_heads,) and slopes.dtype == np.float64
    assert np.all(slopes > 0) and np.all(slopes <= 1)


@given(st.integers(1, 1024))
def test_official_monotonic_iff_power_of_two(num_heads):
    """The official schedule is strictly decreasing exactly when n is a power of two."""
    decreasing = bool(np.all(np.diff(alibi_slopes(num_heads)) < 0))
    assert decreasing == is_power_of_two(num_heads)


def test_describe_schedule_names_the_zigzag():
    """The explanation mentions non-monotonic order only when there is one."""
    assert "not monotonic" in describe_schedule(12)
    assert "not monotonic" not in describe_schedule(16)
    assert "not monotonic" not in describe_schedule(12, "geometric")


@pytest.mark.parametrize("num_heads", [n for n in range(3, 129) if not is_power_of_two(n)])
def test_describe_schedule_says_where_the_extra_slopes_fall(num_heads):
    """The sentence's claim holds on the slopes: the first extra is steeper than head 1, the
    others fall strictly between two slopes of the c-head schedule (1-128 heads)."""
    slopes = alibi_slopes(num_heads)
    c = 2 ** (num_heads.bit_length() - 1)
    base, extra = slopes[:c], slopes[c:]
    assert extra[0] > base[0]
    for m in extra[1:]:
        assert base.min() < m < base.max() and m not in base
    text = describe_schedule(num_heads)
    assert "in between" not in text and "steeper than head 1's" in text
    assert ("fall between" in text) == (num_heads > c + 1)


# ----------------------------------------------------------------------------- bias vs transformers

@pytest.mark.parametrize("num_heads", [1, 8, 12])
def test_causal_bias_matches_bloom_after_mask_and_softmax(num_heads):
    """Textbook bias and BLOOM's row-constant tensor give the same attention on random logits."""
    length = 40
    logits = np.random.default_rng(0).normal(size=(num_heads, length, length)) * 3
    ours = masked_softmax(logits + alibi_bias(alibi_slopes(num_heads), length))
    theirs = bloom_alibi(torch.ones(1, length), num_heads, torch.float32).double().numpy()
    np.testing.assert_allclose(ours, masked_softmax(logits + theirs), atol=1e-6)


def test_causal_bias_matches_mpt_after_mask_and_softmax():
    """MPT's m*(j-(L-1)) form gives the same attention as the textbook bias."""
    num_heads, length = 12, 33
    logits = np.random.default_rng(1).normal(size=(num_heads, length, length))
    theirs = build_mpt_alibi_tensor(num_heads, length).double().numpy()  # (heads, 1, L)
    np.testing.assert_allclose(masked_softmax(logits + alibi_bias(alibi_slopes(num_heads), length)),
                               masked_softmax(logits + theirs), atol=1e-6)


def test_row_constant_form_equals_bloom_tensor():
    """alibi_bias_row_constant is BLOOM's +m*j tensor, shape (heads, 1, L)."""
    theirs = bloom_alibi(torch.ones(1, 50), 12, torch.float32).double().numpy()
    np.testing.assert_allclose(alibi_bias_row_constant(alibi_slopes(12), 50), theirs, rtol=1e-6)


def test_row_constant_differs_by_a_constant_per_row():
    """textbook - row-constant form is m*i in row i (masked entries aside)."""
    slopes, length = alibi_slopes(4), 9
    diff = alibi_bias(slopes, length) - alibi_bias_row_constant(slopes, length)
    lower = np.tril_indices(length)
    expected = -slopes[:, None] * lower[0][None, :]
    np.testing.assert_allclose(diff[:, lower[0], lower[1]], expected)


# ----------------------------------------------------------------------------- bias properties

@settings(max_examples=50, deadline=None)
@given(st.integers(1, 16), st.integers(1, 64), st.sampled_from(["causal", "symmetric"]))
def test_bias_zero_on_diagonal_and_nonpositive(num_heads, length, mode):
    """B_ii = 0 and B_ij <= 0 everywhere (masked entries are -inf)."""
    bias = alibi_bias(alibi_slopes(num_heads), length, mode)
    assert bias.shape == (num_heads, length, length)
    assert np.all(np.diagonal(bias, axis1=1, axis2=2) == 0)
    assert np.all(bias <= 0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.integers(1, 64))
def test_symmetric_bias_is_symmetric(num_heads, length):
    """Symmetric mode gives B = B^T for every head."""
    bias = alibi_bias(alibi_slopes(num_heads), length, "symmetric")
    np.testing.assert_array_equal(bias, bias.transpose(0, 2, 1))


def test_causal_bias_masks_future_keys():
    """Causal mode puts -inf exactly above the diagonal."""
    bias = alibi_bias(alibi_slopes(2), 5)
    assert np.array_equal(np.isinf(bias[0]), np.triu(np.ones((5, 5), bool), 1))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12), st.integers(1, 80), st.sampled_from(["causal", "symmetric"]), st.data())
def test_sampled_equals_full(num_heads, length, mode, data):
    """alibi_bias_sampled at random indices equals indexing the full matrix."""
    index = st.lists(st.integers(0, length - 1), min_size=1, max_size=10)
    rows, cols = np.array(data.draw(index)), np.array(data.draw(index))
    slopes = alibi_slopes(num_heads)
    full = alibi_bias(slopes, length, mode)
    np.testing.assert_array_equal(alibi_bias_sampled(slopes, rows, cols, mode),
                                  full[:, rows][:, :, cols])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 40), st.integers(0, 40),
       st.sampled_from(["causal", "symmetric"]))
def test_key_len_offsets_are_bottom_right_aligned(num_heads, seq_len, extra, mode):
    """With key_len > seq_len the queries are the last seq_len rows of the full matrix."""
    key_len = seq_len + extra
    slopes = alibi_slopes(num_heads)
    np.testing.assert_array_equal(alibi_bias(slopes, seq_len, mode, key_len=key_len),
                                  alibi_bias(slopes, key_len, mode)[:, extra:, :])


def test_sampled_costs_only_the_pixels_drawn():
    """A 65,536-token matrix sampled at 100 x 100 returns 100 x 100 per head."""
    rows = np.linspace(0, 65_535, 100).astype(int)
    bias = alibi_bias_sampled(alibi_slopes(128), rows, rows)
    assert bias.shape == (128, 100, 100)
    assert bias[0, -1, 0] == -alibi_slopes(128)[0] * 65_535


# ----------------------------------------------------------------------------- decay

def test_implied_attention_is_softmax_of_bias_row():
    """implied_attention equals softmax of the bias row, with zeros on future keys."""
    slopes = alibi_slopes(8)
    row = alibi_bias(slopes, 30)[:, 20, :]
    expected = np.exp(row - row.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(implied_attention(slopes, 20, seq_len=30), expected)
    assert np.all(implied_attention(slopes, 20, seq_len=30)[:, 21:] == 0)


def test_half_life_halves_the_weight():
    """At distance ln2/m the bias-only weight is half the weight of the query's own position."""
    slopes = alibi_slopes(8)
    np.testing.assert_allclose(np.exp(-slopes * half_life(slopes)), 0.5)
    np.testing.assert_allclose(half_life([0.5]), [2 * math.log(2)])


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
@pytest.mark.parametrize("context", [1, 7, 300, 5000])
def test_mean_distance_matches_brute_force(mode, context):
    """Closed-form mean distance equals the sum over the implied attention."""
    slopes = alibi_slopes(8)
    if mode == "causal":
        weights = implied_attention(slopes, context - 1)  # (H, context)
        distance = np.arange(context - 1, -1, -1)
    else:
        weights = implied_attention(slopes, context - 1, "symmetric", 2 * context - 1)
        distance = np.abs(np.arange(2 * context - 1) - (context - 1))
    np.testing.assert_allclose(mean_distance(slopes, mode, context), (weights * distance).sum(1),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
@pytest.mark.parametrize("context", [1, 10, 1000])
@pytest.mark.parametrize("mass", [0.5, 0.9])
def test_attention_span_matches_brute_force(mode, context, mass):
    """attention_span is the smallest distance whose cumulative bias-only attention reaches mass."""
    slopes = alibi_slopes(8)
    if mode == "causal":
        per_distance = implied_attention(slopes, context - 1)[:, ::-1]  # (H, D) by distance
    else:
        weights = implied_attention(slopes, context - 1, "symmetric", 2 * context - 1)
        per_distance = weights[:, context - 1:].copy()
        per_distance[:, 1:] *= 2
    expected = np.argmax(np.cumsum(per_distance, 1) >= mass - 1e-12, axis=1)
    np.testing.assert_array_equal(attention_span(slopes, mass, mode, context), expected)


def test_unbounded_mean_distance_is_one_over_expm1():
    """With unbounded causal context the mean distance is 1 / (e^m - 1)."""
    slopes = alibi_slopes(16)
    np.testing.assert_allclose(mean_distance(slopes), 1 / np.expm1(slopes))


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad", [0, -3, 1025, 2.5, "8", True, None])
def test_bad_num_heads_raises(bad):
    """num_heads outside [1, 1024] or not an int raises a clear AlibiVizError."""
    with pytest.raises(AlibiVizError, match="num_heads"):
        alibi_slopes(bad)


@pytest.mark.parametrize("bad", [0, -1, 2**20 + 1, 3.0, "64"])
def test_bad_seq_len_raises(bad):
    """seq_len outside [1, 1,048,576] or not an int raises a clear AlibiVizError."""
    with pytest.raises(AlibiVizError, match="seq_len"):
        alibi_bias(alibi_slopes(2), bad)


def test_bad_mode_and_schedule_raise():
    """Unknown modes and schedules are refused by name."""
    with pytest.raises(AlibiVizError, match="mode"):
        alibi_bias(alibi_slopes(2), 4, "bidirectional")
    with pytest.raises(AlibiVizError, match="schedule"):
        alibi_slopes(4, "bloom")


def test_key_len_shorter_than_seq_len_raises():
    """key_len < seq_len is refused."""
    with pytest.raises(AlibiVizError, match="key_len"):
        alibi_bias(alibi_slopes(2), 8, key_len=4)


def test_budget_refuses_huge_matrix_before_allocating():
    """A 128-head 65,536-token matrix (4 TiB) raises BudgetError instead of exhausting memory."""
    with pytest.raises(BudgetError, match="MiB"):
        alibi_bias(alibi_slopes(128), 65_536)


def test_budget_is_configurable():
    """A small explicit budget refuses a matrix the default allows."""
    with pytest.raises(BudgetError):
        alibi_bias(alibi_slopes(8), 100, budget_bytes=1000)


def test_implied_attention_map_rows_match_the_core_function():
    """Row i of the map is alibi.implied_attention for query i (keys 0..i)."""
    m = 0.3
    attention = implied_attention_map([m], 9)[0]
    for i in range(9):
        np.testing.assert_allclose(attention[i, :i + 1], implied_attention([m], i)[0], rtol=1e-6)
        assert not attention[i, i + 1:].any()


def test_bias_only_mean_distance_averages_the_closed_form_over_queries():
    """bias_only_mean_distance is the mean over queries 0..T-1 of mean_distance with i + 1 keys."""
    from alibi_viz.alibi import bias_only_mean_distance

    m, T = 0.1, 40
    expected = np.mean([mean_distance([m], "causal", i + 1)[0] for i in range(T)])
    assert bias_only_mean_distance([m], T)[0] == pytest.approx(expected, rel=1e-12)


def _brute_force_row(slopes, seq_len, mode, query):
    """softmax over an explicit bias row -m |i - j| (causal: j <= i), float64 (H, L)."""
    j = np.arange(seq_len)
    bias = -np.asarray(slopes)[:, None] * np.abs(query - j)[None, :]
    if mode == "causal":
        bias[:, j > query] = -np.inf
    p = np.exp(bias - bias.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
def test_query_decay_matches_brute_force_softmax(mode):
    """The span and mean distance of the default query (last when causal, middle when
    symmetric) equal a brute-force softmax over the explicit bias row."""
    from alibi_viz.alibi import default_query, query_decay

    slopes, L = alibi_slopes(8), 64
    q = default_query(L, mode)
    assert q == (63 if mode == "causal" else 31)
    p = _brute_force_row(slopes, L, mode, q)
    d = np.abs(q - np.arange(L))
    decay = query_decay(slopes, L, mode)
    np.testing.assert_allclose(decay["mean_distance"], (p * d).sum(axis=1), rtol=1e-9)
    for h in range(8):
        within = [p[h, d <= D].sum() for D in range(L)]
        assert decay["span90"][h] == next(D for D in range(L) if within[D] >= 0.9)


def test_symmetric_middle_query_numbers_of_the_issue():
    """8 heads, 64 tokens, symmetric: the gentlest head's middle query has a 90% span of 29
    and a mean distance of 15.7 (not the 56 and 30.4 of an impossible query)."""
    from alibi_viz.alibi import head_summary

    row = head_summary(alibi_slopes(8), 64, "symmetric")[-1]
    assert row["90% span (tokens)"] == 29 and round(row["mean distance"], 1) == 15.7


def test_last_query_mass_beyond_matches_brute_force():
    """m = 1/256, last of 1,024 queries: the share of bias-only attention more than 128 tokens
    back is about 60%, as an explicit softmax gives."""
    from alibi_viz.alibi import last_query_mass_beyond

    p = _brute_force_row([1 / 256], 1024, "causal", 1023)[0]
    expected = p[: 1023 - 128].sum()  # keys j with 1023 - j > 128
    value = last_query_mass_beyond([1 / 256], 1024, 128)[0]
    assert value == pytest.approx(expected, rel=1e-9) and round(value, 2) == 0.60


def test_official_rule_formula_on_the_page_matches_transformers():
    """The bias explorer's formula for n not a power of two (c = 2^floor(log2 n); m_h =
    2^(-8h/c) for h <= c, then 2^(-8(2k-1)/(2c)), k = 1..n-c) gives transformers' BLOOM slopes."""
    for n in range(1, 65):
        c = 2 ** int(np.floor(np.log2(n)))
        formula = [2.0 ** (-8 * h / c) for h in range(1, c + 1)]
        formula += [2.0 ** (-8 * (2 * k - 1) / (2 * c)) for k in range(1, n - c + 1)]
        reference = bloom_alibi(torch.ones(1, 2), n, torch.float64)[:, 0, 1].numpy()
        np.testing.assert_allclose(formula, reference, rtol=1e-6)


def test_recent_share_by_hand():
    """Three keys with equal content and m = ln 2 weigh 1/4, 1/2, 1: the nearest key gets 4/7,
    and without a bias each gets 1/3."""
    from alibi_viz.alibi import recent_share

    assert recent_share(np.zeros(3), np.log(2), 1) == pytest.approx(4 / 7)
    assert recent_share(np.zeros(3), 0.0, 1) == pytest.approx(1 / 3)


def test_first_slope_rise_of_transformers_schedules():
    """BLOOM's own slopes for 12 heads first rise at head 9 (index 8: 2^-0.5 after 2^-8); for
    8 heads they fall steadily."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    from alibi_viz.alibi import first_slope_rise

    def bloom_slopes(heads):
        return build_alibi_tensor(torch.ones(1, 2), heads, torch.float64)[:, 0, 1].numpy()

    assert first_slope_rise(bloom_slopes(12)) == 8
    assert first_slope_rise(bloom_slopes(8)) is None


@pytest.mark.parametrize("num_heads", [8, 12, 32])
@pytest.mark.parametrize("num_keys", [16, 128, 2048])
def test_content_to_win_half_takes_half_of_a_brute_force_softmax(num_heads, num_keys):
    """content_to_win_half against the softmax itself: a causal query over num_keys keys with
    bias -m k and content 0, but s at the key d back. With s the returned need that key gets
    half the attention (to 1e-9); 0.01 logits less, under half; 0.01 more, over half."""
    from alibi_viz.alibi import content_to_win_half

    slopes = alibi_slopes(num_heads)
    distances = np.unique(np.round(np.geomspace(1, num_keys - 1, 12))).astype(int)
    distances = np.concatenate([[0], distances])
    need = content_to_win_half(slopes, distances, num_keys)  # (H, D)
    k = np.arange(num_keys)
    for h, m in enumerate(slopes):
        for j, d in enumerate(distances):
            def weight(s, m=m, d=d):
                logits = -m * k + np.where(k == d, s, 0.0)
                p = np.exp(logits - logits.max())
                return p[d] / p.sum()
            assert weight(need[h, j]) == pytest.approx(0.5, abs=1e-9)
            assert weight(need[h, j] - 0.01) < 0.5 < weight(need[h, j] + 0.01)
