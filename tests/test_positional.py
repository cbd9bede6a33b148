"""Tests for alibi_viz.positional: other positional schemes as functions of distance.

Where a reference implementation exists (transformers' T5 buckets and bias, Llama's rotary
embedding) the tests compare against it; the closed forms are checked against independent,
direct constructions (embeddings built position by position, brute-force complex sums).
"""

import cmath
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig, T5Config
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.t5.modeling_t5 import T5Attention

from alibi_viz import positional as P
from alibi_viz.alibi import alibi_bias
from alibi_viz.errors import AlibiVizError, BudgetError

torch.set_num_threads(1)

T5_SETTINGS = [(32, 128), (64, 256), (8, 20), (33, 77)]  # (num_buckets, max_distance)


# ----------------------------------------------------------------------------- T5

@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), T5_SETTINGS)
def test_t5_bucket_matches_transformers(bidirectional, num_buckets, max_distance):
    """t5_bucket equals T5Attention._relative_position_bucket for every distance in -1000..1000."""
    rel = np.arange(-1000, 1001)
    expected = T5Attention._relative_position_bucket(
        torch.from_numpy(rel), bidirectional=bidirectional, num_buckets=num_buckets,
        max_distance=max_distance).numpy()
    ours = P.t5_bucket(rel, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(ours, expected)


def _t5_attention(is_decoder: bool, num_heads: int, num_buckets: int = 8,
                  max_distance: int = 20) -> T5Attention:
    config = T5Config(d_model=8, d_kv=4, num_heads=num_heads, is_decoder=is_decoder,
                      relative_attention_num_buckets=num_buckets,
                      relative_attention_max_distance=max_distance)
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_bias_matches_t5_compute_bias(is_decoder):
    """t5_bias with T5's learned table equals T5Attention.compute_bias (encoder and decoder)."""
    torch.manual_seed(0)
    attn = _t5_attention(is_decoder, num_heads=3)
    with torch.no_grad():
        expected = attn.compute_bias(30, 30)[0].numpy()  # (H, q, k)
    table = attn.relative_attention_bias.weight.detach().numpy().T  # (H, num_buckets)
    rel = np.arange(30)[None, :] - np.arange(30)[:, None]  # key - query
    ours = P.t5_bias(rel, table, bidirectional=not is_decoder, max_distance=20)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


@pytest.mark.parametrize(("mode", "is_decoder"), [("symmetric", False), ("causal", True)])
def test_t5_score_matrix_matches_t5_with_illustrative_values(mode, is_decoder):
    """score_matrix("t5") equals T5's compute_bias loaded with the illustrative table (masked)."""
    attn = _t5_attention(is_decoder, num_heads=1)
    values = P.t5_illustrative_values(8, 20, bidirectional=not is_decoder, slope=0.25)
    with torch.no_grad():
        attn.relative_attention_bias.weight[:, 0] = torch.from_numpy(values)
        expected = attn.compute_bias(40, 40)[0, 0].double().numpy()
    if mode == "causal":
        expected[np.triu_indices(40, 1)] = -np.inf
    ours = P.score_matrix("t5", 40, mode, num_buckets=8, max_distance=20, slope=0.25)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


def test_t5_illustrative_curve_is_flat_beyond_max_distance():
    """The illustrative T5 score is the same for every distance at or beyond max_distance."""
    scores = P.score_vs_distance("t5", np.arange(128, 5000), "causal", max_distance=128)
    assert np.all(scores == scores[0])


def test_t5_illustrative_curve_follows_alibi_in_exact_buckets():
    """Below max_exact each distance has its own bucket, valued -slope * distance."""
    d = np.arange(16)  # causal, 32 buckets: max_exact = 16
    scores = P.score_vs_distance("t5", d, "causal", slope=0.125)
    np.testing.assert_allclose(scores, -0.125 * d)


# ----------------------------------------------------------------------------- sinusoidal

def _sinusoidal_embeddings(positions, d_model, base=10000.0):
    """Vaswani et al.'s table built directly (the annotated-transformer recipe), (P, d_model)."""
    pos = torch.tensor(positions, dtype=torch.float64)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64)
                         * -(math.log(base) / d_model))
    pe = torch.zeros(len(positions), d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div_term)
    pe[:, 1::2] = torch.cos(pos * div_term)
    return pe.numpy()


