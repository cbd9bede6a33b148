"""The statistics behind every interval and test the project prints.

The shipped experiments score a few units of text (chunks, passages) per cell, so an interval
is Student's t with n - 1 degrees of freedom, never the normal 1.96: with 16 units t is 2.131,
and a z interval would be 8% too narrow. A conclusion drawn from a family of tests (the last
length at which a longer window still gains, out of every pair of lengths) controls the
family-wise error with Holm's step-down procedure. Plain numpy and scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _

LEVEL = 0.95  # every interval the project prints
ALPHA = 1 - LEVEL  # every test's family-wise error rate


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided `level` quantile of Student's t with `df` degrees of freedom (2.131 for
    15 and 95%)."""
    from scipy import stats  # 0.3 s: only when an interval is computed

    if df < 1:
        raise AlibiVizError(_("Need at least two chunks for an interval."))
    return float(stats.t.ppf(0.5 + level / 2, df))


def _units(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size < 2:
        raise AlibiVizError(_("Need at least two chunks for an interval."))
    return values


def mean_interval(values, level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high): the t interval of the mean of independent `values`."""
    values = _units(values)
    half = t_quantile(values.size - 1, level) * values.std(ddof=1) / math.sqrt(values.size)
    mean = float(values.mean())
    return mean, mean - half, mean + half


def p_below(values, bound: float) -> float:
    """One-sided p-value of Student's t test that the mean of `values` lies below `bound`
    (small when it clearly does; 0.5 when the mean sits on the bound)."""
    from scipy import stats  # 0.3 s: only when a test is made

    values = _units(values)
    sd = values.std(ddof=1)
    if sd == 0:
        return 0.0 if values.mean() < bound else 1.0
    t = (values.mean() - bound) / (sd / math.sqrt(values.size))
    return float(stats.t.cdf(t, values.size - 1))


def holm(p_values, alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure: which of the hypotheses behind `p_values` are rejected with
    a family-wise error rate of at most `alpha`. The smallest p is compared with alpha / m, the
    next with alpha / (m - 1), and so on; the first that fails stops the procedure."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def holm_rejected(p_values: dict, alpha: float = ALPHA) -> set:
    """The keys of {key: p-value} whose hypotheses Holm's procedure (`holm`) rejects over the
    whole family."""
    keys = list(p_values)
    return {k for k, no in zip(keys, holm([p_values[k] for k in keys], alpha), strict=True) if no}
