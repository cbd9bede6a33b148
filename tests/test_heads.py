"""heads: attention maps, the content/bias decomposition against each model's own attention,
head statistics, and bad text."""

import math
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import OPTConfig, OPTForCausalLM
from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from alibi_viz.alibi import alibi_slopes, implied_attention_map, mean_distance
from alibi_viz.errors import AlibiVizError, BudgetError
from alibi_viz.figures.heads import highlight_html
from alibi_viz.models import attention as heads_module
from alibi_viz.models.attention import (
    CONTINUATION,
    AttentionResult,
    analyze_heads,
    attention_maps,
    attention_modules,
    fit_decay_slope,
    head_statistics,
    mean_distance_against_bias,
    mean_mass_beyond,
    score_decomposition,
    token_labels,
    tokenize_capped,
)
from alibi_viz.models.loading import describe_model, load_model
from alibi_viz.tiny_models import ALIBI_KINDS, KINDS, byte_tokenizer, save_tiny_model, tiny_model

TEXT = "ALiBi adds a linear bias to attention scores; heads look near or far."
T = len(TEXT)  # 69 ASCII characters: 69 byte tokens


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


@pytest.fixture(scope="module")
def models():
    """One tiny random model per kind, built in memory (loading is tested in test_loading);
    MPT's max_seq_len is 128 here, as load_model would raise it (64 in the factory)."""
    return {kind: tiny_model(kind, **({"max_seq_len": 128} if kind == "mpt" else {})) for kind in KINDS}


def reference_attentions(model, text, tokenizer):
    """The model's own output_attentions for text, straight from transformers."""
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        out = model(ids, output_attentions=True, use_cache=False)
    return [a[0].numpy() for a in out.attentions]


# ----------------------------------------------------------------------------- attention maps

@pytest.mark.parametrize("kind", KINDS)
def test_maps_equal_the_models_output_attentions(models, tokenizer, kind):
    """attention_maps returns the model's own attentions, one (heads, T, T) float32 per layer."""
    tokens, maps = attention_maps(models[kind], tokenizer, TEXT)
    reference = reference_attentions(models[kind], TEXT, tokenizer)
    assert len(tokens) == len(TEXT) and len(maps) == 2
    for ours, theirs in zip(maps, reference, strict=True):
        assert ours.dtype == np.float32 and ours.shape == (4, T, T)
        np.testing.assert_array_equal(ours, theirs)


def test_maps_are_causal_distributions(models, tokenizer):
    """Each row sums to 1 and puts nothing on future keys."""
    _, maps = attention_maps(models["bloom"], tokenizer, TEXT)
    for attn in maps:
        np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-5)
        assert np.all(np.triu(attn, k=1) == 0)


def test_maps_from_a_loaded_checkpoint(tmp_path, tokenizer):
    """A checkpoint loaded with load_model gives the same maps as the model it was saved from."""
    folder = save_tiny_model(tmp_path / "bloom", "bloom", seed=3)
    model, loaded_tokenizer, _ = load_model(folder)
    _, maps = attention_maps(model, loaded_tokenizer, TEXT)
    np.testing.assert_array_equal(maps[1], reference_attentions(tiny_model("bloom", 3), TEXT, tokenizer)[1])


def test_tokens_are_readable_labels(models, tokenizer):
    """Tokens are the text's characters with whitespace made visible; a two-byte letter is
    shown on its first byte, its second byte marked as a continuation."""
    result = attention_maps(models["bloom"], tokenizer, "a b\né")
    assert isinstance(result, AttentionResult) and result.truncated is None
    assert result.tokens[:4] == ["a", "␣", "b", "⏎"]
    assert result.tokens[4:] == ["é", CONTINUATION]  # é is two bytes


def byte_ids(payload: bytes) -> list[int]:
    """ByT5 ids of raw bytes (valid UTF-8 or not)."""
    return [b + 3 for b in payload]


