"""Live re-evaluation time (Extrapolation lab) per model, protocol and length, 1 torch thread.

    .venv/bin/python bench/bench_live_eval.py [alibi,rope,...] [nonoverlapping,sliding]

Uses the page's own token caps, so each line is what one click on "Re-run" costs. The models
are measured one after another in the same run, so their times can be compared directly.
"""

import os
import sys
import time

import torch

from alibi_viz import assets
from alibi_viz.models.loading import load_eval_model
from alibi_viz.models.scoring import evaluation_stream, live_token_cap, perplexity, protocol_plan
from alibi_viz.results.evaluation import DEFAULT_STRIDE, LENGTHS


def main() -> None:
    names = (sys.argv[1] if len(sys.argv) > 1 else ",".join(assets.shipped_models())).split(",")
    protocols = (sys.argv[2] if len(sys.argv) > 2 else "nonoverlapping,sliding").split(",")
    torch.set_num_threads(1)
    stream = evaluation_stream(2 * 4096 + 64)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print("| model | protocol | length | tokens scored | ppl | seconds |")
    print("|---|---|---|---|---|---|")
    for name in names:
        model = load_eval_model(assets.shipped_models()[name])
        for protocol in protocols:
            for length in LENGTHS:
                tokens = live_token_cap(length, protocol)
                start = time.perf_counter()
                out = perplexity(model, stream, length, protocol, stride=DEFAULT_STRIDE,
                                 **protocol_plan(protocol, tokens, max_length=length))
                print(f"| {name} | {protocol} | {length} | {out['tokens']} | {out['ppl']:.3f} "
                      f"| {time.perf_counter() - start:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
