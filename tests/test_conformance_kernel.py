"""check_kernel and check_bias: the conformance check without a Hugging Face model, on small
hand-written kernels (correct, and with the bugs ports have) and bias tensors built by
`alibi_bias`; and the error a plain nn.Module port gets."""

import math
import warnings

import numpy as np
import pytest
import torch

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
