"""The ALiBi conformance check: the probe's premise, correct models passing, every bug of the
zoo named, and the slopes of the shipped model read back exactly."""

import numpy as np
import pytest
import torch
from model_factory import byte_tokenizer, tiny_model

from alibi_viz.alibi import alibi_slopes
from alibi_viz.assets import shipped_models
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.conformance import check_alibi, probe_bias
from alibi_viz.models.loading import load_model
from alibi_viz.models.zoo import BUGS, broken_model


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def test_repeated_token_keeps_every_position_identical():
    """The probe's premise, checked: with one token repeated and no position embeddings,
    every position's hidden state is the same in every layer of a BLOOM model."""
    model = tiny_model("bloom")
    with torch.inference_mode():
        out = model(input_ids=torch.full((1, 40), 70), output_hidden_states=True)
    for hidden in out.hidden_states:
        torch.testing.assert_close(hidden[0], hidden[0, :1].expand_as(hidden[0]),
                                   rtol=1e-5, atol=1e-5)


def test_probe_reads_minus_m_d_from_a_bloom_model():
    """The probe's curve of head h is -m_h d (transformers' BLOOM slopes), to 1e-5."""
    model = tiny_model("bloom")
    curves = probe_bias(model, 64, tokenizer=byte_tokenizer())
    d = np.arange(64)
    for h, m in enumerate(alibi_slopes(model.config.n_head)):
        np.testing.assert_allclose(curves[0, h], -m * d, atol=1e-5)


@pytest.mark.parametrize("kind", ["bloom", "mpt"])
def test_correct_models_pass(kind, tokenizer):
    """Tiny random BLOOM and MPT conform in every head, in decoding and with left padding."""
    check = check_alibi(tiny_model(kind), tokenizer)
    assert set(check.verdicts().ravel()) == {"conforms"}
    assert check.decode.ok and check.decode.padding_ok and check.ok


@pytest.mark.parametrize("kind", ["falcon", "falcon_mq", "falcon_new"])
def test_falcon_sdpa_passes_and_eager_is_flagged_scaled_by_two(kind, tokenizer):
    """Falcon with alibi=True on sdpa applies m/sqrt(d) (its documented form) and passes; the
    eager path applies 2 m/sqrt(d): `scaled` with ratio 2 and the reason in the notes."""
    eager = tiny_model(kind)
    sdpa = tiny_model(kind)
    sdpa.config._attn_implementation = "sdpa"
    sdpa_check = check_alibi(sdpa, tokenizer, decode=False)
    assert set(sdpa_check.verdicts().ravel()) == {"conforms"}
    eager_check = check_alibi(eager, tokenizer, decode=False)
    assert set(eager_check.verdicts().ravel()) == {"scaled"}
    np.testing.assert_allclose([h.ratio for row in eager_check.heads for h in row], 2.0,
                               rtol=1e-3)
    assert any("twice" in note for note in eager_check.notes)


EXPECTED = {  # bug -> (every head's verdict, None: mixed; decode ok; left padding ok)
    "sign_flip": ({"sign_flipped"}, True, True),  # consistent in prefill and decode
    "sqrt_d": ({"scaled"}, True, True),
    "reversed": ({"permuted"}, True, True),
    "geometric": (None, True, True),
    "row_shift": ({"conforms"}, True, True),
    "decode_zero": ({"conforms"}, False, True),
    "clip64": ({"clipped"}, True, True),
    "left_padding": ({"conforms"}, True, False),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_every_bug_of_the_zoo_is_named(bug, tokenizer):
    """Each injected bug gets its verdict (the harmless row shift passes); decoding and left
    padding fail exactly for the bugs that break them."""
    check = check_alibi(broken_model(bug), tokenizer)
    verdicts, decode_ok, padding_ok = EXPECTED[bug]
    if verdicts is not None:
        assert set(check.verdicts().ravel()) == verdicts
    assert check.decode.ok == decode_ok and check.decode.padding_ok == padding_ok
    assert check.ok == (bug == "row_shift")


def test_named_details_of_the_zoo(tokenizer):
    """sqrt_d's ratio is 1/sqrt(8); reversed says which head's slope it got; geometric names
    the schedule; clip64 stops at 64 tokens."""
    ratio = check_alibi(broken_model("sqrt_d"), tokenizer, decode=False).heads[0][0].ratio
    assert ratio == pytest.approx(1 / np.sqrt(8), rel=1e-3)
    reversed_ = check_alibi(broken_model("reversed"), tokenizer, decode=False)
    assert "head 4" in reversed_.heads[0][0].detail
    geometric = check_alibi(broken_model("geometric"), tokenizer, decode=False)
    assert geometric.schedule == "geometric" and not geometric.ok
    clipped = check_alibi(broken_model("clip64"), tokenizer, decode=False)
    assert {h.clip_at for row in clipped.heads for h in row} == {64}


@pytest.mark.parametrize("bug", ["sign_flip", "reversed", "row_shift", "decode_zero"])
def test_mpt_zoo(bug, tokenizer):
    """The same bugs in MPT's position_bias are named too."""
    check = check_alibi(broken_model(bug, "mpt"), tokenizer)
    verdicts, decode_ok, _ = EXPECTED[bug]
    assert set(check.verdicts().ravel()) == verdicts and check.decode.ok == decode_ok


def test_shipped_model_slopes_read_back_exactly():
    """The applied slopes of the shipped ALiBi model equal alibi_slopes(8) to 1e-5 (fp32)."""
    model, tokenizer, _ = load_model(shipped_models()["alibi"])
    check = check_alibi(model, tokenizer)
    np.testing.assert_allclose(check.applied(), np.broadcast_to(alibi_slopes(8), (4, 8)),
                               atol=1e-5)
    assert check.ok


def test_non_alibi_model_is_a_typed_error(tokenizer):
    """A GPT-2 model has no ALiBi to check: AlibiVizError, not a crash."""
    with pytest.raises(AlibiVizError, match="ALiBi"):
        check_alibi(tiny_model("gpt2"), tokenizer)
