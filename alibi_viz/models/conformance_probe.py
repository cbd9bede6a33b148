"""The conformance check's probe: what was measured, per head and per query row.

The stage of the check that reads numbers off the attention, shared by `check_alibi` (a model's
attention on one repeated token) and `check_kernel` / `check_bias` (a kernel on q = 0, or a bias):
each head's curve y(d) = mean over queries of log p_{i, i-d} - log p_{i, i} (`curves`,
`kernel_curves`), its fitted slope, offset and clip point (`fit_head`), every query row's total
variation from exact ALiBi and its attention on keys after the query (`row_measures`), and the
tolerances every measure is judged with (`thresholds`: the module docstring of
alibi_viz/models/conformance.py says where each comes from). The diagnosis
(`conformance_diagnosis`) explains what was measured; the report (`conformance_report`) says it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

MIN_QUERIES = 16  # a distance seen by fewer queries (the probe's last ones) is not read
CLIP_TAIL = 8  # a clip is only called with at least this many flat distances after it
# Per layer decode tolerance on logits, in units of the dtype's eps (module docstring).
DECODE_EPS = {torch.float64: 2.0**20, torch.float32: 2.0**9, torch.bfloat16: 4.0,
              torch.float16: 8.0}


@dataclass(frozen=True)
class Thresholds:
    """The probe's resolution for one model and path: every tolerance the check used, derived
    from the dtype's precision and the schedule's own rounding (module docstring)."""

    dtype: str                # the model's dtype, e.g. "bfloat16"
    read_dtype: str           # the dtype the probabilities are read in (sdpa: float64)
    eps: float                # machine epsilon of `dtype`
    schedule_rounding: float  # relative rounding of the bias builder (Falcon: 2^-8), else 0
    slope_rtol: float         # relative tolerance on slopes
    slope_atol: float         # absolute tolerance on slopes (logits per token)
    offset_tol: float         # a jump between d = 0 and d = 1 larger than this is an offset
    min_log_prob: float       # probabilities below exp(this) are not read
    min_queries: int          # distances seen by fewer queries are not read
    decode_rtol: float        # per layer, relative to max(1, max |logits|)
    attention_tol: float      # first layer's attention rows, prefill vs decode and padding


def thresholds(dtype: torch.dtype, attn: str, schedule_rounding: float = 0.0,
               max_slope: float = 1.0) -> Thresholds:
    """The check's tolerances for a model in `dtype` read on `attn` ("eager" or "sdpa"); the
    module docstring says where each comes from. max_slope: the steepest slope (logits per
    token) of the probe, which scales the schedule's rounding into an offset."""
    eps = float(torch.finfo(dtype).eps)
    read = dtype if attn == "eager" else torch.float64
    eps_read = float(torch.finfo(read).eps)
    decode_rtol = DECODE_EPS.get(dtype, 8.0) * eps
    return Thresholds(
        dtype=str(dtype).removeprefix("torch."), read_dtype=str(read).removeprefix("torch."),
        eps=eps, schedule_rounding=schedule_rounding,
        slope_rtol=max(2.0**-10, 2 * eps, 2 * schedule_rounding),
        slope_atol=1e-6 + eps_read / 64,
        offset_tol=max(2.0**-10, 32 * eps_read, schedule_rounding * max_slope),
        min_log_prob=math.log(torch.finfo(read).tiny), min_queries=MIN_QUERIES,
        decode_rtol=decode_rtol, attention_tol=2 * decode_rtol)


# ----------------------------------------------------------------------------- curves

