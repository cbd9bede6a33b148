"""`python -m experiments.rescale`: the shipped ALiBi model with every slope multiplied
by s, at 2, 8 and 32 times its training length -> assets/results/rescale.json (the scale is
alibi_viz.models.slope_scale; what the results say, alibi_viz.results.rescale)."""

from __future__ import annotations

import time

import numpy as np

from alibi_viz import assets, data
from alibi_viz.assets import DEFAULT_MODEL, shipped_models, shipped_train_seq_len
from alibi_viz.models.context_reach import REACH_CONTEXTS, context_reach
from alibi_viz.models.loading import load_eval_model
from alibi_viz.models.scoring import evaluate_length
from alibi_viz.models.slope_scale import slope_scale
from alibi_viz.results.evaluation import PROTOCOLS, confidence_interval
from experiments.program import parse, parser, write_results

SWEEP_SCALES = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 32)  # holds L_train / L for each of SWEEP_FACTORS
SWEEP_FACTORS = (2, 8, 32)  # evaluation lengths, in training lengths
SWEEP_KIND = "en"  # the held-out text of the sweep


def rescale_sweep(model, train_seq_len: int, kind: str = SWEEP_KIND, scales=SWEEP_SCALES,
                  factors=SWEEP_FACTORS, log=print) -> dict:
    """Perplexity (both protocols, on evaluate's targets) at each length factor x train_seq_len
    and the reach curve, for each slope scale: what assets/results/rescale.json holds."""
    lengths = [f * train_seq_len for f in factors]
    out = {"command": "python -m experiments.rescale", "kind": kind,
           "train_seq_len": train_seq_len, "scales": [float(s) for s in scales],
           "lengths": lengths, "perplexity": {p: {} for p in PROTOCOLS}, "ci95": {p: {} for p in PROTOCOLS},
           "reach": {}, "seconds": {}}
    stream = data.heldout_mixture_ids(max_tokens=1 << 16)
    for scale in scales:
        t0 = time.perf_counter()
        key = f"{scale:.6g}"
        with slope_scale(model, scale):
            for protocol in PROTOCOLS:
                for length in lengths:
                    cell = evaluate_length(model, length, protocol, max_length=max(lengths),
                                           kind=kind)
                    out["perplexity"][protocol].setdefault(str(length), {})[key] = round(
                        cell["ppl"], 5)
                    out["ci95"][protocol].setdefault(str(length), {})[key] = [
                        round(v, 5) for v in confidence_interval(cell["chunk_nll"])]
            reach = context_reach(model, stream, [c for c in REACH_CONTEXTS if c <= 1024])
        out["reach"][key] = reach.as_dict()
        out["seconds"][key] = round(time.perf_counter() - t0, 1)
        log(f"s={key}: " + ", ".join(
            f"{p} {n}: {out['perplexity'][p][str(n)][key]:.3f}" for p in PROTOCOLS for n in lengths)
            + f"; reach at 1,024 {np.round(reach.nll[-1], 3)} ({out['seconds'][key]} s)")
    return out


def main(argv=None) -> None:
    parse(parser("python -m experiments.rescale",
                 "The shipped ALiBi model with its slopes rescaled -> assets/results/rescale.json."),
          argv)
    folder = shipped_models()[DEFAULT_MODEL]
    results = rescale_sweep(load_eval_model(folder), shipped_train_seq_len(folder))
    write_results(assets.RESCALE_PATH, results)


if __name__ == "__main__":
    main()
