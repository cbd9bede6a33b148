"""A context-reach curve as `alibi_viz.reach.context_reach` measures it and
assets/results/reach.json keeps it, read back: where the loss is lowest and where it settles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ReachResult:
    """Per-token loss of the same scored tokens against the context given (nats per token).

    contexts: (C,) tokens of context before each scored token (at least; see context_reach).
    nll: (C,) mean nll. nll_sd: (C,) spread of the chunk means scaled to one chunk's size
    (sd x sqrt(chunks)), a rough per-chunk sd. tokens: scored tokens (the same at every c).
    """

    contexts: np.ndarray
    nll: np.ndarray
    nll_sd: np.ndarray
    tokens: int

    def as_dict(self) -> dict:
        return {"contexts": self.contexts.tolist(), "nll": np.round(self.nll, 4).tolist(),
                "nll_sd": np.round(self.nll_sd, 4).tolist(), "tokens": self.tokens}

    @classmethod
    def from_dict(cls, entry: dict) -> ReachResult:
        """A curve as `as_dict` wrote it (assets/results/reach.json)."""
        return cls(np.array(entry["contexts"]), np.array(entry["nll"]),
                   np.array(entry["nll_sd"]), entry["tokens"])

    def lowest_context(self) -> int:
        """The context at which the loss is lowest."""
        return int(self.contexts[int(np.argmin(self.nll))])

    def settled_context(self, tolerance: float = 0.01) -> int | None:
        """The smallest context from which the loss stays within `tolerance` nats of its lowest
        at every longer context; None when even the longest context is further off."""
        near = self.nll <= self.nll.min() + tolerance  # (C,)
        if not near[-1]:
            return None
        outside = np.flatnonzero(~near)
        return int(self.contexts[outside[-1] + 1 if outside.size else 0])
