"""Other positional schemes as functions of relative distance, to set ALiBi beside them.

Every scheme here is reduced to one number per (query i, key j) pair that depends only on the
signed distance d = i - j (query minus key, ALiBi's convention: d > 0 for a key in the past):

    method        source                                  value at distance d
    alibi         Press, Smith & Lewis 2021               -m |d|
    t5            Raffel et al. 2020 (T5)                 a learned scalar per bucket(d)
    sinusoidal    Vaswani et al. 2017                     PE(p) . PE(p + d) = sum_i cos(w_i d)
    rope_bound    Su et al. 2021 (RoFormer) sec. 3.4.3    (1/(D/2)) sum_j |S_j(d)|, its decay bound
    rope_cos      Su et al. 2021 (RoFormer)               mean_k cos(d theta_k)
    kerple_log    Chi et al. 2022 (KERPLE)                -r1 log(1 + r2 |d|)
    kerple_power  Chi et al. 2022 (KERPLE)                -r1 |d|^r2
    sandwich      Chi et al. 2023 (Sandwich)              (sum_k cos(d / 10000^(2k/D')) - D'/2) / s

ALiBi, T5, KERPLE and Sandwich add their value to the pre-softmax score. Sinusoidal and RoPE add
nothing to the score directly: what is shown for them is the positional part of q . k under the
simplest assumption (identity projections for sinusoidal; RoFormer's own bound for RoPE), so read
those curves as "how much the encoding itself can express distance", not as a bias.

Read top to bottom: one function per scheme, then the method table `METHODS` (names, one-sentence
descriptions, default parameters and slider ranges) and the entry points the "Compare positional
methods" page calls: `score_vs_distance`, `score_matrix_sampled` and `score_matrix`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from alibi_viz.alibi import (
    DEFAULT_BUDGET_BYTES,
    MAX_SEQ_LEN,
    alibi_bias_sampled,
    check_budget,
    check_int,
    check_mode,
    check_seq_len,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import N_, _, number, significant

MAX_DISTANCE = MAX_SEQ_LEN - 1  # largest |i - j| in a sequence of MAX_SEQ_LEN tokens
MAX_DIM = 8192  # cap on embedding / head dims: cost grows with dim per distance
_CHUNK_ELEMENTS = 1 << 20  # distances x frequencies evaluated at once (16 MiB of complex128)


# ----------------------------------------------------------------------------- input checks

def check_distances(distances, name: str = "distances") -> np.ndarray:
    """Return `distances` as an int64 array (any shape) of whole numbers with |d| <= MAX_DISTANCE."""
    try:
        arr = np.asarray(distances)
    except (TypeError, ValueError) as exc:
        raise AlibiVizError(_("{name} must be an array of whole numbers: {error}").format(
            name=name, error=exc)) from None
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or np.issubdtype(arr.dtype, np.floating)):
        raise AlibiVizError(_("{name} must be an array of whole numbers, got dtype {dtype}.")
                            .format(name=name, dtype=arr.dtype))
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise AlibiVizError(_("{name} must hold whole numbers (token distances).").format(
                name=name))
    if arr.size and np.max(np.abs(arr)) > MAX_DISTANCE:
        raise AlibiVizError(_("{name} must lie in [-{max}, {max}].").format(
            name=name, max=number(MAX_DISTANCE)))
    return arr.astype(np.int64)


def check_positions(positions, name: str) -> np.ndarray:
    """Return token positions as a non-empty 1-D int64 array in [0, MAX_SEQ_LEN - 1]."""
    arr = check_distances(positions, name).reshape(-1)
    if arr.size == 0:
        raise AlibiVizError(_("{name} must hold at least one position.").format(name=name))
    if np.any(arr < 0):
        raise AlibiVizError(_("{name} must be positions >= 0.").format(name=name))
    return arr


def _check_real(value, name: str, low: float, high: float, low_open: bool = False) -> float:
    """Return `value` as a float in [low, high] ((low, high] with low_open); else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise AlibiVizError(_("{name} must be a number, got {value}.").format(
            name=name, value=repr(value)))
    value = float(value)
    lower_ok = value > low if low_open else value >= low
    if not (math.isfinite(value) and lower_ok and value <= high):
        bracket = "(" if low_open else "["
        raise AlibiVizError(_("{name} must be in {bracket}{low}, {high}], got {value}.").format(
            name=name, bracket=bracket, low=significant(low, 6),
            high=significant(high, 6),
            value=significant(value, 6)))
    return value


