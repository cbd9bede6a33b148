"""Train short, test long: per-token perplexity of the shipped models at growing lengths.

    python -m alibi_viz.evaluate            # every shipped model -> assets/results/extrapolation.json

The models were trained on windows of 128 tokens. Here each reads held-out text in windows of
128, 256, ..., 4096 tokens, under the two protocols the ALiBi paper distinguishes (Press et al.
2021, section 4 and appendix B):

  nonoverlapping  the text is cut into consecutive windows of `length` tokens and every token
                  is scored. Tokens early in a window see little context (the "early token
                  curse"), so this understates what a long window gives.
  sliding         windows of `length` tokens advance by `stride` tokens and only the last
                  `stride` tokens of each window are scored, so every scored token sees at least
                  length - stride tokens of context. More expensive: length / stride forward
                  tokens per scored token.

Per protocol, every length scores exactly the same target tokens, so the perplexities compare
directly. Perplexity is exp(mean negative log-likelihood per token); tokens are bytes here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import data
from .assets import (
    MODEL_ORDER,
    MODELS_DIR,
    RESULTS_PATH,
    load_extrapolation_results,
    shipped_models,
    training_info,
)
from .errors import AlibiVizError

PROTOCOLS = ("nonoverlapping", "sliding")
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
DEFAULT_STRIDE = 64
NONOVERLAPPING_TOKENS = 16384  # 4 windows at 4096
SLIDING_TOKENS = 512  # scored tokens; each costs length / stride forward tokens
TOKENS_PER_BATCH = 4096  # windows of one length batched up to this many input tokens
CHECK_WINDOWS = 4  # extrapolation.json keeps 4 x 128 + 1 ids for tests to re-evaluate


def _windows(n_targets: int, length: int, protocol: str, stride: int, score_from: int):
    """(input_start, input_end, scored) per window, for a stream whose targets are positions
    1 .. n_targets. Window [a, b) reads ids[a:b], predicts ids[a+1:b+1] and scores the last
    `scored` of those predictions."""
    windows = []
    if protocol == "nonoverlapping":
        for a in range(0, n_targets, length):
            b = min(a + length, n_targets)
            windows.append((a, b, b - a))
        return windows
    # sliding: targets score_from .. n_targets, `stride` per window, each window as long as
    # the text before it allows (at most `length`)
    first = score_from
    while first <= n_targets:
        last = min(first + stride - 1, n_targets)  # targets first..last, predicted by inputs
        b = last  # input end (exclusive) so that the last prediction is target `last`
        a = max(0, b - length)
        windows.append((a, b, last - first + 1))
        first = last + 1
    return windows


def perplexity(model, token_ids: Sequence[int] | np.ndarray | torch.Tensor, length: int,
               protocol: str = "nonoverlapping", stride: int = DEFAULT_STRIDE,
               score_from: int = 1, max_tokens: int | None = None,
               tokens_per_batch: int = TOKENS_PER_BATCH,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Per-token perplexity of a causal LM on one token stream at one window length.

    token_ids: 1-D ids, shape (n,). Targets are positions 1 .. n - 1 (each predicted from the
        tokens before it, within its window); max_tokens keeps only the first max_tokens + 1 ids.
    length: window length in tokens (the model's context at evaluation).
    protocol: "nonoverlapping" (all targets scored, windows cut at multiples of `length`) or
        "sliding" (targets score_from .. n - 1, `stride` per window, each seeing up to `length`
        tokens; pass score_from >= the longest length you compare so every window is full).
    progress: called as progress(windows_done, windows_total) after each batch.
    Returns {"ppl", "nll" (mean, nats per token), "tokens" (targets scored), "windows"}.
    Runs under torch.inference_mode(); batches windows of equal length, up to
    `tokens_per_batch` input tokens per forward pass.
    """
    if protocol not in PROTOCOLS:
        raise AlibiVizError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}.")
    ids = torch.as_tensor(np.asarray(token_ids), dtype=torch.long).reshape(-1)
    if max_tokens is not None:
        ids = ids[: max_tokens + 1]
    n_targets = ids.numel() - 1
    if length < 1 or stride < 1:
        raise AlibiVizError(f"length and stride must be positive, got {length} and {stride}.")
    if protocol == "sliding" and not 1 <= score_from <= n_targets:
        raise AlibiVizError(f"score_from ({score_from}) must be in [1, {n_targets}].")
    if n_targets < 1:
        raise AlibiVizError("Need at least two tokens to score one prediction.")
    stride = min(stride, length)
    windows = _windows(n_targets, length, protocol, stride, score_from)

    model.eval()
    device = next(model.parameters()).device
    total_nll, total_tokens, done = 0.0, 0, 0
    with torch.inference_mode():
        i = 0
        while i < len(windows):
            width = windows[i][1] - windows[i][0]
            j = i  # gather a batch of windows of the same input width
            while (j < len(windows) and windows[j][1] - windows[j][0] == width
                   and (j - i + 1) * width <= max(tokens_per_batch, width)):
                j += 1
            batch = windows[i:j]
            inputs = torch.stack([ids[a:b] for a, b, _ in batch]).to(device)  # (B, width)
            targets = torch.stack([ids[a + 1 : b + 1] for a, b, _ in batch]).to(device)
            logits = model(input_ids=inputs).logits.float()  # (B, width, V)
            nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, width)
            for row, (_, _, scored) in enumerate(batch):
                total_nll += nll[row, width - scored :].double().sum().item()
                total_tokens += scored
            done += len(batch)
            if progress is not None:
                progress(done, len(windows))
            i = j
    mean = total_nll / total_tokens
    return {"ppl": math.exp(mean), "nll": mean, "tokens": total_tokens, "windows": len(windows)}


