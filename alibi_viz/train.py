"""Train the shipped model family from scratch on CPU: ALiBi and four baselines.

    python -m alibi_viz.train --arch alibi      --out assets/models/alibi
    python -m alibi_viz.train --arch sinusoidal --out assets/models/sinusoidal
    python -m alibi_viz.train --arch rope       --out assets/models/rope
    python -m alibi_viz.train --arch learned    --out assets/models/learned
    python -m alibi_viz.train --arch nope       --out assets/models/nope

One backbone as far as transformers allows: pre-LayerNorm blocks, multi-head attention with
biases, a 4x GELU (tanh approximation) MLP, tied input/output embeddings, no dropout. The five
share depth, width, heads, tokenizer, data, batches (same seed), copy curriculum, steps,
learning-rate schedule and training length; they differ in how a token's position enters:
  alibi       BloomForCausalLM: no position embeddings; each head adds -m_h (i - j) to its scores.
  sinusoidal  GPT2LMHeadModel whose position table is Vaswani et al.'s sinusoidal table, scaled
              to the token embeddings' initial size (SINUSOIDAL_SCALE) and frozen.
  rope        GPTNeoXForCausalLM with rotary embeddings on every dimension (rotary_pct 1.0),
              sequential residual (use_parallel_residual=False), tied embeddings.
  learned     GPT2LMHeadModel with its learned absolute position table (4096 rows so that it can
              be *evaluated* that long; only the first `seq_len` rows are ever trained).
  nope        GPT2LMHeadModel with a zero position table, frozen: no position information.
What remains different is listed in REMAINING_DIFFERENCES (and in every model card).

Output folder: config.json, model.safetensors and the tokenizer (`save_pretrained`, so it loads
with `AutoModelForCausalLM.from_pretrained`), training.json (settings, wall time, loss curve,
machine load, the exact command), training.log and README.md (the model card;
`alibi_viz.evaluate` fills in its evaluation table).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from alibi_viz import assets, data
from alibi_viz.alibi import alibi_slopes
from alibi_viz.assets import (
    REMAINING_DIFFERENCES,
    SHIPPED,
    load_extrapolation_results,
    load_learnable_slopes_results,
    load_reach_results,
)
from alibi_viz.errors import AlibiVizError
from alibi_viz.models import layer_slopes
from alibi_viz.models.pretrained import from_pretrained
from alibi_viz.models.scoring import next_token_nll
from alibi_viz.positional import sinusoidal_table
from alibi_viz.results import learnable_slopes
from alibi_viz.results.reach import ReachResult

ARCHS = tuple(SHIPPED)
GPT2_ARCHS = ("sinusoidal", "learned", "nope")  # GPT-2 backbones, differing in the wpe table
EVAL_MAX_LEN = 4096  # position tables this long, so that every model can be evaluated at 4096
# The frozen sinusoidal table is the formula times this: its entries then have the token
# embeddings' initial RMS (initializer_range 0.02; a sinusoid's RMS is 1/sqrt(2)). Vaswani et
# al. balance the two by multiplying the embeddings by sqrt(d_model) instead; GPT-2 cannot,
# and with the bare table (35x the embeddings) the model trained far worse: held-out loss
# 2.42 against ALiBi's 1.34 after 500 steps, measured here.
SINUSOIDAL_SCALE = 0.02 * math.sqrt(2)



@dataclass
class TrainConfig:
    arch: str
    out: str
    steps: int = 3000  # optimizer steps
    seq_len: int = 128  # training length (tokens per window)
    layers: int = 4
    heads: int = 8  # 8 heads: ALiBi slopes 1/2 .. 1/256, the paper's canonical set
    hidden: int = 192  # chosen from a pilot: issue 23's note and the model cards
    batch_size: int = 32  # windows per step
    lr: float = 2e-3  # peak learning rate (AdamW)
    warmup: int = 100  # linear warmup steps, then cosine decay to lr * min_lr_ratio
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    plant_fraction: float = data.PLANT_FRACTION  # windows with a planted repeat (0: none)
    seed: int = 0
    threads: int = 2  # torch CPU threads
    log_every: int = 25  # steps per point of the loss curve
    eval_every: int = 500  # steps per held-out loss measurement
    snapshots: str = ""  # comma-separated steps at which to save an fp16 copy ("" for none)
    save_dtype: str = "float16"  # the shipped weights' dtype (the app computes in float32)
    snapshot_dir: str = ""  # where the snapshots go (default: <out>/snapshots, alibi_viz.snapshots)
    learn_slopes: bool = False  # alibi only: per-layer slopes as parameters (models.layer_slopes)


def model_config(arch: str, layers: int, heads: int, hidden: int):
    """A transformers config for `arch` (one of ARCHS): 259-id byte vocabulary, no dropout,
    tied input/output embeddings, 4x GELU(tanh) MLP."""
    from transformers import BloomConfig, GPT2Config, GPTNeoXConfig  # heavy: at first use

    common = dict(vocab_size=data.VOCAB_SIZE, pad_token_id=data.PAD_ID, eos_token_id=data.EOS_ID,
                  bos_token_id=data.EOS_ID, tie_word_embeddings=True)
    if arch == "alibi":
        return BloomConfig(hidden_size=hidden, n_layer=layers, n_head=heads, hidden_dropout=0.0,
                           attention_dropout=0.0, **common)
    if arch in GPT2_ARCHS:
        return GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, n_positions=EVAL_MAX_LEN,
                          activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0, **common)
    if arch == "rope":
        return GPTNeoXConfig(hidden_size=hidden, num_hidden_layers=layers,
                             num_attention_heads=heads, intermediate_size=4 * hidden,
                             hidden_act="gelu_new", rotary_pct=1.0, use_parallel_residual=False,
                             max_position_embeddings=EVAL_MAX_LEN, attention_dropout=0.0,
                             hidden_dropout=0.0, layer_norm_eps=1e-5, **common)
    raise AlibiVizError(f"arch must be one of {ARCHS}, got {arch!r}.")


def build_model(arch: str, layers: int, heads: int, hidden: int, attn_implementation: str):
    """A randomly initialised causal LM for `arch`. The sinusoidal and nope models get their
    fixed position table here (sinusoidal formula / zeros) with requires_grad off."""
    from transformers import AutoModelForCausalLM  # heavy: at first use

    config = model_config(arch, layers, heads, hidden)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    if arch in ("sinusoidal", "nope"):
        wpe = model.transformer.wpe.weight  # (n_positions, hidden)
        with torch.no_grad():
            if arch == "sinusoidal":
                table = sinusoidal_table(wpe.shape[0], wpe.shape[1]) * SINUSOIDAL_SCALE
                wpe.copy_(torch.from_numpy(table))
            else:
                wpe.zero_()
        wpe.requires_grad_(False)
    return model


def parameter_count(model, include_positions: bool = True) -> int:
    """Parameters of a model (tied weights counted once); without the GPT-2 position table
    when include_positions is False."""
    seen, total = set(), 0
    for name, p in model.named_parameters(remove_duplicate=True):
        if id(p) in seen or (not include_positions and name.endswith("wpe.weight")):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def snapshot_schedule(cfg: TrainConfig) -> set[int]:
    """The steps (0 = before the first update, cfg.steps = the final model) to snapshot at."""
    steps = {int(x) for x in cfg.snapshots.split(",") if x.strip()}
    bad = sorted(n for n in steps if not 0 <= n <= cfg.steps)
    if bad:
        raise AlibiVizError(f"snapshot steps must lie in 0..{cfg.steps}, got {bad}.")
    return steps


def save_snapshot(model, root: Path, step: int, valid_stream, seq_len: int, seconds: float):
    """An fp16 copy of `model` after `step` updates in root/step-NNNNN (save_pretrained, eager
    attention, the tokenizer beside it), with snapshot.json: step, held-out loss, seconds."""
    folder = root / f"step-{step:05d}"
    snap = copy.deepcopy(model).half()
    snap.config._attn_implementation = "eager"
    snap.save_pretrained(folder)
    data.make_tokenizer().save_pretrained(folder)
    record = {"step": step, "valid_loss": round(validation_loss(model, valid_stream, seq_len), 4),
              "seconds": round(seconds, 1)}
    (folder / "snapshot.json").write_text(json.dumps(record) + "\n")


def corpus_record() -> dict:
    """What the models read: the four-kind corpus, as assets/corpus/manifest.json pins it."""
    manifest = data.corpus_manifest()
    return {"name": "four-kind corpus (Python, English, Spanish, Russian prose; see "
                    "alibi_viz/data.py and assets/corpus/README.md)",
            "shares": data.SHARES,
            "manifest": "assets/corpus/manifest.json",
            "streams": {split: manifest["streams"][split]["sha256"] for split in ("train", "valid")},
            "packages": {name: pkg["version"] for name, pkg in manifest["packages"].items()}}


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate at `step` (0-based): linear warmup, then cosine decay to lr*min_lr_ratio.
    A function of the step alone, so a run is the same on any machine."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def lm_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross entropy (nats) of `batch` (B, T + 1): inputs [:, :-1], targets [:, 1:]."""
    return next_token_nll(model, batch).mean()


