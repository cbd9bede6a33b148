"""Watch heads form: the shipped ALiBi model's training snapshots, measured.

    python -m experiments.snapshots        # -> assets/results/snapshots.json

`experiments.train --snapshots 0,30,100,...` saves an fp16 copy of the model at those steps
(`assets/models/<name>/snapshots/step-NNNNN/`, save_pretrained with the tokenizer, and
snapshot.json: step, held-out loss on the validation stream, seconds into training). This
program measures every snapshot once, so that the app reads numbers and runs no training:

* copying score of every head: `models.behaviour`'s induction probe (a random sequence of
  printable bytes repeated twice; the attention from each token of the second copy to the token
  after its twin in the first; Olsson et al. 2022's induction score, as TransformerLens
  computes it);
* the other behaviour scores of `models.behaviour` (previous token, local, sink, ...);
* held-out loss per kind of text: the shipped held-out text (`data.heldout_ids`), the first
  SNAPSHOT_TOKENS tokens cut into windows of the training length.

On a model this small the copying score need not jump: Olsson et al. saw a phase change in
two-layer and larger models trained on far more text; `phase_change` says how much of the rise
happens between two consecutive snapshots, so the page can say what the curve shows
(alibi_viz.results.snapshots reads the results back).
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch

from alibi_viz import data
from alibi_viz.assets import DEFAULT_MODEL, SNAPSHOT_RESULTS_PATH
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.behaviour import BEHAVIOURS, behaviour_scores
from alibi_viz.models.loading import describe_model, load_snapshot, snapshot_folders, snapshot_root
from alibi_viz.results.snapshots import SNAPSHOT_TOKENS
from experiments.program import parse, parser, write_results
from experiments.train import validation_loss


def heldout_loss(model, kind: str, seq_len: int, tokens: int = SNAPSHOT_TOKENS) -> float:
    """Mean next-token loss (nats) on the first `tokens` held-out tokens of `kind`, in
    non-overlapping windows of seq_len + 1 (`train.validation_loss` on the held-out text)."""
    return validation_loss(model, data.heldout_ids(kind, max_tokens=tokens + 1), seq_len,
                           windows=tokens // seq_len)


def measure(name: str = DEFAULT_MODEL, seq_len: int = 128, log=print) -> dict:
    """Measure every snapshot of `name`: what assets/results/snapshots.json holds."""
    folders = snapshot_folders(name)
    if not folders:
        raise AlibiVizError(f"No training snapshots under {snapshot_root(name)}: train with "
                            "`python -m experiments.train --snapshots ...` (make models).")
    out = {"model": name, "command": "python -m experiments.snapshots", "seq_len": seq_len,
           "tokens_per_kind": SNAPSHOT_TOKENS, "torch": torch.__version__,
           "steps": [], "valid_loss": [], "heldout_loss": {k: [] for k in data.CORPUS_KINDS},
           "scores": {b: [] for b in BEHAVIOURS if b != "content"}, "seconds": []}
    for step, folder in folders.items():
        t0 = time.perf_counter()
        model, tokenizer = load_snapshot(folder)
        record = json.loads((folder / "snapshot.json").read_text())
        behaviour = behaviour_scores(model, tokenizer, describe_model(model).config_slopes)
        out["steps"].append(step)
        out["valid_loss"].append(record["valid_loss"])
        out["seconds"].append(record["seconds"])
        for kind in data.CORPUS_KINDS:
            out["heldout_loss"][kind].append(round(heldout_loss(model, kind, seq_len), 4))
        for b in out["scores"]:
            out["scores"][b].append(np.round(behaviour.scores[b], 4).tolist())  # (layers, heads)
        log(f"step {step:5d}: copying max {behaviour.scores['induction'].max():.3f}, held-out "
            + ", ".join(f"{k} {out['heldout_loss'][k][-1]:.3f}" for k in data.CORPUS_KINDS)
            + f" ({time.perf_counter() - t0:.1f} s)")
    return out


def main(argv=None) -> None:
    p = parser("python -m experiments.snapshots",
               "Measure the training snapshots -> assets/results/snapshots.json.")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--out", default=str(SNAPSHOT_RESULTS_PATH))
    args = parse(p, argv)
    write_results(args.out, measure(args.model))


if __name__ == "__main__":
    main()
