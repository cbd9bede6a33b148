"""The model cards: assets/models/<name>/README.md, written from a model's training.json and
every experiment's shipped results (extrapolation per kind of text, reach, the learnable-slope
variant). Training writes a card at its end; `python -m experiments.evaluate` and `python -m
experiments.reach` rewrite them with their new numbers; `python -m experiments.train --card
FOLDER...` rewrites them by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from alibi_viz import assets, data
from alibi_viz.assets import (
    REMAINING_DIFFERENCES,
    SHIPPED,
    load_extrapolation_results,
    load_learnable_slopes_results,
    load_reach_results,
)
from alibi_viz.results import learnable_slopes
from alibi_viz.results.reach import MARGIN, PAST_VERDICTS, ReachResult, ReachTests, reach_tests


def _arch_text(info: dict) -> str:
    spec = SHIPPED[info["arch"]]
    if info.get("learn_slopes"):  # its slopes are its own, per layer: not the family's schedule
        final = np.asarray(info["final_slopes"], dtype=np.float64)  # (layers, heads)
        initial = np.asarray(info["initial_slopes"], dtype=np.float64)
        return (f"{spec.title}, `{info['model_class']}`: no position embeddings; each head adds "
                "+m·j to its attention score for key j (the row-constant form of -m (i - j): "
                "the same attention), with a slope m of its own in every layer, "
                f"trained: from {final.max():.3g} down to {final.min():.3g} after training "
                f"(initialised to the official schedule, {initial.max():.3g} .. "
                f"{initial.min():.3g}, in every layer).")
    return f"{spec.title}, `{info['model_class']}`: {spec.position}."


def _slope_parameters_text(info: dict) -> str:
    """The learnable-slope variant's trained slopes, which its weights file does not hold (they
    live in config.json), so that the card counts every trained number."""
    if not info.get("learn_slopes"):
        return ""
    slopes = np.asarray(info["final_slopes"])  # (layers, heads)
    return (f" in its weights, plus its {slopes.size} trained slopes ({slopes.shape[0]} layers "
            f"x {slopes.shape[1]} heads, in `config.json`): {info['parameters'] + slopes.size:,} "
            "trained in all")


def _machine_text(info: dict) -> str:
    m = info.get("machine")
    if not m:
        return "an unrecorded machine"
    return (f"{m['cpus']} CPU cores ({m['platform']}), load average "
            f"{m['load_average_before'][0]} before and {m['load_average_after'][0]} after: "
            + (info.get("alongside") or
               ("idle apart from this run" if max(m["load_average_before"][0],
                                                   m["load_average_after"][0]) < m["threads"] + 0.8
                else "other work shared the cores")))


def _sparkline(values: list[float]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    lo, hi = min(values), max(values)
    return "".join(bars[int((v - lo) / (hi - lo + 1e-12) * (len(bars) - 1))] for v in values)


def _data_lines(info: dict) -> list[str]:
    corpus = info.get("corpus")
    if not isinstance(corpus, dict):  # a model of the earlier, Python-only corpus
        return ["The `.py` sources of the Python standard library (PSF License). See "
                "`alibi_viz/data.py`."]
    shares = ", ".join(f"{kind} {share:.0%}" for kind, share in corpus["shares"].items())
    return [
        "The four-kind corpus, in shares of its bytes: " + shares + " (Python standard library "
        "code; English, Spanish and Russian prose of the GIMP manual and the LibreOffice help, "
        "a text that Debian ships translated page by page, so the three languages read the "
        "same pages). Built from pinned Debian 12 packages by `make corpus`; why these "
        "sources: the docstring of `alibi_viz/data.py`; sizes and licences: "
        "`assets/corpus/README.md`. Documents go to train or validation by a hash of their "
        "name; the held-out text that evaluates the model is validation text only.",
        "",
        "Corpus manifest `" + corpus["manifest"] + "`: train stream sha256 `"
        + corpus["streams"]["train"] + "`, validation stream sha256 `"
        + corpus["streams"]["valid"] + "`. Packages: "
        + ", ".join(f"{name} {version}" for name, version in corpus["packages"].items()) + ".",
    ]


# The pilot that chose the width (issue 23): 400 steps (40 warmup, cosine to 10%) of the
# family's recipe on the four-kind corpus, ALiBi, 4 layers, 8 heads, nothing else running.
PILOT = ({"hidden": 128, "parameters": 826_752, "seconds_per_step": 0.20,
          "valid_loss": {200: 2.4297, 400: 2.2604}},
         {"hidden": 192, "parameters": 1_829_952, "seconds_per_step": 0.36,
          "valid_loss": {200: 2.3534, 400: 2.1187}})


def _snapshot_lines(info: dict) -> list[str]:
    if not info.get("snapshots"):
        return []
    return ["", f"Training snapshots (fp16) at steps {info['snapshots']}: "
            f"`{info['out']}/snapshots/step-NNNNN/`, for the app's "
            "training-step slider (`experiments.snapshots`)."]


def _pilot_lines(info: dict) -> list[str]:
    runs = "; ".join(f"hidden {r['hidden']} ({r['parameters']:,} parameters, "
                     f"{r['seconds_per_step']} s/step): held-out loss {r['valid_loss'][200]} at "
                     f"step 200, {r['valid_loss'][400]} at step 400" for r in PILOT)
    return [f"Width, from a pilot of 400 steps on 2 idle cores: {runs}. The wider model was "
            "0.14 nats better at 1.8x the cost; {steps} steps of it keep the family within "
            "about 2 hours of training on 2 cores, so the family is {hidden} wide.".format(
                steps=f"{info['steps']:,}", hidden=info["hidden"])]


CARD_FACTORS = (1, 2, 8, 32)  # lengths of the card's per-kind table, in training lengths


def results_entry(results: dict, name: str) -> dict | None:
    """The evaluation of model `name` in one extrapolation-<kind>.json: a shipped model's, or
    a run trained with another seed (folder <model>-seed<N>, kept under results["seeds"])."""
    if name in results.get("models", {}):
        return results["models"][name]
    run = assets.seed_run(name)
    return results.get("seeds", {}).get(run[0], {}).get(str(run[1])) if run else None


def _evaluation_lines(name: str, info: dict, by_kind: dict) -> list[str]:
    """The card's evaluation: per kind of held-out text, perplexity at 1x, 2x, 8x and 32x the
    training length with 95% intervals, under both protocols."""
    found = {kind: r for kind, r in by_kind.items() if r and results_entry(r, name)}
    if not found:
        return ["Not evaluated yet: run `python -m experiments.evaluate`."]
    first = next(iter(found.values()))
    train_len = info["train_seq_len"]
    lengths = [f * train_len for f in CARD_FACTORS if f * train_len in first["lengths"]]
    sliding = first["protocols"]["sliding"]
    if sliding.get("passages"):
        where = (f"Sliding: {sliding['tokens']:,} tokens scored in {sliding['passages']} "
                 f"passages of {sliding['passage_tokens']} spread evenly through the text, each "
                 f"after {sliding['context']:,} tokens of its own context, windows advancing by "
                 f"{first['stride']}, each scored token seeing between length - "
                 f"{first['stride'] - 1} and length tokens. In brackets: the 95% interval "
                 f"(Student's t) over {first.get('chunks', 16)} disjoint chunks of the "
                 f"non-overlapping tokens and over the passages of the sliding ones; it covers "
                 f"which text was scored, not training randomness (one training run, seed "
                 f"{info.get('seed', 0)}). The two protocols score different stretches of the "
                 f"text: compare each protocol across lengths, not one protocol's value with "
                 f"the other's.")
    else:
        where = (f"Sliding: {sliding['tokens']:,} tokens scored, windows advancing by "
                 f"{first['stride']}, each scored token seeing between length - "
                 f"{first['stride'] - 1} and length tokens. In brackets: the 95% interval over "
                 f"{first.get('chunks', 16)} disjoint chunks of the scored tokens. The two "
                 f"protocols score different stretches of the text (tokens "
                 f"{first['protocols']['nonoverlapping']['targets'][0]:,}-"
                 f"{first['protocols']['nonoverlapping']['targets'][1]:,} and "
                 f"{sliding['targets'][0]:,}-{sliding['targets'][1]:,}): compare each protocol "
                 "across lengths, not one protocol's value with the other's.")
    lines = [
        f"Per-byte perplexity on the shipped held-out text of each kind "
        f"(`assets/corpus/heldout/`), at {', '.join(str(n) for n in lengths)} tokens "
        f"(1x, 2x, 8x, 32x the training length {train_len}). Non-overlapping: the first "
        f"{first['protocols']['nonoverlapping']['tokens']:,} tokens cut into windows of the "
        f"length, every token scored. " + where,
        "",
        "| text | protocol | " + " | ".join(f"{n} ({n // train_len}x)" for n in lengths) + " |",
        "|---|---|" + "---:|" * len(lengths),
    ]
    for kind, results in found.items():
        entry = results_entry(results, name)
        for protocol, ppl in entry["perplexity"].items():
            ci = entry.get("ci95", {}).get(protocol, {})
            cells = [f"{ppl[str(n)]:.3f} ({ci[str(n)][0]:.3f}-{ci[str(n)][1]:.3f})"
                     if str(n) in ci else f"{ppl[str(n)]:.3f}" for n in lengths]
            lines.append(f"| {data.TEXT_KINDS[kind]} | {protocol} | " + " | ".join(cells) + " |")
    lines += ["", "Every length from 128 to 4,096: `assets/results/extrapolation-<kind>.json`, "
              "written by `python -m experiments.evaluate`."]
    return lines


def _change(change) -> str:
    mean, low, high = change
    return f"{mean:+.3f} nats (95% interval {low:+.3f} to {high:+.3f})"


def _reach_tested(tests: ReachTests) -> str:
    """What the card says of a curve's tests, every clause one `reach_tests` finding."""
    evidence = (f"paired over the {tests.passages} passages: 95% t intervals, Holm-corrected "
                f"over {tests.tests} comparisons, margin {MARGIN} nats")
    if tests.last_gain is None:
        falls = f"no longer context lowers the loss by {MARGIN} nats or more detectably"
    elif tests.rest is None:
        falls = (f"the loss still falls detectably at the longest context ({_change(tests.gain)} "
                 f"from {tests.last_gain[0]:,} to {tests.longest:,} tokens)")
    else:
        falls = (f"the loss falls detectably up to {tests.flat_from:,} tokens "
                 f"({_change(tests.gain)} from {tests.last_gain[0]:,}); from {tests.flat_from:,} "
                 f"to {tests.longest:,} tokens it changes by {_change(tests.rest)}, but no gain "
                 f"of a longer context from {tests.flat_from:,} tokens on passes the corrected "
                 "test")
    past = "" if tests.past is None else (
        f"; past the training length more context {PAST_VERDICTS[tests.past]} "
        f"({_change(tests.whole)} from {tests.train_seq_len:,} to {tests.longest:,})")
    return f"{evidence}: {falls}{past}"