@torch.inference_mode()
def validation_loss(model, stream, seq_len: int, windows: int = 64) -> float:
    """Mean loss over the first `windows` non-overlapping windows of the held-out stream."""
    model.eval()
    n = windows * seq_len
    ids = torch.from_numpy(stream[: n + 1])
    batch = torch.stack([ids[i : i + seq_len + 1] for i in range(0, n, seq_len)])
    loss = lm_loss(model, batch).item()
    model.train()
    return loss


def train(cfg: TrainConfig, command: str) -> dict:
    """Train one model as `cfg` says and save it to `cfg.out`; returns what training.json holds."""
    if cfg.arch not in ARCHS:
        raise AlibiVizError(f"arch must be one of {ARCHS}, got {cfg.arch!r}.")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)

    # BLOOM has only the eager path; the others train faster with sdpa (same maths).
    attn = "eager" if cfg.arch == "alibi" else "sdpa"
    model = build_model(cfg.arch, cfg.layers, cfg.heads, cfg.hidden, attn)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    decayed = [p for p in trainable if p.dim() >= 2]
    slopes = None
    if cfg.learn_slopes:  # after the model, so that its initial weights are the ALiBi model's
        if cfg.arch != "alibi":
            raise AlibiVizError("--learn-slopes needs --arch alibi.")
        slopes = layer_slopes.attach(model, trainable=True)  # official schedule in every layer
        trainable.append(slopes.log_slopes)  # (layers, heads): no weight decay
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": cfg.weight_decay},
         {"params": [p for p in trainable if all(p is not q for q in decayed)],
          "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95))

    train_stream = data.mixture_ids("train")
    valid_stream = data.mixture_ids("valid", max_tokens=64 * cfg.seq_len + 1)
    snapshot_steps = snapshot_schedule(cfg)
    snapshot_root = Path(cfg.snapshot_dir) if cfg.snapshot_dir else out / "snapshots"
    if snapshot_steps:
        snapshot_root.mkdir(parents=True, exist_ok=True)
    batches = data.training_batches(train_stream, cfg.batch_size, cfg.seq_len, cfg.seed,
                                    cfg.plant_fraction)

    curve, valid_curve, window = [], [], []
    log_path = out / "training.log"
    load_before = os.getloadavg()
    start = time.perf_counter()
    with open(log_path, "w") as log, tqdm(range(cfg.steps), desc=f"train {cfg.arch}",
                                          unit="step", mininterval=10) as bar:
        log.write(f"{command}\n{parameter_count(model)} parameters, {len(train_stream)} "
                  f"training tokens, load average before {load_before}\n")
        for step in bar:
            if step in snapshot_steps:
                save_snapshot(model, snapshot_root, step, valid_stream, cfg.seq_len,
                              time.perf_counter() - start)
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = lm_loss(model, next(batches))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            window.append(loss.item())
            if len(window) == cfg.log_every or step == cfg.steps - 1:
                point = {"step": step + 1, "loss": round(sum(window) / len(window), 4),
                         "lr": round(lr, 6), "seconds": round(time.perf_counter() - start, 1)}
                if slopes is not None:
                    point["slopes"] = layer_slopes.logged(slopes.slopes())
                curve.append(point)
                log.write(json.dumps(point) + "\n")
                log.flush()
                bar.set_postfix(loss=f"{point['loss']:.3f}")
                window = []
            if (step + 1) % cfg.eval_every == 0 or step == cfg.steps - 1:
                point = {"step": step + 1,
                         "valid_loss": round(validation_loss(model, valid_stream, cfg.seq_len), 4)}
                valid_curve.append(point)
                log.write(json.dumps(point) + "\n")
    wall = time.perf_counter() - start
    load_after = os.getloadavg()
    valid = valid_curve[-1]["valid_loss"]
    if cfg.steps in snapshot_steps:
        save_snapshot(model, snapshot_root, cfg.steps, valid_stream, cfg.seq_len, wall)

    if cfg.save_dtype == "float16":  # half the size on disk; measured as shipped: rounded
        model = model.half().float()
        valid = validation_loss(model, valid_stream, cfg.seq_len)
        model = model.half()
    # Saved for the eager path: that is the one that returns attention probabilities.
    model.config._attn_implementation = "eager"
    if slopes is not None:
        layer_slopes.store(model, slopes)  # config.json's alibi_viz_slopes
    for p in model.parameters():
        p.requires_grad_(True)
    model.save_pretrained(out)
    data.make_tokenizer().save_pretrained(out)
    info = {
        **asdict(cfg),
        "train_seq_len": cfg.seq_len,
        "model_class": type(model).__name__,
        "parameters": parameter_count(model),
        "parameters_without_position_table": parameter_count(model, include_positions=False),
        "train_tokens_available": int(len(train_stream)),
        "steps_done": cfg.steps,
        "tokens_seen": cfg.steps * cfg.batch_size * cfg.seq_len,
        "wall_time_s": round(wall, 1),
        "seconds_per_step": round(wall / cfg.steps, 3),
        "machine": {"cpus": os.cpu_count(), "threads": cfg.threads,
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in load_after],
                    "platform": platform.platform()},
        "final_loss": curve[-1]["loss"],
        "initial_slopes": None if slopes is None else [list(alibi_slopes(cfg.heads))] * cfg.layers,
        "final_slopes": None if slopes is None else slopes.slopes().tolist(),
        "valid_loss_at_train_len": valid,
        "valid_ppl_at_train_len": round(math.exp(valid), 4),
        "valid_curve": valid_curve,
        "loss_curve": curve,
        "command": command,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "corpus": corpus_record(),
        "curriculum": "none" if not cfg.plant_fraction else f"copy: in {cfg.plant_fraction:.0%} of windows one span of "
                      f"{data.PLANT_SPAN[0]}-{data.PLANT_SPAN[1]} tokens from elsewhere in the "
                      "training stream is written at two places (alibi_viz/data.py)",
    }
    (out / "training.json").write_text(json.dumps(info, indent=1) + "\n")
    write_model_card(out)
    return info


