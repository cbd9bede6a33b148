"""Port bugs the conformance check used to miss or misname, injected where a port has them
(the bias on its way into transformers' BLOOM and MPT attention, through forward pre-hooks):
tensor-parallel shards, the bfloat16 blind spot, padded batch decoding (HF #26380), the decode
step's own bias row, a sign flip with reversed order, MPT's alibi_bias_max; and correct models
at real head counts that must not be flagged."""

import numpy as np
import pytest
import torch

from alibi_viz.alibi import alibi_slopes
from alibi_viz.models.conformance import check_alibi
from alibi_viz.models.zoo import tiny_model
from alibi_viz.tiny_models import byte_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def hook(model, edit):
    """Edit the bias every attention block receives: edit(per_head, queries) returns the new
    per-head bias, per_head (batch, heads, 1, keys) holding m_h x key position (BLOOM's alibi,
    or MPT's position_bias viewed so); queries: the rows of this forward (1 when decoding)."""
    kind = model.config.model_type
    heads = model.config.n_head if kind == "bloom" else model.config.n_heads
    blocks = ([b.self_attention for b in model.transformer.h] if kind == "bloom" else
              [b.attn for b in model.transformer.blocks])
    name = "alibi" if kind == "bloom" else "position_bias"

    def pre(_module, args, kwargs):
        bias = kwargs[name]
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        per = bias.reshape(-1, heads, *bias.shape[1:]) if kind == "bloom" else bias[None]
        per = edit(per.clone(), hidden.shape[1])
        kwargs[name] = per.reshape(bias.shape) if kind == "bloom" else per[0]
        return args, kwargs

    for block in blocks:
        block.register_forward_pre_hook(pre, with_kwargs=True)
    return model


def ratio(slopes, heads):
    """Per-head factor turning the official slopes into `slopes`, shaped to broadcast."""
    return torch.tensor(np.asarray(slopes) / alibi_slopes(heads),
                        dtype=torch.float32)[None, :, None, None]


# ----------------------------------------------------------------------------- tensor parallel