@pytest.mark.parametrize("d_model", [2, 16, 512])
def test_sinusoidal_dot_equals_embedding_dot_product(d_model):
    """sinusoidal_dot(k) equals PE(p) . PE(p + k) of embeddings built directly, for any p."""
    for p in (0, 7, 1234):
        ks = np.array([0, 1, 2, 5, 50, 999])
        pe = _sinusoidal_embeddings([p, *(p + ks)], d_model)
        expected = pe[1:] @ pe[0]
        np.testing.assert_allclose(P.sinusoidal_dot(ks, d_model, normalize=False), expected,
                                   rtol=1e-9, atol=1e-9)


def test_sinusoidal_dot_normalized_is_one_at_zero_and_bounded():
    """Normalised, the dot product is 1 at distance 0 and within [-1, 1] everywhere."""
    values = P.sinusoidal_dot(np.arange(-3000, 3000), d_model=64)
    assert values[3000] == pytest.approx(1.0)
    assert np.all(np.abs(values) <= 1 + 1e-12)


def test_sinusoidal_dot_decreases_over_first_half_period():
    """Each cos(k w_i) falls while k w_i <= pi, so the sum falls for k in [0, pi / max w_i]."""
    values = P.sinusoidal_dot(np.arange(0, 4), d_model=128)  # max w_i = 1: k <= pi
    assert np.all(np.diff(values) < 0)


# ----------------------------------------------------------------------------- RoPE

def _rope_bound_brute_force(r, head_dim, base=10000.0):
    half = head_dim // 2
    theta = [base ** (-2 * k / head_dim) for k in range(half)]
    sums = [abs(sum(cmath.exp(1j * r * theta[k]) for k in range(j))) for j in range(1, half + 1)]
    return sum(sums) / half


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_rope_bound_matches_brute_force(head_dim):
    """rope_decay_bound equals (1/(D/2)) sum_j |S_j| summed term by term in complex arithmetic."""
    rs = [0, 1, 3, 17, 250, 4096]
    expected = [_rope_bound_brute_force(r, head_dim) for r in rs]
    np.testing.assert_allclose(P.rope_decay_bound(rs, head_dim), expected, rtol=1e-10)


def test_rope_bound_at_zero():
    """At r = 0 the bound is (D/2 + 1)/2, and 1 when normalised."""
    assert P.rope_decay_bound([0], 128)[0] == pytest.approx(32.5)
    assert P.rope_decay_bound([0], 128, normalize=True)[0] == pytest.approx(1.0)


def test_rope_bound_decays_on_average():
    """The bound's average over successive distance windows shrinks as distance grows."""
    bound = P.rope_decay_bound(np.arange(4096), 128, normalize=True)
    window_means = [bound[a:b].mean() for a, b in [(0, 16), (16, 64), (64, 256), (256, 1024),
                                                   (1024, 4096)]]
    assert np.all(np.diff(window_means) < 0)


def _llama_rotary(head_dim, positions, base=10000.0):
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    rotary = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, len(positions), head_dim)
    return rotary(x, torch.tensor([positions]))  # cos, sin: (1, P, head_dim)


def test_rope_bound_bounds_real_rope_scores():
    """|q_m . k_n| after Llama's rotary embedding never exceeds the bound times max|h_{k+1} - h_k|."""
    head_dim, half = 16, 8
    positions = [0, 1, 5, 40, 300]
    cos, sin = _llama_rotary(head_dim, positions)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        q = torch.randn(1, 1, 1, head_dim, generator=gen).expand(1, 1, len(positions), head_dim)
        k = torch.randn(1, 1, 1, head_dim, generator=gen).expand(1, 1, len(positions), head_dim)
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
        scores = (q_rot[0, 0] @ k_rot[0, 0].T).double().numpy()  # (P, P)
        # rotate_half pairs dims (k, k + D/2): h_k = q_k conj(k_k) as complex numbers, h_{D/2} = 0
        qc = q[0, 0, 0, :half].double() + 1j * q[0, 0, 0, half:].double()
        kc = k[0, 0, 0, :half].double() + 1j * k[0, 0, 0, half:].double()
        h = np.append((qc * kc.conj()).numpy(), 0)
        lipschitz = np.max(np.abs(np.diff(h)))
        dist = np.subtract.outer(positions, positions)
        bound = lipschitz * half * P.rope_decay_bound(dist, head_dim)
        assert np.all(np.abs(scores) <= bound + 1e-4)


