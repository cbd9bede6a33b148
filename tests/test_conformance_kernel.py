"""check_kernel and check_bias: the conformance check without a Hugging Face model, on small
hand-written kernels (correct, and with the bugs ports have) and bias tensors built by
`alibi_bias`; and the error a plain nn.Module port gets."""

import math
import warnings

import numpy as np
import pytest
import torch
from alibi_truth import exact_attention, future_mass, worst_tv

import alibi_viz
from alibi_viz.alibi import alibi_bias, alibi_bias_row_constant, alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.conformance import check_alibi


def kernel(slopes, bug=None):
    """A small ALiBi attention kernel (batch, heads, T, head_dim), on torch's sdpa."""
    m = torch.tensor(slopes, dtype=torch.float32)

    def attention(q, k, v):
        T, d = q.shape[-2], q.shape[-1]
        i = torch.arange(T)
        distance = (i[:, None] - i[None, :]).float()  # i - j
        bias = -m[:, None, None] * distance  # (H, T, T)
        if bug == "sqrt_d":
            bias = bias / math.sqrt(d)
        if bug == "reversed":
            bias = bias.flip(0)
        bias = bias.masked_fill(distance < 0, -math.inf).to(q.dtype)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return attention


def test_correct_kernel_conforms():
    """An sdpa kernel adding -m (i - j) with the official slopes: every head conforms."""
    check = alibi_viz.check_kernel(kernel(alibi_slopes(12)), num_heads=12, head_dim=16)
    assert check.ok, check.problems()
    np.testing.assert_allclose(check.measured()[0], alibi_slopes(12), rtol=1e-4)


def test_kernel_dividing_by_sqrt_d_is_named():
    """The bias divided by sqrt(head_dim) inside the kernel: scaled, 1/sqrt(d), named."""
    check = alibi_viz.check_kernel(kernel(alibi_slopes(8), "sqrt_d"), 8, 16, seq_len=64)
    assert check.verdict == "scaled"
    assert check.diagnosis[0].evidence["factor_name"] == "inv_sqrt_d", check.problems()


def test_kernel_in_bfloat16_and_flash_layout():
    """A (batch, seq, heads, head_dim) kernel in bfloat16 with the slopes reversed: named."""
    inner = kernel(alibi_slopes(16), "reversed")

    def flash_layout(q, k, v):  # FlashAttention's layout
        return inner(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)

    check = alibi_viz.check_kernel(flash_layout, 16, 32, layout="bshd", dtype=torch.bfloat16)
    assert check.verdict == "permuted" and check.diagnosis[0].evidence["order"] == "reversed"


def test_kernel_returning_scores():
    """A kernel that returns its pre-softmax scores is read directly."""
    m = torch.tensor(alibi_slopes(8, "geometric"), dtype=torch.float32)

    def scores(q, k, v):
        T = q.shape[-2]
        j = torch.arange(T).float()
        return q @ k.transpose(-1, -2) + (m[:, None, None] * j)[None]  # row-constant +m j

    check = alibi_viz.check_kernel(scores, 8, 4, returns="scores")
    assert check.ok, check.problems()  # geometric == official for a power of two
    twelve = alibi_viz.check_kernel(lambda q, k, v: scores(q, k, v), 8, 4, returns="scores",
                                    expected=alibi_slopes(8) * 2)
    assert twelve.verdict == "scaled"


def test_kernel_errors_are_typed():
    """A wrong output shape or a non-callable: AlibiVizError saying what was expected."""
    with pytest.raises(AlibiVizError, match="should be"):
        alibi_viz.check_kernel(lambda q, k, v: q[..., :2], 4, 8)
    with pytest.raises(AlibiVizError, match="callable"):
        alibi_viz.check_kernel("sdpa", 4, 8)


def test_check_bias_reads_any_row_constant_form():
    """The textbook -m (i - j) and BLOOM's +m j give the same verdict; geometric slopes at
    12 heads are named as the paper's formula; a read-only array is read without a warning; a
    2-D array is a typed error."""
    m = alibi_slopes(12)
    assert alibi_viz.check_bias(alibi_bias(m, 48)).ok
    row = np.broadcast_to(alibi_bias_row_constant(m, 48), (12, 48, 48))  # a read-only view
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's warning on a read-only array, once printed
        assert alibi_viz.check_bias(row).ok
    geometric = alibi_viz.check_bias(alibi_bias(alibi_slopes(12, "geometric"), 48))
    assert geometric.verdict == "schedule"
    assert geometric.diagnosis[0].evidence["schedule"] == "geometric"
    with pytest.raises(AlibiVizError, match="heads, queries, keys"):
        alibi_viz.check_bias(np.zeros((4, 4)))