def _check_even_dim(value, name: str) -> int:
    value = check_int(value, name, 2, MAX_DIM)
    if value % 2:
        raise AlibiVizError(_("{name} must be even (sin/cos come in pairs), got {value}.").format(
            name=name, value=value))
    return value


def _check_base(base) -> float:
    return _check_real(base, "base", 1.0, 1e12, low_open=True)


def _cos_sum(distances: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """sum_k cos(d * freqs[k]) for every d, float64, same shape as `distances`.

    Evaluated in chunks so that memory stays bounded whatever the number of distances.
    """
    flat = distances.reshape(-1).astype(np.float64)
    out = np.empty(flat.shape, dtype=np.float64)
    step = max(1, _CHUNK_ELEMENTS // freqs.size)
    for start in range(0, flat.size, step):
        chunk = flat[start:start + step]
        out[start:start + step] = np.cos(np.outer(chunk, freqs)).sum(axis=1)  # (n, F) -> (n,)
    return out.reshape(distances.shape)


# ----------------------------------------------------------------------------- T5 buckets

def t5_bucket(relative_position, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> np.ndarray:
    """T5's relative-position bucket, identical to transformers' T5Attention._relative_position_bucket.

    Source: Raffel et al. 2020 (T5), via Mesh TensorFlow; transformers' modeling_t5.py.
    `relative_position` uses T5's convention: key position minus query position (j - i, so
    -d in this module's convention), any shape, whole numbers. Returns int64 buckets in
    [0, num_buckets), same shape.

      bidirectional=True (encoder): half of the buckets for keys before the query
        (j - i <= 0), half for keys after it (j - i > 0, offset by num_buckets // 2).
      bidirectional=False (decoder): keys after the query all fall in bucket 0 (they are masked
        anyway); keys before it get all num_buckets.
    With n the buckets for one side and max_exact = n // 2: distances 0..max_exact-1 each get
    their own bucket; larger distances get max_exact + floor(log(dist / max_exact) /
    log(max_distance / max_exact) * (n - max_exact)), capped at n - 1, so every distance at or
    beyond max_distance shares the last bucket. The logarithm is taken in float32, as torch
    does, so bucket edges match transformers exactly.
    """
    rel = check_distances(relative_position, "relative_position")
    num_buckets = check_int(num_buckets, "num_buckets", 2, 1 << 16)
    max_distance = check_int(max_distance, "max_distance", 1, MAX_SEQ_LEN)
    n = num_buckets // 2 if bidirectional else num_buckets  # buckets for one side
    max_exact = n // 2
    if max_exact < 1:
        raise AlibiVizError(_("num_buckets must be at least 4 when bidirectional (2 otherwise)."))
    if max_distance <= max_exact:
        raise AlibiVizError(
            _("max_distance ({max_distance}) must exceed the {max_exact} exact buckets "
              "(num_buckets // {divisor}).").format(max_distance=max_distance, max_exact=max_exact,
                                                     divisor=4 if bidirectional else 2))

    buckets = np.zeros(rel.shape, dtype=np.int64)
    if bidirectional:
        buckets += (rel > 0) * n
        dist = np.abs(rel)
    else:
        dist = -np.minimum(rel, 0)
    # float32 throughout, like torch's `relative_position.float()`; clamp to max_exact so the
    # log never sees 0 (those entries take the exact branch anyway).
    ratio = np.maximum(dist, max_exact).astype(np.float32) / np.float32(max_exact)
    scaled = (np.log(ratio) / np.float32(math.log(max_distance / max_exact))
              * np.float32(n - max_exact))
    if_large = np.minimum(max_exact + scaled.astype(np.int64), n - 1)  # astype truncates like torch
    return buckets + np.where(dist < max_exact, dist, if_large)


def t5_bucket_start(num_buckets: int = 32, max_distance: int = 128,
                    bidirectional: bool = True) -> np.ndarray:
    """Distance at which each T5 bucket starts, shape (num_buckets,), float64, in tokens.

    Inverts `t5_bucket`'s formula: exact buckets b < max_exact start at b, logarithmic ones at
    max_exact * (max_distance / max_exact) ** ((b - max_exact) / (n - max_exact)). With
    bidirectional=True the second half (keys after the query) repeats the first half.
    """
    num_buckets = check_int(num_buckets, "num_buckets", 2, 1 << 16)
    t5_bucket(0, bidirectional, num_buckets, max_distance)  # validates the combination
    n = num_buckets // 2 if bidirectional else num_buckets
    max_exact = n // 2
    b = np.arange(n, dtype=np.float64)
    log_part = max_exact * (max_distance / max_exact) ** ((b - max_exact) / (n - max_exact))
    start = np.where(b < max_exact, b, log_part)
    if bidirectional:
        start = np.concatenate([start, start, np.zeros(num_buckets - 2 * n)])[:num_buckets]
    return start


def t5_illustrative_values(num_buckets: int = 32, max_distance: int = 128,
                           bidirectional: bool = True, slope: float = 0.0625) -> np.ndarray:
    """An ILLUSTRATIVE per-bucket value table, shape (num_buckets,): -slope * bucket start.

    Real T5 learns one free scalar per bucket per head (`relative_attention_bias`, an
    nn.Embedding(num_buckets, num_heads)); trained values need not decay or even be monotonic.
    To show what bucketing does, this table samples the ALiBi line -slope * d at the distance
    where each bucket starts, so T5's curve is a staircase that follows ALiBi exactly for small
    distances, in ever wider steps up to max_distance, and is flat beyond it.
    """
    slope = _check_real(slope, "slope", 0.0, 1e6)
    return -slope * t5_bucket_start(num_buckets, max_distance, bidirectional) + 0.0  # no -0.0


def t5_bias(relative_position, bucket_values, bidirectional: bool = True,
            max_distance: int = 128) -> np.ndarray:
    """T5's relative attention bias: the value of the bucket each relative position falls in.

    Source: Raffel et al. 2020; transformers' T5Attention.compute_bias. `relative_position` is
    key minus query (j - i), any shape S. `bucket_values` is (num_buckets,) for one head, giving
    shape S, or (num_heads, num_buckets) (the transpose of T5's `relative_attention_bias.weight`),
    giving (num_heads, *S). num_buckets is read from the last axis of `bucket_values`.
    """
    values = np.asarray(bucket_values, dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[-1] < 2:
        raise AlibiVizError(
            _("bucket_values must be shaped (num_buckets,) or (num_heads, num_buckets), "
              "num_buckets >= 2, got shape {shape}.").format(shape=values.shape))
    buckets = t5_bucket(relative_position, bidirectional, values.shape[-1], max_distance)
    return values[..., buckets]  # (S) or (H, *S)


# ----------------------------------------------------------------------------- sinusoidal

def sinusoidal_frequencies(d_model: int = 512, base: float = 10000.0) -> np.ndarray:
    """w_i = base^(-2i/d_model), i = 0 .. d_model/2 - 1, shape (d_model/2,), radians per token."""
    d_model = _check_even_dim(d_model, "d_model")
    base = _check_base(base)
    return base ** (-2.0 * np.arange(d_model // 2) / d_model)


def sinusoidal_table(n_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The sinusoidal position table of Vaswani et al. 2017, sec. 3.5, shape (n_positions, d_model):
    PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/d_model). float32, ready to
    copy into a GPT-2 `wpe` table (the shipped `sinusoidal` model holds exactly this, frozen)."""
    if not 1 <= int(n_positions) <= MAX_SEQ_LEN:
        raise AlibiVizError(_("n_positions must be in [1, {max}], got {value}.").format(
            max=MAX_SEQ_LEN, value=n_positions))
    angles = np.arange(int(n_positions))[:, None] * sinusoidal_frequencies(d_model, base)[None]
    table = np.empty((int(n_positions), angles.shape[1] * 2))  # (P, d_model)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table.astype(np.float32)


def sinusoidal_dot(distances, d_model: int = 512, base: float = 10000.0,
                   normalize: bool = True) -> np.ndarray:
    """Dot product of two sinusoidal position encodings as a function of their distance.

    Source: Vaswani et al. 2017, sec. 3.5: PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i),
    w_i = base^(-2i/d_model). Since sin a sin b + cos a cos b = cos(a - b),
        PE(p) . PE(p + k) = sum_{i=0}^{d_model/2-1} cos(k w_i),
    which depends on k only (not p) and is even in k. normalize=True divides by d_model/2,
    giving 1 at k = 0 and values in [-1, 1]. Returns float64, same shape as `distances`.
    """
    k = check_distances(distances)
    freqs = sinusoidal_frequencies(d_model, base)
    dots = _cos_sum(k, freqs)
    return dots / freqs.size if normalize else dots


# ----------------------------------------------------------------------------- RoPE

def rope_frequencies(head_dim: int = 128, base: float = 10000.0) -> np.ndarray:
    """RoPE angles per token theta_k = base^(-2k/head_dim), k = 0 .. head_dim/2 - 1 (RoFormer's
    theta_i = 10000^(-2(i-1)/d), i = 1..d/2). Shape (head_dim/2,)."""
    head_dim = _check_even_dim(head_dim, "head_dim")
    base = _check_base(base)
    return base ** (-2.0 * np.arange(head_dim // 2) / head_dim)


def rope_decay_bound(distances, head_dim: int = 128, base: float = 10000.0,
                     normalize: bool = False) -> np.ndarray:
    """RoFormer's long-term decay bound of RoPE, as a function of relative distance r.

    Source: Su et al. 2021, "RoFormer", sec. 3.4.3 and Figure 2. Writing q.k after rotation as
    Re[sum_k h_k e^{i r theta_k}] and summing by parts (Abel transformation) gives
        |q.k| <= (max_k |h_{k+1} - h_k|) * sum_{j=1}^{D/2} |S_j|,
        S_j = sum_{k=0}^{j-1} exp(i r theta_k),   theta_k = base^(-2k/D),  D = head_dim.
    This returns the paper's "relative upper bound" (1/(D/2)) sum_{j=1}^{D/2} |S_j|, which
    decays (with ripples) as |r| grows. At r = 0, |S_j| = j, so the value is (D/2 + 1)/2;
    normalize=True divides by that, giving 1 at r = 0. Even in r. float64, same shape as input.
    """
    r = check_distances(distances)
    theta = rope_frequencies(head_dim, base)
    half = theta.size
    flat = r.reshape(-1).astype(np.float64)
    out = np.empty(flat.shape, dtype=np.float64)
    step = max(1, _CHUNK_ELEMENTS // half)
    for start in range(0, flat.size, step):
        phases = np.exp(1j * np.outer(flat[start:start + step], theta))  # (n, D/2)
        partial_sums = np.cumsum(phases, axis=1)  # (n, D/2): column j-1 holds S_j
        out[start:start + step] = np.abs(partial_sums).mean(axis=1)
    out = out.reshape(r.shape)
    return out / ((half + 1) / 2) if normalize else out


def rope_mean_cos(distances, head_dim: int = 128, base: float = 10000.0) -> np.ndarray:
    """Mean over frequency pairs of cos(r theta_k): q.k / |q||k| after RoPE when q = k = all ones.

    Source: Su et al. 2021 (RoFormer). For q = k = (1, ..., 1) each 2-D pair contributes
    2 cos(r theta_k) to q.k and |q||k| = D, so the ratio is (2/D) sum_k cos(r theta_k): 1 at
    r = 0, oscillating with a decaying envelope. theta_k = base^(-2k/D). float64, input's shape.
    """
    r = check_distances(distances)
    theta = rope_frequencies(head_dim, base)
    return _cos_sum(r, theta) / theta.size


# ----------------------------------------------------------------------------- KERPLE

def kerple_log(distances, r1: float = 1.0, r2: float = 1.0) -> np.ndarray:
    """KERPLE logarithmic bias -r1 * log(1 + r2 |i - j|), r1, r2 > 0 (learned per head).

    Source: Chi, Fan, Ramadge & Rudnicky 2022, "KERPLE: Kernelized Relative Positional
    Embedding for Length Extrapolation" (NeurIPS), the "log" variant of their conditionally
    positive definite kernels. 0 at distance 0, strictly decreasing in |d|. float64.
    """
    d = np.abs(check_distances(distances)).astype(np.float64)
    r1 = _check_real(r1, "r1", 0.0, 1e6, low_open=True)
    r2 = _check_real(r2, "r2", 0.0, 1e6, low_open=True)
    return -r1 * np.log1p(r2 * d) + 0.0  # + 0.0 turns -0.0 into 0.0


def kerple_power(distances, r1: float = 1.0, r2: float = 0.5) -> np.ndarray:
    """KERPLE power bias -r1 * |i - j|^r2, r1 > 0, 0 < r2 <= 2 (learned per head).

    Source: Chi et al. 2022 (KERPLE), the "power" variant; r2 <= 2 keeps the kernel
    conditionally positive definite. r2 = 1 is ALiBi with slope r1. 0 at distance 0, strictly
    decreasing in |d|. float64, same shape as `distances`.
    """
    d = np.abs(check_distances(distances)).astype(np.float64)
    r1 = _check_real(r1, "r1", 0.0, 1e6, low_open=True)
    r2 = _check_real(r2, "r2", 0.0, 2.0, low_open=True)
    return -r1 * d**r2 + 0.0


# ----------------------------------------------------------------------------- Sandwich

def sandwich_bias(distances, d_prime: int = 128, scale: float = 1.0) -> np.ndarray:
    """Sandwich bias: inner product of sinusoidal embeddings, shifted to 0 on the diagonal.

    Source: Chi, Fan, Rudnicky & Ramadge 2023, "Dissecting Transformer Length Extrapolation
    via the Lens of Receptive Field Analysis" (ACL 2023, arXiv:2212.10356). With
    p_m the d'-dimensional sinusoidal embedding of position m, p_m . p_n =
    sum_{k=1}^{d'/2} cos((m - n) / 10000^(2k/d')). What is implemented here:
        bias(d) = (sum_{k=1}^{d'/2} cos(d / 10000^(2k/d')) - d'/2) / scale.
    The frequency index k runs from 1 (as printed in the paper and as in NeMo's
    SandwichRelativePositionEmbedding), so the fastest frequency is 10000^(-2/d'), not 1.
    Subtracting d'/2 (the value at d = 0) makes the diagonal 0 and every entry <= 0. NeMo
    divides head h of H by scale = 8h/H, an ALiBi-like per-head scaling; scale = 1 is the bare
    shifted inner product. A frequency stops contributing once d w_k passes about 1, and the
    w_k are geometric, so the bias falls roughly logarithmically in d until the slowest
    frequency 10000^-1 turns over (about 10^4 tokens), then ripples around -d'/(2 scale).
    float64, same shape as `distances`.
    """
    d = check_distances(distances)
    d_prime = _check_even_dim(d_prime, "d_prime")
    scale = _check_real(scale, "scale", 0.0, 1e6, low_open=True)
    freqs = 10000.0 ** (-2.0 * np.arange(1, d_prime // 2 + 1) / d_prime)
    return (_cos_sum(d, freqs) - d_prime / 2) / scale


# ----------------------------------------------------------------------------- method table

@dataclass(frozen=True)
class MethodParam:
    """One adjustable parameter of a method, with what a slider (or checkbox) needs.

    kind: "int" | "float" | "bool". For numbers, [low, high] is the accepted range and `step`
    the slider step (an int parameter must be low + a multiple of step); `log` suggests a
    log-scale control (e.g. a select_slider over powers of two or ten).
    """

    name: str
    label: str
    kind: str
    default: float | int | bool
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    help: str = ""


@dataclass(frozen=True)
class Method:
    """A positional scheme as the compare page lists it."""

    name: str  # key used in URLs and in score_* calls
    label: str  # display name (marked with N_ where it has words to translate; shown as _(label))
    description: str  # one sentence, marked with N_; shown as _(description)
    source: str  # citation
    params: tuple[MethodParam, ...]
    kind: str  # "bias" (added to the score) or "similarity" (positional part of q.k)

    def defaults(self) -> dict:
        """{param name: default value}."""
        return {p.name: p.default for p in self.params}


# What each kind is called on the page (translated where shown: `_(KIND_NAMES[kind])`).
KIND_NAMES = {"bias": N_("bias"), "similarity": N_("similarity")}


def _slope(help_text: str) -> MethodParam:
    return MethodParam("slope", N_("slope m"), "float", 0.0625, 2.0**-16, 1.0, None, True, help_text)


def _dim(name: str, label: str, default: int, high: int = 4096) -> MethodParam:
    return MethodParam(name, label, "int", default, 2, high, 2, True,
                 N_("Even: sin/cos (or rotation) pairs."))


def _base(default: float = 10000.0) -> MethodParam:
    return MethodParam("base", N_("base"), "float", default, 10.0, 1e7, None, True,
                 N_("Longest wavelength is about 2 pi x base tokens."))


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("alibi", "ALiBi",
           N_("Adds -m times the distance to the score: a straight line, steeper for larger "
              "slopes."),
           "Press, Smith & Lewis 2021, arXiv:2108.12409",
           (_slope(N_("ALiBi slope of one head (the official schedule uses 2^-8h/n).")),), "bias"),
    Method("t5", N_("T5 buckets"),
           N_("Adds a learned scalar per distance bucket: exact buckets nearby, log-spaced ones "
              "further out, one shared bucket beyond max_distance (values here are "
              "illustrative)."),
           "Raffel et al. 2020 (T5), transformers T5Attention._relative_position_bucket",
           (MethodParam("num_buckets", N_("buckets"), "int", 32, 4, 256, 1, False,
                  N_("Total buckets (halved per side in symmetric mode).")),
            MethodParam("max_distance", N_("max distance"), "int", 128, 2, 65536, 1, True,
                  N_("Distances at or beyond this share the last bucket.")),
            _slope(N_("Illustrative values: -slope x the distance where each bucket starts."))),
           "bias"),
    Method("sinusoidal", N_("Sinusoidal"),
           N_("Dot product of two sinusoidal position encodings, which depends only on their "
              "distance and oscillates rather than decaying steadily."),
           "Vaswani et al. 2017, Attention Is All You Need, sec. 3.5",
           (_dim("d_model", "d_model", 512), _base(),
            MethodParam("normalize", N_("normalise to 1 at distance 0"), "bool", True)),
           "similarity"),
    Method("rope_bound", N_("RoPE decay bound"),
           N_("RoFormer's upper bound on how large q.k can be after rotary encoding, which "
              "decays (with ripples) as the distance grows."),
           "Su et al. 2021, RoFormer, sec. 3.4.3 (Figure 2)",
           (_dim("head_dim", N_("head dim"), 128, 1024), _base(),
            MethodParam("normalize", N_("normalise to 1 at distance 0"), "bool", True)),
           "similarity"),
    Method("rope_cos", N_("RoPE, all-ones q and k"),
           N_("The cosine between rotated all-ones query and key vectors: the mean of "
              "cos(distance x theta_k) over frequencies."),
           "Su et al. 2021, RoFormer",
           (_dim("head_dim", N_("head dim"), 128, 1024), _base()), "similarity"),
    Method("kerple_log", "KERPLE (log)",
           N_("Adds -r1 log(1 + r2 distance): steep nearby, then a slow logarithmic decline."),
           "Chi, Fan, Ramadge & Rudnicky 2022, KERPLE (NeurIPS)",
           (MethodParam("r1", "r1", "float", 1.0, 0.01, 10.0, None, True,
                        N_("Overall strength (> 0).")),
            MethodParam("r2", "r2", "float", 1.0, 0.01, 10.0, None, True,
                        N_("Distance scale (> 0)."))),
           "bias"),
    Method("kerple_power", N_("KERPLE (power)"),
           N_("Adds -r1 distance^r2: r2 = 1 is ALiBi, r2 < 1 flattens with distance."),
           "Chi, Fan, Ramadge & Rudnicky 2022, KERPLE (NeurIPS)",
           (MethodParam("r1", "r1", "float", 1.0, 0.01, 10.0, None, True,
                        N_("Overall strength (> 0).")),
            MethodParam("r2", "r2", "float", 0.5, 0.01, 2.0, 0.01, False,
                        N_("Exponent, in (0, 2]."))),
           "bias"),
    Method("sandwich", "Sandwich",
           N_("Adds the inner product of sinusoidal embeddings of the two positions, minus its "
              "diagonal value: a decay roughly logarithmic in distance out to about 10^4 "
              "tokens."),
           "Chi, Fan, Rudnicky & Ramadge 2023, ACL, arXiv:2212.10356",
           (_dim("d_prime", "d'", 128),
            MethodParam("scale", N_("scale"), "float", 8.0, 0.0625, 64.0, None, True,
                        N_("Divisor; NeMo uses 8h/H for head h of H."))), "bias"),
)}
# What the Compare page shows until the user picks: the paper's comparison plus its successors.
DEFAULT_METHODS = ("alibi", "t5", "sinusoidal", "rope_bound", "kerple_log", "sandwich")


def check_params(method: str, **params) -> dict:
    """Validate `params` for `method` against METHODS; return them with defaults filled in.

    Raises AlibiVizError for an unknown method or parameter name, a wrong type, a value outside
    the range listed in METHODS, or (T5) a max_distance not above the exact buckets.
    """
    if method not in METHODS:
        raise AlibiVizError(_("Unknown method {method}; choose one of {choices}.").format(
            method=repr(method), choices=tuple(METHODS)))
    spec = METHODS[method]
    known = {p.name: p for p in spec.params}
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise AlibiVizError(
            _("{method} has no parameter {unknown}; its parameters are {known}.").format(
                method=_(spec.label), unknown=", ".join(map(repr, unknown)), known=tuple(known)))
    values = spec.defaults() | params
    for name, p in known.items():
        value = values[name]
        label = f"{_(p.label)} ({name})"
        if p.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise AlibiVizError(_("{name} must be True or False, got {value}.").format(
                    name=_(p.label), value=repr(value)))
            values[name] = bool(value)
        elif p.kind == "int":
            values[name] = check_int(value, label, int(p.low), int(p.high))
            if (values[name] - p.low) % p.step:
                raise AlibiVizError(
                    _("{name} must be {low} plus a multiple of {step}, got {value}.").format(
                        name=label, low=int(p.low), step=int(p.step), value=values[name]))
        else:
            values[name] = _check_real(value, label, p.low, p.high)
    return values


def _t5_profile(d: np.ndarray, mode: str, num_buckets: int, max_distance: int,
                slope: float) -> np.ndarray:
    bidirectional = mode == "symmetric"
    values = t5_illustrative_values(num_buckets, max_distance, bidirectional, slope)
    return t5_bias(-d, values, bidirectional, max_distance)  # T5 wants key - query = -d


# method name -> f(signed distances, mode, **params), all returning float64 of d's shape
_PROFILES: dict[str, Callable[..., np.ndarray]] = {
    "alibi": lambda d, mode, slope: alibi_bias_sampled(
        [slope], d.reshape(-1), [0], "symmetric")[0, :, 0].reshape(d.shape),
    "t5": _t5_profile,
    "sinusoidal": lambda d, mode, **p: sinusoidal_dot(d, **p),
    "rope_bound": lambda d, mode, **p: rope_decay_bound(d, **p),
    "rope_cos": lambda d, mode, **p: rope_mean_cos(d, **p),
    "kerple_log": lambda d, mode, **p: kerple_log(d, **p),
    "kerple_power": lambda d, mode, **p: kerple_power(d, **p),
    "sandwich": lambda d, mode, **p: sandwich_bias(d, **p),
}
# These cost O(dim) per distance and are even in d: evaluate once per distinct |d|.
_PER_DISTANCE_COST = {"sinusoidal", "rope_bound", "rope_cos", "sandwich"}


def _profile(method: str, d: np.ndarray, mode: str, params: dict) -> np.ndarray:
    fn = _PROFILES[method]
    if method in _PER_DISTANCE_COST:
        unique, inverse = np.unique(np.abs(d), return_inverse=True)
        return fn(unique, mode, **params)[inverse].reshape(d.shape)
    return fn(d, mode, **params)


# ----------------------------------------------------------------------------- entry points

def score_vs_distance(method: str, distances, mode: str = "causal", **params) -> np.ndarray:
    """The method's contribution to the attention score at signed distances d = i - j.

    float64, same shape as `distances` (whole numbers, |d| <= 1,048,575). mode="causal": keys
    after the query (d < 0) are masked, -inf; "symmetric": every d is valid (all methods here
    are even in d, T5 because its illustrative values mirror). In causal mode T5 uses its
    decoder buckets (bidirectional=False), in symmetric mode its encoder buckets. `params`
    are the method's parameters (see METHODS[method].params); missing ones take defaults.
    """
    mode = check_mode(mode)
    params = check_params(method, **params)
    d = check_distances(distances)
    values = _profile(method, d, mode, params)
    if mode == "causal":
        values = np.where(d < 0, -np.inf, values)
    return values


def score_matrix_sampled(method: str, rows, cols, mode: str = "causal",
                         budget_bytes: int | None = DEFAULT_BUDGET_BYTES, **params) -> np.ndarray:
    """The method's score matrix evaluated only at query positions `rows` and key positions `cols`.

    Returns float64 (len(rows), len(cols)) with entry [a, b] = score_vs_distance at
    d = rows[a] - cols[b]; causal mode puts -inf where cols[b] > rows[a]. Cost is proportional
    to len(rows) * len(cols) (the pixels drawn), whatever the sequence length; methods that
    cost O(dim) per distance are evaluated once per distinct |d|.
    """
    mode = check_mode(mode)
    params = check_params(method, **params)
    rows = check_positions(rows, "rows")
    cols = check_positions(cols, "cols")
    # d, |d|, the values and np.unique's work arrays: about 5 arrays of 8 bytes per entry
    check_budget(rows.size * cols.size * 8 * 5, budget_bytes, "This score matrix")
    d = rows[:, None] - cols[None, :]  # (R, C): i - j
    values = _profile(method, d, mode, params)
    if mode == "causal":
        values[d < 0] = -np.inf
    return values


def score_matrix(method: str, seq_len: int, mode: str = "causal",
                 budget_bytes: int | None = DEFAULT_BUDGET_BYTES, **params) -> np.ndarray:
    """Full (seq_len, seq_len) score matrix of `method`, float64; -inf above the diagonal when
    mode="causal". Same as score_matrix_sampled on arange(seq_len) for rows and columns;
    raises BudgetError when it would exceed `budget_bytes`."""
    seq_len = check_seq_len(seq_len)
    positions = np.arange(seq_len)
    return score_matrix_sampled(method, positions, positions, mode, budget_bytes, **params)