# ----------------------------------------------------------------------------- model card

def _arch_text(info: dict) -> str:
    spec = SHIPPED[info["arch"]]
    if info.get("learn_slopes"):  # its slopes are its own, per layer: not the family's schedule
        final = np.asarray(info["final_slopes"], dtype=np.float64)  # (layers, heads)
        initial = np.asarray(info["initial_slopes"], dtype=np.float64)
        return (f"{spec.title}, `{info['model_class']}`: no position embeddings; each head adds "
                "-m (i - j) to its attention scores, with a slope of its own in every layer, "
                f"trained: from {final.max():.3g} down to {final.min():.3g} after training "
                f"(initialised to the official schedule, {initial.max():.3g} .. "
                f"{initial.min():.3g}, in every layer).")
    return f"{spec.title}, `{info['model_class']}`: {spec.position}."


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
            "training-step slider (`alibi_viz.snapshots`)."]


def _pilot_lines(info: dict) -> list[str]:
    runs = "; ".join(f"hidden {r['hidden']} ({r['parameters']:,} parameters, "
                     f"{r['seconds_per_step']} s/step): held-out loss {r['valid_loss'][200]} at "
                     f"step 200, {r['valid_loss'][400]} at step 400" for r in PILOT)
    return [f"Width, from a pilot of 400 steps on 2 idle cores: {runs}. The wider model was "
            "0.14 nats better at 1.8x the cost; {steps} steps of it keep the family within "
            "about 2 hours of training on 2 cores, so the family is {hidden} wide.".format(
                steps=f"{info['steps']:,}", hidden=info["hidden"])]


