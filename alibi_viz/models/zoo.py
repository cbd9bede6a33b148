"""A zoo of broken ALiBi models, for the conformance check's tests and its demo in the app.

Tiny random BLOOM and MPT models built in memory from transformers configs (no download), each
with one bug injected through torch's documented forward pre-hooks on the attention modules:
the hook edits the bias (BLOOM's `alibi`, MPT's `position_bias`) or the attention mask on its
way in. transformers itself is never edited. The bugs are the ones engineers keep hitting when
they port, quantise or serve ALiBi models, one per explanation the check names:

  sign_flip        the bias added with the wrong sign                       sign_flipped
  twice            the bias added twice (2 m_h)                             scaled, 2
  sqrt_d           the bias divided by sqrt(head_dim) (the Falcon-RW port)  scaled, 1/sqrt(d)
  truncated        the first n slopes of the next power of two's schedule   schedule
                   (2n's for a power of two n)
  geometric        the paper's geometric formula instead of the official    schedule (same
                   rule                                                     slopes, so it
                                                                            conforms, when n
                                                                            is a power of two)
  reversed         the slopes in reverse head order                         permuted
  permuted         neighbouring heads' slopes swapped (1<->2, 3<->4, ...)   permuted
  off_by_one       the distance one short for every key but the query's     offset
                   own (BLOOM)
  row_shift        a constant added to every key of a row: harmless         conforms
  shift_all        the distance one long for every key, the query's own     conforms
                   included: a constant per row, harmless
  decode_zero      the bias dropped in the decode path only                 decode
  clip64           the bias stops growing beyond 64 tokens (BLOOM)          clipped
  left_padding     padding ignored: pad tokens attended and counted (BLOOM) padding

`tiny_model` also builds correct Falcon models (alibi=True) in any dtype and attention path,
for the check's tests; the zoo's bugs go into BLOOM and MPT only.
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
    "twice": N_("the bias added twice"),
    "sqrt_d": N_("the bias divided by sqrt(head_dim), as in a Falcon-RW port"),
    "truncated": N_("the first slopes of the next power of two's schedule"),
    "geometric": N_("the geometric formula instead of the official slopes (the same for 4, 8, "
                    "16, ... heads)"),
    "reversed": N_("the slopes in reverse head order"),
    "permuted": N_("neighbouring heads' slopes swapped"),
    "off_by_one": N_("the distance one token short for every key but the query's own"),
    "row_shift": N_("a constant added to every key of a row (harmless: must pass)"),
    "shift_all": N_("the distance one token long for every key, the query's own included "
                    "(harmless: must pass)"),
    "decode_zero": N_("the bias dropped in the decode path only"),
    "clip64": N_("the bias stops growing beyond 64 tokens"),
    "left_padding": N_("left padding ignored: pad tokens attended and counted as positions"),
}
HARMLESS = {"row_shift", "shift_all"}  # and "geometric" when the head count is a power of two
BLOOM_ONLY = {"clip64", "left_padding", "off_by_one"}  # they edit BLOOM's float attention mask
KINDS = ("bloom", "mpt", "falcon")
VOCAB = 259  # the byte tokenizer of the shipped models


def tiny_model(kind: str = "bloom", heads: int = 4, seed: int = 0, layers: int = 2,
               head_dim: int = 8, dtype: torch.dtype | None = None, attn: str = "eager",
               init: float | None = None):
    """A tiny random causal LM ("bloom", "mpt" or "falcon" with alibi=True): hidden
    head_dim x heads, in `dtype` (default float32), on the `attn` path ("sdpa": Falcon only).

    init: the weights' initializer_range; default 0.3 (content logits of order 1 beside the
    bias) up to hidden 128, then 0.3 sqrt(128 / hidden), so that wide models amplify rounding
    through their layers no more than narrow ones (as trained models do not either)."""
    # heavy: transformers (about a second), only when a zoo model is built
    from transformers import AutoModelForCausalLM, BloomConfig, FalconConfig, MptConfig

    if kind not in KINDS:
        raise AlibiVizError(f"The zoo has {', '.join(KINDS)}, not {kind!r}.")
    torch.manual_seed(seed)
    hidden = head_dim * heads
    init = 0.3 * min(1.0, math.sqrt(128 / hidden)) if init is None else init
    common = dict(vocab_size=VOCAB, initializer_range=init, pad_token_id=0, bos_token_id=1,
                  eos_token_id=1)  # the byte tokenizer's <pad> and </s>
    if kind == "bloom":
        config = BloomConfig(hidden_size=hidden, n_head=heads, n_layer=layers, **common)
    elif kind == "mpt":
        config = MptConfig(d_model=hidden, n_heads=heads, n_layers=layers, max_seq_len=512,
                           **common)
    else:  # the Falcon-RW layout: one k/v per head, sequential attention and MLP
        config = FalconConfig(hidden_size=hidden, num_attention_heads=heads,
                              num_hidden_layers=layers, alibi=True, bias=True, multi_query=False,
                              new_decoder_architecture=False, parallel_attn=False, **common)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    return model.to(dtype) if dtype is not None else model


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
        elif bug == "twice":
            per = per * 2
        elif bug == "truncated":
            wanted = torch.tensor(alibi_slopes(_next_count(heads))[:heads], dtype=per.dtype)
            per = per * (wanted / slopes.to(per.dtype))[None, :, None, None]
        elif bug == "permuted":
            per = per[:, _swapped(heads)]
        elif bug == "shift_all":  # m_h (j + 1): one more step of distance on every key
            per = per + slopes.to(per.dtype)[None, :, None, None]
        elif bug == "off_by_one" and mask is not None and mask.dim() == 4 \
                and mask.is_floating_point():
            # bias -m (d - 1) for d >= 1, 0 at d = 0: add m to every key but the query's own
            queries, keys = mask.shape[-2:]
            d = (torch.arange(queries)[:, None] + keys - queries - torch.arange(keys)[None, :])
            extra = slopes[:, None, None] * (d >= 1).to(slopes.dtype)  # (H, Q, K)
            kwargs["attention_mask"] = mask + extra[None].to(mask.dtype)
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


def _next_count(heads: int) -> int:
    """The head count whose schedule the "truncated" bug takes the first slopes of."""
    count = 2 ** math.ceil(math.log2(heads))
    return count if count != heads else 2 * heads


def _swapped(heads: int) -> torch.Tensor:
    """Head order with neighbours swapped: 1, 0, 3, 2, ... (the last stays when odd)."""
    order = torch.arange(heads)
    pairs = heads - heads % 2
    order[:pairs] = order[:pairs].reshape(-1, 2).flip(1).reshape(-1)
    return order


def is_harmless(bug: str, heads: int) -> bool:
    """Whether `bug` leaves a model with `heads` heads correct (and the check must pass it)."""
    return bug in HARMLESS or (bug == "geometric" and heads & (heads - 1) == 0)


def broken_model(bug: str, kind: str = "bloom", heads: int | None = None, **options):
    """A tiny random model with `bug` injected; by default "geometric" gets 12 heads (where the
    schedules differ), the others 4. options go to `tiny_model` (layers, dtype, seed, ...)."""
    if heads is None:
        heads = 12 if bug == "geometric" else 4
    return break_model(tiny_model(kind, heads=heads, **options), bug)
