"""Inspect a loaded model's heads: attention maps, content vs positional bias, head statistics.

Data contract (the one bertviz uses): attention maps are transformers' `outputs.attentions`
for one sequence, one float32 numpy array per layer shaped (heads, query, key), each row a
probability distribution over keys. They come from the eager attention path only, which is
how `load_model` loads every model.

Three entry points, in the order a page uses them:

* `attention_maps(model, tokenizer, text)`: tokens and the per-layer maps.
* `score_decomposition(model, tokenizer, text, layer)`: for one layer, the pre-softmax score
  of every head split into its content term (QK^T / sqrt(d)) and the positional bias the model
  adds, recomputed from the attention module's own inputs and weights (captured with hooks,
  transformers untouched) and checked against the model's own probabilities.
* `head_statistics(maps, slopes)`: per layer and head, mean attention distance, entropy, share
  of attention within k tokens, and a slope fitted to how the attention decays
  with distance, beside the slope from the config (`ModelInfo.config_slopes`).

For the pages, `analyze_heads` and `decomposition_view` run the first two once and keep only
display-resolution arrays (`display.stack_view`: a few MB instead of layers x heads x T^2).

Long inputs are cut (never silently): the token count is capped by a memory budget
(layers x heads x T^2 x 4 bytes for the maps), by `max_tokens`, and by a learned position
table's length; the result's `truncated` field says what was cut and why.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import psutil
import torch

from alibi_viz.alibi import (
    DEFAULT_BUDGET_BYTES,
    bias_only_mean_distance,
    check_int,
    implied_attention_map,
)
from alibi_viz.display import IMAGE_PIXEL_BUDGET, StackView, stack_view
from alibi_viz.errors import AlibiVizError, BudgetError
from alibi_viz.i18n import _, ngettext, number
from alibi_viz.models.loading import ModelInfo, bias_form, learned_positions, model_dims

DECOMPOSITION_ARRAYS = 8  # float32 (heads, T, T) arrays alive at once in score_decomposition
LAYER_ARRAYS = 4  # float32 (heads, T, T) arrays of one layer alive at once in analyze_heads'
                  # pass: the model's scores and probabilities, a float copy, the statistics'
MEMORY_SHARE = 4  # the default budget is 1/MEMORY_SHARE of the memory available now
MEMORY_BUDGET_ENV = "ALIBI_VIZ_MEMORY_BUDGET_MB"  # a fixed budget (a class server sets one)
REPRODUCE_TOL = 1e-4      # largest |softmax(total) - model probs| accepted as "reproduced"
REPRODUCE_TOL_16BIT = 2e-2  # the same for bfloat16/float16 models (probabilities rounded)
FIT_ROWS = 512            # query rows used to fit a head's fitted slope
CHECK_ROWS = 256          # query rows on which score_decomposition checks its reproduction
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}
CONTINUATION = "◦"  # label of a token that continues a character begun on an earlier token
MAX_CHARACTER_TOKENS = 4  # a UTF-8 character is at most 4 bytes, so at most 4 tokens
DECOMPOSITION_PARTS = ("content", "bias", "total", "probs")
BIAS_SHOWN = ("textbook", "as_added")  # the bias as the lesson writes it, or as the model adds it
DECOMP_PANEL_PIXELS = 300    # per side of each decomposition panel (about its width on screen)
DECOMP_HOVER_SIDE = 64       # hover samples per side of each decomposition panel
GRID_HOVER_CELLS = 8_000     # hover samples over all heads of the grid (the row has finer ones)


# ----------------------------------------------------------------------------- tokens

@dataclass
class TokenizedText:
    """Token ids of a text (cut to a cap), readable labels, and what was cut (None: nothing)."""

    ids: list[int]
    tokens: list[str]
    truncated: str | None = None


def token_labels(tokenizer, ids) -> list[str]:
    """One short readable label per token id, for axis labels: whitespace made visible (␣ ⏎ ⇥).

    A character spread over several tokens (a byte-level model reads "ñ" and "м" as two
    bytes, an emoji as four) is shown whole on its first token and each later one is labelled
    CONTINUATION: "año" -> a ñ ◦ o, "мама" -> м ◦ а ◦ м ◦ а ◦. A token that begins no
    character (a lone continuation byte, a character cut off by the end of the text, invalid
    UTF-8) keeps the tokenizer's own name for it, a lone byte as its hex "<0xBC>" (the name
    LLaMA's byte fallback uses). Labels can repeat, so plot against positions, not labels.
    """
    ids = [int(i) for i in ids]
    special = set(tokenizer.all_special_ids)
    names = tokenizer.convert_ids_to_tokens(ids)
    texts = [name if token_id in special else tokenizer.decode([token_id])
             for token_id, name in zip(ids, names, strict=True)]
    labels, pos = [], 0
    while pos < len(ids):
        if ids[pos] in special or _is_text(texts[pos]):
            labels.append(_visible(texts[pos]))
            pos += 1
            continue
        span = _character_span(tokenizer, ids, pos, special)
        if not span:
            name = str(names[pos])
            lone_byte = len(name) == 1 and 0x80 <= ord(name) <= 0xFF
            labels.append(f"<0x{ord(name):02X}>" if lone_byte else name)
            pos += 1
            continue
        whole = tokenizer.decode(ids[pos:pos + span])
        # a token of several bytes can go on after the character ends ("©s" in "é" + "s")
        tail = texts[pos + span - 1].lstrip("\ufffd")
        if tail and len(whole) > len(tail) and whole.endswith(tail):
            whole = whole[: -len(tail)]
        else:
            tail = ""
        labels += [_visible(whole)] + [CONTINUATION] * (span - 1)
        labels[-1] += _visible(tail)
        pos += span
    return labels


def _is_text(text: str) -> bool:
    """Whether one token decodes to text of its own (not "" nor a replacement character)."""
    return bool(text) and "\ufffd" not in text


def _visible(text: str) -> str:
    return "".join(VISIBLE.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in text)


def _character_span(tokenizer, ids: list[int], pos: int, special: set[int]) -> int:
    """How many tokens from `pos` on make up the character that begins there (2 to
    MAX_CHARACTER_TOKENS), or 0 when no character begins at `pos`.

    The shortest run that decodes to text without a replacement character, and to more than
    the run without its first token (tokenizers that drop invalid bytes, such as ByT5's,
    decode a stray byte followed by "a" to "a": that "a" is not the stray byte's)."""
    for span in range(2, MAX_CHARACTER_TOKENS + 1):
        run = ids[pos:pos + span]
        if len(run) < span or run[-1] in special:
            return 0
        whole = tokenizer.decode(run)
        if _is_text(whole):
            return span if whole != tokenizer.decode(run[1:]) else 0
    return 0


def special_prefix(tokenizer) -> list[int]:
    """Ids the tokenizer puts before a text (a BOS such as LLaMA's <s>); [] for most.

    Found by encoding "a" with and without special tokens. Ids it appends after the text
    (ByT5's </s>) are left out: a causal LM reading a text has not seen its end yet.
    """
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return list(full[:start])
    return []


def tokenize_capped(tokenizer, text, max_tokens: int | None = None,
                    reason: str | None = None) -> TokenizedText:
    """Tokenize `text` for one forward pass, keeping at most `max_tokens` tokens.

    Raises AlibiVizError for a text that is not a string, is empty or blank, or holds only
    special tokens. A very long text is cut before tokenizing (a 1 MB paste costs no more
    than the tokens kept). `reason` says why the cap is what it is, for the `truncated` note.
    """
    if not isinstance(text, str):
        raise AlibiVizError(f"The text must be a string, got {type(text).__name__}.")
    if not text.strip():
        raise AlibiVizError(_("The text is empty: type or paste some text to inspect."))
    prefix = special_prefix(tokenizer)
    room = None if max_tokens is None else max_tokens - len(prefix)
    if room is not None and room < 1:
        raise BudgetError(_("Only {n} token(s) allowed: not enough for any text.")
                          .format(n=max_tokens))

    limit = None if room is None else 8 * room + 64  # characters; grown if tokens are long
    while True:
        piece = text if limit is None or limit >= len(text) else text[:limit]
        ids = list(tokenizer(piece, add_special_tokens=False)["input_ids"])
        if room is None or len(ids) >= room + 2 or len(piece) == len(text):
            break
        limit *= 4

    special = set(tokenizer.all_special_ids)
    if not ids:
        raise AlibiVizError(_("The text gives no tokens: type or paste some ordinary text."))
    if all(i in special for i in ids):
        names = sorted(set(tokenizer.convert_ids_to_tokens(ids)))
        raise AlibiVizError(_("The text holds only special tokens ({names}): type or paste some "
                              "ordinary text to inspect.").format(names=", ".join(names)))

    truncated = None
    if room is not None and len(ids) > room:
        # never end inside a character: a cut two-byte letter would show as <0xD0>
        labels = token_labels(tokenizer, ids[:room])
        keep = room
        while keep > max(1, room - MAX_CHARACTER_TOKENS + 1) and labels[keep - 1].startswith("<0x"):
            keep -= 1
        room = keep
        why = f": {reason}" if reason else ""
        if len(piece) < len(text):
            truncated = ngettext("Kept the first {n} token of a {chars}-character text",
                                 "Kept the first {n} tokens of a {chars}-character text",
                                 room).format(n=number(room), chars=number(len(text))) + why + "."
        else:
            truncated = ngettext("Kept the first {n} of {total} token",
                                 "Kept the first {n} of {total} tokens",
                                 len(ids)).format(n=number(room), total=number(len(ids))) + why + "."
        ids = ids[:room]
    ids = prefix + ids
    return TokenizedText(ids=ids, tokens=token_labels(tokenizer, ids), truncated=truncated)


@dataclass(frozen=True)
class _Facts:
    """What the functions below need to know of a model: from its ModelInfo when the caller
    has one (the pages do), so that a run reads nothing it already holds; else read once from
    the model."""

    layers: int
    heads: int
    max_positions: int | None  # an absolute position table's length (a hard input limit)
    bias_form: str


def _facts(model, info: ModelInfo | None) -> _Facts:
    if info is not None:
        return _Facts(info.num_layers, info.num_heads, info.max_positions, info.bias_form)
    layers, heads, _dim = model_dims(model)
    return _Facts(layers, heads, learned_positions(model), bias_form(model))


def _token_cap(model, facts: _Facts, max_tokens, budget_bytes, bytes_per_token_sq: int,
               what: str):
    """(cap on the token count, sentence saying which limit sets it)."""
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes <= 0:
        raise AlibiVizError(f"budget_bytes must be a positive whole number, got {budget_bytes!r}.")
    budget_cap = math.isqrt(budget_bytes // bytes_per_token_sq)
    if budget_cap < 1:
        raise BudgetError(_("A budget of {bytes} bytes is too small for even one token.")
                          .format(bytes=number(budget_bytes)))
    caps = [(budget_cap, ngettext("the memory budget of {mib} MiB allows {n} token for {what}",
                                  "the memory budget of {mib} MiB allows {n} tokens for {what}",
                                  budget_cap).format(mib=number(budget_bytes / 2**20, 0),
                                                     n=number(budget_cap), what=what))]
    if max_tokens is not None:
        max_tokens = check_int(max_tokens, "max_tokens", 1, 1 << 24)
        caps.append((max_tokens, _("the token limit is {n}").format(n=number(max_tokens))))
    positions = facts.max_positions
    if positions is not None:
        caps.append((positions, ngettext("the model has only {n} learned position",
                                         "the model has only {n} learned positions",
                                         positions).format(n=number(positions))))
    if model.config.model_type == "mpt":  # its bias is built at max_seq_len keys, no more
        longest = int(model.config.max_seq_len)
        caps.append((longest, _("MPT's config.max_seq_len is {n} (load_model raises it)")
                     .format(n=number(longest))))
    return min(caps)


def memory_budget() -> int:
    """The default memory budget of a model run, in bytes: ALIBI_VIZ_MEMORY_BUDGET_MB when set
    (a class server fixes one, so that many students' runs fit beside each other), else a
    quarter of the memory available now (psutil), so that a larger machine reads longer
    texts; never below 64 MiB."""
    fixed = os.environ.get(MEMORY_BUDGET_ENV, "").strip()
    if fixed:
        try:
            megabytes = float(fixed)
        except ValueError:
            megabytes = math.nan
        if not megabytes > 0:  # not a number, nan, zero or negative
            raise AlibiVizError(_("{name} must be a number of MiB, got {value}.").format(
                name=MEMORY_BUDGET_ENV, value=repr(fixed)))
        return int(megabytes * 2**20)
    return max(64 << 20, psutil.virtual_memory().available // MEMORY_SHARE)


def _input_ids(model, ids: list[int]) -> torch.Tensor:
    device = model.get_input_embeddings().weight.device
    if device.type == "meta":  # offloaded by accelerate, whose hooks move the inputs themselves
        device = torch.device("cpu")
    return torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)


# ----------------------------------------------------------------------------- attention maps

@dataclass
class AttentionResult:
    """Tokens and per-layer attention maps; unpacks as `tokens, maps = attention_maps(...)`.

    tokens:    readable label per position (see `token_labels`), length T.
    maps:      one float32 array (heads, T, T) per layer; row i holds query i's attention
               over keys 0..T-1 (zeros above the diagonal), summing to 1.
    truncated: what was cut from the text and why, or None.
    """

    tokens: list[str]
    maps: list[np.ndarray]
    truncated: str | None = None

    def __iter__(self):
        return iter((self.tokens, self.maps))


def attention_maps(model, tokenizer, text, max_tokens: int | None = None,
                   budget_bytes: int = DEFAULT_BUDGET_BYTES,
                   info: ModelInfo | None = None) -> AttentionResult:
    """Every layer's attention probabilities for `text`, from one eager forward pass.

    The token count T is capped so that layers x heads x T^2 x 4 bytes fits `budget_bytes`
    (1 GiB by default), by `max_tokens`, and by a learned position table; `truncated` says
    what was cut. Runs under torch.inference_mode() on the model's base (no LM head, so no
    T x vocabulary logits). Empty text or only special tokens: AlibiVizError. `info`: the
    model's ModelInfo (`load_model` returns it), which saves reading its facts again.
    """
    facts = _facts(model, info)
    cap, reason = _token_cap(model, facts, max_tokens, budget_bytes,
                             facts.layers * facts.heads * 4,
                             _("{layers} layers x {heads} heads of attention maps")
                             .format(layers=facts.layers, heads=facts.heads))
    tokenized = tokenize_capped(tokenizer, text, cap, reason)
    maps = attention_maps_of_ids(model, tokenized.ids, layers=facts.layers)
    return AttentionResult(tokens=tokenized.tokens, maps=maps, truncated=tokenized.truncated)


def attention_maps_of_ids(model, ids, layers: int | None = None) -> list[np.ndarray]:
    """Every layer's attention probabilities for raw token ids (T,), no tokenizer and no
    length cap: one float32 (heads, T, T) per layer, from the model's base (no LM head).
    `layers`: the model's layer count, when the caller knows it."""
    layers = model_dims(model)[0] if layers is None else layers
    with torch.inference_mode():
        out = model.base_model(input_ids=_input_ids(model, [int(i) for i in ids]),
                               output_attentions=True, use_cache=False)
    attentions = getattr(out, "attentions", None)
    if not attentions or len(attentions) != layers or any(a is None for a in attentions):
        raise AlibiVizError(_("The model returned no attention probabilities: load it with "
                              "attn_implementation='eager' (load_model does)."))
    return [a[0].float().cpu().numpy() for a in attentions]  # each (heads, T, T)


# ----------------------------------------------------------------------------- decomposition

@dataclass
class Decomposition:
    """One layer's pre-softmax scores split into content and positional bias, per head.

    Every array is float32, shape (heads, T, T), query i in rows, key j in columns.
    content: QK^T scaled as the model scales it (1/sqrt(d), or MPT's softmax_scale); for RoPE
             models q and k are rotated first, so position is already inside it.
    bias:    everything else the model adds before the softmax, exactly as it adds it, over
             the full matrix: BLOOM +m*j, MPT m*(j-(T-1)), Falcon 2*m*j/sqrt(d) in its eager
             path (bfloat16-built); zeros for models without an additive bias.
    total:   the masked score the softmax sees, computed in the model's own order of
             operations: -inf where the causal mask hides a key (the model uses the dtype's
             most negative number there; both give probability exactly 0). Where unmasked,
             total = content + bias up to float32 rounding.
    probs:   the model's own attention probabilities for this layer (output_attentions);
             softmax(total) reproduces them to `max_abs_error` (the largest difference,
             over all query rows up to 256 tokens, 256 evenly spaced rows beyond).
    A bias that is the same on every query row (BLOOM, MPT, zeros) is a read-only broadcast
    view of one row per head: it costs heads x T floats, not heads x T^2 (np.array() copies).
    """

    content: np.ndarray
    bias: np.ndarray
    total: np.ndarray
    probs: np.ndarray
    tokens: list[str]
    layer: int
    bias_form: str
    max_abs_error: float
    truncated: str | None = None


class _StopForward(Exception):
    """Raised by our hook once the inspected layer has run: later layers are not needed."""


def attention_modules(model, layers: int | None = None) -> list[torch.nn.Module]:
    """The self-attention module of every layer, in layer order (`layers`: the model's layer
    count, when the caller knows it)."""
    layers = model_dims(model)[0] if layers is None else layers
    found = {}
    for module in model.modules():
        index = getattr(module, "layer_idx", None)
        if type(module).__name__.endswith("Attention") and isinstance(index, int):
            found.setdefault(index, module)
    if sorted(found) != list(range(layers)):
        raise AlibiVizError(_("Could not find one attention module per layer in {model}.")
                            .format(model=type(model).__name__))
    return [found[i] for i in range(layers)]


def _mask_split(mask: torch.Tensor | None, like: torch.Tensor, shape) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked: bool, finite part: float) of an additive float mask, broadcast to `shape`.

    transformers' eager masks hold 0 where a key is visible and the dtype's minimum where it
    is not; Falcon also puts its (scaled) ALiBi bias in the visible entries.
    """
    if mask is None:
        return (torch.zeros((), dtype=torch.bool, device=like.device).expand(shape),
                torch.zeros((), dtype=like.dtype, device=like.device).expand(shape))
    masked = mask <= torch.finfo(mask.dtype).min / 2
    return masked.expand(shape), torch.where(masked, 0.0, mask).expand(shape)


def _bloom(module, hidden, kwargs):
    """BloomAttention: fused q/k/v interleaved per head; scores = alibi + QK^T/sqrt(d)."""
    _batch, T, _width = hidden.shape
    H, d = module.num_heads, module.head_dim
    fused = module.query_key_value(hidden).view(1, T, H, 3, d)  # per head: q, k, v
    q = fused[0, :, :, 0].transpose(0, 1)                       # (H, T, d)
    k = fused[0, :, :, 1].transpose(0, 1)                       # (H, T, d)
    alibi = kwargs["alibi"].view(H, 1, -1)                      # (H, 1, T): +m*j
    # as BloomAttention.forward: alibi.baddbmm(q, k^T, beta, alpha), then + attention mask
    total = alibi.baddbmm(q, k.transpose(1, 2), beta=module.beta, alpha=module.inv_norm_factor)
    masked, extra = _mask_split(kwargs.get("attention_mask"), hidden, (1, H, T, T))
    if not _all_zero(extra):  # BLOOM's mask holds only 0 and -inf-like values: nothing to add
        total.add_(extra[0])
    total.masked_fill_(masked[0], -math.inf)
    content = torch.bmm(q, k.transpose(1, 2)).mul_(module.inv_norm_factor)
    bias = module.beta * alibi
    return content, (bias if _all_zero(extra) else bias + extra[0]).expand(H, T, T), total


def _mpt(module, hidden, kwargs):
    """MptAttention: fused [q | k | v]; scores = QK^T * softmax_scale + m*(j-(T-1))."""
    _batch, T, _width = hidden.shape
    H, d = module.n_heads, module.head_dim
    mixed = module.Wqkv(hidden)                                 # (1, T, 3*H*d)
    if module.clip_qkv:
        mixed = mixed.clamp(min=-module.clip_qkv, max=module.clip_qkv)
    q, k, _v = mixed.chunk(3, dim=2)
    q = q.reshape(1, T, H, d).transpose(1, 2)                   # (1, H, T, d)
    k = k.reshape(1, T, H, d).transpose(1, 2)                   # (1, H, T, d)
    content = torch.matmul(q, k.transpose(-1, -2)).mul_(module.softmax_scale)
    # built at max_seq_len keys, (H, 1, max_seq_len): MptAttention keeps the last T columns
    position_bias = kwargs["position_bias"]
    position_bias = position_bias[:, max(0, position_bias.size(1) - T):,
                                  max(0, position_bias.size(2) - T):]  # (H, 1, T)
    total = content + position_bias
    mask = kwargs.get("attention_mask")  # bool, True where the key is hidden
    if mask is not None:
        total.masked_fill_(mask, -math.inf)
    return content[0], position_bias.expand(H, T, T), total[0]


def _falcon(module, hidden, kwargs):
    """FalconAttention, eager path, all three q/k/v layouts, ALiBi or rotary."""
    _batch, T, _width = hidden.shape
    H, d = module.num_heads, module.head_dim
    fused = module.query_key_value(hidden)
    if module.new_decoder_architecture:
        # (1, T, groups, H/groups + 2, d): each kv group holds its queries, one key, one value
        qkv = fused.view(1, T, -1, H // module.num_kv_heads + 2, d)
        q = qkv[:, :, :, :-2]
        k = torch.broadcast_to(qkv[:, :, :, [-2]], q.shape)
        q, k = q.flatten(2, 3), k.flatten(2, 3)                 # (1, T, H, d)
    elif module.multi_query:
        qkv = fused.view(1, T, H + 2, d)                        # H queries, one key, one value
        q, k = qkv[:, :, :-2], qkv[:, :, [-2]]                  # (1, T, H, d), (1, T, 1, d)
    else:
        qkv = fused.view(1, T, H, 3, d)                         # per head: q, k, v
        q, k = qkv[..., 0, :], qkv[..., 1, :]                   # (1, T, H, d)
    q, k = q.transpose(1, 2), k.transpose(1, 2)                 # (1, H, T, d), (1, H or 1, T, d)
    masked, extra = _mask_split(kwargs.get("attention_mask"), hidden, (1, H, T, T))
    alibi = kwargs.get("alibi")
    if alibi is None:  # rotary Falcon: position is in q and k
        cos, sin = kwargs["position_embeddings"]
        q, k = sys.modules[type(module).__module__].apply_rotary_pos_emb(q, k, cos, sin)
        content = (q @ k.transpose(-1, -2)).div_(math.sqrt(d))
        total = (content + extra).masked_fill_(masked, -math.inf)
        return content[0], extra[0], total[0]
    scores = (q @ k.transpose(-1, -2)).float()                  # (1, H, T, T)
    alibi = alibi.view(1, H, 1, -1)                             # (1, H, 1, T): bf16-built m*j
    # as FalconAttention.forward: (QK^T + alibi) * inv_norm_factor + mask, where the mask
    # already holds alibi / sqrt(d) in its visible entries: the bias goes in twice.
    total = (scores + alibi).mul_(module.inv_norm_factor).add_(extra).masked_fill_(masked, -math.inf)
    content = scores.mul_(module.inv_norm_factor)
    bias = torch.where(masked, alibi / math.sqrt(d), extra)    # the mask's copy, everywhere
    bias.add_(alibi * module.inv_norm_factor)                   # + the copy inside the logits
    return content[0], bias[0], total[0]


def _gpt2(module, hidden, kwargs):
    """GPT2Attention: Conv1D c_attn gives [q | k | v]; learned positions are in the input."""
    _batch, T, _width = hidden.shape
    d = module.head_dim
    q, k, _v = module.c_attn(hidden).split(module.split_size, dim=2)
    q = q.view(1, T, -1, d).transpose(1, 2)                     # (1, H, T, d)
    k = k.view(1, T, -1, d).transpose(1, 2)                     # (1, H, T, d)
    content = torch.matmul(q, k.transpose(-1, -2)).mul_(module.scaling)
    return _no_bias(content, kwargs)


def _llama(module, hidden, kwargs):
    """LLaMA-style attention: q_proj/k_proj, rotary on q and k, grouped kv heads."""
    _batch, T, _width = hidden.shape
    d = module.head_dim
    q = module.q_proj(hidden).view(1, T, -1, d).transpose(1, 2)  # (1, H, T, d)
    k = module.k_proj(hidden).view(1, T, -1, d).transpose(1, 2)  # (1, H_kv, T, d)
    cos, sin = kwargs["position_embeddings"]
    q, k = sys.modules[type(module).__module__].apply_rotary_pos_emb(q, k, cos, sin)
    k = k.repeat_interleave(module.num_key_value_groups, dim=1)  # (1, H, T, d), as repeat_kv
    content = torch.matmul(q, k.transpose(-1, -2)).mul_(module.scaling)
    return _no_bias(content, kwargs)


def _gpt_neox(module, hidden, kwargs):
    """GPTNeoXAttention: fused q/k/v per head, rotary on part of each head."""
    _batch, T, _width = hidden.shape
    d = module.head_size
    qkv = module.query_key_value(hidden).view(1, T, -1, 3 * d).transpose(1, 2)  # (1, H, T, 3d)
    q, k, _v = qkv.chunk(3, dim=-1)
    cos, sin = kwargs["position_embeddings"]
    q, k = sys.modules[type(module).__module__].apply_rotary_pos_emb(q, k, cos, sin)
    content = torch.matmul(q, k.transpose(-1, -2)).mul_(module.scaling)
    return _no_bias(content, kwargs)


def _no_bias(content, kwargs):
    """Models without an additive positional bias: total = content + mask (eager order)."""
    masked, extra = _mask_split(kwargs.get("attention_mask"), content, content.shape)
    total = (content + extra).masked_fill_(masked, -math.inf)
    return content[0], extra[0], total[0]


def _all_zero(extra: torch.Tensor) -> bool:
    """Whether a (broadcast) tensor is all zeros, looking at one copy of each broadcast dim."""
    compact = extra[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in extra.stride())]
    return bool((compact == 0).all())


RECOMPUTE = {
    "bloom": _bloom, "mpt": _mpt, "falcon": _falcon, "gpt2": _gpt2,
    "llama": _llama, "mistral": _llama, "qwen2": _llama, "gpt_neox": _gpt_neox,
}


def _recompute_of(model):
    """The function that recomputes this architecture's scores (RECOMPUTE), or AlibiVizError."""
    recompute = RECOMPUTE.get(model.config.model_type)
    if recompute is None:
        raise AlibiVizError(
            _("Splitting scores into content and bias is not supported for '{kind}' models "
              "(supported: {supported}); attention maps and head statistics work for every "
              "causal LM.").format(kind=model.config.model_type,
                                   supported=", ".join(sorted(RECOMPUTE))))
    return recompute


def score_decomposition(model, tokenizer, text, layer: int, max_tokens: int | None = None,
                        budget_bytes: int = DEFAULT_BUDGET_BYTES,
                        info: ModelInfo | None = None) -> Decomposition:
    """Split layer `layer`'s pre-softmax scores into content and positional bias, per head.

    One layer of `score_decompositions` (which see): the pass stops after that layer.
    """
    return score_decompositions(model, tokenizer, text, [layer], max_tokens, budget_bytes,
                                info=info)[0]


def score_decompositions(model, tokenizer, text, layers=None, max_tokens: int | None = None,
                         budget_bytes: int = DEFAULT_BUDGET_BYTES, reduce=None,
                         info: ModelInfo | None = None) -> list:
    """Split the pre-softmax scores of each layer in `layers` (default all) into content and
    positional bias, per head, in ONE forward pass of the model.

    A forward pre-hook (with_kwargs=True) on each chosen layer's attention module captures its
    input hidden states and keyword arguments (the ALiBi tensor, the mask, rotary cos/sin); as
    soon as the module has run, a forward hook recomputes q and k from the module's own
    projection weights and checks the result: softmax(total) must reproduce the module's
    probabilities (`max_abs_error` <= 1e-4 for float32 models, 2e-2 for 16-bit ones, whose
    probabilities are rounded; checked on every query row up to 256 tokens, on 256 evenly
    spaced rows beyond), else AlibiVizError. The pass stops after the last chosen layer. Hooks
    fire only in the calling thread, so a model shared between sessions is safe.

    Each layer's Decomposition goes through `reduce` (e.g. `decomposition_view`) as soon as it
    is made, so only one layer's (heads, T, T) arrays are alive at a time: T is capped so that
    about 8 x heads x T^2 float32 fit `budget_bytes`, whatever the number of layers.
    Returns [reduce(decomposition) for each layer], in the order of `layers`.
    Supported: BLOOM, MPT, Falcon (ALiBi or rotary), GPT-2, LLaMA, Mistral, Qwen2, GPT-NeoX
    (tested: all but Mistral and Qwen2, which share LLaMA's attention). `info`: the model's
    ModelInfo, which saves reading its facts again.
    """
    facts = _facts(model, info)
    num_layers, heads = facts.layers, facts.heads
    layers = list(range(num_layers)) if layers is None else [
        check_int(layer, "layer", 0, num_layers - 1) for layer in layers]
    recompute = _recompute_of(model)
    cap, reason = _token_cap(model, facts, max_tokens, budget_bytes,
                             DECOMPOSITION_ARRAYS * heads * 4,
                             _("the decomposition of {heads} heads").format(heads=heads))
    tokenized = tokenize_capped(tokenizer, text, cap, reason)
    modules = attention_modules(model, num_layers)
    owner, inputs, results = threading.get_ident(), {}, {}
    last = max(layers)

    take_inputs = _input_recorder(owner, inputs)

    def split(layer, mod, args, *rest):
        if threading.get_ident() != owner:
            return
        output = rest[-1]
        hidden, captured = inputs.pop(layer)
        dec = _decompose(model, mod, recompute, hidden, captured, output[1], tokenized, layer,
                         facts.bias_form)
        results[layer] = dec if reduce is None else reduce(dec)
        if layer == last:
            raise _StopForward

    handles = []
    for layer in layers:
        handles += [modules[layer].register_forward_pre_hook(partial(take_inputs, layer),
                                                             with_kwargs=True),
                    modules[layer].register_forward_hook(partial(split, layer), with_kwargs=True)]
    try:
        with torch.inference_mode():
            try:
                model.base_model(input_ids=_input_ids(model, tokenized.ids), use_cache=False)
            except _StopForward:
                pass
    finally:
        for handle in handles:
            handle.remove()
    return [results[layer] for layer in layers]


def _input_recorder(owner: int, inputs: dict):
    """A forward pre-hook (register with_kwargs=True, `partial(hook, layer)`) that keeps each
    layer's input hidden states and keyword arguments in `inputs[layer]`.

    The model is shared by every session, and torch reads its hook tables without a lock:
    while a pass runs, another thread registering or removing its own hooks can make torch
    call a hook registered with kwargs without them. So the hooks take any arguments and act
    only in the thread `owner` that registered them (where they are always called whole)."""
    def take_inputs(layer, mod, args, *rest):
        if threading.get_ident() == owner:
            kwargs = rest[0]
            inputs[layer] = (args[0] if args else kwargs["hidden_states"], dict(kwargs))

    return take_inputs


def _decompose(model, module, recompute, hidden, kwargs, probs, tokenized, layer,
               form: str) -> Decomposition:
    """One layer's Decomposition from its attention module's inputs and probabilities."""
    if probs is None:
        raise AlibiVizError(_("The attention module returned no probabilities: load "
                              "the model with attn_implementation='eager' (load_model "
                              "does)."))
    try:
        content, bias, total = recompute(module, hidden, kwargs)
    except (KeyError, AttributeError, RuntimeError, ValueError) as exc:
        raise AlibiVizError(_("Could not recompute this model's attention scores "
                              "({error}): this transformers version calls its attention "
                              "differently.").format(error=repr(exc))) from None
    tolerance = REPRODUCE_TOL if probs.element_size() >= 4 else REPRODUCE_TOL_16BIT
    probs = probs[0].float()                                      # (H, T, T)
    rows = _check_rows(probs.shape[1])
    error = torch.softmax(total[:, rows].float(), dim=-1).sub_(probs[:, rows]).abs_().max().item()
    if not error <= tolerance:
        raise AlibiVizError(_("Could not reproduce this model's attention from its weights (max "
                              "error {error} > {tolerance}): this transformers version computes "
                              "'{kind}' attention differently.").format(
                                  error=f"{error:.2g}", tolerance=f"{tolerance:g}",
                                  kind=model.config.model_type))
    return Decomposition(
        content=_numpy(content), bias=_numpy(bias), total=_numpy(total), probs=_numpy(probs),
        tokens=tokenized.tokens, layer=layer, bias_form=form, max_abs_error=error,
        truncated=tokenized.truncated)


def _check_rows(T: int) -> torch.Tensor | slice:
    """Query rows on which softmax(total) is checked: all, or CHECK_ROWS evenly spaced ones
    (a softmax over every row of a 2048-token layer costs as much as one model layer)."""
    if T <= CHECK_ROWS:
        return slice(None)
    return torch.linspace(0, T - 1, CHECK_ROWS).round().long().unique()


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """float32 numpy array sharing memory with `tensor`; a broadcast view (a bias that is the
    same on every row) stays one, made read-only, instead of T copies."""
    array = tensor.detach().float().cpu().numpy()
    if 0 in array.strides:
        array.flags.writeable = False
    return array


# ----------------------------------------------------------------------------- statistics

@dataclass
class HeadStatistics:
    """Per layer and head statistics of attention maps; every array is (layers, heads).

    mean_distance:    expected |i - j| under each query's attention, averaged over queries
                      (tokens).
    entropy:          -sum_j p log p of each query's attention, averaged over queries (nats).
    local_share:      attention on keys within k tokens (|i - j| <= k), averaged over queries.
    fitted_slope:  m fitted to log p_ij = c_i - m |i - j| (one intercept per query row, so
                      the row's normaliser drops out), over distances <= max_distance and
                      probabilities above 1e-30; a head that follows only its ALiBi bias gives
                      back its slope, one that looks far gives a smaller or negative value.
    slope_fit_r2:     share of the within-row variance of log p explained by that line (0..1).
                      For an ALiBi head log p_ij = s_ij - m (i - j) - log Z_i, so the fit gives
                      back m whenever the content s is uncorrelated with distance, however much
                      content moves the attention: a slope on y = x with a low R^2 says content
                      does the work. Read it with content_kl.
    config_slope:     the slopes passed in (for ALiBi, `ModelInfo.config_slopes`: predicted
                      from the config), broadcast to (layers, heads); None if none given.
    content_kl:       (with slopes) KL(p || q) in nats, q the attention the configured bias
                      alone gives (causal, all content scores equal), averaged over queries:
                      0 for a head that only follows its bias, large when content decides.
    """

    mean_distance: np.ndarray
    entropy: np.ndarray
    local_share: np.ndarray
    fitted_slope: np.ndarray
    slope_fit_r2: np.ndarray
    config_slope: np.ndarray | None
    k: int
    max_distance: int
    content_kl: np.ndarray | None = None


def fit_decay_slope(attn, max_distance: int | None = None, floor: float = 1e-30,
                    max_rows: int = FIT_ROWS):
    """Fitted slope m per head, and R^2, from attention maps `attn` of shape (heads, T, T).

    Least squares of log p_ij on distance |i - j| with a separate intercept per query row i
    (the pooled within-row slope): for p_ij = exp(-m |i-j|) / Z_i it returns m exactly,
    whatever Z_i. Only entries with |i - j| <= max_distance (default T // 2, so every
    distance used appears in at least half the rows) and p_ij > floor are used, on at most
    `max_rows` evenly spaced query rows (all rows when T <= max_rows), which keeps a
    2048-token layer cheap. Returns two float64 arrays of shape (heads,); NaN where nothing
    can be fitted (fewer than two usable keys in every row).
    """
    attn = torch.as_tensor(np.asarray(attn, dtype=np.float32))
    heads, T, _keys = attn.shape
    max_distance = max(1, T // 2) if max_distance is None else max_distance
    rows = torch.linspace(0, T - 1, min(T, max_rows)).round().long().unique()
    distance = _distance(T)[rows]                                 # (R, T)
    window = distance <= max_distance
    slopes, r2 = np.full(heads, np.nan), np.full(heads, np.nan)
    for h in range(heads):
        p = attn[h, rows]                                         # (R, T)
        use = (window & (p > floor)).float()
        logp = p.clamp_min(floor).log() * use
        dist = distance * use
        # per row: n, S_d, S_y, S_dd, S_dy, S_yy (float32 sums of <= T terms, then float64)
        n, s_d, s_y = (x.sum(1).double() for x in (use, dist, logp))
        s_dd, s_dy, s_yy = ((a * b).sum(1).double() for a, b in ((dist, dist), (dist, logp), (logp, logp)))
        ok = n >= 2
        if not ok.any():
            continue
        n, s_d, s_y = n[ok], s_d[ok], s_y[ok]
        # within-row (co)variations: sum over a row of (x - mean)(y - mean) = S_xy - S_x S_y / n
        cov = (s_dy[ok] - s_d * s_y / n).sum().item()
        var_d = (s_dd[ok] - s_d * s_d / n).sum().item()
        var_y = (s_yy[ok] - s_y * s_y / n).sum().item()
        if var_d <= 0:
            continue
        slopes[h] = -cov / var_d
        r2[h] = min(1.0, cov * cov / (var_d * var_y)) if var_y > 0 else 1.0
    return slopes, r2


def _distance(T: int) -> torch.Tensor:
    """|i - j| as float32, shape (T, T) (exact: distances below 2^24)."""
    positions = torch.arange(T, dtype=torch.float32)
    return (positions[:, None] - positions[None, :]).abs()


def _band_sum(p: torch.Tensor, k: int) -> torch.Tensor:
    """Row sums of p (heads, T, T) over keys within k of the query, sum_{|i-j| <= k} p_ij,
    shape (heads, T), added up one diagonal at a time (2k + 1 strided views, no T x T
    temporary)."""
    T = p.shape[-1]
    total = torch.zeros(p.shape[:-1], dtype=p.dtype)
    for offset in range(-min(k, T - 1), min(k, T - 1) + 1):
        diagonal = torch.diagonal(p, offset=offset, dim1=-2, dim2=-1)  # p[..., i, i + offset]
        start = max(0, -offset)
        total[..., start:start + diagonal.shape[-1]] += diagonal
    return total


def _kl_from_bias(p: torch.Tensor, slopes, distance_rows: torch.Tensor,
                  entropy_rows: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """Per head, the mean over queries of KL(p_i || q_i), q_i the causal bias-only attention
    of the head's slope m (q_ij = e^(-m (i - j)) / Z_i over j <= i), in nats. p: (heads, T, T)
    rows summing to 1; slopes (heads,); distance_rows and entropy_rows (heads, T): each row's
    sum_j p_ij (i - j) and entropy, as head_statistics has them. Returns (heads,) float64.

    Since log q_ij = -m (i - j) - log Z_i, KL_i = sum_j p_ij log p_ij - sum_j p_ij log q_ij
    = -entropy_i + m distance_i + log Z_i sum_j p_ij, with log Z_i = log sum_{d <= i} e^(-m d):
    no (T, T) work beyond the row sums already made. Mass on a key after its query (which q
    gives no weight) makes a head's KL infinite, as it is."""
    T = p.shape[-1]
    m = torch.as_tensor(np.asarray(slopes, dtype=np.float64))[:, None]  # (H, 1)
    log_z = torch.logcumsumexp(-m * torch.arange(T, dtype=torch.float64), dim=1)  # (H, T)
    mass = p.sum(2).double()
    kl = (-entropy_rows + m * distance_rows + log_z * mass).mean(1)
    upper = torch.triu(p, diagonal=1, out=buffer)  # keys after their query
    # a max and a min per head (count_nonzero over the layer is slower)
    after = (upper.amax(dim=(1, 2)) != 0) | (upper.amin(dim=(1, 2)) != 0)
    return torch.where(after, math.inf, kl)


def _as_maps(maps) -> list[np.ndarray]:
    maps = getattr(maps, "maps", maps)  # an AttentionResult is fine too
    if isinstance(maps, np.ndarray) and maps.ndim == 3:
        maps = [maps]
    try:
        maps = [np.asarray(m, dtype=np.float32) for m in maps]
    except (TypeError, ValueError) as exc:
        raise AlibiVizError(f"maps must be a list of (heads, T, T) arrays: {exc}") from None
    if not maps:
        raise AlibiVizError("maps is empty: pass one (heads, T, T) array per layer.")
    shape = maps[0].shape
    if len(shape) != 3 or shape[1] != shape[2] or shape[1] == 0:
        raise AlibiVizError(f"Each attention map must be (heads, T, T), got {shape}.")
    if any(m.shape != shape for m in maps):
        raise AlibiVizError("All layers' attention maps must have the same shape.")
    return maps


def _config_slopes(slopes, layers: int, heads: int) -> np.ndarray | None:
    """`slopes` ((heads,) or (layers, heads)) as a float64 (layers, heads) array; None for
    None; AlibiVizError for another shape."""
    if slopes is None:
        return None
    try:
        return np.broadcast_to(np.asarray(slopes, dtype=np.float64), (layers, heads)).copy()
    except ValueError:
        raise AlibiVizError(f"slopes must have shape ({heads},) or ({layers}, {heads}), "
                            f"got {np.shape(slopes)}.") from None


def head_statistics(maps, slopes=None, k: int = 8, max_distance: int | None = None) -> HeadStatistics:
    """Statistics of every head from its attention maps (see HeadStatistics).

    maps:   one (heads, T, T) array per layer (or an AttentionResult).
    slopes: slopes from the config to set beside the fitted ones: (heads,) or (layers, heads);
            for ALiBi models pass `info.config_slopes`, the slope the eager path applies as
            the config and the model's code predict it.
    k:      distance for `local_share`.
    """
    maps = _as_maps(maps)
    layers = len(maps)
    heads, T, _keys = maps[0].shape
    k = check_int(k, "k", 0, 1 << 24)
    max_distance = max(1, T // 2) if max_distance is None else check_int(max_distance, "max_distance", 1, 1 << 24)
    config = _config_slopes(slopes, layers, heads)

    distance = _distance(T)                                       # (T, T)
    buffer = torch.empty(heads, T, T)                             # one layer's, reused
    kl = np.zeros((layers, heads)) if config is not None else None
    mean_distance = np.zeros((layers, heads))
    entropy = np.zeros((layers, heads))
    local_share = np.zeros((layers, heads))
    fitted = np.zeros((layers, heads))
    r2 = np.zeros((layers, heads))
    for layer, attn in enumerate(maps):
        p = torch.from_numpy(attn)                                 # (H, T, T), every head at once
        distance_rows = torch.mul(p, distance, out=buffer).sum(2).double()  # (H, T)
        entropy_rows = torch.special.entr(p, out=buffer).sum(2).double()
        mean_distance[layer] = distance_rows.mean(1).numpy()
        entropy[layer] = entropy_rows.mean(1).numpy()
        local_share[layer] = _band_sum(p, k).double().mean(1).numpy()
        if kl is not None:
            kl[layer] = _kl_from_bias(p, config[layer], distance_rows, entropy_rows,
                                      buffer).numpy()
        fitted[layer], r2[layer] = fit_decay_slope(attn, max_distance)
    return HeadStatistics(mean_distance=mean_distance, entropy=entropy, local_share=local_share,
                          fitted_slope=fitted, slope_fit_r2=r2, config_slope=config,
                          k=k, max_distance=max_distance, content_kl=kl)


def stack_statistics(per_layer: list[HeadStatistics]) -> HeadStatistics:
    """One HeadStatistics of the layers of `per_layer` (each of one or more layers, computed
    with the same k and max_distance), in order."""
    first = per_layer[0]

    def rows(name):
        values = [getattr(part, name) for part in per_layer]
        return None if values[0] is None else np.concatenate(values)

    return HeadStatistics(mean_distance=rows("mean_distance"), entropy=rows("entropy"),
                          local_share=rows("local_share"), fitted_slope=rows("fitted_slope"),
                          slope_fit_r2=rows("slope_fit_r2"), config_slope=rows("config_slope"),
                          k=first.k, max_distance=first.max_distance,
                          content_kl=rows("content_kl"))


# ----------------------------------------------------------------------------- one map

def mean_distance_against_bias(attention, slope: float) -> tuple[float, float]:
    """(mean attended distance of one head's (T, T) causal attention, mean distance of what its
    ALiBi slope alone would give with every content score equal), in tokens: the distance
    i - j weighted by each row's attention, then averaged over the queries (`head_statistics`;
    the slope's in closed form, `alibi.bias_only_mean_distance`)."""
    attention = check_attention(attention)
    model = head_statistics([attention[None]]).mean_distance[0, 0]
    return float(model), float(bias_only_mean_distance([slope], attention.shape[0])[0])


def check_attention(attention, name: str = "attention") -> np.ndarray:
    """An attention map as float32 (T, T), T >= 1; else AlibiVizError."""
    attention = np.asarray(attention, dtype=np.float32)
    if attention.ndim != 2 or attention.shape[0] != attention.shape[1] or attention.shape[0] < 1:
        raise AlibiVizError(f"{name} must be a square (T, T) map, got shape {attention.shape}.")
    return attention


def mean_mass_beyond(attention, distance: int) -> float:
    """Mean share of attention on keys more than `distance` tokens back (i - j > distance),
    over the queries that have such keys (i > distance); NaN if none do."""
    attention = check_attention(attention)
    T = attention.shape[0]
    distance = check_int(distance, "distance", 0, 1 << 24)
    if T <= distance + 1:
        return math.nan
    far = np.tril(attention, k=-(distance + 1))  # keeps j <= i - distance - 1
    return float(far[distance + 1:].sum(axis=1).mean())


def beyond_training(attention, train_seq_len: int, slope=None) -> tuple[float, float | None, int]:
    """(share of one head's (T, T) attention beyond the training length, the same for its bias
    alone or None without a slope, T): `mean_mass_beyond` of the map and of the bias' map."""
    attention = check_attention(attention)
    T = attention.shape[0]
    bias = (mean_mass_beyond(implied_attention_map([slope], T)[0], train_seq_len)
            if slope else None)
    return mean_mass_beyond(attention, train_seq_len), bias, T


# ----------------------------------------------------------------------------- for the pages

@dataclass
class HeadsAnalysis:
    """What the heads pages draw for one text, at display resolution (a few MB).

    tokens:   label per position (length T).
    layers:   one StackView of attention probabilities per layer, (heads, R, R).
    stats:    head_statistics of the full maps, arrays (layers, heads).
    truncated: what was cut from the text and why, or None.
    splits:   {layer: {bias form: DecompositionView}} of the layers split in the same pass
              (`analyze_heads`' split_layers); {} when none was asked for.
    """

    tokens: list[str]
    seq_len: int
    layers: list[StackView]
    stats: HeadStatistics
    truncated: str | None = None
    splits: dict = field(default_factory=dict)


class _NoProbabilities(Exception):
    """Raised by analyze_heads' hook when an attention module returns no probabilities."""


def analyze_heads(model, tokenizer, text, max_tokens: int | None = None, slopes=None,
                  pixel_budget: int = IMAGE_PIXEL_BUDGET,
                  hover_cells: int = GRID_HOVER_CELLS,
                  info: ModelInfo | None = None, split_layers=(), bias_shown=BIAS_SHOWN[:1],
                  budget_bytes: int | None = None,
                  progress: Callable[[int, int], None] | None = None) -> HeadsAnalysis:
    """Run the model's body once on `text` (no LM head) and keep what the pages draw: every
    layer's attention at display resolution, the head statistics (configured `slopes` beside
    the fitted ones) and, for each layer of `split_layers`, its content/bias split in each
    form of `bias_shown` (`decomposition_view`).

    Each layer is reduced inside the pass, by a hook on its attention module, as soon as its
    probabilities exist: the statistics are computed on its full (heads, T, T) maps (exact,
    as `head_statistics` of all maps would give), the maps are pooled for display, and the
    full maps are dropped before the next layer runs. So one layer's maps are alive at a
    time, and T is capped so that LAYER_ARRAYS x heads x T^2 float32 fit `budget_bytes`
    (default `memory_budget()`), whatever the number of layers. The layers of `split_layers`
    are split in the pass when DECOMPOSITION_ARRAYS more fit too, and when the split
    reproduces the model's attention; `splits` lacks the others (decomposition_views then
    cuts the text to its own cap, or says why it cannot split). progress(layers done,
    layers) after each layer. A model whose attention modules return no probabilities (not
    eager) is run once with output_attentions, holding every layer's maps, and split by
    `score_decompositions`.
    """
    facts = _facts(model, info)
    split_layers = tuple(check_int(layer, "layer", 0, facts.layers - 1) for layer in split_layers)
    forms = (bias_shown,) if isinstance(bias_shown, str) else tuple(bias_shown)
    recompute = _recompute_of(model) if split_layers else None
    budget = memory_budget() if budget_bytes is None else budget_bytes
    cap, reason = _token_cap(model, facts, max_tokens, budget, LAYER_ARRAYS * facts.heads * 4,
                             _("one layer's {heads} heads of attention maps").format(
                                 heads=facts.heads))
    tokenized = tokenize_capped(tokenizer, text, cap, reason)
    T = len(tokenized.ids)
    if (LAYER_ARRAYS + DECOMPOSITION_ARRAYS) * facts.heads * 4 * T**2 > budget:
        split_layers = ()  # the split does not fit beside the maps: decomposition_views cuts it
    hover_side = max(2, int(math.sqrt(hover_cells / facts.heads)))
    config = _config_slopes(slopes, facts.layers, facts.heads)
    modules = attention_modules(model, facts.layers)
    owner, inputs = threading.get_ident(), {}
    stats, views, splits = {}, {}, {}

    def reduce(layer: int, maps: np.ndarray) -> None:  # one layer's (heads, T, T) float32
        stats[layer] = head_statistics([maps], slopes=None if config is None else config[layer])
        views[layer] = stack_view(maps, pixel_budget=pixel_budget, hover_side=hover_side,
                                  reduce="max")
        if progress is not None:
            progress(len(views), facts.layers)

    take_inputs = _input_recorder(owner, inputs)

    def read(layer, mod, args, *rest):
        if threading.get_ident() != owner:  # as in _input_recorder
            return
        probs = rest[-1][1] if isinstance(rest[-1], tuple) and len(rest[-1]) > 1 else None
        if probs is None:
            raise _NoProbabilities
        maps = None
        if layer in split_layers:
            hidden, captured = inputs.pop(layer)
            try:
                dec = _decompose(model, mod, recompute, hidden, captured, probs, tokenized,
                                 layer, facts.bias_form)
            except AlibiVizError:
                pass  # not split here: decomposition_views says why when the split is asked for
            else:
                splits[layer] = {form: decomposition_view(dec, bias_shown=form) for form in forms}
                maps = dec.probs
        reduce(layer, probs[0].float().cpu().numpy() if maps is None else maps)

    handles = []
    for layer, module in enumerate(modules):
        if layer in split_layers:
            handles.append(module.register_forward_pre_hook(partial(take_inputs, layer),
                                                            with_kwargs=True))
        handles.append(module.register_forward_hook(partial(read, layer), with_kwargs=True))
    try:
        with torch.inference_mode():
            model.base_model(input_ids=_input_ids(model, tokenized.ids), use_cache=False)
    except _NoProbabilities:
        views.clear()  # the pass below reduces every layer again
    finally:
        for handle in handles:
            handle.remove()
    if len(views) != facts.layers:  # no probabilities from the modules: every map at once
        for layer, maps in enumerate(attention_maps_of_ids(model, tokenized.ids, facts.layers)):
            reduce(layer, maps)
        if split_layers:
            splits = decomposition_views(model, tokenizer, text, split_layers,
                                         max_tokens=T, info=info,
                                         bias_shown=forms)
    return HeadsAnalysis(tokens=tokenized.tokens, seq_len=T,
                         layers=[views[layer] for layer in range(facts.layers)],
                         stats=stack_statistics([stats[layer] for layer in range(facts.layers)]),
                         truncated=tokenized.truncated, splits=splits)


@dataclass
class DecompositionView:
    """A Decomposition (one layer, every head) at display resolution.

    parts:  "content", "bias", "total", "probs" -> StackView (heads, R, R); probs max-pooled,
            the scores sampled.
    ranges: same keys -> float64 (heads, 2): colour range (min, max) of each head's full matrix
            (content: symmetric about 0, over visible keys; total: over visible keys).
    bias_shown: "textbook" (bias and total relative to the query's own key: -m (i - j) under
            the mask) or "as_added" (the model's own numbers, e.g. BLOOM's +m j).
    """

    tokens: list[str]
    seq_len: int
    layer: int
    bias_form: str
    max_abs_error: float
    parts: dict
    ranges: dict
    truncated: str | None = None
    bias_shown: str = "textbook"


def decomposition_view(dec: Decomposition, side: int = DECOMP_PANEL_PIXELS,
                       hover_side: int = DECOMP_HOVER_SIDE,
                       bias_shown: str = "textbook") -> DecompositionView:
    """Reduce a Decomposition to display resolution, with each head's colour ranges.

    bias_shown "textbook" subtracts from each query row the bias of its own key (i = j), so
    the bias panel shows -m (i - j) under the causal mask whatever row constant the model adds
    (BLOOM's +m j, MPT's m (j - (L - 1))), and the total shifts by the same constant per row,
    which softmax ignores: the attention is unchanged. "as_added" shows the model's numbers.
    """
    if bias_shown not in BIAS_SHOWN:
        raise AlibiVizError(f"bias_shown must be one of {BIAS_SHOWN}, got {bias_shown!r}.")
    T = dec.probs.shape[-1]
    visible = torch.ones(T, T, dtype=torch.bool).tril()  # key j <= query i
    content, total = (torch.from_numpy(np.require(a, np.float32, "W"))  # writable, no copy
                      for a in (dec.content, dec.total))
    if dec.bias.strides[1] == 0:  # the same on every query row: keep one row, no T^2 copy
        bias = torch.from_numpy(np.array(dec.bias[:, :1], dtype=np.float32)).expand(total.shape)
    else:
        bias = torch.from_numpy(np.require(dec.bias, np.float32, "W"))
    if bias_shown == "textbook":
        own = torch.diagonal(bias, dim1=1, dim2=2)[:, :, None]  # (H, T, 1): bias at j = i
        bias = (bias - own).masked_fill_(~visible, -math.inf)  # (H, T, T), -inf where masked
        total = total - own
    # Each head's colour ranges, one head at a time: (T, T) temporaries, not (H, T, T) ones
    # (a 16-head layer at 2,048 tokens is 268 MB per array).
    ranges = {name: np.zeros((len(content), 2)) for name in ("content", "bias", "total")}
    ranges["probs"] = np.tile([0.0, 1.0], (len(content), 1))
    for h in range(len(content)):
        top = content[h].abs().masked_fill_(~visible, 0.0).amax().item()
        ranges["content"][h] = (-top, top)
        for name, scores in (("bias", bias[h]), ("total", total[h])):
            finite = torch.isfinite(scores)  # the masked entries are -inf
            ranges[name][h] = (torch.where(finite, scores, math.inf).amin().item(),
                               torch.where(finite, scores, -math.inf).amax().item())
    arrays = {"content": content, "bias": bias, "total": total, "probs": dec.probs}
    parts = {name: stack_view(np.asarray(arrays[name]), side=side, hover_side=hover_side,
                              reduce="max" if name == "probs" else "sample")
             for name in DECOMPOSITION_PARTS}
    return DecompositionView(tokens=dec.tokens, seq_len=T, layer=dec.layer,
                             bias_form=dec.bias_form, max_abs_error=dec.max_abs_error,
                             parts=parts, ranges=ranges, truncated=dec.truncated,
                             bias_shown=bias_shown)


ALL_LAYERS_AT_ONCE = 12  # models with at most this many layers are split in one pass ...
ALL_LAYERS_CELLS = 12 * 512 * 512  # ... when layers x T^2 is at most this


def decomposition_layers(num_layers: int, layer: int, seq_len: int = 0) -> tuple[int, ...]:
    """The layers one pass splits when layer `layer` (0-based) is asked for, on a text of
    `seq_len` tokens: every layer of a small model on a text short enough (ALL_LAYERS_AT_ONCE
    layers, ALL_LAYERS_CELLS layer x T^2 cells), so that switching layer afterwards runs no
    model; only `layer` otherwise, to bound the first wait (2,048 tokens: splitting the
    shipped model's 4 layers took three quarters of a new text's 4.8 CPU-s, bench/README.md)."""
    if num_layers <= ALL_LAYERS_AT_ONCE and num_layers * seq_len ** 2 <= ALL_LAYERS_CELLS:
        return tuple(range(num_layers))
    return (layer,)


def decomposition_views(model, tokenizer, text, layers, max_tokens: int | None = None,
                        info: ModelInfo | None = None, bias_shown=BIAS_SHOWN
                        ) -> dict[int, dict[str, DecompositionView]]:
    """{layer: {form: DecompositionView}} for each of `layers` and each bias form of
    `bias_shown` (one of BIAS_SHOWN, or several), from ONE forward pass of
    `score_decompositions`, at display size."""
    forms = (bias_shown,) if isinstance(bias_shown, str) else tuple(bias_shown)
    views = score_decompositions(
        model, tokenizer, text, list(layers), max_tokens=max_tokens, info=info,
        reduce=lambda dec: {shown: decomposition_view(dec, bias_shown=shown) for shown in forms})
    return dict(zip(layers, views, strict=True))

