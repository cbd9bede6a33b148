"""Tiny random checkpoints for tests and benchmarks: no downloads, each builds and saves in
well under a second.

Every model reads bytes: a `ByT5Tokenizer(extra_ids=0)` (259 ids: pad, </s>, unk, then the
256 byte values) is saved next to it. Weights are initialised with a large range (0.3) so the
content term QK^T/sqrt(d) is not negligible beside the positional bias; otherwise a test of
the decomposition could pass while computing the content wrongly.

Shipped with the library (as transformers ships `testing_utils`), so tests and benchmarks
import it as installed:

    from alibi_viz.tiny_models import KINDS, ALIBI_KINDS, save_tiny_model, tiny_model, byte_tokenizer

    folder = save_tiny_model(tmp_path / "bloom", "bloom")     # config + safetensors + tokenizer
    model, tokenizer, info = alibi_viz.load_model(folder)
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    BloomConfig,
    BloomForCausalLM,
    ByT5Tokenizer,
    FalconConfig,
    FalconForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MptConfig,
    MptForCausalLM,
)

VOCAB = 259  # ByT5Tokenizer(extra_ids=0): 3 special ids + 256 bytes
INIT = 0.3   # initializer_range: large enough for content logits of order 1

# kind -> (config class, model class, config keyword arguments). Hidden 32, 4 heads, 2 layers.
_SPECS = {
    "bloom": (BloomConfig, BloomForCausalLM, dict(hidden_size=32, n_head=4, n_layer=2)),
    "mpt": (MptConfig, MptForCausalLM, dict(d_model=32, n_heads=4, n_layers=2, max_seq_len=64)),
    # classic Falcon-7B-like layout with ALiBi: interleaved per-head q/k/v, one kv per head
    "falcon": (FalconConfig, FalconForCausalLM, dict(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=2, alibi=True, bias=True,
        multi_query=False, new_decoder_architecture=False, parallel_attn=False)),
    # multi-query Falcon (one shared k/v head), parallel attention + MLP, ALiBi
    "falcon_mq": (FalconConfig, FalconForCausalLM, dict(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=2, alibi=True,
        multi_query=True, new_decoder_architecture=False, parallel_attn=True)),
    # Falcon-40B-like grouped layout (2 kv groups), ALiBi
    "falcon_new": (FalconConfig, FalconForCausalLM, dict(
        hidden_size=32, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=2, alibi=True,
        new_decoder_architecture=True)),
    "gpt2": (GPT2Config, GPT2LMHeadModel, dict(n_embd=32, n_head=4, n_layer=2, n_positions=128)),
    "llama": (LlamaConfig, LlamaForCausalLM, dict(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        intermediate_size=64, max_position_embeddings=128)),
    "gpt_neox": (GPTNeoXConfig, GPTNeoXForCausalLM, dict(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=128, rotary_pct=0.5)),
}
KINDS = tuple(_SPECS)
ALIBI_KINDS = ("bloom", "mpt", "falcon", "falcon_mq", "falcon_new")


def byte_tokenizer() -> ByT5Tokenizer:
    """A byte-level tokenizer that needs no vocabulary file (259 ids)."""
    return ByT5Tokenizer(extra_ids=0)


def tiny_config(kind: str, **overrides):
    """Config of a tiny random model of `kind` (one of KINDS); keyword arguments override."""
    config_cls, _, kwargs = _SPECS[kind]
    kwargs = dict(kwargs, vocab_size=VOCAB, initializer_range=INIT, pad_token_id=0, bos_token_id=1,
                  eos_token_id=1)  # the byte tokenizer's <pad> and </s>
    kwargs.update(overrides)
    return config_cls(**kwargs)


def tiny_model(kind: str, seed: int = 0, **overrides):
    """A tiny random model of `kind` in eval mode with eager attention (not saved)."""
    _, model_cls, _ = _SPECS[kind]
    config = tiny_config(kind, **overrides)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return model_cls(config).eval()


def save_tiny_model(folder, kind: str = "bloom", seed: int = 0, tokenizer: bool = True,
                    **overrides) -> Path:
    """Write a tiny random `kind` checkpoint (config.json, model.safetensors and, unless
    tokenizer=False, the byte tokenizer) into `folder`; returns the folder as a Path."""
    folder = Path(folder)
    tiny_model(kind, seed, **overrides).save_pretrained(folder)
    if tokenizer:
        byte_tokenizer().save_pretrained(folder)
    return folder