def test_rope_mean_cos_equals_llama_cosine_of_all_ones():
    """rope_mean_cos(r) equals the cosine of Llama-rotated all-ones q and k, r positions apart."""
    head_dim = 32
    positions = [0, 1, 2, 9, 100, 777]
    cos, sin = _llama_rotary(head_dim, positions)
    ones = torch.ones(1, 1, len(positions), head_dim)
    q_rot, k_rot = apply_rotary_pos_emb(ones, ones, cos, sin)
    cosine = (q_rot[0, 0] @ k_rot[0, 0].T).double().numpy() / head_dim  # |q| |k| = head_dim
    dist = np.subtract.outer(positions, positions)
    np.testing.assert_allclose(P.rope_mean_cos(dist, head_dim), cosine, atol=1e-4)


# ----------------------------------------------------------------------------- KERPLE

@settings(max_examples=40, deadline=None)
@given(r1=st.floats(0.01, 10), r2=st.floats(0.01, 10), power_r2=st.floats(0.01, 2.0))
def test_kerple_zero_at_zero_and_strictly_decreasing(r1, r2, power_r2):
    """Both KERPLE variants are 0 at distance 0 and strictly decrease with |d| (r1, r2 > 0)."""
    d = np.arange(0, 200)
    for values in (P.kerple_log(d, r1, r2), P.kerple_power(d, r1, power_r2)):
        assert values[0] == 0
        assert np.all(np.diff(values) < 0)


def test_kerple_is_even_in_distance():
    """KERPLE depends on |i - j| only."""
    d = np.arange(1, 100)
    np.testing.assert_array_equal(P.kerple_log(-d, 2.0, 0.5), P.kerple_log(d, 2.0, 0.5))
    np.testing.assert_array_equal(P.kerple_power(-d, 2.0, 0.5), P.kerple_power(d, 2.0, 0.5))


def test_kerple_power_with_exponent_one_is_alibi():
    """KERPLE power with r2 = 1 gives ALiBi's causal matrix with slope r1."""
    expected = alibi_bias([0.25], 64, "causal")[0]
    ours = P.score_matrix("kerple_power", 64, "causal", r1=0.25, r2=1.0)
    np.testing.assert_allclose(ours, expected)


# ----------------------------------------------------------------------------- Sandwich

@pytest.mark.parametrize("d_prime", [2, 16, 128])
def test_sandwich_equals_shifted_embedding_inner_product(d_prime):
    """sandwich_bias(m - n) equals p_m . p_n - d'/2 with p built from frequencies k = 1..d'/2."""
    k = np.arange(1, d_prime // 2 + 1)
    freqs = 1.0 / 10000 ** (2 * k / d_prime)

    def embed(p):
        return np.concatenate([np.sin(p * freqs), np.cos(p * freqs)])

    for m, n in [(0, 0), (5, 3), (3, 5), (1000, 1), (70000, 123)]:
        expected = embed(m) @ embed(n) - d_prime / 2
        assert P.sandwich_bias([m - n], d_prime)[0] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("d_prime", [2, 16, 128, 1024])
def test_sandwich_zero_at_zero_and_non_positive(d_prime):
    """Sandwich is 0 on the diagonal and <= 0 at every distance."""
    values = P.sandwich_bias(np.arange(-5000, 5001), d_prime, scale=8.0)
    assert values[5000] == 0
    assert np.all(values <= 0)


@pytest.mark.parametrize("d_prime", [16, 128, 1024])
def test_sandwich_decreases_over_first_half_period(d_prime):
    """Sandwich falls on [0, pi / w_max], where every cos(d w_k) is still falling."""
    w_max = 10000 ** (-2 / d_prime)
    d = np.arange(0, int(math.pi / w_max) + 1)
    assert np.all(np.diff(P.sandwich_bias(d, d_prime)) < 0)


# ----------------------------------------------------------------------------- entry points

def test_alibi_score_vs_distance_matches_alibi_bias():
    """The "alibi" method's causal curve is the last row of alibi_bias, read right to left."""
    expected = alibi_bias([0.125], 50, "causal")[0, -1, ::-1]  # distances 0..49
    np.testing.assert_array_equal(P.score_vs_distance("alibi", np.arange(50), slope=0.125),
                                  expected)


@pytest.mark.parametrize("method", list(P.METHODS))
def test_causal_masks_future_keys(method):
    """Causal mode gives -inf exactly for keys after the query (d < 0), finite values elsewhere."""
    d = np.arange(-20, 21)
    values = P.score_vs_distance(method, d, "causal")
    assert np.all(np.isneginf(values[d < 0]))
    assert np.all(np.isfinite(values[d >= 0]))


@pytest.mark.parametrize("method", list(P.METHODS))
def test_symmetric_matrix_is_symmetric(method):
    """In symmetric mode every method's score matrix equals its transpose."""
    matrix = P.score_matrix(method, 60, "symmetric")
    np.testing.assert_array_equal(matrix, matrix.T)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), method=st.sampled_from(list(P.METHODS)),
       mode=st.sampled_from(["causal", "symmetric"]), seq_len=st.integers(1, 48))
