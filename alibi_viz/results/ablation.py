"""What `python -m experiments.ablation` found, read back from
assets/results/ablation.json: how much each head's silencing costs beside its slope, as the
numbers Model heads states. Plain Python and numpy, no torch."""

from __future__ import annotations

import numpy as np


def rank_correlation(a, b) -> float:
    """Spearman's rank correlation of two equal-length samples (average ranks for ties)."""
    def ranks(x):
        x = np.asarray(x, dtype=float).ravel()
        order = np.argsort(x, kind="stable")
        r = np.empty(x.size)
        r[order] = np.arange(x.size)
        for value in np.unique(x):  # ties share their mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


MINOR = 0.01  # nats per token: a head whose silencing costs less barely matters here


def ablation_summary(entry: dict) -> dict:
    """The numbers the page states about one model's head ablation (an ablation.json entry):
    heads, the rank correlation of slope and loss increase, the head that matters most (0-based
    layer, head, increase, slope), how many heads cost less than MINOR, and the mean increase of
    the steepest and the gentlest quarter of the heads by slope."""
    increase = np.asarray(entry["increase"], dtype=float)
    slope = np.asarray(entry["slope"], dtype=float)
    layer, head = np.unravel_index(np.argmax(increase), increase.shape)
    order = np.argsort(slope.ravel())
    quarter = max(1, order.size // 4)
    return {"heads": int(increase.size), "rho": rank_correlation(slope, increase),
            "top": (int(layer), int(head), float(increase[layer, head]), float(slope[layer, head])),
            "minor": int((increase < MINOR).sum()),
            "steep": float(increase.ravel()[order[-quarter:]].mean()),
            "gentle": float(increase.ravel()[order[:quarter]].mean())}
