"""What `python -m experiments.snapshots` measured of the shipped ALiBi model's training
snapshots, read back from assets/results/snapshots.json: each head's behaviour scores and the
held-out loss per kind of text at every snapshot step, and when the copying head formed.
Plain Python and numpy, no torch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alibi_viz.assets import load_snapshot_results
from alibi_viz.errors import AlibiVizError

SNAPSHOT_TOKENS = 8192  # held-out tokens per kind scored at every snapshot


@dataclass(frozen=True)
class SnapshotCurves:
    """The shipped snapshot results as arrays. steps (S,); scores[behaviour] (S, layers, heads);
    heldout_loss[kind] (S,)."""

    steps: np.ndarray
    scores: dict[str, np.ndarray]
    heldout_loss: dict[str, np.ndarray]

    @classmethod
    def from_dict(cls, results: dict) -> SnapshotCurves:
        if not results.get("steps"):
            raise AlibiVizError("No snapshot results: run `python -m experiments.snapshots`.")
        return cls(np.array(results["steps"]),
                   {b: np.array(v, dtype=float) for b, v in results["scores"].items()},
                   {k: np.array(v, dtype=float) for k, v in results["heldout_loss"].items()})

    def best_copying_head(self) -> tuple[int, int]:
        """(layer, head), 0-based, of the head with the highest copying score at the last step."""
        final = self.scores["induction"][-1]
        layer, head = np.unravel_index(np.argmax(final), final.shape)
        return int(layer), int(head)

    def phase_change(self) -> tuple[int, int, float]:
        """For the best copying head: the two consecutive snapshot steps between which its
        score rises most, and that rise's share of its whole rise from the first snapshot to
        its highest (1.0: all at once; small: gradual)."""
        layer, head = self.best_copying_head()
        curve = self.scores["induction"][:, layer, head]
        rises = np.diff(curve)
        k = int(np.argmax(rises))
        total = curve.max() - curve[0]
        return int(self.steps[k]), int(self.steps[k + 1]), float(rises[k] / total) if total > 0 else 0.0


def shipped_curves() -> SnapshotCurves | None:
    """The shipped snapshot results, or None when there are none."""
    results = load_snapshot_results()
    return SnapshotCurves.from_dict(results) if results.get("steps") else None