def test_sampled_equals_full_matrix(data, method, mode, seq_len):
    """score_matrix_sampled on any row/column index sets equals slicing score_matrix."""
    index = st.lists(st.integers(0, seq_len - 1), min_size=1, max_size=12)
    rows, cols = data.draw(index), data.draw(index)
    full = P.score_matrix(method, seq_len, mode)
    sampled = P.score_matrix_sampled(method, rows, cols, mode)
    np.testing.assert_array_equal(sampled, full[np.ix_(rows, cols)])


@pytest.mark.parametrize("method", list(P.METHODS))
def test_methods_table_defaults_are_valid(method):
    """Each method's listed defaults lie in its listed ranges and pass check_params unchanged."""
    spec = P.METHODS[method]
    assert P.check_params(method) == spec.defaults()
    for p in spec.params:
        if p.kind != "bool":
            assert p.low <= p.default <= p.high


@pytest.mark.parametrize(("call", "message"), [
    (lambda: P.score_vs_distance("nope", [1]), "Unknown method"),
    (lambda: P.score_vs_distance("alibi", [1], slope_typo=1.0), "no parameter"),
    (lambda: P.score_vs_distance("alibi", [1], slope=2.0), "slope"),
    (lambda: P.score_vs_distance("kerple_power", [1], r2=2.5), "r2"),
    (lambda: P.score_vs_distance("sinusoidal", [1], d_model=63), "multiple of 2"),
    (lambda: P.score_vs_distance("sinusoidal", [1], normalize="yes"), "True or False"),
    (lambda: P.score_vs_distance("t5", [1], num_buckets=32, max_distance=8), "max_distance"),
    (lambda: P.score_vs_distance("alibi", [1.5]), "whole numbers"),
    (lambda: P.score_vs_distance("alibi", [2**21]), "distances"),
    (lambda: P.score_vs_distance("alibi", [1], mode="both"), "mode"),
    (lambda: P.score_matrix_sampled("alibi", [-1], [0]), "rows"),
    (lambda: P.score_matrix_sampled("alibi", [0], []), "cols"),
    (lambda: P.score_matrix("alibi", 0), "seq_len"),
    (lambda: P.t5_bucket([1], num_buckets=2, bidirectional=True), "num_buckets"),
    (lambda: P.t5_bias([1], np.zeros((2, 2, 2))), "bucket_values"),
    (lambda: P.kerple_log([1], r1=0.0), "r1"),
    (lambda: P.rope_decay_bound([1], head_dim=7), "even"),
])
def test_bad_input_raises_alibi_viz_error(call, message):
    """Bad input raises AlibiVizError whose message names what is wrong."""
    with pytest.raises(AlibiVizError, match=message):
        call()


def test_score_matrix_over_budget_raises_budget_error():
    """A full matrix above the memory budget is refused before anything is allocated."""
    with pytest.raises(BudgetError):
        P.score_matrix("alibi", 65536, "causal")


def test_sandwich_falls_logarithmically_to_ten_thousand_tokens():
    """What the Compare page says of Sandwich (d' = 128, scale 1): from 10 to 10^4 tokens each
    decade lowers the bias by 11 to 20 logits (roughly logarithmic, not levelled off), and
    beyond that it stays within a few logits of -d'/2 = -64. Checked on the direct sum of
    cosines written out here."""
    def direct(d):
        k = np.arange(1, 65)
        return np.cos(d / 10000.0 ** (2 * k / 128)).sum() - 64

    values = [direct(10.0 ** e) for e in range(1, 5)]
    drops = -np.diff(values)
    assert np.all((drops >= 10.5) & (drops <= 20.5))
    np.testing.assert_allclose(P.sandwich_bias([10, 100, 1000, 10000], 128, 1.0), values)
    assert abs(direct(1e5) + 64) < 5