def head_curves(probs: torch.Tensor, min_log_prob: float,
            first_query: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, n) of one layer's probabilities (H, Q, T), the rows of the queries at positions
    first_query .. first_query + Q - 1 (all T of them by default): y[h, d] = mean over the
    queries i that read d of log p_{i, i-d} - log p_{i, i}; n[h, d] = how many did (both
    probabilities in the normal range of their dtype, i - d >= 0)."""
    H, Q, T = probs.shape
    logp = probs.double().log()  # zeros give -inf, which fails the range test below
    q = torch.arange(Q, device=probs.device)
    i = (first_query + q)[:, None]  # (Q, 1) query position
    j = i - torch.arange(T, device=probs.device)[None, :]  # (Q, T) key at distance d
    other = logp[:, q[:, None], j.clamp_min(0)]  # (H, Q, T) [h, i, d]: log p_{i, i-d}
    own = logp[:, q, first_query + q][:, :, None]  # (H, Q, 1): log p_{i, i}
    valid = (j >= 0) & (other >= min_log_prob) & (own >= min_log_prob)  # (H, Q, T)
    diff = torch.where(valid, other - own, torch.zeros((), dtype=logp.dtype,
                                                       device=logp.device))
    n = valid.sum(dim=1)  # (H, T)
    y = diff.sum(dim=1) / n.clamp_min(1)
    return torch.where(n > 0, y, torch.full_like(y, math.nan)), n


# ----------------------------------------------------------------------------- per-head fits

def kernel_curves(logits: torch.Tensor, valid: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(y, n), each (heads, keys), of one (heads, queries, keys) array of logits (a bias, or a
    kernel's log probabilities): y[h, d] = mean over queries i of logits[h, i, i-d] -
    logits[h, i, i] where both entries are valid; n[h, d] how many queries that was. Query i
    sits at key position i + keys - queries (bottom-right aligned, as a KV cache's are)."""
    H, Q, K = logits.shape
    i = torch.arange(Q)[:, None] + (K - Q)  # (Q, 1) the query's position among the keys
    j = i - torch.arange(K)[None, :]  # (Q, K) the key at distance d
    safe = j.clamp_min(0)
    rows = torch.arange(Q)[:, None].expand(Q, K)
    other = logits[:, rows, safe]  # (H, Q, K) [h, i, d]
    own = logits[:, torch.arange(Q), i[:, 0]][:, :, None]  # (H, Q, 1)
    ok = (j >= 0) & valid[:, rows, safe] & valid[:, torch.arange(Q), i[:, 0]][:, :, None]
    diff = torch.where(ok, other - own, torch.zeros((), dtype=logits.dtype))
    n = ok.sum(dim=1)
    y = diff.sum(dim=1) / n.clamp_min(1)
    y = torch.where(n > 0, y, torch.full_like(y, math.nan))
    return y.numpy(), n.numpy()


# A 16-bit attention may differ from exact ALiBi by this much in its worst query row: more
# than the rounding of -m (i - j), +m j or m (j - L + 1) over a 128-token cache (16-bit
# logits of up to 64), less than that of a row constant -m L over a static cache of 1,024
# slots, whose 16-bit steps of 2-4 logits move each row's attention differently.
PRECISION_TV = 0.125


def tv_tolerance(dtype: torch.dtype) -> float:
    """The largest total variation of a query row's attention from exact ALiBi that the
    rounding of `dtype` explains: PRECISION_TV for 16-bit dtypes, 2^12 eps for float32 (a
    bias of up to 4,096 logits, m j at 8,192 tokens, rounded), never below 1e-6."""
    return max(1e-6, min(PRECISION_TV, 2.0**12 * float(torch.finfo(dtype).eps)))


