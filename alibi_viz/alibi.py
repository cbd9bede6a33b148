"""ALiBi: Attention with Linear Biases (Press, Smith & Lewis, 2021, arXiv:2108.12409).

ALiBi adds no position embeddings. Instead, each head h adds a fixed penalty to the
pre-softmax attention score that grows linearly with the distance between query i and key j:

    score_ij = q_i . k_j / sqrt(d)  +  B_ij,      B_ij = -m_h * (i - j)    (causal, j <= i)
                                                  B_ij = -m_h * |i - j|    (symmetric)

The paper trains causal language models only. The symmetric form is the authors' answer for
bidirectional models in their repository's issue #5 (github.com/ofirpress/attention_with_
linear_biases/issues/5), used by later encoder work; it is not part of the paper.

The slope m_h is fixed, not learned, and differs per head, so some heads look far and some
look only at their neighbours. This module computes the slopes, the bias matrices (full or
sampled at a few indices for drawing), and what the bias alone does to attention.

Read top to bottom: input checks, slopes, bias matrices, the row-constant form real code uses,
then the decay intuition (implied attention, half-life, span, mean distance).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from alibi_viz.errors import AlibiVizError, BudgetError
from alibi_viz.i18n import N_, _, ngettext, number, significant

MAX_HEADS = 1024
MAX_SEQ_LEN = 1_048_576
DEFAULT_BUDGET_BYTES = 1 << 30  # 1 GiB: refuse to materialise anything larger
SCHEDULES = ("official", "geometric", "mpt")
MODES = ("causal", "symmetric")
# What the app shows for each mode and schedule (translated where shown: `_(MODE_NAMES[m])`).
MODE_NAMES = {"causal": N_("causal"), "symmetric": N_("symmetric")}
SCHEDULE_NAMES = {"official": N_("official"), "geometric": N_("geometric"), "mpt": "MPT"}


# ----------------------------------------------------------------------------- input checks

def check_int(value, name: str, low: int, high: int) -> int:
    """Return `value` as an int if it is an integer in [low, high]; else raise AlibiVizError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise AlibiVizError(_("{name} must be a whole number in [{low}, {high}], got {value}.")
                            .format(name=name, low=number(low, grouping=False),
                                    high=number(high, grouping=False), value=repr(value)))
    value = int(value)
    if not low <= value <= high:
        raise AlibiVizError(_("{name} must be in [{low}, {high}], got {value}.").format(
            name=name, low=number(low, grouping=False), high=number(high, grouping=False),
            value=number(value, grouping=False)))
    return value


def check_num_heads(num_heads) -> int:
    return check_int(num_heads, "num_heads", 1, MAX_HEADS)


def check_seq_len(seq_len, name: str = "seq_len") -> int:
    return check_int(seq_len, name, 1, MAX_SEQ_LEN)


def check_mode(mode) -> str:
    if mode not in MODES:
        raise AlibiVizError(_("mode must be one of {choices}, got {value}.").format(
            choices=MODES, value=repr(mode)))
    return mode