CARD_FACTORS = (1, 2, 8, 32)  # lengths of the card's per-kind table, in training lengths


def _evaluation_lines(name: str, info: dict, by_kind: dict) -> list[str]:
    """The card's evaluation: per kind of held-out text, perplexity at 1x, 2x, 8x and 32x the
    training length with 95% intervals, under both protocols."""
    found = {kind: r for kind, r in by_kind.items() if r and name in r.get("models", {})}
    if not found:
        return ["Not evaluated yet: run `python -m alibi_viz.evaluate`."]
    first = next(iter(found.values()))
    train_len = info["train_seq_len"]
    lengths = [f * train_len for f in CARD_FACTORS if f * train_len in first["lengths"]]
    lines = [
        f"Per-byte perplexity on the shipped held-out text of each kind "
        f"(`assets/corpus/heldout/`), at {', '.join(str(n) for n in lengths)} tokens "
        f"(1x, 2x, 8x, 32x the training length {train_len}). Non-overlapping: the first "
        f"{first['protocols']['nonoverlapping']['tokens']:,} tokens cut into windows of the "
        f"length, every token scored. Sliding: {first['protocols']['sliding']['tokens']:,} "
        f"tokens scored, windows advancing by {first['stride']}, each scored token seeing "
        f"between length - {first['stride'] - 1} and length tokens. In brackets: the 95% "
        f"interval over {first.get('chunks', 16)} disjoint chunks of the scored tokens. The "
        f"two protocols score different stretches of the text (tokens "
        f"{first['protocols']['nonoverlapping']['targets'][0]:,}-"
        f"{first['protocols']['nonoverlapping']['targets'][1]:,} and "
        f"{first['protocols']['sliding']['targets'][0]:,}-"
        f"{first['protocols']['sliding']['targets'][1]:,}): compare each protocol across "
        "lengths, not one protocol's value with the other's.",
        "",
        "| text | protocol | " + " | ".join(f"{n} ({n // train_len}x)" for n in lengths) + " |",
        "|---|---|" + "---:|" * len(lengths),
    ]
    for kind, results in found.items():
        entry = results["models"][name]
        for protocol, ppl in entry["perplexity"].items():
            ci = entry.get("ci95", {}).get(protocol, {})
            cells = [f"{ppl[str(n)]:.3f} ({ci[str(n)][0]:.3f}-{ci[str(n)][1]:.3f})"
                     if str(n) in ci else f"{ppl[str(n)]:.3f}" for n in lengths]
            lines.append(f"| {data.TEXT_KINDS[kind]} | {protocol} | " + " | ".join(cells) + " |")
    lines += ["", "Every length from 128 to 4,096: `assets/results/extrapolation-<kind>.json`, "
              "written by `python -m alibi_viz.evaluate`."]
    return lines