def row_measures(probs: torch.Tensor, slopes, mode: str = "causal",
                 first_query: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(tv, future), each (heads, queries), of one layer's attention probabilities (H, Q, K)
    over every key: tv[h, i] = the total variation (1/2 sum_j |p - e|) of row i from exact
    ALiBi e = softmax(-m_h |i - j|) with `slopes` m (keys at or before the query in mode
    "causal", all keys in "symmetric"); future[h, i] = the attention on keys after the query.
    Query i sits at key position first_query + i (default: bottom-right aligned)."""
    H, Q, K = probs.shape
    first = K - Q if first_query is None else first_query
    m = torch.as_tensor(np.asarray(slopes, dtype=np.float64), device=probs.device)
    i = torch.arange(Q, device=probs.device)[:, None] + first
    j = torch.arange(K, device=probs.device)[None, :]
    after = j > i  # (Q, K)
    exact = -m[:, None, None] * (i - j).abs()
    if mode == "causal":
        exact = exact.masked_fill(after, -math.inf)
    exact = torch.softmax(exact, dim=-1)
    p = probs.double()
    tv = 0.5 * (p - exact).abs().sum(dim=-1)
    future = (p * after).sum(dim=-1)
    return tv, future


def _wls(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """(slope, intercept, weighted residual sum of squares) of y = intercept + slope x."""
    W = w.sum()
    xm, ym = (w * x).sum() / W, (w * y).sum() / W
    sxx = (w * (x - xm) ** 2).sum()
    slope = (w * (x - xm) * (y - ym)).sum() / sxx if sxx > 0 else 0.0
    a = ym - slope * xm
    return float(slope), float(a), float((w * (y - a - slope * x) ** 2).sum())


def _slope_error(x: np.ndarray, w: np.ndarray, rss: float) -> float:
    """Standard error of a weighted least-squares slope from its residuals: what the probe
    really measured. The weights are query counts (y is a mean over that many queries), so
    rss / (N - 2) estimates one query's variance and the slope's is that over sum w (x - x̄)^2."""
    N = x.size
    xm = (w * x).sum() / w.sum()
    sxx = float((w * (x - xm) ** 2).sum())
    if N <= 2 or sxx <= 0:
        return math.inf
    return math.sqrt(max(rss, 0.0) / (N - 2) / sxx)


def _clip_point(x, y, w, rss_line: float, th: Thresholds) -> tuple[int | None, float, float]:
    """(N, slope, intercept) of the hinge y = a - m min(d, N) when it explains the curve far
    better than a line and the bias is flat after N (at least CLIP_TAIL distances); else
    (None, nan, nan)."""
    candidates = x[(x >= 2) & (x <= x.max() - CLIP_TAIL)]
    if candidates.size == 0:
        return None, math.nan, math.nan
    X = np.minimum(x[None, :], candidates[:, None])  # (N, D): min(d, N) for every candidate
    W = w.sum()
    xm, ym = (X * w).sum(1) / W, (w * y).sum() / W  # (N,), scalar
    sxx = (w * (X - xm[:, None]) ** 2).sum(1)
    slopes = (w * (X - xm[:, None]) * (y - ym)).sum(1) / np.where(sxx > 0, sxx, 1.0)
    rss_all = (w * (y - (ym - slopes * xm)[:, None] - slopes[:, None] * X) ** 2).sum(1)
    best = int(np.argmin(rss_all))
    n, slope, a, rss = int(candidates[best]), slopes[best], ym - slopes[best] * xm[best], \
        rss_all[best]
    tail = x >= n
    tail_slope = _wls(x[tail], y[tail], w[tail])[0]
    steep = abs(slope) > th.slope_atol
    flat = abs(tail_slope) <= max(0.1 * abs(slope), th.slope_atol)
    if steep and flat and rss <= 0.25 * rss_line:
        return n, -slope, a
    return None, math.nan, math.nan


def fit_head(y: np.ndarray, n: np.ndarray, th: Thresholds) -> tuple[float, float, int | None,
                                                                      int, float]:
    """(measured slope, offset, clip point or None, reach, slope's standard error) of one
    head's curve, fitted over the distances d >= 1 that at least th.min_queries queries read
    (or half the most any distance got, when underflow leaves fewer: a steep head read in
    float16, or the decode probe's few queries), weighted by their count. The standard error
    comes from the fit's own residuals (`_slope_error`): inf when too few distances were read."""
    d = np.arange(y.size)
    use = (d >= 1) & (n >= min(th.min_queries, max(2, n[1:].max(initial=0) // 2)))
    if use.sum() < 2:
        return math.nan, math.nan, None, int(d[use].max()) if use.any() else 0, math.inf
    x, v, w = d[use].astype(np.float64), y[use], n[use].astype(np.float64)
    slope, a, rss = _wls(x, v, w)
    clip, clip_slope, clip_a = _clip_point(x, v, w, rss, th)
    if clip is not None:
        X = np.minimum(x, clip)
        rss_clip = float((w * (v - clip_a + clip_slope * X) ** 2).sum())
        return clip_slope, clip_a, clip, int(x.max()), _slope_error(X, w, rss_clip)
    return -slope, a, None, int(x.max()), _slope_error(x, w, rss)

