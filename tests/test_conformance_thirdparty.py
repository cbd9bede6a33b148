"""The conformance check on ALiBi that nobody here wrote: x-transformers and attn-gym, installed
from PyPI, built locally with their own code (no weights involved: the check sets q = 0).

What their sources do, worked out by hand (x-transformers 2.31.10, attn-gym 0.0.17):

* x-transformers, x_transformers/x_transformers.py, `AlibiPositionalBias`: `_get_slopes(heads)`
  is fairseq's official rule (2^(-8h/n) for n a power of two; otherwise the closest power of
  two's slopes, then every other slope of twice that count); `forward(i, j)` returns
  -|j' - i'| times the slopes for the last i of j positions (symmetric: -m |i - j|), and pads
  zero heads up to `total_heads` (`alibi_num_heads` < heads: ALiBi on the first heads only);
  `slopes=` replaces the schedule. Its causal mask is x_transformers/attend.py's
  `Attend(causal=True)`: `create_causal_mask(i, j)`, keys after the query filled with
  -finfo.max; one query (decoding) turns it off, all cached keys being before it.
* attn-gym, attn_gym/mods/alibi.py, `generate_alibi_bias(H)`: a FlexAttention score_mod adding
  (kv_idx - q_idx) 2^(-8 (h + 1) / H): the paper's geometric formula (the official rule only for
  H a power of two), and no mask: the causal mask is a block_mask of torch's flex_attention
  (mask_mod q_idx >= kv_idx); without it the keys after the query get +m (j - i) > 0. Decoding
  one query, q_idx is 0, so the bias is +m j: a row constant away from -m (i - j).

The truth of every test is computed from the library's own attention (x-transformers' Attend
returns its post-softmax attention; FlexAttention's is read through v = the identity): its
total variation from exact ALiBi, softmax(-m |i - j|), and its attention on keys after the
query; never from the check's output."""

import warnings

import attn_gym.mods.alibi as alibi_mods  # dev dependencies: missing, this module fails loudly
import numpy as np
import pytest
import torch
import torch.nn.attention.flex_attention as flex
import x_transformers.attend as attend_module
import x_transformers.x_transformers as x_transformers
from alibi_truth import exact_attention, future_mass, worst_tv

import alibi_viz
from alibi_viz.alibi import alibi_slopes

HEAD_COUNTS = [8, 12, 16, 32, 40]
DTYPES = [torch.float32, torch.bfloat16]
# How far a correct implementation's rows may be from exact ALiBi: float32 rounding, and
# bfloat16's for slopes and probabilities held in 8 bits of mantissa over a short probe.
TRUTH_TOL = {torch.float32: 1e-5, torch.bfloat16: 0.02}
T = 32  # probe length: every slope of 8-40 heads is read to well within its tolerance


@pytest.fixture(autouse=True)
def _quiet_flex():
    """FlexAttention warns on every eager (uncompiled) call; the check makes many."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile")
        yield


# ----------------------------------------------------------------------------- the libraries

def x_alibi(heads, dtype=torch.float32, *, alibi_heads=None, causal=True, slopes=None):
    """x-transformers' attention with ALiBi, as its Attention module runs it: fn(q, k, v) ->
    (out, post-softmax attention). The bias module is cast with the model (`.to(dtype)`)."""
    rel = x_transformers.AlibiPositionalBias(alibi_heads or heads, total_heads=heads,
                                             slopes=slopes).to(dtype)
    attend = attend_module.Attend(causal=causal)

    def fn(q, k, v):
        out, inter = attend(q, k, v, attn_bias=rel(q.shape[-2], k.shape[-2]))
        return out, inter.post_softmax_attn
    return fn


def output(fn):
    """The kernel check's callable: the attention output alone."""
    return lambda q, k, v: fn(q, k, v)[0]


def gym_alibi(heads, *, mask=True):
    """attn-gym's ALiBi score_mod in torch's flex_attention, with the causal block_mask (or
    none: mask=False); one query (decoding) needs no mask, all its keys being cached."""
    score_mod = alibi_mods.generate_alibi_bias(heads)

    def fn(q, k, v):
        Q, K = q.shape[-2], k.shape[-2]
        block_mask = None
        if mask and Q > 1:
            block_mask = flex.create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, Q, K,
                                                device=q.device)
        return flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    return fn


# ----------------------------------------------------------------------------- the truth

