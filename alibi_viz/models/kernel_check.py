"""The conformance check without a Hugging Face model: an attention kernel, or a bias tensor.

    check_kernel(fn, num_heads, head_dim)                fn(q, k, v) -> attention output
    check_kernel(fn, num_heads, head_dim, decode=True)   fn(new query, key cache, value cache)
    check_bias(bias)       bias: (heads, queries, keys), (heads, 1, keys) or with a batch of 1

Both return the `AlibiCheck` of `check_alibi` (one layer; `decode` None), judged by the same
diagnosis (conforms, scaled, sign flipped, another schedule, tensor-parallel shards, ALiBi on
some heads only, permuted, offset, missing, clipped, inconclusive), and by two measures of
every query row that the slopes alone cannot give:

  unmasked   a causal kernel that puts attention on keys after the query (no causal mask):
             the slopes read from the keys before it can be right while the attention is not.
  precision  the worst query row's attention differs from exact ALiBi's by a total variation
             over PRECISION_TV (16-bit) or 2^12 eps (float32): the rounding of a bias far from
             zero (a row constant of -m L, as m (j - L + 1) over a static cache of L slots
             has) changes each row differently, and averaging rows before the fit hides it.

How a kernel's bias is recovered. With q = 0 every content score q.k is 0, so the kernel's
pre-softmax scores are exactly the bias it adds (causal mask included) and its attention
probabilities are softmax(bias). A kernel that returns scores gives the bias directly. One that
returns the attention output gives the probabilities back through v: with v[j] the one-hot
vector e_(j mod head_dim) for the keys of one block of head_dim keys and 0 for the others,
out[i, c] = p_(i, j) for the key j of that block at column c; ceil(seq_len / head_dim) calls
read every key (decode=True: one call per query position, the blocks in the batch).
log p_ij - log p_ii = b(i - j) - b(0), as in `check_alibi`'s probe, so any row-constant form
of the bias (+m j, m (j - L + 1), -m (i - j)) reads the same.

Expected slopes: `expected` (slopes, or a schedule name of `alibi_slopes`), default the
official schedule for num_heads. Slopes are per token on the pre-softmax scores: a kernel that
adds m / sqrt(d) (Falcon-RW's form) is checked with expected=alibi_slopes(n) / sqrt(d). A head
expected to add no bias (slope 0) is judged against an absolute tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from alibi_viz.alibi import alibi_slopes, check_int, check_mode, check_num_heads
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.conformance_diagnosis import diagnose, given_slopes
from alibi_viz.models.conformance_probe import (
    fit_head,
    kernel_curves,
    row_measures,
    thresholds,
    tv_tolerance,
)
from alibi_viz.models.conformance_report import AlibiCheck, Finding, finite

MAX_KERNEL_LENGTH = 8192
# A causal kernel may leave this much attention on keys after the query: a masked key gets
# exactly 0 (-inf, or finfo.min, underflows), an unmasked one a share of the row.
FUTURE_TOL = 1e-3
KERNEL_NEEDS = ("check_kernel calls fn(q, k, v) with q, k, v of shape {shape} ({layout}, "
                "num_heads={heads}, head_dim={head_dim}{length}) in {dtype} on {device}")


def _judge(logits: torch.Tensor, valid: torch.Tensor, dtype: torch.dtype, expected,
           path: str, head_dim: int = 1, *, probs: torch.Tensor | None = None,
           mode: str = "causal", bias: torch.Tensor | None = None) -> AlibiCheck:
    """The check of one (heads, queries, keys) array of logits (bias or log probabilities).

    probs: the attention's probabilities over every key, future ones included (H, Q, K) (None:
    softmax of the logits over the valid keys); bias: the pre-softmax bias where known (its
    row constants are reported). mode "symmetric": the keys after the query are read too."""
    heads = logits.shape[0]
    configured, form = (given_slopes(expected, heads) if expected is not None else
                        (alibi_slopes(heads), (f"the official schedule for {heads} heads")))
    past = _past(logits.shape)
    if probs is None:
        keep = valid & (past if mode == "causal" else torch.ones_like(past))
        probs = torch.softmax(torch.where(keep, logits, -math.inf), dim=-1).nan_to_num(0.0)
    check = _diagnose_side(logits, valid & past, dtype, configured, form, path, head_dim,
                           expected)
    tv, future = row_measures(probs, configured, mode)
    th = check.thresholds
    found = [f for f in check.diagnosis if f.verdict != "inconclusive"]
    if mode == "causal" and float(future.max()) > FUTURE_TOL:
        check.diagnosis.insert(0, _unmasked_finding(future))
    elif mode == "symmetric":
        # flipping queries and keys puts the keys after each query before it, at the same
        # distance, where the causal reading of the fit sees them
        side = (valid & (~past | _diagonal(logits.shape))).flip(1, 2)
        mirrored = _diagnose_side(logits.flip(1, 2), side, dtype, configured, form, path,
                                  head_dim, expected)
        if float(future.max()) <= FUTURE_TOL:
            check.diagnosis.insert(0, Finding(
                "unmasked", "The kernel puts no attention on keys after the query: it applies a "
                "causal mask, but mode='symmetric' expects a bias on both sides (pass "
                "mode='causal' for a causal kernel).", [0], heads,
                {"future_mass": float(future.max())}))
        else:
            for f in mirrored.diagnosis:
                if f.verdict != "inconclusive":
                    f.summary = "Keys after the query: " + f.summary
                    check.diagnosis.insert(len(found), f)
                    found.append(f)
    worst = float(tv.max())
    if found and worst > tv_tolerance(dtype) and _rounding_offsets(check, found, dtype, bias):
        check.diagnosis = [f for f in check.diagnosis if f not in found]
        found = []
    if not found and not any(f.verdict == "unmasked" for f in check.diagnosis) and \
            worst > tv_tolerance(dtype):
        check.diagnosis.insert(0, _precision_finding(tv, dtype, bias, logits.shape[-1]))
    for f in check.diagnosis:  # a q = 0 probe has no content: only rounding makes it coarse
        if f.verdict == "inconclusive":
            f.summary = ("Inconclusive: the probe reads {n} heads' slopes only to about {res} "
                         "logits per token: the attention's rounding in {dtype} is too coarse "
                         "to judge them (q = 0: the scores are the bias alone).").format(
                             n=f.heads, res=f"{f.evidence.get('resolution', math.nan):.2g}",
                             dtype=th.dtype)
    h, i = divmod(int(tv.argmax()), tv.shape[1])
    check.notes.append(f"Worst query row: total variation {worst:.2g} from exact ALiBi "
                       f"(head {h + 1}, query {i + 1}); most attention on keys after a query: "
                       f"{float(future.max()):.2g}.")
    return check


def _rounding_offsets(check: AlibiCheck, found: list, dtype: torch.dtype, bias) -> bool:
    """True when the findings are only per-head offsets that no explanation fits, in a 16-bit
    dtype, each within the rounding of its head's row constants (where the bias is known):
    what a 16-bit bias far from zero gives when only a few rows are read, whose rounding
    averages out over many rows and whose rows then differ from exact ALiBi (the caller's
    total variation)."""
    if torch.finfo(dtype).bits > 16 or not all(
            f.verdict == "offset" and "counts" in f.evidence for f in found):
        return False
    if bias is None:
        return True
    Q, K = bias.shape[1:]
    own = bias[:, torch.arange(Q), torch.arange(Q) + (K - Q)].abs().amax(dim=1)  # (H,)
    step = 4 * float(torch.finfo(dtype).eps) * own  # a few roundings of the row constant
    offsets = torch.tensor([h.offset for h in check.heads[0]], dtype=torch.float64)
    return bool((offsets.nan_to_num(0.0).abs() <= step).all())


def _past(shape) -> torch.Tensor:
    """(Q, K) True where key j is at or before query i (queries bottom-right aligned)."""
    _H, Q, K = shape
    return torch.arange(K)[None, :] <= torch.arange(Q)[:, None] + (K - Q)


def _diagonal(shape) -> torch.Tensor:
    _H, Q, K = shape
    return torch.arange(K)[None, :] == torch.arange(Q)[:, None] + (K - Q)


def _diagnose_side(logits, valid, dtype, configured, form, path, head_dim, expected):
    """The slope diagnosis of the keys at or before each query (`kernel_curves`)."""
    heads = logits.shape[0]
    y, n = kernel_curves(logits, valid)
    base = thresholds(dtype, "eager")
    fits = [[fit_head(y[h], n[h], base) for h in range(heads)]]
    steepest = float(np.nanmax(np.abs([f[0] for f in fits[0]] + list(configured))))
    th = thresholds(dtype, "eager", 0.0, steepest)
    context = {"head_dim": head_dim, "heads": heads, "probe_length": int(logits.shape[-1]),
               "falcon_eager": False, "content": False,
               "schedule": expected if isinstance(expected, str) else
               "official" if expected is None else None}
    head_checks, findings, schedule = diagnose(fits, configured, 1.0, head_dim, th, context)
    findings = ([f for f in findings if f.verdict != "inconclusive"]
                + [f for f in findings if f.verdict == "inconclusive"])
    return AlibiCheck(heads=head_checks, decode=None, expected_form=form, schedule=schedule,
                      probe_length=int(logits.shape[-1]), diagnosis=findings, attn=path,
                      dtype=str(dtype).removeprefix("torch."), model_type="", thresholds=th)


def _unmasked_finding(future: torch.Tensor) -> Finding:
    """The finding of a causal kernel that attends to keys after the query."""
    per_head = future.amax(dim=1)  # (H,)
    heads = int((per_head > FUTURE_TOL).sum())
    h, i = divmod(int(future.argmax()), future.shape[1])
    return Finding(
        "unmasked", f"The kernel attends to keys after the query: up to {float(future.max()):.0%}"
        f" of a row's attention (head {h + 1}, query {i + 1}) is on future keys, in {heads} of "
        f"{future.shape[0]} heads. Its causal mask is missing (a mask_mod, causal=True or "
        "is_causal=True); for a bidirectional kernel pass mode='symmetric'.", [0], heads,
        finite({"future_mass": float(future.max()), "head": h, "query": i,
                "heads_future_mass": per_head.tolist()}))


def _precision_finding(tv: torch.Tensor, dtype: torch.dtype, bias, keys: int) -> Finding:
    """The finding of query rows whose attention differs from exact ALiBi's while the slopes
    conform on average: the rounding of a bias far from zero, named where the dtype has it."""
    h, i = divmod(int(tv.argmax()), tv.shape[1])
    worst = float(tv.max())
    heads = int((tv.amax(dim=1) > tv_tolerance(dtype)).sum())
    name = str(dtype).removeprefix("torch.")
    constant = float(bias[h, i, i + keys - tv.shape[1]]) if bias is not None else None
    evidence = {"total_variation": worst, "head": h, "query": i, "dtype": name,
                "heads_total_variation": tv.amax(dim=1).tolist(), "tolerance": tv_tolerance(dtype)}
    text = (f"Query rows' attention differs from exact ALiBi by a total variation up to "
            f"{worst:.2g} (head {h + 1}, query {i + 1}; in {heads} heads), although the slopes "
            "conform on average over the rows.")
    if torch.finfo(dtype).bits <= 16:
        evidence["row_constant"] = constant
        here = f"; here {constant:.4g}" if constant is not None else ""
        text += (f" The cause: {name} rounding of a bias far from zero (row constant ≈ "
                 f"-m·L{here}): use the textbook form -m·(i - j) or compute the bias in "
                 "float32.")
    return Finding("precision", text, [0], heads, finite(evidence))


def check_bias(bias, expected: str | Sequence[float] | np.ndarray | None = None,
               head_dim: int | None = None, *, mode: str = "causal") -> AlibiCheck:
    """Check a bias tensor: the pre-softmax scores a kernel adds, in any row-constant form.

    Shapes: (heads, queries, keys), with a batch of one (1, heads, queries, keys), or one row
    for every query, (heads, 1, keys) or (1, heads, 1, keys), as BLOOM, MPT and most libraries
    build it (b[h, j], the same for every query: read as a keys x keys bias). Queries are the
    last `queries` positions of the keys (a KV cache's decode rows). mode "causal": entries
    above the diagonal are ignored (-inf there is fine; the mask is the kernel's);
    "symmetric": they are read as the bias of the keys after the query.
    expected: slopes or a schedule name (default: the official schedule for `heads`).
    head_dim: when given, a factor of sqrt(head_dim) or 1/sqrt(head_dim) is named as such.
    Returns an AlibiCheck with one layer. Raises AlibiVizError for a bias of another shape."""
    mode = check_mode(mode)
    if not isinstance(bias, torch.Tensor):
        bias = np.asarray(bias)
        if not bias.flags.writeable:  # a view (np.broadcast_to), a buffer: torch warns on it
            bias = bias.copy()
    tensor = torch.as_tensor(bias)
    shape = tuple(tensor.shape)
    if tensor.dim() == 4 and shape[0] == 1:
        tensor = tensor[0]
    if tensor.dim() == 3 and tensor.shape[1] == 1 and tensor.shape[2] >= 2:
        tensor = tensor.expand(-1, tensor.shape[2], -1)  # one row for every query
    if tensor.dim() != 3 or tensor.shape[1] < 2 or tensor.shape[2] < tensor.shape[1]:
        raise AlibiVizError(
            "check_bias takes a (heads, queries, keys) bias with at least 2 queries and no more "
            "queries than keys, a (heads, 1, keys) row for every query, or either with a batch "
            f"of 1 in front; got shape {shape}.")
    check_num_heads(int(tensor.shape[0]))
    if mode == "symmetric" and tensor.shape[1] != tensor.shape[2]:
        raise AlibiVizError("mode='symmetric' reads keys on both sides of every query: it takes "
                            f"a square (heads, keys, keys) bias, got shape {shape}.")
    dtype = tensor.dtype if tensor.is_floating_point() else torch.float64
    logits = tensor.detach().cpu().double()
    head_dim = 1 if head_dim is None else check_int(head_dim, "head_dim", 1, 1024)
    return _judge(logits, torch.isfinite(logits), dtype, expected, "bias", head_dim,
                  mode=mode, bias=logits)


def _kernel_error(exc: Exception, what: str, dtype: torch.dtype) -> AlibiVizError:
    """A typed error for an exception the kernel raised, naming the check_kernel argument
    that does not fit it (num_heads for a shape, dtype for a dtype)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    low = text.lower()
    dtype_words = ("dtype", "scalar type", "same type")
    shape_words = ("size", "shape", "match", "broadcast", "expand", "dimension")
    if any(w in low for w in dtype_words) or (not any(w in low for w in shape_words) and any(
            w in low for w in ("bfloat16", "half", "float"))):
        advice = (f"the dtype argument ({str(dtype).removeprefix('torch.')}) does not fit the "
                  "kernel: pass dtype= the one it computes in, or make it cast its bias to "
                  "q.dtype")
    elif any(w in low for w in shape_words):
        advice = ("num_heads (or head_dim, or layout) does not fit the kernel: pass the head "
                  "count and head size it was built for")
    else:
        advice = "pass num_heads, head_dim, layout and dtype as the kernel takes them"
    return AlibiVizError(f"The kernel raised {type(exc).__name__}: {text} ({what}): {advice}.")


def check_kernel(fn: Callable, num_heads: int, head_dim: int, seq_len: int = 128, *,
                 expected: str | Sequence[float] | np.ndarray | None = None,
                 returns: str = "output", layout: str = "bhsd",
                 dtype: torch.dtype = torch.float32, device="cpu", decode: bool = False,
                 mode: str = "causal") -> AlibiCheck:
    """Check an attention kernel for ALiBi, with constructed q, k, v (q = 0).

    Prefill (decode=False): fn(q, k, v) with q, k, v (batch, num_heads, seq_len, head_dim)
    (layout "bhsd", torch's sdpa) or (batch, seq_len, num_heads, head_dim) ("bshd":
    FlashAttention's), in `dtype` on `device`; the kernel applies its own causal mask and
    ALiBi slopes (wrap it: `lambda q, k, v: flash_attn_func(q, k, v, causal=True,
    alibi_slopes=m)`). Decode (decode=True): fn(q, k, v) with the new token's query q
    (batch, num_heads, 1, head_dim) at position t and the cache k, v (batch, num_heads, t + 1,
    head_dim), keys 0..t, the new one last; called once for every t < seq_len (the kernel's
    decode path: its bias row for a query at the end of the cache).
    returns: "output", the attention output in q's layout, or "scores", the pre-softmax scores
    (batch, num_heads, queries, keys), read as `check_bias` reads a bias (the scores of keys
    after the query are not read: whether the kernel masks them shows only in its output). mode: "causal", or "symmetric" for a bidirectional
    kernel (bias -m |i - j|). Returns an AlibiCheck with one layer (module docstring).
    Raises AlibiVizError for bad arguments, and for an error the kernel raises, naming the
    argument that does not fit it.
    """
    if not callable(fn):
        raise AlibiVizError(f"check_kernel needs a callable fn(q, k, v), got {type(fn).__name__}.")
    heads = check_num_heads(num_heads)
    head_dim = check_int(head_dim, "head_dim", 1, 1024)
    seq_len = check_int(seq_len, "seq_len", 16, MAX_KERNEL_LENGTH)
    mode = check_mode(mode)
    if returns not in ("output", "scores"):
        raise AlibiVizError(f"returns must be 'output' or 'scores', got {repr(returns)}.")
    if layout not in ("bhsd", "bshd"):
        raise AlibiVizError(f"layout must be 'bhsd' or 'bshd', got {repr(layout)}.")
    if decode and mode == "symmetric":
        raise AlibiVizError("decode=True reads a causal kernel's decode path: a symmetric "
                            "kernel has none (pass mode='causal').")

    def call(v: torch.Tensor, queries: int) -> torch.Tensor:
        """fn on q = k = 0 and v, (batch, heads, keys, head_dim); returns (batch, heads,
        queries, head_dim or keys) in float64 on the CPU."""
        batch, _h, keys, _d = v.shape
        q = torch.zeros(batch, heads, queries, head_dim, dtype=dtype, device=device)
        k = torch.zeros(batch, heads, keys, head_dim, dtype=dtype, device=device)
        if layout == "bshd":
            q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        what = KERNEL_NEEDS.format(shape=tuple(q.shape) if queries == keys else
                                   f"{tuple(q.shape)}, {tuple(k.shape)}", layout=layout,
                                   heads=heads, head_dim=head_dim,
                                   length=f", seq_len={seq_len}" if not decode else
                                   ", decode=True", dtype=str(dtype).removeprefix("torch."),
                                   device=device)
        try:
            with torch.inference_mode():
                out = fn(q, k, v)
        except AlibiVizError:
            raise
        except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:
            raise _kernel_error(exc, what, dtype) from exc
        if not isinstance(out, torch.Tensor):
            raise AlibiVizError(f"The kernel returned {type(out).__name__}, not a tensor.")
        if returns == "output" and layout == "bshd" and out.dim() == 4:
            out = out.transpose(1, 2)
        want = (batch, heads, queries, keys if returns == "scores" else head_dim)
        if tuple(out.shape) != want:
            raise AlibiVizError(f"The kernel returned shape {tuple(out.shape)}; with returns="
                                f"{returns!r} and layout {layout!r} it should be {want} "
                                f"({what}).")
        return out.detach().to("cpu", torch.float64)

    # v of every block of head_dim keys, one block per batch entry: (blocks, heads, T, d)
    blocks = -(-seq_len // head_dim)
    key = torch.arange(seq_len)
    bank = torch.zeros(blocks, heads, seq_len, head_dim, dtype=dtype, device=device)
    bank[key // head_dim, :, key, key % head_dim] = 1.0

    if decode:
        probs = torch.zeros(heads, seq_len, seq_len, dtype=torch.float64)
        for t in range(seq_len):  # the query at position t sees keys 0..t
            keys = t + 1
            if returns == "scores":
                scores = call(torch.zeros(1, heads, keys, head_dim, dtype=dtype,
                                          device=device), 1)[0, :, 0]
                probs[:, t, :keys] = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                continue
            v = bank[: -(-keys // head_dim), :, :keys].contiguous()
            out = call(v, 1)[:, :, 0, :]  # (blocks, heads, head_dim)
            probs[:, t, :keys] = out.permute(1, 0, 2).reshape(heads, -1)[:, :keys]
    elif returns == "scores":
        scores = call(torch.zeros(1, heads, seq_len, head_dim, dtype=dtype, device=device),
                      seq_len)[0]
        # pre-softmax scores may leave the causal mask to the softmax: read as a bias
        return _judge(scores, torch.isfinite(scores), dtype, expected, "kernel", head_dim,
                      mode=mode, bias=scores)
    else:
        probs = torch.zeros(heads, seq_len, seq_len, dtype=torch.float64)
        for start in range(0, seq_len, head_dim):  # one block of head_dim keys per call
            stop = min(start + head_dim, seq_len)
            out = call(bank[start // head_dim: start // head_dim + 1], seq_len)[0]
            probs[:, :, start:stop] = out[:, :, : stop - start]
    logits = probs.log()
    valid = probs >= torch.finfo(dtype).tiny
    return _judge(logits, valid, dtype, expected, "kernel", head_dim, probs=probs, mode=mode)