@pytest.mark.parametrize("text, labels", [
    ("año", ["a", "ñ", "◦", "o"]),  # ñ: two bytes
    ("мама", ["м", "◦", "а", "◦", "м", "◦", "а", "◦"]),  # Cyrillic: two bytes a letter
    ("a😀 b", ["a", "😀", "◦", "◦", "◦", "␣", "b"]),  # an emoji: four bytes
    ("€\t\n", ["€", "◦", "◦", "⇥", "⏎"]),  # three bytes, then the special labels
])
def test_multibyte_characters_are_labelled_on_their_first_byte(tokenizer, text, labels):
    """Each character's first byte shows the character and each later byte the continuation
    mark: one short label per byte token, so a student reads the letter, not <0xD0> <0xBC>."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert token_labels(tokenizer, ids) == labels
    assert len(labels) == len(text.encode())


@pytest.mark.parametrize("payload, labels", [
    (b"\xbca", ["<0xBC>", "a"]),  # a lone continuation byte
    (b"a\xd0", ["a", "<0xD0>"]),  # a character cut off by the end of the text
    (b"\xd0a\xbc", ["<0xD0>", "a", "<0xBC>"]),  # a lead byte that nothing continues
    (b"\xf0\x9f\x98", ["<0xF0>", "<0x9F>", "<0x98>"]),  # three of an emoji's four bytes
    (b"\xd0\xbc\xbc", ["м", "◦", "<0xBC>"]),  # one continuation byte too many
])
def test_invalid_utf8_gets_hex_labels(tokenizer, payload, labels):
    """A byte that begins no character keeps a readable hex label, and never takes a
    neighbour's character (ByT5 decodes a stray byte before "a" to "a")."""
    assert token_labels(tokenizer, byte_ids(payload)) == labels


def test_special_tokens_keep_their_names_beside_characters(tokenizer):
    """A special token is never read as part of a character: </s> after a lead byte stays."""
    assert token_labels(tokenizer, byte_ids(b"\xd0") + [tokenizer.eos_token_id]) == [
        "<0xD0>", "</s>"]


class PieceTokenizer:
    """A stand-in BPE-like tokenizer whose tokens are byte strings of any length; decode
    replaces invalid bytes with U+FFFD, as GPT-2's does."""

    all_special_ids = [0]
    pieces = {1: b"a", 2: b"\xc3", 3: b"\xb1o", 4: b"\xd0\xbc", 5: b" "}

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i].decode("latin-1") for i in ids]

    def decode(self, ids):
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


def test_a_token_that_goes_on_after_the_character_keeps_its_text():
    """With tokens of several bytes, "a" + b"\\xc3" + b"\\xb1o" reads a, ñ, ◦o: the character on
    the token where it begins, the rest of the last token after the mark."""
    assert token_labels(PieceTokenizer(), [1, 2, 3, 5, 4]) == ["a", "ñ", "◦o", "␣", "м"]


def test_highlight_reads_as_text_with_a_bar_per_continuation_byte():
    """The highlighted text shows each character once (no continuation marks) and keeps one
    span, with its weight, per byte token."""
    labels = ["м", CONTINUATION, "а", CONTINUATION]
    page = highlight_html(labels, np.array([0.1, 0.2, 0.3, 0.4]), query=3)
    assert page.count("<span") == 4 and CONTINUATION not in page
    assert "м" in page and "а" in page and page.count("inline-block") == 2


def test_highlighted_code_keeps_its_indentation_and_breaks_at_the_box():
    """Spaces are real spaces in a pre-wrap box: four of them indent a line, and a line longer
    than the box breaks at its edge (non-breaking spaces ran past it)."""
    labels = ["⏎", "␣", "␣", "␣", "␣", "x"]
    page = highlight_html(labels, np.ones(6) / 6, query=5)
    assert "white-space: pre-wrap" in page and "&nbsp;" not in page
    assert page.count('"> </span>') == 4 and "⏎\n" in page


def test_other_causal_lms_give_maps_but_no_decomposition(tokenizer):
    """An architecture without a recomputation (OPT) still gives maps; decomposing it says why not."""
    config = OPTConfig(vocab_size=259, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                       ffn_dim=64, word_embed_proj_dim=32, max_position_embeddings=128)
    config._attn_implementation = "eager"
    model = OPTForCausalLM(config).eval()
    _, maps = attention_maps(model, tokenizer, TEXT)
    assert len(maps) == 2 and maps[0].shape == (4, T, T)
    with pytest.raises(AlibiVizError, match="not supported for 'opt'"):
        score_decomposition(model, tokenizer, TEXT, 0)


# ----------------------------------------------------------------------------- decomposition