def x_attention(fn, heads, dtype=torch.float32, decode=False):
    """x-transformers' own attention probabilities (heads, T, T) on q = k = 0, float64: its
    Attend's post-softmax attention, for the whole prefill or one decode row at a time."""
    if not decode:
        q = torch.zeros(1, heads, T, 4, dtype=dtype)
        return fn(q, q, q)[1][0].double()
    rows = torch.zeros(heads, T, T, dtype=torch.float64)
    for t in range(T):
        q, k = torch.zeros(1, heads, 1, 4, dtype=dtype), torch.zeros(1, heads, t + 1, 4,
                                                                     dtype=dtype)
        rows[:, t, : t + 1] = fn(q, k, k)[1][0, :, 0].double()
    return rows


def flex_attention_probs(fn, heads, dtype=torch.float32, decode=False):
    """FlexAttention's own probabilities (heads, T, T): its output on q = k = 0 and v = the
    identity (head_dim T) is the attention itself; decoding, one row per call."""
    if not decode:
        q = torch.zeros(1, heads, T, T, dtype=dtype)
        return fn(q, q, torch.eye(T, dtype=dtype).expand(1, heads, T, T).contiguous())[0].double()
    rows = torch.zeros(heads, T, T, dtype=torch.float64)
    for t in range(T):
        q, k = torch.zeros(1, heads, 1, T, dtype=dtype), torch.zeros(1, heads, t + 1, T,
                                                                     dtype=dtype)
        v = torch.eye(T, dtype=dtype)[: t + 1].expand(1, heads, t + 1, T).contiguous()
        rows[:, t] = fn(q, k, v)[0, :, 0].double()
    return rows


def geometric(heads):
    """attn-gym's slopes, 2^(-8 (h + 1) / H) for h = 0..H-1, as its score_mod computes them."""
    return np.array([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])


# ----------------------------------------------------------------------------- correct forms

@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("heads", HEAD_COUNTS)
def test_x_transformers_alibi_conforms_in_prefill_and_decode(heads, dtype):
    """x-transformers' AlibiPositionalBias under its causal Attend, prefill and decode: its
    rows are exact ALiBi with the official slopes to the dtype's rounding and put nothing on
    future keys (truth: Attend's own attention), and the check says it conforms, both ways."""
    fn = x_alibi(heads, dtype)
    for decode in (False, True):
        probs = x_attention(fn, heads, dtype, decode)
        assert worst_tv(probs, exact_attention(alibi_slopes(heads), T)) < TRUTH_TOL[dtype]
        assert future_mass(probs) == 0
        check = alibi_viz.check_kernel(output(fn), heads, 16, seq_len=T, dtype=dtype,
                                       decode=decode)
        assert check.ok, (decode, check.problems())


@pytest.mark.parametrize("heads,dtype,decode", [
    (8, torch.float32, False), (12, torch.bfloat16, False), (16, torch.float32, False),
    (32, torch.bfloat16, False), (40, torch.float32, False), (8, torch.bfloat16, True),
    (40, torch.float32, True)], ids=str)
def test_attn_gym_alibi_conforms_to_its_geometric_formula(heads, dtype, decode):
    """attn-gym's score_mod with the causal block_mask (decoding: +m j on the cache): its rows
    are exact ALiBi with the geometric slopes (truth: FlexAttention's own attention), and the
    check, told expected="geometric", says it conforms, prefill and decode."""
    fn = gym_alibi(heads)
    probs = flex_attention_probs(fn, heads, dtype, decode)
    assert worst_tv(probs, exact_attention(geometric(heads), T)) < TRUTH_TOL[dtype]
    assert future_mass(probs) == 0
    check = alibi_viz.check_kernel(fn, heads, 16, seq_len=T, dtype=dtype, decode=decode,
                                   expected="geometric")
    assert check.ok, check.problems()


# ----------------------------------------------------------------------------- their options

@pytest.mark.parametrize("heads", [8, 12])
def test_x_transformers_without_causal_mask_is_named(heads):
    """Attend(causal=False) with ALiBi's symmetric -m |i - j|: the first rows put most of
    their attention on future keys (truth), so the causal check says "unmasked" and names
    the mask; checked as what it is, mode="symmetric", it is exact bidirectional ALiBi."""
    fn = x_alibi(heads, causal=False)
    probs = x_attention(fn, heads)
    assert future_mass(probs) > 0.4
    assert worst_tv(probs, exact_attention(alibi_slopes(heads), T, "symmetric")) < 1e-5
    check = alibi_viz.check_kernel(output(fn), heads, 16, seq_len=T)
    assert check.verdict == "unmasked" and "causal mask is missing" in check.problems()[0]
    assert alibi_viz.check_kernel(output(fn), heads, 16, seq_len=T, mode="symmetric").ok