def check_slopes(slopes) -> np.ndarray:
    """Return slopes as a 1-D float64 array of positive finite numbers, shape (num_heads,)."""
    try:
        slopes = np.asarray(slopes, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AlibiVizError(_("slopes must be a 1-D array of numbers: {error}").format(
            error=exc)) from None
    if slopes.ndim != 1 or slopes.size == 0:
        raise AlibiVizError(_("slopes must be a non-empty 1-D array, got shape {shape}.").format(
            shape=slopes.shape))
    check_num_heads(slopes.size)
    if not np.all(np.isfinite(slopes)) or np.any(slopes <= 0):
        raise AlibiVizError(_("slopes must be positive finite numbers."))
    return slopes


def check_budget(nbytes: int, budget_bytes: int | None, what: str) -> None:
    """Raise BudgetError when `nbytes` exceeds `budget_bytes` (None: no limit)."""
    if budget_bytes is not None and nbytes > budget_bytes:
        raise BudgetError(
            _("{what} would need {size} MiB, over the budget of {budget} MiB. Use fewer heads "
              "or a shorter sequence, or alibi_bias_sampled() to evaluate only the entries you "
              "need.").format(what=what, size=number(nbytes / 2**20, 0),
                              budget=number(budget_bytes / 2**20, 0)))


# ----------------------------------------------------------------------------- slopes

def alibi_slopes(num_heads: int, schedule: str = "official", max_bias: float = 8.0) -> np.ndarray:
    """Per-head ALiBi slopes m_h, shape (num_heads,), float64, all in (0, 1].

    schedule:
      "official"  the rule of the authors' fairseq code and of HF BLOOM's `build_alibi_tensor`.
                  For n a power of two: m_h = 2^(-max_bias*h/n), h = 1..n. Otherwise, with c the
                  largest power of two below n: the c slopes of the c-head schedule, then the
                  odd-position slopes 2^(-max_bias*h/(2c)), h = 1, 3, 5, ... of the 2c-head
                  schedule for the remaining n - c heads. The result is NOT monotonic: n=12
                  gives 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
      "geometric" 2^(-max_bias*h/n) for every n: the formula as printed in the paper (and
                  PyTorch FlexAttention's ALiBi example). Monotonic for every n.
      "mpt"       MPT / llm-foundry `gen_slopes` (HF `build_mpt_alibi_tensor`): with
                  p = 2^ceil(log2 n), the p-head geometric schedule reordered as its
                  even-numbered heads (2, 4, ...) then its odd-numbered ones, cut to n. It is
                  written differently from "official" but, measured for every n in 1..1024 and
                  derivable by hand (the c-head slopes are the even-numbered 2c-head slopes),
                  it yields exactly the same slopes. MPT differs from BLOOM in the row constant
                  it adds (see `alibi_bias_row_constant`), not in its slopes.
    max_bias: the paper's 8 (the last head's slope is 2^-max_bias for a power of two n).
    """
    num_heads = check_num_heads(num_heads)
    if schedule not in SCHEDULES:
        raise AlibiVizError(_("schedule must be one of {choices}, got {value}.").format(
            choices=SCHEDULES, value=repr(schedule)))
    if isinstance(max_bias, bool) or not isinstance(max_bias, numbers.Real):
        raise AlibiVizError(_("max_bias must be a number, got {value}.").format(
            value=repr(max_bias)))
    max_bias = float(max_bias)
    if not (math.isfinite(max_bias) and 0 < max_bias <= 64):
        raise AlibiVizError(_("max_bias must be in (0, 64], got {value}.").format(
            value=significant(max_bias, 6)))

    def geometric(n: int) -> np.ndarray:
        return 2.0 ** (-max_bias * np.arange(1, n + 1) / n)

    if schedule == "geometric":
        return geometric(num_heads)
    if schedule == "mpt":
        p = 2 ** math.ceil(math.log2(num_heads))
        slopes = geometric(p)
        if p != num_heads:
            slopes = np.concatenate([slopes[1::2], slopes[::2]])[:num_heads]
        return slopes
    # official (fairseq / BLOOM)
    c = 2 ** math.floor(math.log2(num_heads))
    slopes = geometric(c)
    if c != num_heads:
        extra = geometric(2 * c)[0::2][: num_heads - c]  # h = 1, 3, 5, ... of the 2c schedule
        slopes = np.concatenate([slopes, extra])
    return slopes


def round_to_bfloat16(values) -> np.ndarray:
    """`values` rounded to bfloat16 (via float32, round to nearest, ties to even: what torch's
    `.bfloat16()` does), returned as float64. Falcon's `build_alibi_tensor` rounds its slopes
    this way (8 significant bits, a relative error up to 2^-8), so the slopes a Falcon model
    applies are `round_to_bfloat16(alibi_slopes(n))`, not the exact schedule. Finite values only.
    """
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # keep the top 16 bits, rounded
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def describe_schedule(num_heads: int, schedule: str = "official", max_bias: float = 8.0) -> str:
    """One sentence on the order of the slopes, for the app: why a schedule zigzags or not."""
    n = check_num_heads(num_heads)
    if n == 1:
        return _("A single head gets the slope 2^-{max_bias}.").format(
            max_bias=significant(max_bias, 6))
    if schedule == "geometric" or is_power_of_two(n):
        return ngettext("With {n} head the slopes form one geometric sequence, from 2^-{first} "
                        "down to 2^-{last}, steepest head first: monotonic.",
                        "With {n} heads the slopes form one geometric sequence, from 2^-{first} "
                        "down to 2^-{last}, steepest head first: monotonic.", n).format(
            n=n, first=significant(max_bias / n, 6),
            last=significant(max_bias, 6))
    if schedule == "official":
        c = 2 ** math.floor(math.log2(n))
        # The extra slopes are 2^-(max_bias*h/(2c)) for h = 1, 3, 5, ...: the first (h = 1) is
        # steeper than head 1's 2^-(max_bias/c); each later one sits between two c-head slopes.
        if n == c + 1:
            return _("{n} is not a power of two, so the official rule (fairseq, BLOOM) gives "
                     "heads 1-{c} the {c}-head slopes and head {n} the first slope of the "
                     "{double}-head schedule, which is steeper than head 1's: the order is not "
                     "monotonic.").format(n=n, c=c, double=2 * c)
        return _("{n} is not a power of two, so the official rule (fairseq, BLOOM) gives heads "
                 "1-{c} the {c}-head slopes and heads {next}-{n} every other slope of the "
                 "{double}-head schedule. Head {next}'s slope is steeper than head 1's and the "
                 "others fall between the {c}-head slopes, so the order is not "
                 "monotonic.").format(n=n, c=c, next=c + 1, double=2 * c)
    p = 2 ** math.ceil(math.log2(n))
    return _("{n} is not a power of two, so MPT takes the {p}-head schedule, lists its "
             "even-numbered slopes then its odd-numbered ones, and keeps the first {n}: the order "
             "is not monotonic, and it comes out exactly equal to the official rule.").format(
        n=n, p=p)


# ----------------------------------------------------------------------------- bias matrices

def alibi_bias_sampled(slopes, rows, cols, mode: str = "causal") -> np.ndarray:
    """The ALiBi bias evaluated only at query positions `rows` and key positions `cols`.

    Returns float64 of shape (num_heads, len(rows), len(cols)) with entry [h, a, b] equal to
    -m_h * (rows[a] - cols[b]) (causal; -inf where the key is in the future, cols[b] > rows[a])
    or -m_h * |rows[a] - cols[b]| (symmetric). Costs len(rows) * len(cols) per head whatever
    the sequence length, which is what lets the app draw a 65,536-token matrix at screen size.
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    cols = np.asarray(cols, dtype=np.int64).reshape(-1)
    dist = rows[:, None] - cols[None, :]  # (R, C): i - j
    bias = -slopes[:, None, None] * np.abs(dist)[None]  # (H, R, C)
    if mode == "causal":
        bias[:, dist < 0] = -np.inf
    return bias


def alibi_bias(slopes, seq_len: int, mode: str = "causal", key_len: int | None = None,
               budget_bytes: int | None = DEFAULT_BUDGET_BYTES) -> np.ndarray:
    """Full ALiBi bias, shape (num_heads, seq_len, key_len or seq_len), float64.

    Causal: B_ij = -m (i - j) for j <= i, -inf above the diagonal (the causal mask).
    Symmetric: B_ij = -m |i - j| (bidirectional models: not in the paper, which trains causal
    LMs only; the authors suggest it in their repository's issue #5).
    With key_len > seq_len the queries are the last seq_len positions (bottom-right aligned,
    as when decoding with a KV cache): query row q sits at position q + key_len - seq_len.
    Raises BudgetError if the matrix would exceed `budget_bytes`.
    """
    slopes = check_slopes(slopes)
    seq_len = check_seq_len(seq_len)
    key_len = seq_len if key_len is None else check_seq_len(key_len, "key_len")
    if key_len < seq_len:
        raise AlibiVizError(_("key_len ({key_len}) must be >= seq_len ({seq_len}).").format(
            key_len=key_len, seq_len=seq_len))
    check_budget(slopes.size * seq_len * key_len * 8, budget_bytes, _("This bias matrix"))
    rows = np.arange(seq_len) + (key_len - seq_len)
    return alibi_bias_sampled(slopes, rows, np.arange(key_len), mode)


def alibi_bias_row_constant(slopes, key_len: int) -> np.ndarray:
    """The bias as BLOOM and the official fairseq code actually add it: +m_h * j.

    Shape (num_heads, 1, key_len), float64, broadcast over every query row. It differs from
    the textbook -m_h * (i - j) only by m_h * i, a constant within each query row i, and
    softmax(x + c) = softmax(x) for any constant c, so after the causal mask and softmax the
    attention probabilities are identical. It saves building an L x L tensor per head, which
    is why HF's `build_alibi_tensor` returns shape (batch * heads, 1, key_len). The pre-softmax
    scores differ, so compare the two forms only after masking and softmax.
    (MPT adds m_h * (j - (L - 1)) instead: another row constant, same probabilities.)
    """
    slopes = check_slopes(slopes)
    key_len = check_seq_len(key_len, "key_len")
    return slopes[:, None, None] * np.arange(key_len)[None, None, :]


# ----------------------------------------------------------------------------- decay intuition

def _softmax_rows(bias: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of a bias array (-inf where masked), float64."""
    bias = bias - bias.max(axis=-1, keepdims=True)
    weights = np.exp(bias)
    return weights / weights.sum(axis=-1, keepdims=True)


def implied_attention(slopes, query_pos: int, mode: str = "causal",
                      seq_len: int | None = None) -> np.ndarray:
    """Softmax of the bias alone for one query: the attention a head gives with no content signal.

    If every q.k is equal, the scores differ only by the bias, so query i attends to key j
    with weight proportional to exp(-m |i - j|): a geometric decay with ratio e^-m per token.
    Returns (num_heads, seq_len) float64, rows summing to 1; seq_len defaults to query_pos + 1
    (every earlier key). Causal: future keys get 0.
    """
    slopes = check_slopes(slopes)
    query_pos = check_int(query_pos, "query_pos", 0, MAX_SEQ_LEN - 1)
    seq_len = query_pos + 1 if seq_len is None else check_seq_len(seq_len)
    if query_pos >= seq_len:
        raise AlibiVizError(_("query_pos ({query_pos}) must be < seq_len ({seq_len}).").format(
            query_pos=query_pos, seq_len=seq_len))
    check_budget(slopes.size * seq_len * 8 * 2, DEFAULT_BUDGET_BYTES, _("This attention row"))
    bias = alibi_bias_sampled(slopes, [query_pos], np.arange(seq_len), mode)[:, 0, :]  # (H, L)
    return _softmax_rows(bias)


def implied_attention_map(slopes, seq_len: int, mode: str = "causal") -> np.ndarray:
    """`implied_attention` for every query at once: (num_heads, seq_len, seq_len) float64,
    row i the bias-only attention of query i (causal: over j <= i)."""
    return _softmax_rows(alibi_bias(slopes, seq_len, mode))


def recent_share(content, slope: float, recent: int) -> float:
    """Share of one query's attention on its `recent` nearest keys, for content scores
    `content` (K,) of keys at distances K-1, ..., 1, 0 (the last key is the query's own) and
    the ALiBi penalty −slope·distance added before the softmax. slope 0 is no bias."""
    content = np.asarray(content, dtype=np.float64)
    distance = np.arange(content.size - 1, -1, -1)  # (K,): the last key is distance 0
    weights = np.exp(content - content.max() - slope * distance)
    return float(weights[-recent:].sum() / weights.sum())


def first_slope_rise(slopes) -> int | None:
    """The first head (0-based) whose slope is steeper than the head before it, or None when
    the slopes fall steadily (the official schedule rises for any head count that is not a
    power of two: its second, interleaved half starts steeper)."""
    slopes = np.asarray(slopes, dtype=np.float64)
    rises = np.flatnonzero(slopes[1:] > slopes[:-1])
    return int(rises[0]) + 1 if rises.size else None


def half_life(slopes) -> np.ndarray:
    """ln 2 / m_h, shape (num_heads,): the distance (in tokens) over which the bias alone
    halves a key's attention weight, since exp(-m d) = 1/2 at d = ln 2 / m."""
    return math.log(2) / check_slopes(slopes)


def _geometric_sums(r: np.ndarray, n: float) -> tuple[np.ndarray, np.ndarray]:
    """S0 = sum_{d=0}^{n} r^d and S1 = sum_{d=0}^{n} d r^d, elementwise; n may be inf, or an
    array of finite counts broadcast against r."""
    one_minus_r = -np.expm1(np.log(r))  # 1 - r, accurate for r close to 1
    if np.isscalar(n) and math.isinf(n):
        return 1.0 / one_minus_r, r / one_minus_r**2
    rn1 = r ** (n + 1)
    s0 = (1.0 - rn1) / one_minus_r
    s1 = r * (1.0 - (n + 1) * r**n + n * rn1) / one_minus_r**2
    return s0, s1


def _check_context(context) -> float:
    return math.inf if context is None else float(check_seq_len(context, "context"))


def attention_span(slopes, mass: float = 0.9, mode: str = "causal", context: int | None = None
                   ) -> np.ndarray:
    """Smallest distance D such that the bias-only attention within distance D holds `mass`.

    Shape (num_heads,), float64 holding whole numbers of tokens. `context` is how many keys the
    query can see on each side (None: unbounded, i.e. a query far into a long sequence). With
    weights exp(-m d), causal mass within D is (1 - r^(D+1)) / (1 - r^context), r = e^-m;
    symmetric counts each distance d >= 1 twice.
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    if not (isinstance(mass, numbers.Real) and 0 < mass < 1):
        raise AlibiVizError(_("mass must be a number in (0, 1), got {value}.").format(
            value=repr(mass)))
    n = _check_context(context) - 1  # largest distance on one side
    r = np.exp(-slopes)
    s0_total, _s1 = _geometric_sums(r, n)
    if mode == "causal":
        need = mass * s0_total  # sum_{d<=D} r^d >= need
    else:
        need = (mass * (2 * s0_total - 1) + 1) / 2
    # sum_{d<=D} r^d = (1 - r^(D+1)) / (1 - r) >= need  <=>  r^(D+1) <= 1 - need (1 - r)
    target = 1.0 - need * -np.expm1(-slopes)
    span = np.ceil(np.log(np.maximum(target, 1e-300)) / -slopes - 1.0 - 1e-9)
    return np.clip(span, 0.0, n)


def mean_distance(slopes, mode: str = "causal", context: int | None = None) -> np.ndarray:
    """Expected |i - j| under the bias-only attention, shape (num_heads,), in tokens.

    Unbounded causal context gives 1 / (e^m - 1), about 1/m for small slopes.
    """
    slopes = check_slopes(slopes)
    mode = check_mode(mode)
    s0, s1 = _geometric_sums(np.exp(-slopes), _check_context(context) - 1)
    return s1 / s0 if mode == "causal" else 2 * s1 / (2 * s0 - 1)


def default_query(seq_len: int, mode: str = "causal") -> int:
    """The query the decay statistics describe by default: the last one in causal mode (it sees
    all seq_len keys, all behind it) and the middle one, (seq_len - 1) // 2, in symmetric mode
    (about (seq_len - 1) / 2 keys on each side: no query of a bidirectional sequence has
    seq_len - 1 keys on both sides)."""
    seq_len = check_seq_len(seq_len)
    return seq_len - 1 if check_mode(mode) == "causal" else (seq_len - 1) // 2


def query_keys(seq_len: int, mode: str, query_pos: int) -> tuple[int, int]:
    """(keys behind, keys ahead) of query `query_pos` that it may attend to, itself excluded:
    causal (query_pos, 0); symmetric (query_pos, seq_len - 1 - query_pos)."""
    seq_len = check_seq_len(seq_len)
    query_pos = check_int(query_pos, "query_pos", 0, seq_len - 1)
    return query_pos, (0 if check_mode(mode) == "causal" else seq_len - 1 - query_pos)


def query_decay(slopes, seq_len: int, mode: str = "causal", query_pos: int | None = None
                ) -> dict:
    """Bias-only attention statistics of one real query, in closed form, per head.

    The query at `query_pos` (default `default_query`) with `behind` keys before it and `ahead`
    after it (causal: none) weighs the key at distance d by e^(-m d). Returns a dict of
    (num_heads,) float64 arrays: "mean_distance" (expected |i - j|), "span90" (smallest D
    such that keys within D hold 90% of the attention, whole tokens), plus "query_pos",
    "behind", "ahead". Exact sums, no L x L matrix: works at any length.
    """
    slopes = check_slopes(slopes)
    query_pos = default_query(seq_len, mode) if query_pos is None else query_pos
    behind, ahead = query_keys(seq_len, mode, query_pos)
    r = np.exp(-slopes)
    s0_b, s1_b = _geometric_sums(r, behind)  # sums over d = 0..behind
    s0_a, s1_a = _geometric_sums(r, ahead)
    total = s0_b + s0_a - 1.0  # the query itself counted once
    mean = (s1_b + s1_a) / total

    def within(d):  # mass within distance d (array of d per head)
        return (_geometric_sums(r, np.minimum(d, behind))[0]
                + _geometric_sums(r, np.minimum(d, ahead))[0] - 1.0) / total

    low, high = np.zeros_like(slopes), np.full_like(slopes, float(max(behind, ahead)))
    while np.any(high - low > 0):  # smallest whole D with within(D) >= 0.9, by bisection
        mid = np.floor((low + high) / 2)
        ok = within(mid) >= 0.9 - 1e-12
        high = np.where(ok, mid, high)
        low = np.where(ok, low, mid + 1)
    return {"mean_distance": mean, "span90": high, "query_pos": query_pos, "behind": behind,
            "ahead": ahead}


def head_summary(slopes, seq_len: int, mode: str = "causal", query_pos: int | None = None
                 ) -> list[dict]:
    """One row per head: slope, half-life, and the 90% span and mean distance (tokens) of the
    bias-only attention of one real query (`query_decay`: the last query when causal, the
    middle one when symmetric, unless query_pos says otherwise). The keys are English column
    names, marked for translation: a page shows them as `_(key)`."""
    slopes = check_slopes(slopes)
    decay = query_decay(slopes, seq_len, mode, query_pos)
    return [
        {N_("head"): h + 1, N_("slope m"): float(m), "log2 m": float(np.log2(m)),
         N_("half-life (tokens)"): float(hl), N_("90% span (tokens)"): int(s),
         N_("mean distance"): float(md)}
        for h, (m, hl, s, md) in enumerate(zip(slopes, half_life(slopes), decay["span90"],
                                               decay["mean_distance"], strict=True))
    ]


def last_query_mass_beyond(slopes, seq_len: int, distance: int) -> np.ndarray:
    """Share of the last causal query's bias-only attention on keys more than `distance` tokens
    back, per head: (r^(distance+1) - r^seq_len) / (1 - r^seq_len), r = e^-m. Why quality
    degrades gradually past the training length: gentle heads keep spreading weight that far.
    """
    slopes = check_slopes(slopes)
    seq_len = check_seq_len(seq_len)
    distance = check_int(distance, "distance", 0, seq_len - 1)
    r = np.exp(-slopes)
    return (r ** (distance + 1) - r ** seq_len) / -np.expm1(-slopes * seq_len)


def bias_only_mean_distance(slopes, seq_len: int) -> np.ndarray:
    """Mean attention distance per head if attention followed the ALiBi bias alone, averaged
    over the T queries of a causal sequence (query i sees i + 1 keys), shape (heads,)."""
    contexts = range(1, seq_len + 1)
    return np.mean([mean_distance(slopes, "causal", c) for c in contexts], axis=0)


def content_to_win_half(slopes, distances, num_keys: int) -> np.ndarray:
    """The content score (logits above every other key) that a key d tokens back needs to get
    half of a query's attention under the ALiBi bias alone: the retrieval limit, per head.

    Causal query with keys at distances 0 .. num_keys - 1, all others at content 0. The key's
    weight is e^(s - m d) / (e^(s - m d) + Z - e^(-m d)) with Z = sum_k e^(-m k), which is 1/2
    when s = m d + ln(Z - e^(-m d)). So the need grows by m logits per token of distance.
    slopes (H,), distances (D,) with 0 <= d < num_keys -> (H, D) float64.
    """
    m = np.asarray(slopes, dtype=np.float64)[:, None]  # (H, 1)
    d = np.asarray(distances, dtype=np.float64)[None, :]  # (1, D)
    if np.any(d < 0) or np.any(d >= num_keys):
        raise AlibiVizError(_("distances must be in [0, {last}].").format(last=num_keys - 1))
    z = -np.expm1(-m * num_keys) / -np.expm1(-m)  # (H, 1): sum_{k < num_keys} e^(-m k)
    return m * d + np.log(z - np.exp(-m * d))
