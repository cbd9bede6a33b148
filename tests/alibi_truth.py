"""The truth the conformance tests hold a check's verdict against, computed from attention
itself in float64 (never from the check): exact ALiBi's attention rows, how far other rows are
from them, and how much of a row falls on keys after its query. Imported by the test modules
as `from alibi_truth import ...` (pytest puts tests/ on their path)."""

import math

import numpy as np
import torch


def exact_attention(slopes, T, mode="causal"):
    """Exact ALiBi's attention (heads, T, T): softmax(-m |i - j|) in float64, causal or not."""
    i = torch.arange(T)
    distance = (i[:, None] - i[None, :]).double()
    logits = -torch.tensor(np.asarray(slopes), dtype=torch.float64)[:, None, None] * distance.abs()
    if mode == "causal":
        logits = logits.masked_fill(distance < 0, -math.inf)
    return torch.softmax(logits, dim=-1)


def worst_tv(p, e) -> float:
    """The largest total variation between two sets of attention rows."""
    return float(0.5 * (p - e).abs().sum(-1).max())


def future_mass(p) -> float:
    """The largest share of a row's attention on keys after its query."""
    return float(p.triu(1).sum(-1).max())
