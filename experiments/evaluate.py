"""Train short, test long: per-token perplexity of the shipped models at growing lengths.

    python -m experiments.evaluate   # every shipped model -> assets/results/extrapolation-<kind>.json
    python -m experiments.evaluate --seeds assets/seeds   # and the runs trained with other seeds

The models were trained on windows of 128 tokens. Here each reads the shipped held-out text of
each kind (Python code, English, Spanish and Russian prose: `data.heldout_ids`) in windows of
128, 256, ..., 4096 tokens, under the two protocols the ALiBi paper distinguishes
(non-overlapping and sliding windows, as alibi_viz.models.scoring scores them). Per protocol,
every length scores exactly the same target tokens, so the perplexities compare directly; the
sliding protocol scores passages spread through the whole text, one mean nll per passage.
What the results say: alibi_viz.results.evaluation.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from alibi_viz import data
from alibi_viz.assets import (
    ASSETS_DIR,
    MODEL_ORDER,
    MODELS_DIR,
    load_extrapolation_results,
    results_path,
    seed_run,
    shipped_models,
    training_info,
)
from alibi_viz.models.loading import load_eval_model
from alibi_viz.models.scoring import (
    NONOVERLAPPING_TOKENS,
    PASSAGE_TOKENS,
    PASSAGES,
    evaluation_stream,
    passage_perplexity,
    passage_starts,
    perplexity,
    protocol_plan,
)
from alibi_viz.results.evaluation import (
    CHUNKS,
    CORPUS_SOURCE,
    DEFAULT_STRIDE,
    LENGTHS,
    PASSAGES_NOTE,
    PROTOCOLS,
    T_INTERVAL_NOTE,
    confidence_interval,
    format_table,
)
from experiments.cards import write_model_card
from experiments.program import parse, parser, write_results

CHECK_WINDOWS = 4  # extrapolation.json keeps 4 x 128 + 1 ids for tests to re-evaluate


def evaluate_model(folder: Path, nonoverlapping: np.ndarray, heldout: np.ndarray, plan: dict,
                   lengths, starts, passage_tokens: int, stride: int, kind: str, name: str,
                   bar: bool = True):
    """One model's entry of extrapolation-<kind>.json (and the model, for the check): per
    protocol and length its perplexity, 95% t interval, the per-unit mean nll behind both
    (chunks of `nonoverlapping`, passages of `heldout` at `starts`), tokens and seconds."""
    model = load_eval_model(folder)
    info = training_info(folder)
    folder = Path(folder)
    try:  # relative to the repository, so the results file is the same on every machine
        shown = folder.resolve().relative_to(ASSETS_DIR.parent).as_posix()
    except ValueError:
        shown = folder.as_posix()
    entry = {"folder": shown, "arch": info.get("arch"),
             "model_class": type(model).__name__,
             "attn_implementation": model.config._attn_implementation,
             "train_seq_len": info.get("train_seq_len"), "seed": info.get("seed"),
             "steps": info.get("steps"), "threads": torch.get_num_threads(),
             "perplexity": {}, "ci95": {}, "chunk_nll": {}, "tokens": {}, "seconds": {}}
    for protocol in PROTOCOLS:
        for field in ("perplexity", "ci95", "chunk_nll", "tokens", "seconds"):
            entry[field][protocol] = {}
        for length in lengths:
            t0 = time.perf_counter()
            with tqdm(desc=f"{name} {protocol} {length}", unit="win", disable=not bar,
                      leave=False) as pbar:
                def advance(done, total, pbar=pbar):
                    pbar.total = total
                    pbar.n = done
                    pbar.refresh()
                if protocol == "sliding":
                    out = passage_perplexity(model, heldout, length, starts, passage_tokens,
                                             stride=stride, max_length=max(lengths),
                                             progress=advance)
                else:
                    out = perplexity(model, nonoverlapping, length, protocol, stride=stride,
                                     progress=advance, **plan)
            key = str(length)
            entry["perplexity"][protocol][key] = round(out["ppl"], 5)
            entry["ci95"][protocol][key] = [round(v, 5)
                                            for v in confidence_interval(out["chunk_nll"])]
            entry["chunk_nll"][protocol][key] = [round(v, 6) for v in out["chunk_nll"]]
            entry["tokens"][protocol][key] = out["tokens"]
            entry["seconds"][protocol][key] = round(time.perf_counter() - t0, 1)
            print(f"{kind:6s} {name:12s} {protocol:15s} {length:5d}  ppl {out['ppl']:8.3f}  "
                  f"({out['tokens']} tokens, {entry['seconds'][protocol][key]} s)", flush=True)
    return entry, model


def evaluate_all(models: dict[str, Path], lengths=LENGTHS, nonoverlapping_tokens=NONOVERLAPPING_TOKENS,
                 passages=PASSAGES, passage_tokens=PASSAGE_TOKENS, stride=DEFAULT_STRIDE,
                 bar=True, kind: str = "python", seeds: dict | None = None) -> dict:
    """Evaluate every model at every length under both protocols on the held-out text of
    `kind`; returns the results dict (what extrapolation-<kind>.json holds).

    Nonoverlapping scores targets 1 .. nonoverlapping_tokens. Sliding scores `passages`
    disjoint passages spread evenly through the whole held-out text, `passage_tokens` targets
    each after max(lengths) - 1 tokens of context, so at every length each scored token sees
    between length - stride + 1 and length tokens. seeds: {name: {seed: folder}}, runs of the
    same models trained with other seeds, kept under results["seeds"].
    """
    lengths = sorted(int(n) for n in lengths)
    score_from = max(lengths)
    stream = evaluation_stream(nonoverlapping_tokens, kind)
    heldout = data.heldout_ids(kind)
    starts = passage_starts(heldout.size, passages, passage_tokens, score_from)
    plan = protocol_plan("nonoverlapping", nonoverlapping_tokens, score_from)
    check_ids = stream[: CHECK_WINDOWS * lengths[0] + 1]
    results = {
        "description": f"Per-token (per-byte) perplexity on the shipped held-out text "
                       f"({data.TEXT_KINDS[kind]}); written by `python -m experiments.evaluate`.",
        "command": "python -m experiments.evaluate",
        "kind": kind,
        "lengths": lengths,
        "protocols": {
            "nonoverlapping": {"targets": [1, nonoverlapping_tokens],
                               "tokens": nonoverlapping_tokens},
            "sliding": {"passages": passages, "passage_tokens": passage_tokens,
                        "tokens": passages * passage_tokens, "stride": stride,
                        "context": score_from - 1, "starts": starts},
        },
        "stride": stride,
        "chunks": CHUNKS,
        "interval": T_INTERVAL_NOTE.format(chunks=CHUNKS, passages=passages),
        "tokens_note": PASSAGES_NOTE.format(nonoverlapping=f"{nonoverlapping_tokens:,}",
                                            sliding=f"{passages * passage_tokens:,}",
                                            passages=passages, passage_tokens=passage_tokens),
        "corpus": {
            "source": CORPUS_SOURCE,
            "kind": kind,
            "stream_tokens": int(heldout.size),
            "stream_sha256": hashlib.sha256(heldout.astype(np.int64).tobytes()).hexdigest(),
        },
        "torch": torch.__version__,
        "models": {},
        "check": {"protocol": "nonoverlapping", "length": lengths[0],
                  "token_ids": check_ids.tolist(), "ppl": {}},
    }
    args = (stream, heldout, plan, lengths, starts, passage_tokens, stride, kind)
    for name, folder in models.items():
        entry, model = evaluate_model(folder, *args, name=name, bar=bar)
        results["check"]["ppl"][name] = round(
            perplexity(model, check_ids, lengths[0], "nonoverlapping")["ppl"], 6)
        results["models"][name] = entry
    for name, runs in (seeds or {}).items():
        for seed, folder in sorted(runs.items()):
            entry, _model = evaluate_model(folder, *args, name=f"{name} seed {seed}", bar=bar)
            results.setdefault("seeds", {}).setdefault(name, {})[str(seed)] = entry
    return results


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def seed_folders(root: Path, with_weights: bool = False) -> dict[str, dict[int, Path]]:
    """{model: {seed: folder}} of the runs under `root` named <model>-seed<N>
    (`python -m experiments.train --arch alibi --seed 1 --out assets/seeds/alibi-seed1`).
    with_weights: only the runs whose weights are here (a clone has none: assets/ ships their
    cards and results, not their weights), saying which were left out."""
    found = {}
    for folder in sorted(Path(root).glob("*-seed*")):
        run = seed_run(folder.name)
        if not run or not (folder / "config.json").exists():
            continue
        if with_weights and not any((folder / name).exists() for name in WEIGHT_FILES):
            print(f"{folder}: no weights, left out (its README.md has the command that remakes "
                  "them); its shipped results are kept")
            continue
        found.setdefault(run[0], {})[run[1]] = folder
    return found


SETTINGS = ("lengths", "protocols", "stride", "corpus", "kind")


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
    seeds = {name: {**old.get("seeds", {}).get(name, {}), **new.get("seeds", {}).get(name, {})}
             for name in {**old.get("seeds", {}), **new.get("seeds", {})}}
    if seeds:
        merged["seeds"] = seeds
    merged["check"] = {**new["check"], "ppl": {**old["check"]["ppl"], **new["check"]["ppl"]}}
    return merged


def main(argv=None) -> None:
    p = parser("python -m experiments.evaluate", "Perplexity of the shipped models at 128..4096 tokens.")
    p.add_argument("--models", nargs="*", help="names under assets/models (default: all)")
    p.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    p.add_argument("--tokens", type=int, default=NONOVERLAPPING_TOKENS,
                   help="targets scored by the non-overlapping protocol")
    p.add_argument("--passages", type=int, default=PASSAGES,
                   help="sliding protocol: passages spread through each held-out text")
    p.add_argument("--passage-tokens", type=int, default=PASSAGE_TOKENS,
                   help="sliding protocol: targets scored per passage")
    p.add_argument("--seeds", default="", help="also evaluate the runs trained with other "
                   "seeds under this folder, named <model>-seed<N> (e.g. assets/seeds)")
    p.add_argument("--seeds-only", action="store_true", help="evaluate only those runs, "
                   "keeping the shipped models' results (same settings)")
    p.add_argument("--stride", type=int, default=DEFAULT_STRIDE)
    p.add_argument("--kinds", nargs="*", default=list(data.CORPUS_KINDS), choices=data.CORPUS_KINDS)
    args = parse(p, argv)
    available = shipped_models()
    names = args.models or list(available)
    missing = [n for n in names if n not in available]
    if missing:
        raise SystemExit(f"no model {missing} under {MODELS_DIR}; have {list(available)}")
    by_kind = {}
    for kind in args.kinds:
        seeds = seed_folders(Path(args.seeds), with_weights=True) if args.seeds else {}
        results = evaluate_all({} if args.seeds_only else {n: available[n] for n in names},
                               args.lengths, args.tokens,
                               args.passages, args.passage_tokens, args.stride, kind=kind,
                               seeds={n: runs for n, runs in seeds.items() if n in names})
        if args.seeds:  # the command that remakes the whole file
            results["command"] += f" --seeds {args.seeds}"
        results = merge_results(load_extrapolation_results(kind), results)
        if not results["models"]:
            raise SystemExit(f"--seeds-only: no shipped results with the same settings for {kind}")
        print(format_table(results))
        write_results(results_path(kind), results)
        by_kind[kind] = results
    by_kind = {kind: by_kind.get(kind) or load_extrapolation_results(kind)
               for kind in data.CORPUS_KINDS}
    for name in [] if args.seeds_only else names:
        write_model_card(available[name], by_kind)
    for runs in (seed_folders(Path(args.seeds)) if args.seeds else {}).values():
        for folder in runs.values():
            write_model_card(folder, by_kind)


if __name__ == "__main__":
    main()
