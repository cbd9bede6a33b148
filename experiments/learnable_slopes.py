"""The learnable-slope variant against the shipped fixed-slope ALiBi model, side by side on
the same held-out targets -> assets/results/learnable-slopes.json (`make models` runs it as
`python -m experiments.learnable_slopes`, the command its results record; this module is what
that runs). The slopes' hook is `alibi_viz.models.layer_slopes`; what the results say,
`alibi_viz.results.learnable_slopes`."""

from __future__ import annotations

import time

from alibi_viz import data
from alibi_viz.assets import (
    DEFAULT_MODEL,
    LEARNABLE_SLOPES_DIR,
    LEARNABLE_SLOPES_PATH,
    shipped_models,
    shipped_train_seq_len,
    training_info,
)
from alibi_viz.models.layer_slopes import logged, read
from alibi_viz.models.loading import load_eval_model
from alibi_viz.models.scoring import evaluate_length
from alibi_viz.results.evaluation import PROTOCOLS, confidence_interval, paired_ratio_interval
from alibi_viz.results.learnable_slopes import COMPARE_FACTORS, cell_key, drift, slope_history
from experiments.program import parse, parser, write_results


def compare(variant, fixed, train_seq_len: int, kinds=None, factors=COMPARE_FACTORS,
            log=print) -> dict:
    """Perplexity of the learnable-slope model and the fixed-slope one, side by side on the
    same held-out targets (evaluate's), at each length factor x train_seq_len, on each kind of
    text and both protocols, with their 95% intervals and the paired ratio variant / fixed."""
    kinds = tuple(kinds or data.TEXT_KINDS)
    lengths = [f * train_seq_len for f in factors]
    out = {"command": "python -m experiments.learnable_slopes", "train_seq_len": train_seq_len,
           "factors": list(factors), "lengths": lengths, "kinds": list(kinds),
           "protocols": list(PROTOCOLS), "cells": {}, "seconds": {}}
    for kind in kinds:
        t0 = time.perf_counter()
        for protocol in PROTOCOLS:
            for length in lengths:
                a, b = (evaluate_length(m, length, protocol, max_length=max(lengths), kind=kind)
                        for m in (variant, fixed))
                out["cells"][cell_key(kind, protocol, length)] = {
                    "learnable": round(a["ppl"], 5), "fixed": round(b["ppl"], 5),
                    "learnable_ci95": [round(v, 5) for v in confidence_interval(a["chunk_nll"])],
                    "fixed_ci95": [round(v, 5) for v in confidence_interval(b["chunk_nll"])],
                    "ratio": [round(v, 5) for v in paired_ratio_interval(a["chunk_nll"],
                                                                         b["chunk_nll"])],
                    "tokens": a["tokens"]}
        out["seconds"][kind] = round(time.perf_counter() - t0, 1)
        log(f"{kind}: " + ", ".join(
            f"{p} {n}: {out['cells'][cell_key(kind, p, n)]['ratio'][0]:.3f}x"
            for p in PROTOCOLS for n in lengths) + f" ({out['seconds'][kind]} s)")
    return out


def main(argv=None) -> None:
    parse(parser("python -m experiments.learnable_slopes", "The learnable-slope variant "
                 "against the shipped ALiBi model -> assets/results/learnable-slopes.json."), argv)
    folder = shipped_models()[DEFAULT_MODEL]
    training = training_info(LEARNABLE_SLOPES_DIR)
    steps, history = slope_history(training)
    results = compare(load_eval_model(LEARNABLE_SLOPES_DIR), load_eval_model(folder),
                      shipped_train_seq_len(folder))
    results.update(steps=steps, slopes=[logged(step) for step in history],
                   drift=drift(history[0], read(LEARNABLE_SLOPES_DIR)),
                   training={"learnable_s": training["wall_time_s"],
                             "fixed_s": training_info(folder).get("wall_time_s")})
    write_results(LEARNABLE_SLOPES_PATH, results)


if __name__ == "__main__":
    main()