def _reach_lines(name: str, reach: dict) -> list[str]:

    entry = reach.get("models", {}).get(name)
    if not entry:
        return ["Not measured yet: run `python -m alibi_viz.reach`."]
    r = ReachResult.from_dict(entry["reach"])
    settled = r.settled_context(0.01)
    copy = entry["copy"]
    lines = [
        "On the shipped held-out text of the four kinds, interleaved (`assets/results/"
        "reach.json`, `python -m alibi_viz.reach`). Loss with at most c tokens of context "
        f"(nats/byte, {reach['reach']['tokens']:,} scored tokens): "
        + ", ".join(f"{c}: {v:.3f}" for c, v in zip(r.contexts.tolist(), r.nll.tolist(),
                                                       strict=True))
        + f"; lowest at {r.lowest_context():,} tokens ({r.nll.min():.3f})"
        + ("" if settled is None or settled >= r.contexts.max() else
           f", and within 0.01 nats of that at every context from {settled:,} tokens on") + ".",
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
                  "95% interval over 16 chunks.", "",
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
    kind of held-out text (or `results`, {kind: the dict `alibi_viz.evaluate` writes}) and the
    shipped reach results; rows for this folder's model name."""
    folder = Path(folder)
    shipped = folder.resolve().parent == assets.MODELS_DIR.resolve()  # the shipped results are its own
    if results is None:
        results = ({kind: load_extrapolation_results(kind) for kind in data.CORPUS_KINDS}
                   if shipped else {})
    info = json.loads((folder / "training.json").read_text())
    name = folder.name
    curve = info["loss_curve"]
    shown = curve[:: max(1, len(curve) // 12)]
    shown += [] if shown[-1] is curve[-1] else [curve[-1]]
    lines = [
        f"# alibi-viz `{name}`: {info['arch']} byte-level language model"
        + (", learnable slopes (a variant beside the family)" if info.get("learn_slopes") else ""),
        "",
        "Trained from scratch on CPU by `alibi_viz/train.py` so that the app can show real "
        "attention heads, on code and on English, Spanish and Russian prose, and the *train "
        "short, test long* experiment of the ALiBi paper (Press, Smith & Lewis 2021) without "
        "downloading anything.",
        *_snapshot_lines(info),
        "",
        "## Architecture",
        _arch_text(info),
        f"{info['layers']} layers, {info['heads']} heads, hidden size {info['hidden']}, "
        f"{info['parameters']:,} parameters "
        f"({info['parameters_without_position_table']:,} without a position table). "
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
                  *_reach_lines(name, load_reach_results() if shipped else {})]
    lines += [
        "",
        "## Regenerate",
        "```",
        info["command"],
        "python -m alibi_viz.models.layer_slopes" if info.get("learn_slopes")
        else "python -m alibi_viz.evaluate",
        "```",
        "The schedule depends on the step only, so a rerun reproduces the model step for step "
        "up to floating-point differences between machines and thread counts.",
        "",
    ]
    (folder / "README.md").write_text("\n".join(lines))


def parse_args(argv=None) -> TrainConfig:
    defaults = TrainConfig(arch="alibi", out="")
    p = argparse.ArgumentParser(prog="python -m alibi_viz.train", description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=ARCHS, required=True)
    p.add_argument("--out", required=True, help="output folder, e.g. assets/models/alibi")
    p.add_argument("--save-dtype", default="float16", choices=("float16", "float32"))
    p.add_argument("--snapshots", default="", help="steps to save fp16 copies at, e.g. 0,30,100")
    p.add_argument("--snapshot-dir", default="", help="default <out>/snapshots")
    p.add_argument("--learn-slopes", action="store_true",
                   help="alibi: train per-layer slopes too (initialised to the official schedule)")
    for name in ("steps", "seq_len", "layers", "heads", "hidden", "batch_size", "warmup", "seed",
                 "threads", "log_every", "eval_every"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("lr", "min_lr_ratio", "weight_decay", "plant_fraction"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name))
    return TrainConfig(**vars(p.parse_args(argv)))


def halve(folder: Path) -> dict:
    """Store a trained model's weights in fp16 (what `--save-dtype float16` does at the end of
    training), re-measure its held-out loss as stored, and update its training.json."""
    folder = Path(folder)
    info = json.loads((folder / "training.json").read_text())
    model = from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    model = model.half().float().eval()  # the weights as they will be stored
    valid_stream = data.mixture_ids("valid", max_tokens=64 * info["seq_len"] + 1)
    valid = validation_loss(model, valid_stream, info["seq_len"])
    model.half().save_pretrained(folder)
    info.update(save_dtype="float16", valid_loss_at_train_len=round(valid, 4),
                valid_ppl_at_train_len=round(math.exp(valid), 4))
    (folder / "training.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--halve"]:
        for folder in argv[1:]:
            info = halve(Path(folder))
            print(f"{folder}: stored in fp16, held-out ppl {info['valid_ppl_at_train_len']}")
        return
    if argv[:1] == ["--card"]:  # rewrite the model cards, e.g. after new results
        for folder in argv[1:]:
            write_model_card(Path(folder))
            print(f"{folder}/README.md rewritten")
        return
    cfg = parse_args(argv)
    info = train(cfg, command="python -m alibi_viz.train " + shlex.join(argv))
    print(f"saved {cfg.out}: final loss {info['final_loss']}, held-out ppl at {cfg.seq_len}: "
          f"{info['valid_ppl_at_train_len']}, {info['wall_time_s']:.0f} s")


if __name__ == "__main__":
    main()
