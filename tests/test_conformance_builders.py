"""The conformance check's reference is this project's own rule, not the code under test.

The rule (`alibi_slopes`, MPT's alibi_bias_max, Falcon's bfloat16 rounding) is checked here
against fairseq's get_slopes (written out below, as the authors' code has it) and against
transformers' own builders, for 1-128 heads. Then the builders are broken inside transformers'
modules, as a vendored, patched or other transformers version would be, and the check must
catch each bug in the model and name the builder."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers.models.bloom.modeling_bloom as bloom_module
import transformers.models.falcon.modeling_falcon as falcon_module
import transformers.models.mpt.modeling_mpt as mpt_module

from alibi_viz.alibi import alibi_slopes, round_to_bfloat16
from alibi_viz.models.conformance import builder_finding, check_alibi, rule_slopes
from alibi_viz.models.zoo import tiny_model

HEADS = range(1, 129)


def fairseq_get_slopes(n: int) -> list[float]:
    """fairseq's get_slopes (ofirpress/attention_with_linear_biases, fairseq/models/
    transformer.py), the reference of the official rule."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + fairseq_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


def stub(model_type: str, heads: int, **config):
    """Just what rule_slopes reads: a config with a model type and a head count."""
    return SimpleNamespace(config=SimpleNamespace(model_type=model_type,
                                                  num_attention_heads=heads, **config))


ONES = torch.ones(1, 2, dtype=torch.long)  # two keys: the bias at key 1 is the slope


@pytest.mark.parametrize("n", HEADS)
def test_rule_equals_fairseq_and_transformers_builders(n):
    """For 1-128 heads the rule gives fairseq's get_slopes (to 1e-12), BLOOM's and MPT's
    builders (float32, to 1e-6) and Falcon's bfloat16-rounded slopes exactly."""
    np.testing.assert_allclose(rule_slopes(stub("bloom", n)), fairseq_get_slopes(n), rtol=1e-12)
    bloom = bloom_module.build_alibi_tensor(ONES, n, torch.float32)[:, 0, 1].double().numpy()
    np.testing.assert_allclose(rule_slopes(stub("bloom", n)), bloom, rtol=1e-6)
    mpt = -mpt_module.build_mpt_alibi_tensor(n, 2)[:, 0, 0].double().numpy()
    np.testing.assert_allclose(rule_slopes(stub("mpt", n, attn_config=SimpleNamespace(
        alibi_bias_max=8))), mpt, rtol=1e-6)
    falcon = falcon_module.build_alibi_tensor(ONES, n, torch.float32)[:, 0, 1].double().numpy()
    np.testing.assert_array_equal(rule_slopes(stub("falcon", n, alibi=True)), falcon)


@pytest.mark.parametrize("max_bias", [4, 16])
def test_mpt_rule_follows_alibi_bias_max_like_mpt_builder(max_bias):
    """MPT's rule takes the config's alibi_bias_max, as build_mpt_alibi_tensor does when
    given it (transformers' MptModel never gives it: it always passes 8)."""
    for n in (7, 12, 32, 48):
        built = -mpt_module.build_mpt_alibi_tensor(n, 2, alibi_bias_max=max_bias)[:, 0, 0]
        rule = rule_slopes(stub("mpt", n, attn_config=SimpleNamespace(alibi_bias_max=max_bias)))
        np.testing.assert_allclose(rule, built.double().numpy(), rtol=1e-6)


def test_bfloat16_rounding_matches_torch():
    """round_to_bfloat16 rounds as torch's .bfloat16() does (ties to even included)."""
    values = np.concatenate([alibi_slopes(n) for n in HEADS] + [np.linspace(-3, 3, 1001)])
    torch_rounded = torch.tensor(values, dtype=torch.float32).bfloat16().double().numpy()
    np.testing.assert_array_equal(round_to_bfloat16(values), torch_rounded)


# ----------------------------------------------------------------------------- broken builders

ORIGINAL_SLOPES = bloom_module._get_alibi_slopes


def broken_slopes(bug: str):
    """transformers' BLOOM slope builder with a bug, as a patched copy of it would have."""
    def slopes(num_heads, device):
        if bug == "twice":
            return 2 * ORIGINAL_SLOPES(num_heads, device)
        if bug == "truncated":  # the next power of two's schedule, cut to the head count
            return ORIGINAL_SLOPES(2 ** math.ceil(math.log2(num_heads)), device)[:num_heads]
        if bug == "sign":
            return -ORIGINAL_SLOPES(num_heads, device)
        if bug == "quarter":
            return ORIGINAL_SLOPES(num_heads, device) / 4
        if bug == "reversed":
            return ORIGINAL_SLOPES(num_heads, device).flip(0)
        raise AssertionError(bug)
    return slopes