def test_plain_module_port_gets_what_a_port_needs():
    """A plain nn.Module: AlibiVizError saying what check_alibi needs (not AttributeError)."""
    with pytest.raises(AlibiVizError, match="needs a transformers-style causal LM.*no .config"):
        check_alibi(torch.nn.Linear(4, 4), decode=False)


# ----------------------------------------------------------------------------- every query row
# The truth of each test below is computed from the attention itself (the kernel's own
# probabilities, or softmax of the bias in float64), never from the check's output.

def kernel_attention(fn, heads, T, dtype=torch.float32):
    """The kernel's own attention (heads, T, T) in float64: fn on q = k = 0 and v = the identity
    (head_dim T), so that out[i] = the probabilities of row i."""
    q = torch.zeros(1, heads, T, T, dtype=dtype)
    v = torch.eye(T, dtype=dtype).expand(1, heads, T, T).contiguous()
    return fn(q, q, v)[0].double()


def decode_attention(fn, heads, T, dtype=torch.float32):
    """The decode kernel's own attention rows (heads, T, T): one call per query position t, on
    q = 0 (one query), a cache of t + 1 zero keys, and v = the identity's first t + 1 rows."""
    rows = torch.zeros(heads, T, T, dtype=torch.float64)
    for t in range(T):
        q = torch.zeros(1, heads, 1, T, dtype=dtype)
        k = torch.zeros(1, heads, t + 1, T, dtype=dtype)
        v = torch.eye(T, dtype=dtype)[: t + 1].expand(1, heads, t + 1, T).contiguous()
        rows[:, t] = fn(q, k, v)[0, :, 0].double()
    return rows


def unmasked_kernel(slopes):
    """sdpa with the symmetric bias -m |i - j| and no causal mask: what a library's attention
    called with causal=False computes."""
    m = torch.tensor(slopes, dtype=torch.float32)

    def attention(q, k, v):
        i = torch.arange(q.shape[-2])
        bias = -m[:, None, None] * (i[:, None] - i[None, :]).abs().float()
        return torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                attn_mask=bias.to(q.dtype))
    return attention


@pytest.mark.parametrize("heads", [8, 12])
def test_kernel_without_causal_mask_does_not_conform(heads):
    """A causal check of a kernel without a causal mask: most of the first rows' attention is
    on future keys (truth: the kernel's own probabilities), so it does not conform and the
    finding names the mask (the keys before each query alone gave "conforms" at 8 heads)."""
    fn = unmasked_kernel(alibi_slopes(heads))
    assert future_mass(kernel_attention(fn, heads, 32)) > 0.4
    check = alibi_viz.check_kernel(fn, heads, 16, seq_len=32)
    assert check.verdict == "unmasked", check.problems()
    assert "causal mask is missing" in check.problems()[0]


def test_symmetric_mode_reads_both_sides():
    """mode="symmetric": the same unmasked kernel is exact bidirectional ALiBi (truth: total
    variation from softmax(-m |i - j|) over all keys) and conforms; with the slopes reversed on
    the keys after the query only, that side is named; a causal kernel is told it masks."""
    slopes = alibi_slopes(8)
    fn = unmasked_kernel(slopes)
    assert worst_tv(kernel_attention(fn, 8, 32), exact_attention(slopes, 32, "symmetric")) < 1e-5
    assert alibi_viz.check_kernel(fn, 8, 16, seq_len=32, mode="symmetric").ok
    m = torch.tensor(slopes, dtype=torch.float32)

    def lopsided(q, k, v):  # the future side uses the slopes in reverse head order
        i = torch.arange(q.shape[-2])
        d = (i[:, None] - i[None, :]).float()
        bias = torch.where(d >= 0, -m[:, None, None] * d, m.flip(0)[:, None, None] * d)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    check = alibi_viz.check_kernel(lopsided, 8, 16, seq_len=32, mode="symmetric")
    assert check.verdict == "permuted" and check.problems()[0].startswith("Keys after the query")
    causal = alibi_viz.check_kernel(kernel(slopes), 8, 16, seq_len=32, mode="symmetric")
    assert causal.verdict == "unmasked" and "causal mask" in causal.problems()[0]


def static_cache_bias(slopes, T, slots, dtype):
    """The bias m (j - L + 1) of a static cache of L slots, for the last T positions' keys:
    (heads, T, T) in `dtype`, its row constant -m (L - 1 - i) near -m L."""
    m = torch.tensor(np.asarray(slopes), dtype=torch.float64)[:, None, None]
    j = torch.arange(T, dtype=torch.float64)[None, None, :]
    return (m * (j - slots + 1)).expand(-1, T, -1).to(dtype)


