"""A zoo of broken ALiBi models, for the conformance check's tests and its demo in the app.

Tiny random BLOOM and MPT models built in memory from transformers configs (no download), each
with one bug injected through torch's documented forward pre-hooks on the attention modules:
the hook edits the bias (BLOOM's `alibi`, MPT's `position_bias`) or the attention mask on its
way in. transformers itself is never edited. The bugs are the ones engineers keep hitting when
they port, quantise or serve ALiBi models:

  sign_flip        the bias added with the wrong sign
  sqrt_d           the bias divided by sqrt(head_dim) (the Falcon-RW port)
  reversed         the slopes in reverse head order
  geometric        12 heads with the geometric instead of the official slopes
  row_shift        a constant added to every key of a row: harmless, must pass
  decode_zero      the bias dropped in the decode path only (one query at a time)
  clip64           the bias stops growing beyond 64 tokens
  left_padding     padding ignored: pad tokens attended and counted as positions
"""

from __future__ import annotations

import math

import torch

from alibi_viz.alibi import alibi_slopes
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_

# Bug -> what it does: English msgids, shown as _(BUGS[bug]).
BUGS = {
    "sign_flip": N_("the bias added with the wrong sign"),
    "sqrt_d": N_("the bias divided by sqrt(head_dim), as in a Falcon-RW port"),
    "reversed": N_("the slopes in reverse head order"),
    "geometric": N_("12 heads with the geometric instead of the official slopes"),
    "row_shift": N_("a constant added to every key of a row (harmless: must pass)"),
    "decode_zero": N_("the bias dropped in the decode path only"),
    "clip64": N_("the bias stops growing beyond 64 tokens"),
    "left_padding": N_("left padding ignored: pad tokens attended and counted as positions"),
}
HARMLESS = {"row_shift"}
BLOOM_ONLY = {"clip64", "left_padding"}  # they edit BLOOM's additive float attention mask
VOCAB = 259  # the byte tokenizer of the shipped models


def tiny_model(kind: str = "bloom", heads: int = 4, seed: int = 0):
    """A tiny random causal LM ("bloom" or "mpt"): 2 layers, hidden 8 per head, eager."""
    from transformers import AutoModelForCausalLM, BloomConfig, MptConfig

    torch.manual_seed(seed)
    hidden = 8 * heads
    if kind == "bloom":
        config = BloomConfig(vocab_size=VOCAB, hidden_size=hidden, n_head=heads, n_layer=2,
                             initializer_range=0.3)
    elif kind == "mpt":
        config = MptConfig(vocab_size=VOCAB, d_model=hidden, n_heads=heads, n_layers=2,
                           max_seq_len=512, initializer_range=0.3)
    else:
        raise AlibiVizError(f"The zoo has 'bloom' and 'mpt', not {kind!r}.")
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


def _attention_modules(model):
    kind = model.config.model_type
    if kind == "bloom":
        return [block.self_attention for block in model.transformer.h], "alibi"
    if kind == "mpt":
        return [block.attn for block in model.transformer.blocks], "position_bias"
    raise AlibiVizError(f"The zoo can break BLOOM and MPT models, not '{kind}'.")


def _per_head(bias: torch.Tensor, heads: int, kind: str) -> torch.Tensor:
    """The bias viewed as (batch, heads, rows, keys)."""
    if kind == "bloom":  # (batch * heads, 1, keys)
        return bias.reshape(-1, heads, *bias.shape[1:])
    return bias[None]  # MPT: (heads, 1, keys)


def _back(per_head: torch.Tensor, like: torch.Tensor, kind: str) -> torch.Tensor:
    return per_head.reshape(like.shape) if kind == "bloom" else per_head[0]


def _slopes_of(model) -> torch.Tensor:
    return torch.tensor(alibi_slopes(_heads(model)), dtype=torch.float32)


def _heads(model) -> int:
    return model.config.n_head if model.config.model_type == "bloom" else model.config.n_heads


def break_model(model, bug: str):
    """Inject `bug` (a key of BUGS) into `model` in place with forward pre-hooks; returns it."""
    if bug not in BUGS:
        raise AlibiVizError(f"Unknown bug {bug!r}; the zoo has {', '.join(BUGS)}.")
    if bug in BLOOM_ONLY and model.config.model_type != "bloom":
        raise AlibiVizError(f"The zoo injects {bug!r} into BLOOM models only.")
    modules, name = _attention_modules(model)
    kind, heads = model.config.model_type, _heads(model)
    head_dim = (model.config.hidden_size if kind == "bloom" else model.config.d_model) // heads
    slopes = _slopes_of(model)

    def edit(module, args, kwargs):
        bias = kwargs.get(name)
        mask = kwargs.get("attention_mask")
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        if bias is None:
            return None
        per = _per_head(bias, heads, kind)  # (B, H, rows, keys), m_h * (something linear in j)
        if bug == "sign_flip":
            per = -per
        elif bug == "sqrt_d":
            per = per / math.sqrt(head_dim)
        elif bug == "reversed":
            per = per.flip(1)
        elif bug == "geometric":
            wanted = torch.tensor(alibi_slopes(heads, "geometric"), dtype=per.dtype)
            per = per * (wanted / slopes.to(per.dtype))[None, :, None, None]
        elif bug == "row_shift":
            per = per + 3.0
        elif bug == "decode_zero" and hidden is not None and hidden.shape[1] == 1:
            per = torch.zeros_like(per)
        elif bug == "clip64" and mask is not None and mask.dim() == 4 and mask.is_floating_point():
            # bias -m min(d, 64): add back m (d - 64) where d > 64, on the unmasked entries
            queries, keys = mask.shape[-2:]
            d = (torch.arange(queries)[:, None] + keys - queries - torch.arange(keys)[None, :])
            extra = slopes[:, None, None] * (d - 64).clamp_min(0).to(slopes.dtype)  # (H, Q, K)
            kwargs["attention_mask"] = mask + extra[None].to(mask.dtype)
        elif bug == "left_padding" and mask is not None and mask.dim() == 4:
            queries, keys = mask.shape[-2:]
            future = torch.ones(queries, keys, dtype=torch.bool).triu(keys - queries + 1)
            kwargs["attention_mask"] = torch.zeros_like(mask).masked_fill(
                future, torch.finfo(mask.dtype).min)  # causal only: the padding mask is lost
        kwargs[name] = _back(per, bias, kind)
        return args, kwargs

    for module in modules:
        module.register_forward_pre_hook(edit, with_kwargs=True)
    model.zoo_bug = bug
    return model


def broken_model(bug: str, kind: str = "bloom"):
    """A tiny random model with `bug` injected; "geometric" gets 12 heads (where the schedules
    differ), the others 4."""
    return break_model(tiny_model(kind, heads=12 if bug == "geometric" else 4), bug)