def _reach_lines(name: str, reach: dict, train_seq_len: int) -> list[str]:
    entry = reach.get("models", {}).get(name)
    if not entry:
        return ["Not measured yet: run `python -m experiments.reach`."]
    r = ReachResult.from_dict(entry["reach"])
    tests = reach_tests(r, train_seq_len, name)
    setting = reach["reach"]
    scored = (f"{setting['passages']} passages of {setting['passage_tokens']} scored tokens "
              "spread through the text" if "passages" in setting
              else f"{setting['tokens']:,} scored tokens")
    copy = entry["copy"]
    lines = [
        "On the shipped held-out text of the four kinds, interleaved (`assets/results/"
        "reach.json`, `python -m experiments.reach`). Loss with at most c tokens of context "
        f"(nats/byte, {scored}): "
        + ", ".join(f"{c}: {v:.3f}" for c, v in zip(r.contexts.tolist(), r.nll.tolist(),
                                                       strict=True))
        + ("; " + _reach_tested(tests) if tests else "") + ".",
        "",
        f"Copy at a distance ({copy['samples']} planted spans of {copy['span']} tokens per "
        "distance; gain = loss on the same span where nothing precedes it to copy, minus loss "
        "on the repeat, nats/byte): "
        + ", ".join(f"{d}: {g:+.2f}" for d, g in zip(copy["distances"], copy["gain"],
                                                      strict=True)) + ".",
    ]
    return lines


