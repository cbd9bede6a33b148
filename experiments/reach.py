"""`python -m experiments.reach`: context reach and copy at a distance of every shipped model
on the shipped held-out text -> assets/results/reach.json (the measurements are
alibi_viz.models.context_reach; what the results say, alibi_viz.results.reach)."""

from __future__ import annotations

import time

import numpy as np
import torch

from alibi_viz import data
from alibi_viz.assets import REACH_PATH, shipped_models
from alibi_viz.models.context_reach import (
    COPY_DISTANCES,
    COPY_PREFIX,
    COPY_SAMPLES,
    COPY_SPAN,
    REACH_CONTEXTS,
    REACH_TOKENS,
    context_reach,
    copy_at_distance,
)
from alibi_viz.models.loading import load_eval_model
from experiments.cards import write_model_card
from experiments.program import parse, parser, write_results


def evaluate_reach(models: dict, stream: np.ndarray, contexts=REACH_CONTEXTS,
                   distances=COPY_DISTANCES, bar: bool = True) -> dict:
    """Context reach and copy at a distance for every model {name: folder}: the dict that
    `python -m experiments.reach` writes to assets/results/reach.json."""
    out = {"description": "Context reach and copy at a distance of the shipped models on the "
                          "shipped held-out text, the four kinds interleaved in their training "
                          "shares (data.heldout_mixture_ids); written by "
                          "`python -m experiments.reach`.",
           "command": "python -m experiments.reach", "torch": torch.__version__,
           "reach": {"contexts": list(contexts), "tokens": REACH_TOKENS,
                     "context": "at most c: between c - c // 16 and c tokens"},
           "copy": {"distances": list(distances), "span": COPY_SPAN, "samples": COPY_SAMPLES,
                    "prefix": COPY_PREFIX,
                    "gain": "control - repeat: the same span at the same place, its first copy "
                            "replaced by other held-out text"},
           "models": {}}
    for name, folder in models.items():
        model = load_eval_model(folder)
        t0 = time.perf_counter()
        reach = context_reach(model, stream, contexts)
        t1 = time.perf_counter()
        copy = copy_at_distance(model, stream, distances)
        t2 = time.perf_counter()
        out["models"][name] = {"reach": reach.as_dict(), "copy": copy.as_dict(),
                               "seconds": {"reach": round(t1 - t0, 1), "copy": round(t2 - t1, 1)}}
        if bar:
            print(f"{name:10s} reach {np.round(reach.nll, 3).tolist()} ({t1 - t0:.0f} s)\n"
                  f"{'':10s} copy gain {np.round(copy.gain, 3).tolist()} ({t2 - t1:.0f} s)",
                  flush=True)
    return out


def main(argv=None) -> None:
    p = parser("python -m experiments.reach", "Context reach and copy at a distance of the "
               "shipped models -> assets/results/reach.json.")
    p.add_argument("--out", default=str(REACH_PATH))
    args = parse(p, argv)
    stream = data.heldout_mixture_ids(max_tokens=1 << 18)
    models = shipped_models()
    results = evaluate_reach(models, stream)
    write_results(args.out, results)
    if args.out == str(REACH_PATH):  # the shipped results: the model cards quote them
        for folder in models.values():
            write_model_card(folder)


if __name__ == "__main__":
    main()