@pytest.mark.parametrize("heads", [8, 12])
def test_attn_gym_without_mask_mod_is_named(heads):
    """attn-gym's score_mod without a block_mask: keys after the query get +m (j - i) and take
    most of the first rows' attention (truth); the check says "unmasked", naming the mask."""
    fn = gym_alibi(heads, mask=False)
    assert future_mass(flex_attention_probs(fn, heads)) > 0.4
    check = alibi_viz.check_kernel(fn, heads, 16, seq_len=T, expected="geometric")
    assert check.verdict == "unmasked" and "causal mask is missing" in check.problems()[0]


@pytest.mark.parametrize("heads,alibi_heads", [(8, 4), (12, 6), (16, 4)])
def test_x_transformers_alibi_on_some_heads_is_one_explanation(heads, alibi_heads):
    """alibi_num_heads=k: heads 1..k apply the k-head schedule, the others no bias (truth:
    their rows are exact ALiBi with those slopes, zeros included: uniform over past keys). The
    check names it as one explanation; told to expect exactly that, it conforms (a head
    expected to add no bias is judged against an absolute tolerance)."""
    fn = x_alibi(heads, alibi_heads=alibi_heads)
    applied = np.concatenate([alibi_slopes(alibi_heads), np.zeros(heads - alibi_heads)])
    probs = x_attention(fn, heads)
    assert worst_tv(probs, exact_attention(applied, T)) < 1e-5
    assert worst_tv(probs, exact_attention(alibi_slopes(heads), T)) > 0.1
    check = alibi_viz.check_kernel(output(fn), heads, 16, seq_len=T)
    assert len(check.diagnosis) == 1 and check.diagnosis[0].evidence["alibi_heads"] == \
        alibi_heads, check.problems()
    assert check.problems()[0].startswith(
        f"Heads 1-{alibi_heads} apply the {alibi_heads}-head schedule and heads "
        f"{alibi_heads + 1}-{heads} no positional bias")
    told = alibi_viz.check_kernel(output(fn), heads, 16, seq_len=T, expected=applied)
    assert told.ok, told.problems()


def test_x_transformers_max_bias_is_named_before_its_coincidence():
    """slopes= the official schedule with max_bias 4 at 8 heads, which are also the first 8
    slopes of the 16-head schedule (truth: exact ALiBi with those slopes): the check names
    max_bias, which an argument sets, and then the coincidence."""
    slopes = alibi_slopes(8, "official", 4.0)
    np.testing.assert_allclose(slopes, alibi_slopes(16)[:8])
    fn = x_alibi(8, slopes=list(slopes))
    assert worst_tv(x_attention(fn, 8), exact_attention(slopes, T)) < 1e-5
    check = alibi_viz.check_kernel(output(fn), 8, 16, seq_len=T)
    evidence, text = check.diagnosis[0].evidence, check.problems()[0]
    assert evidence["max_bias"] == 4 and evidence["same_as_num_heads"] == 16
    assert text.index("max_bias 4") < text.index("16-head schedule")


@pytest.mark.parametrize("heads", [12, 40])
def test_attn_gym_geometric_formula_is_named_against_the_official_rule(heads):
    """At 12 and 40 heads attn-gym's 2^(-8 (h + 1) / H) is not the official rule (truth: its
    rows are exact geometric ALiBi and far from the official slopes'): checked against the
    default expectation, the check names the paper's geometric formula, in prefill and in
    its decode path (+m j on the cache)."""
    fn = gym_alibi(heads)
    probs = flex_attention_probs(fn, heads)
    assert worst_tv(probs, exact_attention(geometric(heads), T)) < 1e-5
    assert worst_tv(probs, exact_attention(alibi_slopes(heads), T)) > 0.05
    for decode in (False, True):
        check = alibi_viz.check_kernel(fn, heads, 16, seq_len=16 if decode else T,
                                       decode=decode)
        assert check.verdict == "schedule" and check.diagnosis[0].evidence["schedule"] == \
            "geometric", (decode, check.problems())