def _variant_lines(info: dict) -> list[str]:
    """The learnable-slope variant: what differs from the shipped ALiBi model, how it loads,
    how far its slopes moved, and its perplexity beside the fixed-slope model's."""
    if not info.get("learn_slopes"):
        return []
    initial, final = info["initial_slopes"], info["final_slopes"]
    moved = learnable_slopes.drift(initial, final)
    lines = [
        "", "## The variant: learnable slopes",
        "The shipped ALiBi model's recipe (data, batches, seed, initial weights, steps, "
        "schedule) with one change: every layer's slopes m[layer, h] are trained too, as "
        "parameters initialised to the official schedule 2^-1 .. 2^-8 in every layer. They are "
        "parameterised by their logarithms (positive, and Adam moves each by the same relative "
        "step), with no weight decay (`alibi_viz/models/layer_slopes.py`).",
        "",
        "The slopes are stored in `config.json` (`alibi_viz_slopes`, layers x heads), not in the "
        "weights. `alibi_viz.load_model` reads them and applies each layer's own: no remote "
        "code runs. Loaded with plain transformers, the model would apply the official slopes in "
        "every layer, which is not the model that was trained.",
        "",
        "Largest relative change of a slope, per layer (final / initial - 1): "
        + ", ".join(f"layer {i + 1} {r:+.1%} (head {h + 1})" for i, (r, h) in enumerate(
            zip(moved["largest_relative"], moved["head"], strict=True))) + ".",
        "",
        "| layer | " + " | ".join(f"h{h + 1}" for h in range(len(final[0]))) + " |",
        "|---|" + "---:|" * len(final[0]),
        *[f"| {i + 1} | " + " | ".join(f"{m:.4g}" for m in row) + " |"
          for i, row in enumerate(final)],
        "", "(final slopes; initial: " + ", ".join(f"{m:.4g}" for m in initial[0]) + ")",
    ]
    results = load_learnable_slopes_results()
    if results:
        lines += ["", "Perplexity against the fixed-slope model on the same held-out targets "
                  "(`assets/results/learnable-slopes.json`): learnable / fixed, with the paired "
                  "95% interval (Student's t) over 16 chunks.", "",
                  "| text | protocol | " + " | ".join(f"{n} ({f}x)" for n, f in zip(
                      results["lengths"], results["factors"], strict=True)) + " |",
                  "|---|---|" + "---:|" * len(results["lengths"])]
        for kind in results["kinds"]:
            for protocol in results["protocols"]:
                cells = [learnable_slopes.cell(results, kind, protocol, n) for n in results["lengths"]]
                lines.append(f"| {data.TEXT_KINDS[kind]} | {protocol} | " + " | ".join(
                    f"{c['ratio'][0]:.3f} ({c['ratio'][1]:.3f}-{c['ratio'][2]:.3f})"
                    for c in cells) + " |")
    return lines


