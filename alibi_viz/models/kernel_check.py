"""The conformance check without a Hugging Face model: an attention kernel, or a bias tensor.

    check_kernel(fn, num_heads, head_dim)   fn(q, k, v) -> attention output (or scores)
    check_bias(bias)                        bias: (heads, queries, keys) pre-softmax

Both return the `AlibiCheck` of `check_alibi` (one layer; `decode` None), judged by the same
diagnosis: conforms, scaled, sign flipped, another schedule, tensor-parallel shards, permuted,
offset, missing, clipped, inconclusive.

How a kernel's bias is recovered. With q = 0 every content score q.k is 0, so the kernel's
pre-softmax scores are exactly the bias it adds (causal mask included) and its attention
probabilities are softmax(bias). A kernel that returns scores gives the bias directly. One that
returns the attention output gives the probabilities back through v: with v[j] the one-hot
vector e_(j mod head_dim) for the keys of one block of head_dim keys and 0 for the others,
out[i, c] = p_(i, j) for the key j of that block at column c; ceil(seq_len / head_dim) calls
read every key. log p_ij - log p_ii = b(i - j) - b(0), as in `check_alibi`'s probe, so any
row-constant form of the bias (+m j, m (j - L + 1), -m (i - j)) reads the same.

Expected slopes: `expected` (slopes, or a schedule name of `alibi_slopes`), default the
official schedule for num_heads. Slopes are per token on the pre-softmax scores: a kernel that
adds m / sqrt(d) (Falcon-RW's form) is checked with expected=alibi_slopes(n) / sqrt(d).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from alibi_viz.alibi import alibi_slopes, check_int, check_num_heads
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.conformance_diagnosis import diagnose, given_slopes
from alibi_viz.models.conformance_probe import fit_head, kernel_curves, thresholds
from alibi_viz.models.conformance_report import AlibiCheck

MAX_KERNEL_LENGTH = 8192


def _judge(logits: torch.Tensor, valid: torch.Tensor, dtype: torch.dtype, expected,
           path: str, head_dim: int = 1) -> AlibiCheck:
    """The check of one (heads, queries, keys) array of logits (bias or log probabilities)."""
    heads = logits.shape[0]
    configured, form = (given_slopes(expected, heads) if expected is not None else
                        (alibi_slopes(heads), (f"the official schedule for {heads} heads")))
    y, n = kernel_curves(logits, valid)
    base = thresholds(dtype, "eager")
    fits = [[fit_head(y[h], n[h], base) for h in range(heads)]]
    steepest = float(np.nanmax(np.abs([f[0] for f in fits[0]] + list(configured))))
    th = thresholds(dtype, "eager", 0.0, steepest)
    context = {"head_dim": head_dim, "heads": heads, "probe_length": int(logits.shape[-1]), "falcon_eager": False,
               "schedule": expected if isinstance(expected, str) else
               "official" if expected is None else None}
    head_checks, findings, schedule = diagnose(fits, configured, 1.0, head_dim, th, context)
    findings = ([f for f in findings if f.verdict != "inconclusive"]
                + [f for f in findings if f.verdict == "inconclusive"])
    return AlibiCheck(heads=head_checks, decode=None, expected_form=form, schedule=schedule,
                      probe_length=int(logits.shape[-1]), diagnosis=findings, attn=path,
                      dtype=str(dtype).removeprefix("torch."), model_type="", thresholds=th)


def check_bias(bias, expected: str | Sequence[float] | np.ndarray | None = None,
               head_dim: int | None = None) -> AlibiCheck:
    """Check a bias tensor (heads, queries, keys): the pre-softmax scores a kernel adds, in any
    row-constant form, causal (entries above the diagonal are ignored; -inf there is fine).
    Queries are the last `queries` positions of the keys (a KV cache's decode rows).
    expected: slopes or a schedule name (default: the official schedule for `heads`).
    head_dim: when given, a factor of sqrt(head_dim) or 1/sqrt(head_dim) is named as such.
    Returns an AlibiCheck with one layer. Raises AlibiVizError for a bias of another shape."""
    if not isinstance(bias, torch.Tensor):
        bias = np.asarray(bias)
        if not bias.flags.writeable:  # a view (np.broadcast_to), a buffer: torch warns on it
            bias = bias.copy()
    tensor = torch.as_tensor(bias)
    if tensor.dim() != 3 or tensor.shape[1] < 2 or tensor.shape[2] < tensor.shape[1]:
        raise AlibiVizError("check_bias takes a (heads, queries, keys) bias with at least 2 "
                              f"queries and no more queries than keys, got shape {tuple(tensor.shape)}.")
    check_num_heads(int(tensor.shape[0]))
    dtype = tensor.dtype if tensor.is_floating_point() else torch.float64
    logits = tensor.detach().cpu().double()
    head_dim = 1 if head_dim is None else check_int(head_dim, "head_dim", 1, 1024)
    return _judge(logits, torch.isfinite(logits), dtype, expected, "bias", head_dim)


def check_kernel(fn: Callable, num_heads: int, head_dim: int, seq_len: int = 128, *,
                 expected: str | Sequence[float] | np.ndarray | None = None,
                 returns: str = "output", layout: str = "bhsd",
                 dtype: torch.dtype = torch.float32, device="cpu") -> AlibiCheck:
    """Check an attention kernel fn(q, k, v) for causal ALiBi, with constructed q, k, v.

    q, k, v are (1, num_heads, seq_len, head_dim) (layout "bhsd", torch's sdpa) or
    (1, seq_len, num_heads, head_dim) ("bshd": FlashAttention's), in `dtype` on `device`.
    returns: "output", the attention output in the same layout, or "scores", the pre-softmax
    scores (1, num_heads, seq_len, seq_len). The kernel applies its own causal mask and ALiBi
    slopes (wrap it: `lambda q, k, v: flash_attn_func(q, k, v, causal=True,
    alibi_slopes=m)`). Returns an AlibiCheck with one layer (module docstring).
    """
    if not callable(fn):
        raise AlibiVizError(f"check_kernel needs a callable fn(q, k, v), got {type(fn).__name__}.")
    heads = check_num_heads(num_heads)
    head_dim = check_int(head_dim, "head_dim", 1, 1024)
    seq_len = check_int(seq_len, "seq_len", 16, MAX_KERNEL_LENGTH)
    if returns not in ("output", "scores"):
        raise AlibiVizError(f"returns must be 'output' or 'scores', got {repr(returns)}.")
    if layout not in ("bhsd", "bshd"):
        raise AlibiVizError(f"layout must be 'bhsd' or 'bshd', got {repr(layout)}.")
    shape = (1, heads, seq_len, head_dim)

    def call(v: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(shape, dtype=dtype, device=device)
        k = torch.zeros(shape, dtype=dtype, device=device)
        if layout == "bshd":
            q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        with torch.inference_mode():
            out = fn(q, k, v)
        if not isinstance(out, torch.Tensor):
            raise AlibiVizError(f"The kernel returned {type(out).__name__}, not a tensor.")
        if returns == "output" and layout == "bshd" and out.dim() == 4:
            out = out.transpose(1, 2)
        want = (1, heads, seq_len, seq_len if returns == "scores" else head_dim)
        if tuple(out.shape) != want:
            raise AlibiVizError(f"The kernel returned shape {tuple(out.shape)}; with returns={returns!r} "
                                  f"and layout {layout!r} it should be {want}.")
        return out[0].detach().to("cpu", torch.float64)

    if returns == "scores":
        logits = call(torch.zeros(shape, dtype=dtype, device=device))
        return _judge(logits, torch.isfinite(logits), dtype, expected, "kernel", head_dim)
    probs = torch.zeros(heads, seq_len, seq_len, dtype=torch.float64)
    for start in range(0, seq_len, head_dim):  # one block of head_dim keys per call
        stop = min(start + head_dim, seq_len)
        v = torch.zeros(shape, dtype=torch.float64)
        v[0, :, torch.arange(start, stop), torch.arange(stop - start)] = 1.0
        probs[:, :, start:stop] = call(v.to(dtype=dtype, device=device))[:, :, : stop - start]
    logits = probs.log()
    valid = probs >= torch.finfo(dtype).tiny
    return _judge(logits, valid, dtype, expected, "kernel", head_dim)
