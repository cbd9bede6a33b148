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
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from alibi_viz import data
from alibi_viz.assets import REMAINING_DIFFERENCES, SHIPPED
from alibi_viz.errors import AlibiVizError
from alibi_viz.positional import sinusoidal_table

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
    hidden: int = 128
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


def model_config(arch: str, layers: int, heads: int, hidden: int):
    """A transformers config for `arch` (one of ARCHS): 259-id byte vocabulary, no dropout,
    tied input/output embeddings, 4x GELU(tanh) MLP."""
    from transformers import BloomConfig, GPT2Config, GPTNeoXConfig

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
    from transformers import AutoModelForCausalLM

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
    logits = model(input_ids=batch[:, :-1]).logits  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))


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
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": cfg.weight_decay},
         {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95))

    train_stream = data.corpus_ids("train")
    valid_stream = data.corpus_ids("valid", max_tokens=64 * cfg.seq_len + 1)
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

    # Saved for the eager path: that is the one that returns attention probabilities.
    model.config._attn_implementation = "eager"
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
        "valid_loss_at_train_len": valid,
        "valid_ppl_at_train_len": round(math.exp(valid), 4),
        "valid_curve": valid_curve,
        "loss_curve": curve,
        "command": command,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "corpus": "Python standard library .py sources (see alibi_viz/data.py)",
        "curriculum": f"copy: in {cfg.plant_fraction:.0%} of windows one span of "
                      f"{data.PLANT_SPAN[0]}-{data.PLANT_SPAN[1]} tokens from elsewhere in the "
                      "training stream is written at two places (alibi_viz/data.py)",
    }
    (out / "training.json").write_text(json.dumps(info, indent=1) + "\n")
    write_model_card(out)
    return info


# ----------------------------------------------------------------------------- model card

def _arch_text(info: dict) -> str:
    spec = SHIPPED[info["arch"]]
    return f"{spec.title}, `{info['model_class']}`: {spec.position}."


def _machine_text(info: dict) -> str:
    m = info.get("machine")
    if not m:
        return "an unrecorded machine"
    return (f"{m['cpus']} CPU cores ({m['platform']}), load average "
            f"{m['load_average_before'][0]} before and {m['load_average_after'][0]} after: "
            + ("idle apart from this run" if max(m["load_average_before"][0],
                                                  m["load_average_after"][0]) < m["threads"] + 0.8
               else "other work shared the cores"))


def _sparkline(values: list[float]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    lo, hi = min(values), max(values)
    return "".join(bars[int((v - lo) / (hi - lo + 1e-12) * (len(bars) - 1))] for v in values)


def write_model_card(folder: Path, results: dict | None = None) -> None:
    """(Re)write folder/README.md from training.json and, if given, extrapolation results
    (the dict `alibi_viz.evaluate` writes; rows for this folder's model name)."""
    folder = Path(folder)
    info = json.loads((folder / "training.json").read_text())
    name = folder.name
    curve = info["loss_curve"]
    shown = curve[:: max(1, len(curve) // 12)]
    shown += [] if shown[-1] is curve[-1] else [curve[-1]]
    lines = [
        f"# alibi-viz `{name}`: {info['arch']} byte-level language model",
        "",
        "Trained from scratch on CPU by `alibi_viz/train.py` so that the app can show real "
        "attention heads and the *train short, test long* experiment of the ALiBi paper "
        "(Press, Smith & Lewis 2021) without downloading anything.",
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
        "The `.py` sources of the Python standard library (Python "
        f"{info['python']}, PSF License), test suites and data tables excluded, about one file "
        "in ten held out for validation (crc32 of the path); files joined with eos. "
        "See `alibi_viz/data.py`.",
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
        + info.get("curriculum", "none") + ". It makes copying heads form, so that the "
        "models can show retrieval at a distance.",
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
    rows = (results or {}).get("models", {}).get(name)
    if rows:
        lengths = results["lengths"]
        lines += [
            f"Same {results['tokens_note']}; train length {info['train_seq_len']}. "
            "Non-overlapping: the text cut into windows of the evaluation length. "
            f"Sliding: windows advance by {results['stride']} tokens and only their last "
            f"{results['stride']} tokens are scored; the scored tokens follow the first "
            f"{max(lengths)}, so each sees between length - {results['stride'] - 1} and length "
            "tokens of context. In brackets: the 95% interval over "
            f"{results.get('chunks', 16)} disjoint chunks of the scored tokens.",
            "",
            "| protocol | " + " | ".join(str(n) for n in lengths) + " |",
            "|---|" + "---:|" * len(lengths),
        ]
        for protocol, ppl in rows["perplexity"].items():
            ci = rows.get("ci95", {}).get(protocol, {})
            cells = [f"{ppl[str(n)]:.3f}" + (f" ({ci[str(n)][0]:.3f}-{ci[str(n)][1]:.3f})"
                                             if str(n) in ci else "") for n in lengths]
            lines.append(f"| {protocol} | " + " | ".join(cells) + " |")
        lines += ["", "Written by `python -m alibi_viz.evaluate` (assets/results/extrapolation.json)."]
    else:
        lines.append("Not evaluated yet: run `python -m alibi_viz.evaluate`.")
    lines += [
        "",
        "## Regenerate",
        "```",
        info["command"],
        "python -m alibi_viz.evaluate",
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
    for name in ("steps", "seq_len", "layers", "heads", "hidden", "batch_size", "warmup", "seed",
                 "threads", "log_every", "eval_every"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("lr", "min_lr_ratio", "weight_decay", "plant_fraction"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name))
    return TrainConfig(**vars(p.parse_args(argv)))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    info = train(cfg, command="python -m alibi_viz.train " + shlex.join(argv))
    print(f"saved {cfg.out}: final loss {info['final_loss']}, held-out ppl at {cfg.seq_len}: "
          f"{info['valid_ppl_at_train_len']}, {info['wall_time_s']:.0f} s")


if __name__ == "__main__":
    main()