# bug -> (the probe's verdict, evidence the probe's finding holds, the builder's phrase)
BUILDER_BUGS = {
    "twice": ("scaled", {"factor_name": "twice"}, "gives 2x the official slopes"),
    "truncated": ("schedule", {"num_heads": 16}, "gives the first 12 slopes of the 16-head "
                                                 "schedule"),
    "sign": ("sign_flipped", {}, "gives the official slopes with the wrong sign"),
    "quarter": ("scaled", {"factor_name": None}, "gives 0.25x the official slopes"),
    "reversed": ("permuted", {"order": "reversed"}, "in another order: the slopes are in "
                                                    "reverse head order"),
}


@pytest.mark.parametrize("bug", list(BUILDER_BUGS))
def test_bug_inside_transformers_bloom_builder_is_caught(bug, monkeypatch):
    """With the slope builder wrong inside transformers' BLOOM module, a 12-head BLOOM does
    not conform (before, the check compared it with the same builder and passed it): the
    probe names the bug in every head and a finding of its own names the builder."""
    monkeypatch.setattr(bloom_module, "_get_alibi_slopes", broken_slopes(bug))
    check = check_alibi(tiny_model("bloom", 12, layers=1), decode=False)
    verdict, evidence, phrase = BUILDER_BUGS[bug]
    assert check.verdict == verdict, check.problems()
    assert evidence.items() <= check.diagnosis[0].evidence.items(), check.diagnosis[0].evidence
    assert sum(h.verdict != "conforms" for h in check.heads[0]) >= 11  # reversed: 1 stays
    builder = [f for f in check.diagnosis if f.verdict == "builder"]
    assert len(builder) == 1 and "Your transformers' BLOOM builder" in builder[0].summary
    assert phrase in builder[0].summary, builder[0].summary


def test_builder_agreeing_with_the_rule_is_no_finding():
    """transformers' own builders as installed agree with the rule: no builder finding."""
    for kind in ("bloom", "mpt", "falcon"):
        assert builder_finding(tiny_model(kind, 12, layers=1)) is None


def test_bloom_build_alibi_tensor_patched_is_named(monkeypatch):
    """A bug in BLOOM's build_alibi_tensor itself (the masked path) is named as the builder's,
    and breaks the left-padded batch, which goes through it."""
    original = bloom_module.build_alibi_tensor
    monkeypatch.setattr(bloom_module, "build_alibi_tensor",
                        lambda mask, heads, dtype: 2 * original(mask, heads, dtype))
    from alibi_viz.tiny_models import byte_tokenizer

    check = check_alibi(tiny_model("bloom", 8, layers=1), byte_tokenizer())
    assert "builder" in [f.verdict for f in check.diagnosis]
    assert "gives 2x the official slopes" in check.problems()[[f.verdict for f in
                                                               check.diagnosis].index("builder")]
    assert not check.decode.padding_ok


def test_bug_inside_falcon_and_mpt_builders_is_caught(monkeypatch):
    """Falcon's build_alibi_tensor and MPT's build_mpt_alibi_tensor giving twice the slopes:
    the sdpa Falcon and the MPT are diagnosed as scaled by 2, and their builders named."""
    falcon_original = falcon_module.build_alibi_tensor
    monkeypatch.setattr(falcon_module, "build_alibi_tensor",
                        lambda mask, heads, dtype: 2 * falcon_original(mask, heads, dtype))
    mpt_original = mpt_module.build_mpt_alibi_tensor
    monkeypatch.setattr(mpt_module, "build_mpt_alibi_tensor",
                        lambda *a, **k: 2 * mpt_original(*a, **k))
    falcon = check_alibi(tiny_model("falcon", 32, layers=1, attn="sdpa"), decode=False)
    mpt = check_alibi(tiny_model("mpt", 12, layers=1), decode=False)
    for check, name in ((falcon, "Falcon"), (mpt, "MPT")):
        assert check.verdict == "scaled" and check.diagnosis[0].evidence["factor_name"] == "twice"
        assert any(f.verdict == "builder" and f"Your transformers' {name} builder" in f.summary
                   and "gives 2x the official slopes" in f.summary for f in check.diagnosis)