def test_bfloat16_rounding_of_a_bias_far_from_zero_is_named():
    """m (j - L + 1) over a static cache of 1,024 slots, in bfloat16: its values near -m L round
    to steps of 2-4 logits, differently in each row, so the attention of a query differs from
    exact ALiBi by a total variation over 0.2 (truth: softmax of the bias), while the same
    bias built textbook-style (-m (i - j)) in bfloat16 stays within 0.01. The slopes, fitted to
    the mean over rows, conform; the check names the rounding and says what to do."""
    slopes, T = alibi_slopes(8), 64
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    exact = exact_attention(slopes, T)
    far = static_cache_bias(slopes, T, 1024, torch.bfloat16)
    textbook = torch.tensor(alibi_bias(slopes, T)).to(torch.bfloat16)
    attention = [torch.softmax(b.double().masked_fill(~causal, -math.inf), -1)
                 for b in (far, textbook)]
    assert worst_tv(attention[0], exact) > 0.2 and worst_tv(attention[1], exact) < 0.01
    check = alibi_viz.check_bias(far)
    assert check.verdict == "precision", check.problems()
    assert ("bfloat16 rounding of a bias far from zero" in check.problems()[0]
            and "use the textbook form" in check.problems()[0])
    assert check.diagnosis[0].evidence["total_variation"] == pytest.approx(
        worst_tv(attention[0], exact), rel=1e-6)
    assert alibi_viz.check_bias(textbook).ok


@pytest.mark.parametrize("heads", [12, 40])
def test_two_rows_of_a_bias_far_from_zero_are_rounding_not_offsets(heads):
    """The last 2 rows of m (j - L + 1) with L = 4,096 slots, in bfloat16, 128 keys: their
    attention differs from exact ALiBi by a total variation over 0.2 (truth: softmax of the
    bias); with 2 rows the rounding does not average out and the fit gives heads offsets that
    no explanation fits ("N heads offset"). The check names the rounding; a real distance off
    by one in the same 2 bfloat16 rows (textbook form) stays an offset."""
    slopes = alibi_slopes(heads)
    m = torch.tensor(slopes, dtype=torch.float64)[:, None, None]
    j = torch.arange(128, dtype=torch.float64)
    rows = (m * (j - 4096 + 1)).expand(-1, 2, -1).to(torch.bfloat16)  # queries 126, 127
    i = torch.tensor([126.0, 127.0])[:, None]
    exact = torch.softmax((-m * (i - j)).masked_fill(j > i, -math.inf), -1)
    assert worst_tv(torch.softmax(rows.double(), -1), exact) > 0.2
    check = alibi_viz.check_bias(rows)
    assert check.verdict == "precision", check.problems()
    distance = i - j
    off_by_one = (-m * (distance + (distance > 0).double())).to(torch.bfloat16)
    assert alibi_viz.check_bias(off_by_one).verdict == "offset"


def static_cache_decode(slopes, slots=1024, bug=None):
    """A decode kernel fn(q, k, v) over a static cache of `slots` slots in q's dtype: the t + 1
    cached keys fill the first slots, the rest are masked, and the bias is m (j - L + 1) built
    in q's dtype (bug "new_key": the new token's own key gets no bias)."""
    m = torch.tensor(slopes, dtype=torch.float32)

    def attention(q, k, v):
        t = k.shape[-2] - 1
        j = torch.arange(slots, dtype=torch.float32)
        bias = (m[:, None, None] * (j - slots + 1)).to(q.dtype)  # (H, 1, L)
        if bug == "new_key":
            bias[..., t] = 0
        bias = bias.masked_fill(j > t, -math.inf)
        pad = slots - (t + 1)
        k = torch.nn.functional.pad(k, (0, 0, 0, pad))
        v = torch.nn.functional.pad(v, (0, 0, 0, pad))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return attention


def test_decode_form_reads_a_kernel_decoding_against_a_cache():
    """decode=True calls fn(new query, key cache, value cache) once per position: a textbook
    decode step conforms at 128 tokens; the static cache's m (j - L + 1) in bfloat16 is named
    as rounding (truth: its own decode rows differ from exact ALiBi by over 0.2), and a new key
    without bias is not called conforming (truth: its rows differ by over 0.2 too)."""
    slopes = alibi_slopes(8)
    m = torch.tensor(slopes)

    def textbook(q, k, v):
        t = k.shape[-2] - 1
        bias = (-m[:, None, None] * (t - torch.arange(t + 1))).to(q.dtype)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    assert alibi_viz.check_kernel(textbook, 8, 16, decode=True).ok
    exact = exact_attention(slopes, 16)
    far = static_cache_decode(slopes)
    assert worst_tv(decode_attention(far, 8, 16, torch.bfloat16), exact) > 0.2
    check = alibi_viz.check_kernel(far, 8, 16, seq_len=16, decode=True, dtype=torch.bfloat16)
    assert check.verdict == "precision" and "bfloat16 rounding" in check.problems()[0]
    broken = static_cache_decode(slopes, slots=64, bug="new_key")
    assert worst_tv(decode_attention(broken, 8, 32), exact_attention(slopes, 32)) > 0.2
    assert not alibi_viz.check_kernel(broken, 8, 16, seq_len=32, decode=True).ok


