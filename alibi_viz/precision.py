"""What a 16-bit dtype does to the ALiBi bias a model really adds.

BLOOM (transformers' `build_alibi_tensor`) adds the row-constant form m_h * j: it computes it in
float32 and casts it to the model's dtype. In bfloat16 a number in [2^e, 2^(e+1)) is rounded to
a multiple of 2^(e-7), so at 2,048 tokens the steepest head's m * j (up to about 1,024 for
m = 1/2) is off by up to 2 logits, and neighbouring keys collapse onto the same bias value. The
textbook form -m (i - j) would be small near the diagonal, where the attention is; the row
constant m * i that the short form saves is exactly what makes the numbers large.

The content score is rounded with it. `BloomAttention.forward` computes the whole score as
`alibi.baddbmm(q, k^T, beta=1, alpha=1/sqrt(d))` in the model's dtype, so m * j + q.k/sqrt(d)
comes back on the grid of m * j: in bfloat16, steps of 4 logits on [512, 1,024) and 8 on
[1,024, 2,048), and a content score of a few logits is rounded to a multiple of them
(`content_rounding`).

Everything here calls transformers' own builder and torch's own rounding, so the figures are
what the model computes, not a model of it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from alibi_viz.alibi import alibi_slopes, check_num_heads, check_seq_len
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, number, significant, small_percent

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_dtype(dtype) -> torch.dtype:
    """A torch dtype from a name in DTYPES (or a torch dtype among them)."""
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if dtype in DTYPES:
        return DTYPES[dtype]
    raise AlibiVizError(_("dtype must be one of {choices}, got {value}.").format(
        choices=", ".join(DTYPES), value=repr(dtype)))


def spacing(values, dtype) -> np.ndarray:
    """Distance between neighbouring representable numbers of `dtype` at each |value| (normal
    range): eps(dtype) * 2^floor(log2 |value|). bfloat16 has eps 2^-7, so the step is 2.0 for
    |value| in [256, 512). Zero maps to 0."""
    dtype = check_dtype(dtype)
    x = np.abs(np.asarray(values, dtype=np.float64))
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(x > 0, x, 1.0)))
    return np.where(x > 0, torch.finfo(dtype).eps * 2.0**exponent, 0.0)


def bloom_bias(num_heads: int, seq_len: int, dtype) -> torch.Tensor:
    """The bias BLOOM adds, from transformers' build_alibi_tensor: m_h * j, (heads, seq_len),
    in `dtype` as the model holds it."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # heavy: at first use

    num_heads, seq_len = check_num_heads(num_heads), check_seq_len(seq_len)
    mask = torch.ones(1, seq_len, dtype=torch.long)
    return build_alibi_tensor(mask, num_heads, check_dtype(dtype))[:, 0, :]  # (heads, seq_len)


def bloom_bias_error(num_heads: int, seq_len: int, dtype="bfloat16") -> dict:
    """How far BLOOM's bias in `dtype` is from the exact m_h * j, per head.

    Returns {"max_error": (heads,) largest |added - exact| over the keys, in logits;
    "distinct_last_16": (heads,) distinct bias values among the last 16 keys (16 when nothing
    collapses); "exact": the float64 slopes used}. The exact slopes are transformers' own
    float32 slopes in float64 (what the model means); the error is the cast to `dtype`.
    """
    added = bloom_bias(num_heads, seq_len, dtype).double()  # (H, T)
    slopes = bloom_bias(num_heads, 2, "float32")[:, 1].double()  # m_h * 1, float32 -> exact
    exact = slopes[:, None] * torch.arange(seq_len, dtype=torch.float64)[None, :]
    last = added[:, -min(16, seq_len):]
    return {"max_error": (added - exact).abs().amax(dim=1).numpy(),
            "distinct_last_16": np.array([torch.unique(row).numel() for row in last]),
            "slopes": slopes.numpy()}


def row_constant_error_table(head_counts=(8, 112), seq_len: int = 2048,
                             dtype="bfloat16") -> list[dict]:
    """One row per head count: the largest error of BLOOM's row-constant bias in `dtype` at
    `seq_len` tokens, and how many distinct values the steepest head's last 16 keys get.
    The keys are English column names, marked for translation: a page shows them as `_(key)`."""
    rows = []
    for n in head_counts:
        err = bloom_bias_error(n, seq_len, dtype)
        rows.append({N_("heads"): int(n), N_("tokens"): int(seq_len), "dtype": str(dtype),
                     N_("largest error (logits)"): float(err["max_error"].max()),
                     N_("distinct values, last 16 keys of head 1"):
                         int(err["distinct_last_16"][0])})
    return rows


def _scores(bias: torch.Tensor, content: float, dtype: torch.dtype, head_dim: int) -> torch.Tensor:
    """bias (H, T) in `dtype` plus a content score of `content` at every key, computed as
    BloomAttention.forward computes its scores: bias.baddbmm(q, k^T, beta=1, alpha=1/sqrt(d))
    in `dtype`, with one query and keys whose q.k/sqrt(d) is `content`. Returns (H, T) float64."""
    heads, keys = bias.shape
    q = torch.zeros(heads, 1, head_dim, dtype=dtype)
    q[:, 0, 0] = content * math.sqrt(head_dim)  # q.k = content * sqrt(d) with k = e_0
    k = torch.zeros(heads, head_dim, keys, dtype=dtype)
    k[:, 0, :] = 1.0
    scores = bias[:, None, :].baddbmm(q, k, beta=1.0, alpha=1.0 / math.sqrt(head_dim))
    return scores[:, 0, :].double()