@pytest.mark.parametrize("heads,shards", [(32, 2), (32, 4), (48, 2)])
def test_shards_each_building_their_own_schedule_are_named(heads, shards):
    """k shards each computing alibi_slopes(n/k): "the schedule for n/k heads, repeated k
    times" with k found (it was "No single explanation fits: 31 heads permuted")."""
    tiled = np.tile(alibi_slopes(heads // shards), shards)
    model = hook(tiny_model("bloom", heads, layers=1),
                 lambda per, q: per * ratio(tiled, heads).to(per.dtype))
    check = check_alibi(model, decode=False)
    assert check.verdict == "schedule", check.problems()
    assert check.diagnosis[0].evidence["shards"] == shards
    assert f"the schedule for {heads // shards} heads, repeated {shards} times" in \
        check.problems()[0]


@pytest.mark.parametrize("heads,shards,dtype", [(32, 4, torch.bfloat16),
                                                (64, 8, torch.bfloat16),
                                                (32, 4, torch.float32)])
def test_last_shard_without_bias_is_caught_in_bfloat16(heads, shards, dtype):
    """A tensor-parallel port whose last shard adds no bias: its heads have the smallest
    slopes (0.013-0.0039 at 32 heads), which bfloat16 used to leave unjudged, so the model
    conformed. Now: "missing", the shard named."""
    size = heads // shards

    def drop_last_shard(per, q):
        per[:, -size:] = 0
        return per

    check = check_alibi(hook(tiny_model("bloom", heads, layers=1, dtype=dtype),
                             drop_last_shard), decode=False)
    assert check.verdict == "missing", check.problems()
    assert check.diagnosis[0].evidence == {"shards": shards, "missing_shards": [shards - 1]}
    assert f"Heads {heads - size + 1}-{heads} apply no positional bias" in check.problems()[0]


def test_a_head_with_3x_its_slope_is_not_passed_in_bfloat16():
    """Head 21 of 32 (slope 0.0078) applying 3.4x its slope used to be marked "conforms" in
    bfloat16; its resolution now comes from what the probe measured."""
    def steep(per, q):
        per[:, 20] *= 3.4
        return per

    check = check_alibi(hook(tiny_model("bloom", 32, layers=1, dtype=torch.bfloat16), steep),
                        decode=False)
    assert not check.ok
    assert check.heads[0][20].verdict != "conforms"
    assert check.heads[0][20].measured_slope == pytest.approx(3.4 * alibi_slopes(32)[20],
                                                             rel=0.05)
    assert sum(h.verdict != "conforms" for h in check.heads[0]) == 1


def test_small_slopes_are_judged_in_bfloat16():
    """The probe reads the shallowest slopes of 32 heads to about 0.1% in bfloat16: every head
    is judged (no "inconclusive", no note that slopes below 0.13 fit anything)."""
    check = check_alibi(tiny_model("bloom", 32, layers=1, dtype=torch.bfloat16), decode=False)
    assert check.ok, check.problems()
    assert not check.notes
    np.testing.assert_allclose(check.measured()[0], alibi_slopes(32), rtol=0.01)


# ----------------------------------------------------------------------------- sign and order

@pytest.mark.parametrize("heads", [12, 40])
def test_sign_flip_with_reversed_order_names_both(heads):
    """-m in reverse head order: "wrong sign" and "reverse head order" (it was "40 heads
    scaled")."""
    model = hook(tiny_model("bloom", heads, layers=1), lambda per, q: -per.flip(1))
    check = check_alibi(model, decode=False)
    assert check.verdict == "sign_flipped", check.problems()
    assert check.diagnosis[0].evidence["order"] == "reversed"
    assert "wrong sign" in check.problems()[0] and "reverse head order" in check.problems()[0]


# ----------------------------------------------------------------------------- MPT max_bias

def mpt_with_bias_max(value, heads=8):
    model = tiny_model("mpt", heads, layers=1)
    model.config.attn_config.alibi_bias_max = value
    return model


def test_mpt_alibi_bias_max_reports_config_transformers_and_model():
    """A config of alibi_bias_max 16: transformers' MPT applies 8 anyway, so the model does not
    conform, and the check says what the config says, what transformers does and what the
    model does; a port that honours 16 conforms, with the same three facts as a note."""
    plain = check_alibi(mpt_with_bias_max(16), decode=False)
    assert plain.verdict == "schedule" and plain.diagnosis[0].evidence["max_bias"] == 8
    text = plain.problems()[0]
    assert "max_bias 8 instead of 16" in text
    assert "config asks for alibi_bias_max 16" in text and "always builds its slopes with 8" in \
        text and "this model applies alibi_bias_max 8" in text

    heads = 8
    honour = torch.tensor(alibi_slopes(heads, "mpt", 16) / alibi_slopes(heads, "mpt", 8),
                          dtype=torch.float32)[None, :, None, None]
    port = hook(mpt_with_bias_max(16), lambda per, q: per * honour.to(per.dtype))
    check = check_alibi(port, decode=False)
    assert check.ok, check.problems()
    assert any("this model applies alibi_bias_max 16" in note for note in check.notes)


# ----------------------------------------------------------------------------- decoding

def new_key(bug):
    """Bugs in the decode step's bias row only (queries == 1)."""
    def edit(per, queries):
        if queries != 1:
            return per
        slopes = torch.tensor(alibi_slopes(per.shape[1]), dtype=per.dtype)
        if bug == "zero_new_key":
            per[..., -1] = 0
        elif bug == "plus_m_new_key":
            per[..., -1] += slopes[None, :, None]
        elif bug == "decode_twice":
            per = per * 2
        elif bug == "pads_counted":  # HF #26380: the new token's position counts the pads
            keys = per.shape[-1]
            per[..., -1] = slopes[None, :, None] * (keys - 1)
        return per
    return edit


@pytest.mark.parametrize("bug,named", [
    ("zero_new_key", "The new token's own key gets no bias"),
    ("plus_m_new_key", "The distance is off by 1 token for every key but the query's own "
                       "(keys look farther)"),
    ("decode_twice", "Every head applies 2x its slope: the bias is added twice."),
])
def test_decode_step_bias_row_is_probed_and_named(bug, named, tokenizer):
    """Bugs in the cached decode step only: the decode step's bias row, probed as the
    prefill's, is named with the same diagnosis (it was only "Cached decoding differs")."""
    check = check_alibi(hook(tiny_model("bloom", 8, layers=1), new_key(bug)), tokenizer)
    assert set(check.verdicts().ravel()) == {"conforms"}  # the prefill is right
    decode = [f for f in check.diagnosis if f.verdict == "decode"]
    assert len(decode) == 1 and "The decode step's bias row, probed as the prefill's" in \
        decode[0].summary
    assert named in decode[0].summary, decode[0].summary


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_left_padded_batch_decode_counting_pads_is_caught(dtype, tokenizer):
    """The new token's position counts the pads in a left-padded batch decode (HF #26380
    class): it conformed in every dtype; now the padded batch, decoded through the cache
    against each text alone, fails, and the finding says it is the batch decode."""
    model = hook(tiny_model("bloom", 8, layers=1, dtype=dtype), new_key("pads_counted"))
    check = check_alibi(model, tokenizer)
    assert check.verdict == "padding", check.problems()
    assert check.decode.ok and not check.decode.padding_ok
    assert check.decode.padded_decode_logits > check.decode.logits_tolerance
    assert "#26380" in check.problems()[0]


# ----------------------------------------------------------------------------- correct shapes

@pytest.mark.parametrize("kind,heads,attn", [("bloom", 40, "eager"), ("mpt", 48, "eager"),
                                             ("falcon", 32, "sdpa")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_real_head_counts_conform_with_decode_and_padding(kind, heads, attn, dtype, tokenizer):
    """Correct BLOOM (40 heads), MPT (48) and Falcon-RW (32, sdpa) in three dtypes: no false
    alarm from the per-head resolution, the decode probe or the padded batch decode."""
    check = check_alibi(tiny_model(kind, heads, layers=1, dtype=dtype, attn=attn), tokenizer)
    assert check.ok, check.problems()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("init", [1.0, 2.0])
def test_content_dominated_weights_are_inconclusive_not_misdiagnosed(init, seed):
    """Correct BLOOM with weights initialised at 1-2 in bfloat16: the content swamps the
    probe (its tokens read the small slopes far apart). The verdict is "inconclusive" (or
    "conforms"), never a bug such as "permuted" or "clipped", as it used to be."""
    check = check_alibi(tiny_model("bloom", 32, layers=2, dtype=torch.bfloat16, init=init,
                                   seed=seed), decode=False)
    assert check.verdict in ("conforms", "inconclusive"), check.problems()
    assert set(check.verdicts().ravel()) <= {"conforms", "inconclusive"}
    if check.verdict == "inconclusive":
        assert check.problems()[0].startswith("Inconclusive: the attention is dominated by "
                                              "content")
        # the count is over both layers (it read "33 heads" of a 32-head model, unexplained)
        n = int((check.verdicts() == "inconclusive").sum())
        assert f" {n} heads' slopes" in check.problems()[0] or f" {n} head's slope" in \
            check.problems()[0]
        assert check.problems()[0].endswith("Counted over all 2 layers (64 heads).")