def write_model_card(folder: Path, results: dict | None = None) -> None:
    """(Re)write folder/README.md from training.json, the shipped extrapolation results per
    kind of held-out text (or `results`, {kind: the dict `experiments.evaluate` writes}) and the
    shipped reach results; rows for this folder's model name."""
    folder = Path(folder)
    shipped = folder.resolve().parent == assets.MODELS_DIR.resolve()  # the shipped results are its own
    run = assets.seed_run(folder.name)
    rerun = folder.resolve().parent.name == "seeds" and run is not None  # assets/seeds/<model>-seed<N>
    if results is None:
        results = ({kind: load_extrapolation_results(kind) for kind in data.CORPUS_KINDS}
                   if shipped or rerun else {})
    info = json.loads((folder / "training.json").read_text())
    name = folder.name
    curve = info["loss_curve"]
    shown = curve[:: max(1, len(curve) // 12)]
    shown += [] if shown[-1] is curve[-1] else [curve[-1]]
    lines = [
        f"# alibi-viz `{name}`: {info['arch']} byte-level language model"
        + (", learnable slopes (a variant beside the family)" if info.get("learn_slopes") else ""),
        "",
        "Trained from scratch on CPU by `python -m experiments.train` so that the app can show real "
        "attention heads, on code and on English, Spanish and Russian prose, and the *train "
        "short, test long* experiment of the ALiBi paper (Press, Smith & Lewis 2021) without "
        "downloading anything.",
        *([] if not rerun else [
            "", f"A run of `{run[0]}` trained again with seed {run[1]} (the same data, settings and "
            "steps; other initial weights and batch order), for the spread that training "
            "randomness adds beside the intervals, which cover only which text was scored. Its "
            "weights are not shipped (assets/ stays under 64 MB); its command below remakes them. "
            "Its evaluation sits under `seeds` in `assets/results/extrapolation-<kind>.json`."]),
        *_snapshot_lines(info),
        "",
        "## Architecture",
        _arch_text(info),
        f"{info['layers']} layers, {info['heads']} heads, hidden size {info['hidden']}, "
        f"{info['parameters']:,} parameters "
        f"({info['parameters_without_position_table']:,} without a position table)"
        + _slope_parameters_text(info) + ". "
        "Vocabulary: 259 byte-level ids "
        "(`ByT5Tokenizer(extra_ids=0)`: one token per UTF-8 byte, plus pad/eos/unk).",
        "",
        "Same backbone as the four other shipped models (pre-LayerNorm, attention with biases, "
        "4x GELU MLP, tied embeddings, no dropout); what still differs between them:",
        "",
        *[f"- {d}" for d in REMAINING_DIFFERENCES],
        "",
        "## Data",
        *_data_lines(info),
        "",
        "## Training",
        f"{info['steps_done']} steps of {info['batch_size']} random windows of "
        f"{info['train_seq_len']} tokens ({info['tokens_seen']:,} tokens), AdamW, peak lr "
        f"{info['lr']}, {info['warmup']} warmup steps then cosine decay to "
        f"{info['min_lr_ratio']} x peak (a function of the step only), seed {info['seed']}, "
        f"{info['threads']} CPU thread(s): {info['wall_time_s'] / 60:.1f} min "
        f"({info['seconds_per_step']} s/step) on {_machine_text(info)}. "
        f"Final training loss {info['final_loss']} nats/byte; "
        f"held-out loss at length {info['train_seq_len']}: {info['valid_loss_at_train_len']} "
        f"(perplexity {info['valid_ppl_at_train_len']}).",
        "",
        "Copy curriculum (part of the data, the same for all five models): "
        + info["curriculum"] + ". It makes copying heads form, so that the models can show "
        "retrieval at a distance. No model was trained without it, so what it does to reach "
        "is not measured here.",
        "",
        *_pilot_lines(info),
        "",
        "Held-out loss during training: "
        + ", ".join(f"{p['valid_loss']} at step {p['step']}" for p in info.get("valid_curve", []))
        + ".",
        "",
        f"Loss curve (mean over each {info['log_every']} steps): "
        f"`{_sparkline([p['loss'] for p in curve])}`",
        "",
        "| step | loss |",
        "|---:|---:|",
        *[f"| {p['step']} | {p['loss']} |" for p in shown],
        "",
        "## Evaluation: per-byte perplexity on held-out text",
    ]
    lines += (["Below, beside the fixed-slope model's."] if info.get("learn_slopes")
              else _evaluation_lines(name, info, results or {}))
    lines += _variant_lines(info)
    if not info.get("learn_slopes"):
        lines += ["", "## Reach and copy at a distance",
                  *_reach_lines(name, load_reach_results() if shipped else {},
                               info["train_seq_len"])]
    lines += [
        "",
        "## Regenerate",
        "```",
        info["command"],
        "python -m experiments.learnable_slopes" if info.get("learn_slopes")
        else "python -m experiments.evaluate",
        "```",
        "The schedule depends on the step only, so a rerun reproduces the model step for step "
        "up to floating-point differences between machines and thread counts.",
        "",
    ]
    (folder / "README.md").write_text("\n".join(lines))