@pytest.mark.parametrize("layer", [0, 1])
@pytest.mark.parametrize("kind", KINDS)
def test_softmax_of_total_is_the_models_attention(models, tokenizer, kind, layer):
    """softmax(total) equals the model's own output_attentions to 1e-5, every head."""
    decomposition = score_decomposition(models[kind], tokenizer, TEXT, layer)
    reference = reference_attentions(models[kind], TEXT, tokenizer)[layer]
    softmax = torch.softmax(torch.from_numpy(decomposition.total), dim=-1).numpy()
    np.testing.assert_allclose(softmax, reference, atol=1e-5, rtol=0)
    np.testing.assert_allclose(decomposition.probs, reference, atol=1e-6, rtol=0)
    assert decomposition.max_abs_error <= 1e-5


def test_long_input_is_reproduced_on_every_row(models, tokenizer):
    """Beyond 256 tokens (where the built-in check samples rows) every row still matches."""
    text = (TEXT + " ") * 5  # 350 tokens
    d = score_decomposition(models["bloom"], tokenizer, text, 1)
    softmax = torch.softmax(torch.from_numpy(d.total), dim=-1).numpy()
    np.testing.assert_allclose(softmax, reference_attentions(models["bloom"], text, tokenizer)[1], atol=1e-5)
    assert d.max_abs_error <= 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_total_is_content_plus_bias_and_masked_with_minus_inf(models, tokenizer, kind):
    """Where a key is visible total = content + bias; above the diagonal total is -inf."""
    d = score_decomposition(models[kind], tokenizer, TEXT, 1)
    visible = np.tril(np.ones((T, T), dtype=bool))
    assert np.all(np.isneginf(d.total[:, ~visible]))
    np.testing.assert_allclose((d.content + d.bias)[:, visible], d.total[:, visible], atol=1e-4, rtol=1e-5)
    assert all(a.shape == (4, T, T) and a.dtype == np.float32 for a in (d.content, d.bias, d.total, d.probs))


@pytest.mark.parametrize("kind", KINDS)
def test_content_term_matters(models, tokenizer, kind):
    """The fixtures' content logits are large enough that bias alone would not reproduce the model."""
    d = score_decomposition(models[kind], tokenizer, TEXT, 0)
    bias_only = torch.softmax(torch.from_numpy(np.where(np.isinf(d.total), -np.inf, d.bias)), -1).numpy()
    assert np.abs(bias_only - d.probs).max() > 0.1


def test_bloom_bias_is_unscaled_row_constant(models, tokenizer):
    """BLOOM's bias is +m*j on every row, unscaled: transformers' builder at T keys."""
    d = score_decomposition(models["bloom"], tokenizer, TEXT, 0)
    built = bloom_alibi(torch.ones(1, T, dtype=torch.long), 4, torch.float32).numpy()  # (H, 1, T)
    np.testing.assert_array_equal(d.bias, np.broadcast_to(built, d.bias.shape))
    np.testing.assert_allclose(d.bias[:, 5, :], alibi_slopes(4)[:, None] * np.arange(T), rtol=1e-6)


def test_mpt_bias_ends_at_zero_on_the_last_key(models, tokenizer):
    """MPT's bias is m*(j-(T-1)), the last T columns of its builder at max_seq_len keys."""
    d = score_decomposition(models["mpt"], tokenizer, TEXT[:60], 0)
    built = build_mpt_alibi_tensor(4, 128)[:, :, -60:].numpy()
    np.testing.assert_array_equal(d.bias, np.broadcast_to(built, d.bias.shape))
    np.testing.assert_allclose(d.bias[:, 0, -1], 0.0)


@pytest.mark.parametrize("kind", ["falcon", "falcon_mq", "falcon_new"])
def test_falcon_eager_bias_is_added_twice(models, tokenizer, kind):
    """Falcon's eager bias is 2 * bf16(m*j) / sqrt(d); one copy would not give its attention."""
    d = score_decomposition(models[kind], tokenizer, TEXT, 0)
    built = falcon_alibi(torch.ones(1, T, dtype=torch.long), 4, torch.float32).numpy()  # (H, 1, T)
    np.testing.assert_allclose(d.bias, np.broadcast_to(2 * built / math.sqrt(8), d.bias.shape), rtol=1e-6)
    masked = np.isinf(d.total)
    once = torch.softmax(torch.from_numpy(np.where(masked, -np.inf, d.content + d.bias / 2)), -1).numpy()
    twice = torch.softmax(torch.from_numpy(np.where(masked, -np.inf, d.content + d.bias)), -1).numpy()
    np.testing.assert_allclose(twice, d.probs, atol=1e-5)
    assert np.abs(once - d.probs).max() > 1e-2


