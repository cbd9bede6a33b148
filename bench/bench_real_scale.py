"""Benchmark: a new text on /inspect at the size people bring (issue 40).

    .venv/bin/python bench/bench_real_scale.py [--lengths 512 2048] [--threads 2] [--no-check]
                                                [--falcon] [--repeat N]

The model: BLOOM with bloom-560m's public config (24 layers, 16 heads, hidden 1,024,
vocabulary 250,880, 559M parameters), random weights, built once with save_pretrained and kept
in bench/out/bloom-560m-shape/ (2.2 GB). Every cell runs in a child process of its own, which
loads the model the way the app does (load_model) and then times one operation once, so its
peak resident memory is that operation's alone: the peak (VmHWM) is reset once the model is
loaded (loading peaks higher than it holds), and the table gives the peak above the memory
held then.

Cells, side by side in one run (these machines are noisy: read the ratios):
- body: one forward of the transformer body with output_attentions (every layer's maps at
  once, no LM head): the physical limit of "every layer's maps";
- new text: what /inspect computes for a new text, `analyze_heads` with the shown layer split
  in the same pass (alibi_viz_app/heads_view.py);
- before: what the page computed for a new text at commit 4fe2a3f, run from that commit's
  library (`--tree`, a git worktree): `analyze_heads` (every layer's maps held at once, capped
  to 1 GiB of them), then `decomposition_views` of the shown layer in a second pass;
- check: `alibi-viz check`'s `check_alibi` with its default probe and decoding, in this tree
  and (check before) in the earlier one.
It also runs the shipped ALiBi model at 2,048 tokens (CPU seconds of a new text), and with
--falcon a Falcon-RW-1B-shaped model in bfloat16 (1.3B parameters, 32 heads, alibi=True).
Results also go to bench/out/bench_real_scale.json. Not in `make test` (minutes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
BLOOM_DIR = OUT / "bloom-560m-shape"
FALCON_DIR = OUT / "falcon-rw-1b-shape"
TEXT_FILE = ROOT / "alibi_viz" / "notebook.py"  # code that any tokenizer cuts into >2,048 tokens


def build(folder: Path, kind: str) -> Path:
    """Save the random model once (bloom-560m's or Falcon-RW-1B's shape) with a tokenizer."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoModelForCausalLM, BloomConfig, FalconConfig

    from alibi_viz.tiny_models import byte_tokenizer

    torch.manual_seed(0)
    if kind == "bloom":  # bigscience/bloom-560m's config.json
        config = BloomConfig(vocab_size=250_880, hidden_size=1024, n_layer=24, n_head=16,
                             layer_norm_epsilon=1e-5, initializer_range=0.02)
        dtype = torch.float32
    else:  # tiiuae/falcon-rw-1b's config.json
        config = FalconConfig(vocab_size=50_304, hidden_size=2048, num_hidden_layers=24,
                              num_attention_heads=32, alibi=True, bias=True, multi_query=False,
                              new_decoder_architecture=False, parallel_attn=False,
                              initializer_range=0.02)
        dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config).to(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    # A byte tokenizer with the model's vocabulary would cut text into fewer tokens than a
    # real BPE would not matter here: a cell is timed at a fixed token count.
    byte_tokenizer().save_pretrained(folder)
    return folder


def status_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS, VmHWM), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> float:
    """Reset this process's peak resident memory (VmHWM) to its current RSS (Linux: write 5
    to /proc/self/clear_refs) and return that RSS, MiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return status_mib("VmRSS")


def cell(args) -> dict:
    """Run in the child: load, time one operation once, report time and memory."""
    import torch

    torch.set_num_threads(args.threads)
    try:
        from alibi_viz.models import attention as heads
    except ImportError:  # a tree from before the module took its name
        from alibi_viz.models import heads
    from alibi_viz.models.conformance import check_alibi
    from alibi_viz.models.loading import load_model

    model, tokenizer, info = load_model(args.folder)
    text = TEXT_FILE.read_text() * 4
    with torch.inference_mode():  # weights read from a mapped file become resident when first
        for param in model.parameters():  # used: make them so before measuring
            param.sum()
    gc.collect()
    loaded_mib = reset_peak()  # loading peaks higher than it holds: measure from here
    T = args.tokens
    layer = 0
    t0, c0 = time.perf_counter(), time.process_time()
    shown, passes = T, 1
    if args.op == "body":
        ids = heads.tokenize_capped(tokenizer, text, T).ids
        with torch.inference_mode():
            out = model.base_model(input_ids=torch.tensor([ids]), output_attentions=True,
                                   use_cache=False)
        assert len(out.attentions) == info.num_layers
    elif args.op == "new text":
        analysis = heads.analyze_heads(model, tokenizer, text, max_tokens=T, info=info,
                                       slopes=info.config_slopes, split_layers=(layer,))
        shown = analysis.seq_len
        if layer not in analysis.splits:  # the split did not fit beside the maps: the page
            passes = 2  # splits the layer in a pass of its own (alibi_viz_app/heads_view.decomposition)
            heads.decomposition_views(model, tokenizer, text,
                                      heads.decomposition_layers(info.num_layers, layer, shown),
                                      max_tokens=T, info=info, bias_shown="textbook")
    elif args.op == "before":  # what the page ran for a new text in the earlier tree
        analysis = heads.analyze_heads(model, tokenizer, text, max_tokens=T, info=info,
                                       slopes=info.config_slopes)
        shown = analysis.seq_len
        del analysis
        heads.decomposition_views(model, tokenizer, text, [layer], max_tokens=T, info=info,
                                  bias_shown="textbook")
        passes = 2
    elif args.op in ("check", "check before"):
        check_alibi(model, tokenizer)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_mib = status_mib("VmHWM")
    return {"op": args.op, "tokens": T, "shown": shown, "passes": passes,
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2), "loaded_mib": round(loaded_mib),
            "peak_above_loaded_mib": round(peak_mib - loaded_mib)}


def run_cell(folder: Path, op: str, tokens: int, threads: int, tree: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--cell", "--folder", str(folder),
                           "--op", op, "--tokens", str(tokens), "--threads", str(threads),
                           "--tree", tree],
                          capture_output=True, text=True, cwd=ROOT,
                          # the library of the earlier tree (a git worktree) for a "before" op
                          env={**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                          if op.endswith("before") else None)
    if done.returncode != 0:
        return {"op": op, "tokens": tokens, "error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_row(cells: list[dict]) -> dict:
    """One row of `cells` (one operation's rounds): the median seconds and CPU seconds, the
    largest peak, every round's seconds in `rounds`; the first error if any round failed."""
    failed = [c for c in cells if "error" in c]
    if failed:
        return failed[0]
    row = dict(cells[0])
    for key in ("seconds", "cpu_seconds"):
        row[key] = round(statistics.median(c[key] for c in cells), 2)
    row["peak_above_loaded_mib"] = max(c["peak_above_loaded_mib"] for c in cells)
    row["rounds"] = [c["seconds"] for c in cells]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of the body, new text and before cells, in turn (medians)")
    p.add_argument("--no-check", action="store_true", help="skip the conformance check cell")
    p.add_argument("--falcon", action="store_true", help="also the Falcon-RW-1B shape, bf16")
    p.add_argument("--tree", default=str(OUT / "before"),
                   help="a checkout of the earlier commit for the 'before' cells (default "
                        "bench/out/before: git worktree add bench/out/before 4fe2a3f)")
    p.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    p.add_argument("--op", help=argparse.SUPPRESS)
    p.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.cell:
        print(json.dumps(cell(args)))
        return
    from alibi_viz import assets

    models = {"bloom-560m shape (fp32)": build(BLOOM_DIR, "bloom")}
    if args.falcon:
        models["Falcon-RW-1B shape (bf16)"] = build(FALCON_DIR, "falcon")
    rows = []
    print(f"torch threads {args.threads}; cores {os.cpu_count()}", flush=True)
    print("| model | tokens asked | operation | model passes | tokens shown | seconds | CPU s | "
          "vs body | peak RSS above the loaded model (MiB) |\n|---|---|---|---|---|---|---|---|---|",
          flush=True)
    for name, folder in models.items():
        for tokens in args.lengths:
            body = None
            ops = ("body", "new text", "before")
            # --repeat N: the three cells in turn, N rounds (so that a slow minute of the
            # machine falls on every cell alike); each cell's median over its rounds
            runs = {op: [] for op in ops}
            for _round in range(args.repeat):
                for op in ops:
                    runs[op].append(run_cell(folder, op, tokens, args.threads, args.tree))
            for op in ops:
                row = median_row(runs[op])
                row["model"] = name
                rows.append(row)
                if "error" in row:
                    print(f"| {name} | {tokens} | {op} | - | - | - | - | - | {row['error']} |",
                          flush=True)
                    continue
                body = row["seconds"] if op == "body" else body
                ratio = f"{row['seconds'] / body:.2f}x" if body else "-"
                seconds = (f"{row['seconds']} ({' / '.join(map(str, row['rounds']))})"
                           if len(row["rounds"]) > 1 else row["seconds"])
                print(f"| {name} | {tokens} | {op} | {row['passes']} | {row['shown']} | {seconds} | "
                      f"{row['cpu_seconds']} | {ratio} | {row['peak_above_loaded_mib']} |",
                      flush=True)
        for op in () if args.no_check else ("check", "check before"):
            row = run_cell(folder, op, 128, args.threads, args.tree)
            row["model"] = name
            rows.append(row)
            print(f"| {name} | probe | {op} | - | - | {row.get('seconds')} | "
                  f"{row.get('cpu_seconds')} | - | {row.get('peak_above_loaded_mib', row.get('error'))} |",
                  flush=True)
    shipped = assets.shipped_models().get("alibi")
    if shipped:
        for op in ("new text", "before"):
            row = run_cell(Path(shipped), op, 2048, args.threads, args.tree)
            row["model"] = "shipped alibi"
            rows.append(row)
            print(f"| shipped alibi | 2048 | {op} | {row.get('passes')} | {row.get('shown')} | {row.get('seconds')} | "
                  f"{row.get('cpu_seconds')} | - | {row.get('peak_above_loaded_mib', row.get('error'))} |",
                  flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_real_scale.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