def load_eval_model(folder: Path, for_attentions: bool = False):
    """A shipped model in eval mode. sdpa where the architecture supports it (same logits as
    eager up to rounding, much less memory at 4096 tokens); eager for BLOOM or when the caller
    needs attention probabilities."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    attn = "eager" if for_attentions or config.model_type == "bloom" else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                 attn_implementation=attn)
    return model.eval()


def evaluation_stream(n_tokens: int) -> np.ndarray:
    """The first n_tokens + 1 ids of the held-out stream (targets 1 .. n_tokens)."""
    stream = data.corpus_ids("valid", max_tokens=n_tokens + 1)
    if stream.size < n_tokens + 1:
        raise AlibiVizError(f"The held-out split has only {stream.size} tokens.")
    return stream


def protocol_plan(protocol: str, tokens: int, max_length: int = max(LENGTHS)) -> dict:
    """The perplexity() arguments that make every length up to max_length score the same
    `tokens` targets: nonoverlapping scores targets 1 .. tokens; sliding scores the `tokens`
    targets after the first max_length tokens, so every window is full."""
    if protocol == "nonoverlapping":
        return {"max_tokens": tokens, "score_from": 1}
    if protocol == "sliding":
        return {"max_tokens": max_length - 1 + tokens, "score_from": max_length}
    raise AlibiVizError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}.")


def evaluate_length(model, length: int, protocol: str = "nonoverlapping",
                    tokens: int | None = None, stride: int = DEFAULT_STRIDE,
                    max_length: int = max(LENGTHS), progress=None) -> dict:
    """One cell of extrapolation.json, computed live: perplexity of `model` on the held-out
    stream at `length` under `protocol`, on the same targets as `python -m alibi_viz.evaluate`
    (tokens defaults to NONOVERLAPPING_TOKENS or SLIDING_TOKENS). Returns perplexity()'s dict.
    """
    if tokens is None:
        tokens = NONOVERLAPPING_TOKENS if protocol == "nonoverlapping" else SLIDING_TOKENS
    plan = protocol_plan(protocol, tokens, max_length)
    stream = evaluation_stream(plan["max_tokens"])
    return perplexity(model, stream, length, protocol, stride=stride, progress=progress, **plan)


def evaluate_all(models: dict[str, Path], lengths=LENGTHS, nonoverlapping_tokens=NONOVERLAPPING_TOKENS,
                 sliding_tokens=SLIDING_TOKENS, stride=DEFAULT_STRIDE, bar=True) -> dict:
    """Evaluate every model at every length under both protocols; returns the results dict.

    Nonoverlapping scores targets 1 .. nonoverlapping_tokens. Sliding scores the
    `sliding_tokens` targets that follow the first max(lengths) tokens, so at every length each
    scored token sees between length - stride and length tokens of context.
    """
    from tqdm import tqdm

    lengths = sorted(int(n) for n in lengths)
    score_from = max(lengths)
    stream = evaluation_stream(max(nonoverlapping_tokens, score_from - 1 + sliding_tokens))
    plan = {"nonoverlapping": protocol_plan("nonoverlapping", nonoverlapping_tokens, score_from),
            "sliding": protocol_plan("sliding", sliding_tokens, score_from)}
    check_ids = stream[: CHECK_WINDOWS * lengths[0] + 1]
    results = {
        "description": "Per-token (per-byte) perplexity on held-out Python standard library "
                       "sources; written by `python -m alibi_viz.evaluate`.",
        "command": "python -m alibi_viz.evaluate",
        "lengths": lengths,
        "protocols": {
            "nonoverlapping": {"targets": [1, nonoverlapping_tokens],
                               "tokens": nonoverlapping_tokens},
            "sliding": {"targets": [score_from, score_from - 1 + sliding_tokens],
                        "tokens": sliding_tokens, "stride": stride},
        },
        "stride": stride,
        "tokens_note": f"held-out tokens at every length: {nonoverlapping_tokens:,} "
                       f"(non-overlapping), {sliding_tokens:,} (sliding)",
        "corpus": {
            "source": "Python standard library .py files, split 'valid' (alibi_viz.data)",
            "python": platform.python_version(),
            "stream_tokens": int(stream.size),
            "stream_sha256": hashlib.sha256(stream.astype(np.int64).tobytes()).hexdigest(),
        },
        "torch": torch.__version__,
        "models": {},
        "check": {"protocol": "nonoverlapping", "length": lengths[0],
                  "token_ids": check_ids.tolist(), "ppl": {}},
    }
    for name, folder in models.items():
        model = load_eval_model(folder)
        info = training_info(folder)
        entry = {"folder": str(folder.as_posix()), "arch": info.get("arch"),
                 "model_class": type(model).__name__,
                 "attn_implementation": model.config._attn_implementation,
                 "train_seq_len": info.get("train_seq_len"), "seed": info.get("seed"),
                 "steps": info.get("steps"), "threads": torch.get_num_threads(),
                 "perplexity": {}, "tokens": {}, "seconds": {}}
        for protocol in PROTOCOLS:
            entry["perplexity"][protocol], entry["tokens"][protocol] = {}, {}
            entry["seconds"][protocol] = {}
            for length in lengths:
                t0 = time.perf_counter()
                with tqdm(desc=f"{name} {protocol} {length}", unit="win", disable=not bar,
                          leave=False) as pbar:
                    def advance(done, total, pbar=pbar):
                        pbar.total = total
                        pbar.n = done
                        pbar.refresh()
                    out = perplexity(model, stream, length, protocol, stride=stride,
                                     progress=advance, **plan[protocol])
                key = str(length)
                entry["perplexity"][protocol][key] = round(out["ppl"], 5)
                entry["tokens"][protocol][key] = out["tokens"]
                entry["seconds"][protocol][key] = round(time.perf_counter() - t0, 1)
                print(f"{name:8s} {protocol:15s} {length:5d}  ppl {out['ppl']:8.3f}  "
                      f"({out['tokens']} tokens, {entry['seconds'][protocol][key]} s)", flush=True)
        results["check"]["ppl"][name] = round(
            perplexity(model, check_ids, lengths[0], "nonoverlapping")["ppl"], 6)
        results["models"][name] = entry
    return results


def format_table(results: dict) -> str:
    """The perplexity table as markdown: one row per model and protocol."""
    lengths = results["lengths"]
    train_len = next(iter(results["models"].values()), {}).get("train_seq_len")
    lines = ["| model | protocol | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|" + "---:|" * len(lengths)]
    for name, entry in results["models"].items():
        for protocol, ppl in entry["perplexity"].items():
            lines.append(f"| {name} | {protocol} | "
                         + " | ".join(f"{ppl[str(n)]:.3f}" for n in lengths) + " |")
    return f"Train length {train_len}.\n" + "\n".join(lines)


SETTINGS = ("lengths", "protocols", "stride", "corpus")


def merge_results(old: dict, new: dict) -> dict:
    """`new`, plus the models of `old` that `new` did not evaluate when both used the same
    settings (lengths, protocols, stride, token stream): lets one re-evaluate a single model."""
    if not old or any(old.get(k) != new.get(k) for k in SETTINGS) or old.get("check", {}).get(
            "token_ids") != new["check"]["token_ids"]:
        return new
    models = {**old["models"], **new["models"]}
    rank = {name: i for i, name in enumerate(MODEL_ORDER)}
    models = {n: models[n] for n in sorted(models, key=lambda n: (rank.get(n, len(rank)), n))}
    merged = {**new, "models": models}
    merged["check"] = {**new["check"], "ppl": {**old["check"]["ppl"], **new["check"]["ppl"]}}
    return merged


def main(argv=None) -> None:
    from .train import write_model_card

    p = argparse.ArgumentParser(prog="python -m alibi_viz.evaluate",
                                description="Perplexity of the shipped models at 128..4096 tokens.")
    p.add_argument("--models", nargs="*", help="names under assets/models (default: all)")
    p.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    p.add_argument("--tokens", type=int, default=NONOVERLAPPING_TOKENS,
                   help="targets scored by the non-overlapping protocol")
    p.add_argument("--sliding-tokens", type=int, default=SLIDING_TOKENS,
                   help="targets scored by the sliding protocol")
    p.add_argument("--stride", type=int, default=DEFAULT_STRIDE)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(RESULTS_PATH))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    available = shipped_models()
    names = args.models or list(available)
    missing = [n for n in names if n not in available]
    if missing:
        raise SystemExit(f"no model {missing} under {MODELS_DIR}; have {list(available)}")
    results = evaluate_all({n: available[n] for n in names}, args.lengths, args.tokens,
                           args.sliding_tokens, args.stride)
    out = Path(args.out)
    results = merge_results(load_extrapolation_results(out), results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    for name in names:
        write_model_card(available[name], results)
    print(format_table(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
