"""The Extrapolation lab's measurements, against brute force."""

import math

import numpy as np
import pytest
import torch

from alibi_viz import data
from alibi_viz.alibi import implied_attention_map
from alibi_viz.models.attention import beyond_training
from alibi_viz.models.context_reach import COPY_SPAN, copy_heads, copy_sequences, own_span
from alibi_viz.tiny_models import byte_tokenizer, tiny_model


def _brute_beyond(attention, distance):
    """Mean over queries i > distance of the attention on keys j < i - distance, by loops (maps are read in float32, so agreement is to about 1e-7)."""
    rows = [sum(attention[i, j] for j in range(i - distance)) for i in range(distance + 1, len(attention))]
    return sum(rows) / len(rows) if rows else math.nan


def test_beyond_training_matches_brute_force_for_a_map_and_its_bias():
    """The share beyond the training length equals a loop over keys, for a random causal map
    and for the map the bias alone draws, and T is the map's length."""
    rng = np.random.default_rng(0)
    T, L, slope = 24, 8, 0.25
    raw = np.tril(rng.random((T, T)))
    attention = raw / raw.sum(axis=1, keepdims=True)
    share, bias, length = beyond_training(attention, L, slope)
    assert length == T
    assert math.isclose(share, _brute_beyond(attention, L), rel_tol=1e-6)
    assert math.isclose(bias, _brute_beyond(implied_attention_map([slope], T)[0], L), rel_tol=1e-6)


def test_beyond_training_without_a_slope_has_no_bias_share():
    """With no slope (a head without ALiBi) there is no bias-alone share."""
    attention = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]
    assert beyond_training(attention, 2, None)[1] is None


# ----------------------------------------------------------------------------- who copies

@pytest.fixture(scope="module")
def bloom():
    torch.set_num_threads(1)
    return tiny_model("bloom", vocab_size=259)


def _brute_copy(model, ids, first, repeat, span):
    """Loss on each copy (mean of -log p over the span's tokens, token 0 never scored) and, per
    (layer, head), the mean attention from repeat + t to first + t + 1 (t < span - 1), read
    entry by entry from the model's own output_attentions."""
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    logp = torch.log_softmax(out.logits[0].double(), dim=-1)

    def loss(start):
        return float(np.mean([-logp[t - 1, ids[t]].item()
                              for t in range(max(start, 1), start + span)]))

    heads = [[np.mean([a[0, h, repeat + t, first + t + 1].item() for t in range(span - 1)])
              for h in range(a.shape[1])] for a in out.attentions]
    return loss(first), loss(repeat), np.array(heads)


def test_copy_heads_matches_the_model_read_entry_by_entry(bloom):
    """copy_heads on one planted span: its losses on the first copy, the repeat and the control
    are the model's own -log p averaged over the span, and its (layers, heads) copy attention
    is output_attentions read at each repeat token's twin's successor."""
    stream = data.heldout_ids("python", max_tokens=4000)
    values, (first_loss, repeat_loss, control_loss) = copy_heads(bloom, stream, 32)
    ids, controls, first, repeat = copy_sequences(stream, 32, samples=1)
    want_first, want_repeat, want_heads = _brute_copy(bloom, ids[0].numpy(), first, repeat,
                                                      COPY_SPAN)
    _first, want_control, _heads = _brute_copy(bloom, controls[0].numpy(), first, repeat,
                                               COPY_SPAN)
    assert values.shape == want_heads.shape
    np.testing.assert_allclose(values, want_heads, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose([first_loss, repeat_loss, control_loss],
                               [want_first, want_repeat, want_control], rtol=1e-5)


def test_own_span_measures_span_text_span(bloom):
    """own_span plants the span before and after the text: its distance is the span plus the
    text in tokens, and its losses and copy attention are the model's own on the whole string
    span + text + span tokenized at once; a one-token span has no copy attention."""
    tokenizer = byte_tokenizer()
    span, text = "total / width", "x = 1\ny = 2\n"
    got = own_span(bloom, tokenizer, text, span)
    ids = np.array(tokenizer(span + text + span, add_special_tokens=False)["input_ids"])
    n = len(span.encode())  # one byte a token
    assert (got.span, got.distance) == (n, n + len(text.encode()))
    want_first, want_repeat, want_heads = _brute_copy(bloom, ids, 0, got.distance, n)
    np.testing.assert_allclose([got.first, got.repeat], [want_first, want_repeat], rtol=1e-5)
    np.testing.assert_allclose(got.heads, want_heads, rtol=1e-5, atol=1e-7)
    assert own_span(bloom, tokenizer, text, "z").heads is None
