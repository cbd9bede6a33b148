"""Benchmark: the engineer's tools. Conformance check, head behaviour scores, reach curve.

    .venv/bin/python bench/bench_engineering.py [--repeats 3] [--threads 2]

Each cell runs in a fresh child process, so its peak resident memory (ru_maxrss, minus the
process's RSS once its model is loaded) belongs to that operation alone; times are the median
of --repeats runs after one warm-up. Rows, measured side by side in one run:

* conformance check (probe + prefill-vs-decode + left padding) of a 24-layer, 16-head BLOOM
  of tiny width (hidden 64) with a 512-token probe; target under 10 s and 1 GiB on 2 cores;
* the same check of the shipped ALiBi model with a 2,048-token probe;
* head behaviour scores (`behaviour.behaviour_scores`) and head statistics of 512 tokens on
  the shipped model; target under 1 s;
* one reach curve (`models.reach.context_reach`, contexts 1 .. 1,024, 256 scored tokens) of the
  shipped ALiBi model; target under 20 s.
Results also go to bench/out/bench_engineering.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = ("conformance_24x16_512", "conformance_shipped_2048", "behaviour_shipped",
         "statistics_shipped_512", "reach_shipped_1024")


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(cell: str, repeats: int, threads: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, BloomConfig

    from alibi_viz import data
    from alibi_viz.assets import shipped_models
    from alibi_viz.models.attention import attention_maps, head_statistics
    from alibi_viz.models.behaviour import behaviour_scores
    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.context_reach import REACH_CONTEXTS, context_reach
    from alibi_viz.models.loading import load_model

    torch.set_num_threads(threads)
    tokenizer = data.make_tokenizer()
    if cell == "conformance_24x16_512":
        torch.manual_seed(0)
        config = BloomConfig(vocab_size=data.VOCAB_SIZE, hidden_size=64, n_head=16, n_layer=24)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
        run = lambda: check_alibi(model, tokenizer, probe_length=512)  # noqa: E731
    else:
        model, tokenizer, info = load_model(shipped_models()["alibi"])
        if cell == "conformance_shipped_2048":
            run = lambda: check_alibi(model, tokenizer, probe_length=2048)  # noqa: E731
        elif cell == "behaviour_shipped":
            run = lambda: behaviour_scores(model, tokenizer, slopes=info.config_slopes)  # noqa: E731
        elif cell == "statistics_shipped_512":
            text = data.long_example(kind="python")
            run = lambda: head_statistics(attention_maps(model, tokenizer, text, max_tokens=512),  # noqa: E731
                                          slopes=info.config_slopes)
        else:
            stream = data.heldout_ids("python", max_tokens=1 << 16)
            contexts = [c for c in REACH_CONTEXTS if c <= 1024]
            run = lambda: context_reach(model, stream, contexts)  # noqa: E731
    base = rss_mib()
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cell": cell, "seconds": statistics.median(times), "peak_extra_mib": peak - base}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--child", default=None)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeats, args.threads)))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f}, {args.threads} torch threads, "
          f"median of {args.repeats}")
    print("| operation | seconds | peak extra RSS (MiB) |")
    print("|---|---|---|")
    rows = []
    for cell in CELLS:
        out = subprocess.run([sys.executable, __file__, "--child", cell, "--repeats",
                              str(args.repeats), "--threads", str(args.threads)],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"| {cell} | {row['seconds']:.2f} | {row['peak_extra_mib']:.0f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "bench_engineering.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
