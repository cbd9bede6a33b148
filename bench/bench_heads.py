"""Benchmark: attention maps, content/bias decomposition and head statistics of the shipped model.

    .venv/bin/python bench/bench_heads.py [--lengths 512 2048] [--threads 1 2] [--repeats 5]

Each (operation, tokens, torch threads) cell runs in a fresh child process, so its peak
resident memory (ru_maxrss) belongs to that operation alone; the table shows the median time
of `--repeats` runs after one warm-up, and the peak RSS above the process's RSS after loading
the model. Threads 1 and 2 sit side by side with their ratio: on a server shared by many
sessions, more threads per request is not free.

Model: assets/models/alibi (the shipped ALiBi model) when it loads; otherwise a random BLOOM of
the same size (4 layers, 8 heads, hidden 128, byte vocabulary), which costs the same per token.
Target (issue 4): maps + decomposition of 512 tokens under 0.3 s on 2 cores.
Results also go to bench/out/bench_heads.json.
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

OPERATIONS = ("maps", "decomposition", "statistics")
TARGET_SECONDS = 0.3


def rss_mib() -> float:
    """Current resident set size of this process, MiB (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_bench_model():
    """(model, tokenizer, description): the shipped model, or a same-size random BLOOM."""
    from alibi_viz.errors import ModelLoadError
    from alibi_viz.models.loading import load_model

    try:
        model, tokenizer, info = load_model(ROOT / "assets" / "models" / "alibi")
        return model, tokenizer, f"assets/models/alibi ({info.architecture}, {info.num_layers} layers, {info.num_heads} heads)"
    except ModelLoadError:
        from alibi_viz.tiny_models import byte_tokenizer, tiny_model

        model = tiny_model("bloom", hidden_size=128, n_head=8, n_layer=4, initializer_range=0.02)
        return model, byte_tokenizer(), "random BLOOM, 4 layers, 8 heads, hidden 128 (shipped model not found)"


def child(operation: str, tokens: int, threads: int, repeats: int) -> dict:
    """Time one operation in this (fresh) process; returns seconds and memory."""
    import torch

    torch.set_num_threads(threads)
    from alibi_viz.models.attention import attention_maps, head_statistics, score_decomposition

    model, tokenizer, description = load_bench_model()
    text = (Path(ROOT / "alibi_viz" / "alibi.py").read_text() * 20)[: tokens * 16]
    layer = model.config.num_hidden_layers - 1  # the last layer: the whole forward runs
    maps = attention_maps(model, tokenizer, text, max_tokens=tokens).maps if operation == "statistics" else None
    runs = {
        "maps": lambda: attention_maps(model, tokenizer, text, max_tokens=tokens),
        "decomposition": lambda: score_decomposition(model, tokenizer, text, layer, max_tokens=tokens),
        "statistics": lambda: head_statistics(maps),
    }
    baseline = rss_mib()
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        result = runs[operation]()
        if i:  # the first run warms up
            times.append(time.perf_counter() - start)
        del result
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"operation": operation, "tokens": tokens, "threads": threads, "model": description,
            "median_s": statistics.median(times), "min_s": min(times),
            "peak_rss_mib": peak, "baseline_rss_mib": baseline, "peak_extra_mib": peak - baseline}


def run_cell(operation, tokens, threads, repeats) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", operation, str(tokens), str(threads),
                          str(repeats)], capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{operation} at {tokens} tokens failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        operation, tokens, threads, repeats = args.child
        print(json.dumps(child(operation, int(tokens), int(threads), int(repeats))))
        return

    results = []
    for tokens in args.lengths:
        repeats = args.repeats if tokens <= 1024 else max(3, args.repeats // 2)
        for operation in OPERATIONS:
            for threads in args.threads:
                results.append(run_cell(operation, tokens, threads, repeats))
    print(f"model: {results[0]['model']}; machine: {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    header = "tokens  operation       " + "".join(f"  {t} thr (s)" for t in args.threads)
    header += f"  ratio {args.threads[0]}/{args.threads[-1]}" + "".join(
        f"  peak+ {t} thr (MiB)" for t in args.threads)
    print(header)
    print("-" * len(header))
    cell = {(r["operation"], r["tokens"], r["threads"]): r for r in results}
    for tokens in args.lengths:
        for operation in OPERATIONS:
            row = [cell[operation, tokens, t] for t in args.threads]
            line = f"{tokens:6d}  {operation:14s}" + "".join(f"  {r['median_s']:10.3f}" for r in row)
            line += f"  {row[0]['median_s'] / row[-1]['median_s']:9.2f}"
            line += "".join(f"  {r['peak_extra_mib']:18.0f}" for r in row)
            print(line)
        both = [cell["maps", tokens, t]["median_s"] + cell["decomposition", tokens, t]["median_s"]
                for t in args.threads]
        print(f"{tokens:6d}  maps+decomp   " + "".join(f"  {b:10.3f}" for b in both))
    if 512 in args.lengths:
        median = min(cell["maps", 512, t]["median_s"] + cell["decomposition", 512, t]["median_s"]
                     for t in args.threads)
        fastest = min(cell["maps", 512, t]["min_s"] + cell["decomposition", 512, t]["min_s"]
                      for t in args.threads)
        verdict = "meets" if median < TARGET_SECONDS else "MISSES"
        print(f"target: maps + decomposition of 512 tokens < {TARGET_SECONDS} s: median {median:.3f} s "
              f"({verdict}), fastest run {fastest:.3f} s; a busy machine inflates the median")
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_heads.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
