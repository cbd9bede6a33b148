"""16-bit rounding of the ALiBi bias, against torch's own casts and transformers' builder."""

import numpy as np
import pytest
import torch
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from alibi_viz.errors import AlibiVizError
from alibi_viz.precision import bloom_bias_error, row_constant_error_table, spacing


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_spacing_matches_torchs_rounding(dtype):
    """spacing(x) is the gap between x's two neighbours in `dtype`, found by torch's nextafter
    in float32 and rounding back: every representable x has x + spacing representable."""
    x = torch.tensor([1.0, 3.0, 300.0, 511.0, 600.0, 1000.0], dtype=dtype)
    step = torch.tensor(spacing(x.float().numpy(), dtype), dtype=torch.float32)
    up = (x.float() + step).to(dtype).float()
    half_up = (x.float() + step * 0.49).to(dtype).float()
    assert torch.equal(up - x.float(), step) and torch.equal(half_up, x.float())


def test_bfloat16_step_is_two_between_256_and_512():
    """The issue's check: in bfloat16 a number in [256, 512) moves in steps of 2.0."""
    assert set(spacing([256.0, 300.5, 511.9], "bfloat16")) == {2.0}
    assert float(torch.tensor(301.0).to(torch.bfloat16)) in (300.0, 302.0)


def test_bloom_bf16_error_numbers_on_the_bias_explorer():
    """At 2,048 tokens BLOOM's bf16 row-constant bias is off by 2 logits with 8 heads, 4 with
    112, and head 1's last 16 keys take 3 distinct values: computed here directly from
    transformers' build_alibi_tensor and float64."""
    for heads, error in ((8, 2.0), (112, 4.0)):
        bf16 = build_alibi_tensor(torch.ones(1, 2048, dtype=torch.long), heads, torch.bfloat16)
        f32 = build_alibi_tensor(torch.ones(1, 2048, dtype=torch.long), heads, torch.float32)
        exact = f32[:, 0, 1].double()[:, None] * torch.arange(2048, dtype=torch.float64)
        direct = (bf16[:, 0, :].double() - exact).abs().max().item()
        assert direct == pytest.approx(error, abs=1e-5)
        assert torch.unique(bf16[0, 0, -16:]).numel() == 3
    rows = row_constant_error_table((8, 112), 2048)
    assert [round(r["largest error (logits)"]) for r in rows] == [2, 4]
    assert [r["distinct values, last 16 keys of head 1"] for r in rows] == [3, 3]


def test_float32_bias_is_exact_enough():
    """In float32 the same bias is off by less than 1e-4 logits."""
    assert bloom_bias_error(8, 2048, "float32")["max_error"].max() < 1e-4


def test_unknown_dtype_is_a_typed_error():
    """A dtype outside float32/bfloat16/float16 raises AlibiVizError."""
    with pytest.raises(AlibiVizError, match="bfloat16"):
        spacing(np.ones(2), "int8")


def test_the_lens_opens_on_the_models_own_dtype_and_builder():
    """Falcon's own bfloat16 builder for Falcon, BLOOM's row-constant m·j otherwise; a dtype
    the lens lacks falls back to bfloat16."""
    from alibi_viz.precision import default_lens

    assert default_lens("falcon", "bfloat16") == ("bfloat16", "falcon")
    assert default_lens("bloom", "float32") == ("float32", "row_constant")
    assert default_lens("mpt", "float64") == ("bfloat16", "row_constant")