def test_falcon_sdpa_path_adds_the_bias_once(tokenizer):
    """Falcon's sdpa attention output is softmax(QK^T/sqrt(d) + m*j/sqrt(d)) V: one copy."""
    eager = tiny_model("falcon")
    sdpa = tiny_model("falcon")
    sdpa.config._attn_implementation = "sdpa"
    module = attention_modules(sdpa)[0]
    captured = {}
    module.register_forward_pre_hook(lambda m, a, k: captured.update(hidden=a[0]), with_kwargs=True)
    module.register_forward_hook(lambda m, a, k, out: captured.update(out=out[0]), with_kwargs=True)
    ids = torch.tensor([tokenizer(TEXT, add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        sdpa(ids, use_cache=False)
        qkv = module.query_key_value(captured["hidden"]).view(1, T, 4, 3, 8)   # per head q, k, v
        q, k, v = (qkv[..., i, :].transpose(1, 2) for i in range(3))           # (1, H, T, d)
        bias = falcon_alibi(torch.ones(1, T, dtype=torch.long), 4, torch.float32).view(1, 4, 1, T)
        scores = (q @ k.transpose(-1, -2) + bias) / math.sqrt(8)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        context = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(1, T, 32)
        np.testing.assert_allclose(module.dense(context), captured["out"], atol=1e-5)
        eager_out = eager(ids, use_cache=False).logits
        assert (eager_out - sdpa(ids, use_cache=False).logits).abs().max() > 1e-3


@pytest.mark.parametrize("kind", ["gpt2", "llama", "gpt_neox"])
def test_models_without_alibi_have_zero_bias(models, tokenizer, kind):
    """Learned-position and rotary models add no bias: it is all zeros."""
    d = score_decomposition(models[kind], tokenizer, TEXT, 1)
    assert np.all(d.bias == 0)
    assert "no additive bias" in d.bias_form


def test_rotary_falcon_decomposes_too(tokenizer):
    """Falcon with alibi=False (rotary) reproduces its attention with a zero bias."""
    model = tiny_model("falcon", alibi=False)
    d = score_decomposition(model, tokenizer, TEXT, 1)
    assert np.all(d.bias == 0) and d.max_abs_error <= 1e-5


def test_bfloat16_model_is_reproduced_to_its_precision(tokenizer):
    """A bfloat16 model decomposes too; its rounded probabilities match to bfloat16 precision."""
    model = tiny_model("falcon").to(torch.bfloat16)
    d = score_decomposition(model, tokenizer, TEXT, 1)
    assert 0 < d.max_abs_error <= 2e-2 and d.total.dtype == np.float32


def test_decomposition_removes_its_hooks(models, tokenizer):
    """After a decomposition, success or failure, no hook is left on the attention modules."""
    model = models["bloom"]
    score_decomposition(model, tokenizer, TEXT, 1)
    with pytest.raises(AlibiVizError):
        score_decomposition(model, tokenizer, "", 1)
    for module in attention_modules(model):
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_decomposition_is_thread_safe(models, tokenizer):
    """Two threads decomposing different texts on one shared model each get their own layer."""
    model, results = models["bloom"], {}

    def run(text):
        results[text] = score_decomposition(model, tokenizer, text, 1).probs

    texts = [TEXT, TEXT[::-1] + " extra"]
    threads = [threading.Thread(target=run, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for text in texts:
        np.testing.assert_allclose(results[text], reference_attentions(model, text, tokenizer)[1], atol=1e-6)


@pytest.mark.parametrize("layer", [-1, 2, 1.5, "0"])
def test_bad_layer_is_refused(models, tokenizer, layer):
    """A layer outside 0..layers-1 is refused with AlibiVizError."""
    with pytest.raises(AlibiVizError, match="layer"):
        score_decomposition(models["bloom"], tokenizer, TEXT, layer)


# ----------------------------------------------------------------------------- bad text, long text

@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_refused(models, tokenizer, text):
    """Empty or blank text raises AlibiVizError saying so."""
    with pytest.raises(AlibiVizError, match="empty"):
        attention_maps(models["bloom"], tokenizer, text)


def test_only_special_tokens_is_refused(models, tokenizer):
    """A text made only of special tokens raises AlibiVizError naming them."""
    with pytest.raises(AlibiVizError, match="only special tokens"):
        attention_maps(models["bloom"], tokenizer, "</s><pad></s>")


def test_text_must_be_a_string(models, tokenizer):
    """Bytes or None instead of text raise AlibiVizError."""
    for text in (b"abc", None):
        with pytest.raises(AlibiVizError, match="string"):
            attention_maps(models["bloom"], tokenizer, text)


def test_one_megabyte_text_is_cut_by_the_budget(models, tokenizer):
    """1 MB of text is cut to what the memory budget allows, with a note saying so."""
    text = "x" * 1_000_000
    budget = 2 * 4 * 200 * 200 * 4  # layers x heads x T^2 x 4 bytes for T = 200
    result = attention_maps(models["bloom"], tokenizer, text, budget_bytes=budget)
    assert len(result.tokens) == 200 and result.maps[0].shape == (4, 200, 200)
    assert "Kept the first 200 tokens of a 1,000,000-character text" in result.truncated
    assert "memory budget" in result.truncated


def test_max_tokens_cuts_and_says_so(models, tokenizer):
    """max_tokens keeps the first tokens and names the limit."""
    result = attention_maps(models["bloom"], tokenizer, TEXT, max_tokens=10)
    assert result.tokens == list("ALiBi␣adds")
    assert result.truncated == "Kept the first 10 of 69 tokens: the token limit is 10."


def test_learned_positions_cap_the_length(models, tokenizer):
    """GPT-2's 128 learned positions cap its input, with a note."""
    result = attention_maps(models["gpt2"], tokenizer, TEXT * 3)
    assert len(result.tokens) == 128 and "128 learned positions" in result.truncated


def test_decomposition_budget_counts_its_arrays(models, tokenizer):
    """The decomposition's cap allows about 8 x heads x T^2 float32 within the budget."""
    d = score_decomposition(models["bloom"], tokenizer, TEXT, 0, budget_bytes=8 * 4 * 4 * 30 * 30)
    assert d.content.shape == (4, 30, 30) and "decomposition" in d.truncated


def test_tiny_budget_is_refused(models, tokenizer):
    """A budget too small for one token raises BudgetError."""
    with pytest.raises(BudgetError):
        attention_maps(models["bloom"], tokenizer, TEXT, budget_bytes=8)


def test_bos_is_kept_and_eos_is_dropped(tokenizer):
    """Tokens a tokenizer puts before text are kept; those it appends (ByT5's </s>) are not."""
    assert tokenize_capped(tokenizer, "ab").ids == [100, 101]


class WordTokenizer:
    """A stand-in tokenizer with one token per word (id = 10 + word length), no specials."""

    all_special_ids = [0]

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [10 + len(word) for word in text.split()]}

    def convert_ids_to_tokens(self, ids):
        return [f"w{i}" for i in ids]

    def decode(self, ids):
        return "x" * (ids[0] - 10)


def test_long_tokens_grow_the_text_cut():
    """When tokens are longer than the first character cut assumes, more text is tokenized."""
    words = [("w" * 20)[: 5 + i % 15] for i in range(2000)]
    tokenized = tokenize_capped(WordTokenizer(), " ".join(words), max_tokens=30)
    assert tokenized.ids == [10 + len(w) for w in words[:30]]
    assert tokenized.truncated.startswith("Kept the first 30 tokens of a ")


def test_mpt_built_without_load_model_is_capped_at_its_max_seq_len(tokenizer):
    """An MPT whose max_seq_len (64) was not raised is cut to it instead of crashing."""
    result = attention_maps(tiny_model("mpt"), tokenizer, TEXT)
    assert len(result.tokens) == 64 and "max_seq_len" in result.truncated


# ----------------------------------------------------------------------------- statistics

def decay_maps(slopes, T):
    """Causal attention that follows only an ALiBi bias: p_ij proportional to exp(-m (i-j))."""
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]
    logits = -np.asarray(slopes)[:, None, None] * distance
    logits = np.where(distance >= 0, logits, -np.inf)
    return torch.softmax(torch.from_numpy(logits), dim=-1).numpy().astype(np.float32)


def test_fitted_slope_recovers_exact_decay():
    """A head whose attention decays exactly as exp(-m d) is fitted back to m, small or large."""
    slopes = np.array([2.0, 0.5, 1 / 16, 1 / 256])
    fitted, r2 = fit_decay_slope(decay_maps(slopes, 300))
    np.testing.assert_allclose(fitted, slopes, rtol=1e-4)
    np.testing.assert_allclose(r2, 1.0, atol=1e-4)


def test_fitted_slope_uses_a_subset_of_rows_for_long_maps():
    """With more rows than max_rows, the fit on a row subset still recovers the slope."""
    fitted, _ = fit_decay_slope(decay_maps([0.1, 0.01], 600), max_rows=64)
    np.testing.assert_allclose(fitted, [0.1, 0.01], rtol=1e-4)


def test_mean_distance_matches_the_bias_only_formula():
    """Mean distance of pure-decay maps equals alibi.mean_distance averaged over query rows."""
    slopes, T = alibi_slopes(4), 64
    stats = head_statistics([decay_maps(slopes, T)], slopes)
    expected = np.mean([mean_distance(slopes, context=i + 1) for i in range(T)], axis=0)
    np.testing.assert_allclose(stats.mean_distance[0], expected, rtol=1e-4)
    np.testing.assert_allclose(stats.fitted_slope[0], slopes, rtol=1e-4)
    np.testing.assert_array_equal(stats.config_slope, slopes[None])


def test_uniform_attention_statistics():
    """Uniform causal attention: entropy log(i+1), local share min(i+1, k+1)/(i+1), slope 0."""
    T, k = 40, 3
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    stats = head_statistics([uniform[None].astype(np.float32)], k=k)
    rows = np.arange(T)
    assert stats.entropy[0, 0] == pytest.approx(np.log(rows + 1).mean(), rel=1e-5)
    assert stats.local_share[0, 0] == pytest.approx((np.minimum(rows + 1, k + 1) / (rows + 1)).mean(), rel=1e-5)
    assert stats.mean_distance[0, 0] == pytest.approx((rows / 2).mean(), rel=1e-5)
    assert stats.fitted_slope[0, 0] == pytest.approx(0.0, abs=1e-6)
    assert stats.config_slope is None


def test_local_share_counts_keys_on_both_sides_within_k():
    """local_share sums |i - j| <= k on both sides of the query; k >= T covers every key."""
    rng = np.random.default_rng(0)
    maps = rng.random((2, 12, 12)).astype(np.float32)
    maps /= maps.sum(-1, keepdims=True)
    distance = np.abs(np.arange(12)[:, None] - np.arange(12)[None, :])
    for k in (0, 2, 11, 50):
        expected = (maps * (distance <= k)).sum(-1).mean(-1)
        np.testing.assert_allclose(head_statistics([maps], k=k).local_share[0], expected, rtol=1e-5)


@pytest.mark.parametrize("kind", ALIBI_KINDS)
def test_heads_without_content_follow_their_fitted_slope(tokenizer, kind):
    """With near-zero weights (no content signal), each ALiBi head's fitted slope is the one
    the model applies: m for BLOOM and MPT, 2m/sqrt(d) for Falcon's eager path."""
    model = tiny_model(kind, initializer_range=1e-4)
    info = describe_model(model)
    result = attention_maps(model, tokenizer, TEXT[:60])
    stats = head_statistics(result, info.config_slopes)
    np.testing.assert_allclose(stats.fitted_slope, stats.config_slope, rtol=0.02)


def test_statistics_shapes_from_a_real_model(models, tokenizer):
    """Every statistic is (layers, heads) and within its range."""
    stats = head_statistics(attention_maps(models["llama"], tokenizer, TEXT))
    for values in (stats.mean_distance, stats.entropy, stats.local_share, stats.fitted_slope):
        assert values.shape == (2, 4) and np.all(np.isfinite(values))
    assert np.all((stats.local_share > 0) & (stats.local_share <= 1))
    assert np.all((stats.slope_fit_r2 >= 0) & (stats.slope_fit_r2 <= 1))


@pytest.mark.parametrize("maps", [[], [np.ones((2, 3, 4))], [np.ones((2, 3, 3)), np.ones((2, 4, 4))], "abc"])
def test_bad_maps_are_refused(maps):
    """Empty, non-square, ragged or non-numeric maps raise AlibiVizError."""
    with pytest.raises(AlibiVizError):
        head_statistics(maps)


def test_bad_slopes_shape_is_refused():
    """Slopes that do not broadcast to (layers, heads) raise AlibiVizError."""
    with pytest.raises(AlibiVizError, match="slopes"):
        head_statistics([decay_maps([0.5, 0.25], 8)], slopes=[1.0, 2.0, 3.0])


# ----------------------------------------------------------------------------- the shipped model

SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "models" / "alibi"


def test_shipped_alibi_model_decomposes_exactly():
    """The shipped ALiBi model loads, and every layer's softmax(total) is its own attention."""
    model, tokenizer, info = load_model(SHIPPED)
    assert info.positional == "alibi" and info.slopes is not None
    result = attention_maps(model, tokenizer, TEXT * 2)
    for layer in range(info.num_layers):
        d = score_decomposition(model, tokenizer, TEXT * 2, layer)
        np.testing.assert_allclose(d.probs, result.maps[layer], atol=1e-6)
        assert d.max_abs_error <= 1e-5


def _random_attention(T: int, seed: int = 0) -> np.ndarray:
    """A causal attention map: softmax of random scores over j <= i, float32 (T, T)."""
    scores = torch.randn(T, T, generator=torch.Generator().manual_seed(seed))
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1).numpy()


def test_mean_mass_beyond_matches_a_loop():
    """The share of attention farther back than d equals a direct sum over i - j > d."""
    attention = _random_attention(12, seed=1)
    d = 4
    rows = [sum(attention[i, j] for j in range(12) if i - j > d) for i in range(d + 1, 12)]
    assert mean_mass_beyond(attention, d) == pytest.approx(np.mean(rows), rel=1e-6)


def test_mean_distance_of_the_bias_only_map_matches_the_closed_form():
    """head_statistics' mean distance of implied_attention_map equals the average over queries
    of alibi.mean_distance with i + 1 keys (an independent closed form)."""
    m, T = 0.1, 40
    expected = np.mean([mean_distance([m], "causal", i + 1)[0] for i in range(T)])
    stats = head_statistics([implied_attention_map([m], T)])
    assert stats.mean_distance[0, 0] == pytest.approx(expected, rel=1e-5)


def test_content_kl_is_zero_for_a_head_that_follows_its_bias():
    """A head whose attention is exactly the bias-only attention of its slope has KL 0."""
    m, T = 0.2, 30
    stats = head_statistics([implied_attention_map([m], T)], slopes=[m])
    assert stats.content_kl[0, 0] == pytest.approx(0.0, abs=1e-6)


def test_content_kl_of_attending_to_itself_is_log_of_the_normaliser():
    """A head that puts all weight on the query itself has KL = mean_i log Z_i, with
    Z_i = sum_{d=0}^{i} e^(-m d) (q_ii = 1 / Z_i), computed here by hand."""
    m, T = 0.3, 20
    expected = np.mean([np.log(sum(np.exp(-m * d) for d in range(i + 1))) for i in range(T)])
    stats = head_statistics([np.eye(T, dtype=np.float32)[None]], slopes=[m])
    assert stats.content_kl[0, 0] == pytest.approx(expected, rel=1e-5)


def test_content_kl_needs_slopes():
    """Without slopes from the config there is no bias-only reference, so no KL."""
    assert head_statistics([np.eye(5, dtype=np.float32)[None]]).content_kl is None


@pytest.mark.parametrize("kind", ["bloom", "gpt2"])
def test_all_layers_decompose_in_one_forward_pass(models, tokenizer, kind):
    """score_decompositions runs the model once for every layer (a layer switch on the page
    reruns nothing) and gives each layer what score_decomposition gives it alone."""
    from alibi_viz.models.attention import attention_modules, score_decompositions

    model = models[kind]
    calls = []
    handle = attention_modules(model)[0].register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        together = score_decompositions(model, tokenizer, TEXT)
    finally:
        handle.remove()
    assert len(calls) == 1 and len(together) == len(attention_modules(model))
    for layer, dec in enumerate(together):
        alone = score_decomposition(model, tokenizer, TEXT, layer)
        assert dec.layer == layer
        np.testing.assert_array_equal(dec.total, alone.total)
        np.testing.assert_array_equal(dec.content, alone.content)


def test_decompositions_survive_sessions_adding_and_removing_hooks(models, tokenizer):
    """Many sessions splitting scores at once on one shared model: while one pass runs, others
    register and remove their hooks (torch may then call a hook registered with kwargs
    without them); every pass still completes with its own, correct result."""
    from alibi_viz.models.attention import score_decompositions

    model, errors, done = models["bloom"], [], []
    expected = reference_attentions(model, TEXT, tokenizer)

    def run():
        try:
            for _i in range(15):
                decs = score_decompositions(model, tokenizer, TEXT)
                done.append(all(np.allclose(d.probs, expected[d.layer], atol=1e-6) for d in decs))
        except Exception as exc:  # noqa: BLE001 (any failure in a thread is the test's failure)
            errors.append(repr(exc))

    threads = [threading.Thread(target=run) for _t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert len(done) == 60 and all(done)


def test_mean_distance_against_bias_of_a_head_that_looks_only_at_itself():
    """A head attending only to the query's own key looks 0 tokens back; its slope alone
    (m = 1, T = 3) gives the last query e^0, e^-1, e^-2 on distances 0, 1, 2: averaged over
    the three queries with the hand-computed row means."""
    measured, prior = mean_distance_against_bias(np.eye(3), 1.0)
    e = np.exp(-1.0)
    row_means = [0.0, e / (1 + e), (e + 2 * e**2) / (1 + e + e**2)]
    assert measured == 0.0
    assert prior == pytest.approx(np.mean(row_means), rel=1e-6)


@pytest.mark.parametrize("seq_len", [2, 64, 300])
def test_the_slopes_own_mean_distance_is_a_softmax_of_the_bias(seq_len):
    """The slope's mean distance against an explicit softmax of -m (i - j) over each query's
    keys, averaged over the queries, for every head of an 8-head schedule."""
    for m in alibi_slopes(8):
        rows = []
        for i in range(seq_len):
            distance = i - np.arange(i + 1)
            weight = np.exp(-m * distance)
            rows.append((distance * weight).sum() / weight.sum())
        assert mean_distance_against_bias(np.eye(seq_len), m)[1] == pytest.approx(
            np.mean(rows), rel=1e-9)


@pytest.mark.parametrize("kind", ["bloom", "gpt2"])
def test_a_run_given_the_model_info_reads_no_model_facts_again(models, tokenizer, kind,
                                                                monkeypatch):
    """With its ModelInfo, analysing a text and splitting every layer ask the model nothing
    the info holds (once 10 reads per text change, and a sinusoidal table rebuilt per layer),
    and give the same numbers as without."""
    model = models[kind]
    info = describe_model(model)
    expected = score_decomposition(model, tokenizer, TEXT, 0)
    for name in ("model_dims", "learned_positions", "bias_form"):
        monkeypatch.setattr(heads_module, name, lambda *a, _name=name, **k: pytest.fail(_name))
    analyze_heads(model, tokenizer, TEXT, info=info)
    got = score_decomposition(model, tokenizer, TEXT, 0, info=info)
    np.testing.assert_array_equal(got.total, expected.total)
    assert got.bias_form == expected.bias_form


def test_a_long_text_is_split_one_layer_at_a_time():
    """A new text splits every layer of a small model in one pass when the text is short (a
    layer switch then runs no model), only the layer shown when it is long or the model deep
    (the first screen waits for one layer)."""
    from alibi_viz.models.attention import decomposition_layers

    assert decomposition_layers(4, 2, 512) == (0, 1, 2, 3)
    assert decomposition_layers(4, 2, 2048) == (2,)
    assert decomposition_layers(24, 5, 64) == (5,)


def test_content_kl_equals_kl_against_the_bias_only_softmax():
    """content_kl (closed form from each row's entropy and mean distance) against KL(p || q)
    summed entry by entry, q the softmax of -m (i - j) over j <= i, on random causal maps
    (every key, and maps with many exact zeros), at several slopes; mass after the query
    makes it infinite."""
    rng = np.random.default_rng(0)
    T, slopes = 40, np.array([0.5, 0.06, 1 / 256, 0.0])
    raw = rng.random((4, T, T)) ** 8  # many tiny entries
    raw[:2] *= rng.random((2, T, T)) > 0.7  # and exact zeros
    maps = np.tril(raw) + np.eye(T) * 1e-3
    maps = (maps / maps.sum(-1, keepdims=True)).astype(np.float32)
    got = head_statistics([maps], slopes=slopes).content_kl[0]
    for h, m in enumerate(slopes):
        p = maps[h].astype(np.float64)
        kl = []
        for i in range(T):
            logits = -m * (i - np.arange(i + 1))
            log_q = logits - np.log(np.exp(logits).sum())
            row = p[i, : i + 1]
            kl.append(sum(x * (np.log(x) - lq) for x, lq in zip(row, log_q, strict=True) if x > 0))
        assert got[h] == pytest.approx(np.mean(kl), rel=1e-5, abs=1e-6)
    leaky = maps.copy()
    leaky[0, 3, 5] = 0.01
    assert np.isinf(head_statistics([leaky], slopes=slopes).content_kl[0, 0])
