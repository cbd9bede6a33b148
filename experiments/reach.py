"""`python -m experiments.reach`: context reach and copy at a distance of every shipped model
on the shipped held-out text -> assets/results/reach.json (the measurements are
alibi_viz.models.context_reach; what the results say, alibi_viz.results.reach)."""

from __future__ import annotations

import time

import numpy as np
import torch

from alibi_viz import data
from alibi_viz.assets import REACH_PATH, load_reach_results, shipped_models
from alibi_viz.errors import AlibiVizError
from alibi_viz.models.context_reach import (
    COPY_DISTANCES,
    COPY_PREFIX,
    COPY_SAMPLES,
    COPY_SPAN,
    REACH_CONTEXTS,
    REACH_PASSAGE_TOKENS,
    REACH_PASSAGES,
    REACH_TOKENS,
    context_reach,
    copy_at_distance,
)
from alibi_viz.models.loading import load_eval_model
from experiments.cards import write_model_card
from experiments.program import parse, parser, write_results

PARTS = ("reach", "copy")


def evaluate_reach(models: dict, stream: np.ndarray, contexts=REACH_CONTEXTS,
                   distances=COPY_DISTANCES, bar: bool = True, parts=PARTS,
                   kept: dict | None = None) -> dict:
    """Context reach and copy at a distance for every model {name: folder}: the dict that
    `python -m experiments.reach` writes to assets/results/reach.json. A part not in `parts`
    is taken from `kept` (the file as written before), with its setting and seconds."""
    kept = kept or {}
    out = {"description": "Context reach and copy at a distance of the shipped models on the "
                          "shipped held-out text, the four kinds interleaved in their training "
                          "shares (data.heldout_mixture_ids); written by "
                          "`python -m experiments.reach`.",
           "command": "python -m experiments.reach", "torch": torch.__version__,
           "reach": {"contexts": list(contexts), "tokens": REACH_TOKENS,
                     "passages": REACH_PASSAGES, "passage_tokens": REACH_PASSAGE_TOKENS,
                     "context": "at most c: between c - c // 16 and c tokens",
                     "passage_nll": "per context, the mean nll of each passage, the same "
                                    "passages spread evenly through the text at every context"},
           "copy": {"distances": list(distances), "span": COPY_SPAN, "samples": COPY_SAMPLES,
                    "prefix": COPY_PREFIX,
                    "gain": "control - repeat: the same span at the same place, its first copy "
                            "replaced by other held-out text"},
           "models": {}}
    for part in PARTS:
        if part not in parts:
            if part not in kept or any(part not in e for e in kept.get("models", {}).values()):
                raise AlibiVizError(f"No {part} results to keep: measure them (--parts {part}).")
            out[part] = kept[part]
    for name, folder in models.items():
        model = load_eval_model(folder)
        entry = kept.get("models", {}).get(name, {})
        done, seconds = {}, dict(entry.get("seconds", {}))
        for part in PARTS:
            if part not in parts:
                if part not in entry:
                    raise AlibiVizError(f"No {part} results for {name} to keep.")
                done[part] = entry[part]
                continue
            t0 = time.perf_counter()
            result = (context_reach(model, stream, contexts) if part == "reach"
                      else copy_at_distance(model, stream, distances))
            seconds[part] = round(time.perf_counter() - t0, 1)
            done[part] = result.as_dict()
            if bar:
                shown = result.nll if part == "reach" else result.gain
                print(f"{name:10s} {part} {np.round(shown, 3).tolist()} ({seconds[part]:.0f} s)",
                      flush=True)
        out["models"][name] = {**done, "seconds": seconds}
    return out


def main(argv=None) -> None:
    p = parser("python -m experiments.reach", "Context reach and copy at a distance of the "
               "shipped models -> assets/results/reach.json.")
    p.add_argument("--out", default=str(REACH_PATH))
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                   help="what to measure again; the rest is kept from --out as written before")
    args = parse(p, argv)
    stream = data.heldout_mixture_ids(max_tokens=1 << 18)
    models = shipped_models()
    kept = load_reach_results(args.out) if set(args.parts) != set(PARTS) else {}
    results = evaluate_reach(models, stream, parts=args.parts, kept=kept)
    write_results(args.out, results)
    if args.out == str(REACH_PATH):  # the shipped results: the model cards quote them
        for folder in models.values():
            write_model_card(folder)


if __name__ == "__main__":
    main()