def test_check_bias_takes_the_broadcast_row_forms():
    """BLOOM's, MPT's and most libraries' row form +m j, (heads, 1, keys) and (1, heads, 1,
    keys), reads as the bias of every query; reversed slopes in that form are named."""
    slopes = alibi_slopes(8)
    row = torch.tensor(slopes)[:, None, None] * torch.arange(48.0)[None, None, :]  # (H, 1, K)
    assert alibi_viz.check_bias(row).ok
    assert alibi_viz.check_bias(row[None]).ok
    reversed_rows = alibi_viz.check_bias(row.flip(0)[None])
    assert reversed_rows.verdict == "permuted"
    assert reversed_rows.diagnosis[0].evidence["order"] == "reversed"


def test_kernel_own_errors_name_the_argument_that_does_not_fit():
    """An 8-head kernel given num_heads=12, and a kernel adding a float32 bias to bfloat16
    inputs with baddbmm (as BLOOM's attention does): their torch errors come back as
    AlibiVizError naming num_heads, and dtype."""
    with pytest.raises(AlibiVizError, match="num_heads"):
        alibi_viz.check_kernel(kernel(alibi_slopes(8)), 12, 16, seq_len=32)
    m = torch.tensor(alibi_slopes(8), dtype=torch.float32)

    def float32_bias(q, k, v):
        i = torch.arange(q.shape[-2]).float()
        bias = (-m[:, None, None] * (i[:, None] - i[None, :])).masked_fill(
            i[:, None] < i[None, :], -math.inf)
        scores = torch.baddbmm(bias, q[0], k[0].transpose(1, 2))  # (H, T, T)
        return (torch.softmax(scores, dim=-1) @ v[0])[None]

    with pytest.raises(AlibiVizError, match="dtype"):
        alibi_viz.check_kernel(float32_bias, 8, 16, seq_len=32, dtype=torch.bfloat16)


def test_inconclusive_kernel_never_blames_content():
    """Slopes of 1e-4 read from a bfloat16 bias are below what the probe resolves: the check
    says "inconclusive", and names rounding, not content (q = 0: there is none)."""
    check = alibi_viz.check_bias(torch.tensor(alibi_bias(np.full(8, 1e-4), 64)).bfloat16(),
                                 expected=np.full(8, 1e-4))
    assert check.verdict == "inconclusive", check.problems()
    assert "rounding" in check.problems()[0] and "dominated by content" not in check.problems()[0]


def test_wrapped_model_gets_what_the_check_needs():
    """A wrapper whose forward takes `input` (an interpretability library's bridge around a
    BLOOM) gets AlibiVizError saying how the check calls a model and which attribute holds the
    transformers model to pass, not a TypeError from deep inside."""
    from alibi_viz.models.zoo import tiny_model

    class Bridge(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model, self.config = model, model.config

        def get_input_embeddings(self):
            return self.model.get_input_embeddings()

        def forward(self, input, return_type="logits"):  # noqa: A002 (the wrapped API's name)
            return self.model(input_ids=input).logits

    with pytest.raises(AlibiVizError, match=r"input_ids=.*check_alibi\(wrapper\.model"):
        check_alibi(Bridge(tiny_model("bloom", 8, layers=1)), decode=False)


def test_bloom_in_bfloat16_at_a_long_probe_reports_its_rounding():
    """transformers' BLOOM in bfloat16 adds +m j to the scores; at a 512-token probe those
    round far from zero and the attention of late queries differs from exact ALiBi by more
    than 0.125 (truth: the model's own attention on the probe's repeated token, id 10). It
    conforms as shipped, with a note giving that size."""
    from alibi_viz.models.zoo import tiny_model

    model = tiny_model("bloom", 8, layers=1, dtype=torch.bfloat16)
    with torch.inference_mode():
        probs = model(torch.full((1, 512), 10), output_attentions=True).attentions[0][0]
    truth = worst_tv(probs.double(), exact_attention(alibi_slopes(8), 512))
    assert truth > 0.125
    check = check_alibi(model, decode=False, probe_length=512)
    assert check.ok, check.problems()
    note = next(n for n in check.notes if n.startswith("Precision"))
    assert f"total variation up to {truth:.2g}" in note