def content_rounding(num_heads: int, head: int, keys, content: float = 3.0, dtype="bfloat16",
                     head_dim: int = 64) -> dict:
    """What BLOOM's attention in `dtype` keeps of a content score at the given keys.

    head: 0-based; keys: key positions j (the bias is transformers' m_h * j from
    build_alibi_tensor, in `dtype`). The score of a key whose content score q.k/sqrt(d) is
    `content` is computed with torch's own baddbmm in `dtype`, as BloomAttention.forward does,
    and so is that of a key with content 0 (the bias alone); their difference is what the
    softmax sees of the content. Returns {"keys", "bias" (m_h * j as the model holds it),
    "seen" (the content the softmax sees, per key), "error" (seen - content)}, each (K,)."""
    dtype = check_dtype(dtype)
    keys = np.asarray(keys, dtype=np.int64)
    if keys.ndim != 1 or keys.size == 0 or keys.min() < 0:
        raise AlibiVizError(_("keys must be a list of key positions (0 or more)."))
    bias = bloom_bias(num_heads, int(keys.max()) + 1, dtype)[[head]][:, keys]  # (1, K)
    seen = (_scores(bias, content, dtype, head_dim) - _scores(bias, 0.0, dtype, head_dim))[0]
    return {"keys": keys, "bias": bias[0].double().numpy(), "seen": seen.numpy(),
            "error": seen.numpy() - content}


FORMS = ("row_constant", "textbook", "falcon")


def default_lens(model_type: str, dtype: str) -> tuple[str, str]:
    """(dtype, form) the precision lens opens on for a model: its own dtype (bfloat16 when it
    is none of DTYPES), and Falcon's own builder for Falcon, BLOOM's row-constant m·j else."""
    return (dtype if dtype in DTYPES else "bfloat16",
            "falcon" if model_type == "falcon" else "row_constant")


def precision_lens(num_heads: int, seq_len: int, dtype="bfloat16", form: str = "row_constant",
                   head_dim: int = 64, content: float | None = None) -> dict:
    """What `dtype` does to the bias of the last of `seq_len` queries, per head.

    form: "row_constant" (BLOOM: float32 m * j cast to dtype), "textbook" (-m (i - j) cast to
    dtype), "falcon" (Falcon's builder: the bias computed in bfloat16 whatever the model's
    dtype, then scaled by 1/sqrt(head_dim)). Returns {"error": (H, T) |added - exact| in logits
    against the exact bias of the same form (float64), "step": (H, T) the dtype's spacing at
    each exact value, "kl": (H,) KL(exact attention || attention with the added bias) of the
    last query with all content scores equal, in nats}. With `content` (a content score
    q.k/sqrt(d), logits) and a form that adds the bias to the content in `dtype` as BLOOM does
    (row_constant, textbook), also "content_error": (H, T) |what the softmax sees of that
    content score - content| at each key (`content_rounding`: the whole score is rounded to
    the dtype's grid at the size of the bias).
    """
    if form not in FORMS:
        raise AlibiVizError(_("form must be one of {choices}, got {value}.").format(
            choices=", ".join(FORMS), value=repr(form)))
    dtype = check_dtype(dtype)
    num_heads, seq_len = check_num_heads(num_heads), check_seq_len(seq_len)
    slopes32 = bloom_bias(num_heads, 2, "float32")[:, 1]  # transformers' float32 slopes
    j = torch.arange(seq_len, dtype=torch.float64)
    if form == "row_constant":
        exact = slopes32.double()[:, None] * j
        added = (slopes32[:, None] * j.float()).to(dtype).double()
    elif form == "textbook":
        exact = -slopes32.double()[:, None] * (seq_len - 1 - j)
        added = exact.float().to(dtype).double()
    else:
        from transformers.models.falcon.modeling_falcon import build_alibi_tensor  # heavy

        scale = 1.0 / math.sqrt(head_dim)
        mask = torch.ones(1, seq_len, dtype=torch.long)
        added = build_alibi_tensor(mask, num_heads, torch.bfloat16)[:, 0, :].double() * scale
        exact = torch.tensor(alibi_slopes(num_heads), dtype=torch.float64)[:, None] * j
        exact = exact * scale
    log_exact = torch.log_softmax(exact, dim=-1)
    log_added = torch.log_softmax(added, dim=-1)
    kl = (log_exact.exp() * (log_exact - log_added)).sum(dim=-1)
    out = {"error": (added - exact).abs().numpy(), "step": spacing(exact.numpy(), dtype),
           "kl": kl.numpy(), "form": form, "dtype": str(dtype).removeprefix("torch.")}
    if content is not None and form != "falcon":
        held = added.to(dtype)  # the bias as the model holds it (exact in dtype already)
        seen = (_scores(held, float(content), dtype, head_dim)
                - _scores(held, 0.0, dtype, head_dim))
        out["content_error"] = (seen - float(content)).abs().numpy()
    return out


def content_summary(lens: dict, content: float) -> str:
    """The content lens's sentence, from `precision_lens(..., content=)`'s data: the largest
    error and where it is, and the share of (head, key) scores that lose more than half of
    the content score."""
    error = lens["content_error"]
    h, j = np.unravel_index(int(np.argmax(error)), error.shape)
    return _("BLOOM adds the content score q·k/√d to the bias in the model's dtype, so the "
             "sum is rounded to the dtype's grid at the bias's size. Largest error: {err} "
             "logits of {content} (head {head}, key {key}); {share} of the heads' keys lose "
             "more than half of it.").format(
                 err=significant(float(error[h, j])), content=significant(content),
                 head=int(h) + 1, key=number(int(j)),
                 share=small_percent(float((error > abs(content) / 2).mean())))
