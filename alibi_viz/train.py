"""Train the shipped models from scratch on CPU: ALiBi (BLOOM) and two baselines.

    python -m alibi_viz.train --arch alibi   --out assets/models/alibi
    python -m alibi_viz.train --arch learned --out assets/models/learned
    python -m alibi_viz.train --arch rope    --out assets/models/rope

The three differ only in how they know where a token is:
  alibi    BloomForCausalLM: no position embeddings, a per-head linear bias -m_h * (i - j) on
           the attention scores (slopes 1/2 .. 1/256 for 8 heads).
  learned  GPT2LMHeadModel: a learned vector per absolute position, added to the token
           embedding. n_positions is 4096 so that it can be *evaluated* that long, but only the
           first `seq_len` rows are ever trained; the rest keep their random initialisation.
  rope     LlamaForCausalLM: rotary position embeddings (queries and keys rotated by position).
Same depth, width, heads, data, batches (same seed), steps, learning-rate schedule and training
length for all. The Llama MLP is SwiGLU (three matrices), so its intermediate size is 8/3 of the
hidden size rather than 4x, which keeps the parameter counts comparable.

Output folder: config.json, model.safetensors and the tokenizer (`save_pretrained`, so it loads
with `AutoModelForCausalLM.from_pretrained`), training.json (settings, wall time, loss curve,
the exact command), training.log and README.md (the model card; `alibi_viz.evaluate` fills in
its evaluation table).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from . import data
from .errors import AlibiVizError

ARCHS = ("alibi", "learned", "rope")
EVAL_MAX_LEN = 4096  # the learned baseline needs a position table this long to be evaluated


@dataclass
class TrainConfig:
    arch: str
    out: str
    steps: int = 2000  # optimizer steps
    seq_len: int = 128  # training length (tokens per window)
    layers: int = 4
    heads: int = 8  # 8 heads: ALiBi slopes 1/2 .. 1/256, the paper's canonical set
    hidden: int = 128
    batch_size: int = 32  # windows per step
    lr: float = 2e-3  # peak learning rate (AdamW)
    warmup: int = 100  # linear warmup steps, then cosine decay to lr * min_lr_ratio
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    threads: int = 2  # torch CPU threads
    log_every: int = 25  # steps per point of the loss curve
    max_minutes: float = 0.0  # >0: wall-clock budget: lr decays by it, training stops at it


def model_config(arch: str, layers: int, heads: int, hidden: int):
    """A transformers config for `arch` ("alibi", "learned" or "rope"), 259-id byte vocabulary,
    no dropout, tied input/output embeddings."""
    from transformers import BloomConfig, GPT2Config, LlamaConfig

    common = dict(vocab_size=data.VOCAB_SIZE, pad_token_id=data.PAD_ID, eos_token_id=data.EOS_ID,
                  bos_token_id=data.EOS_ID, tie_word_embeddings=True)
    if arch == "alibi":
        return BloomConfig(hidden_size=hidden, n_layer=layers, n_head=heads, hidden_dropout=0.0,
                           attention_dropout=0.0, **common)
    if arch == "learned":
        return GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, n_positions=EVAL_MAX_LEN,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **common)
    if arch == "rope":
        intermediate = 8 * (hidden * 8 // 3 // 8)  # SwiGLU at ~2/3 of 4x: comparable parameters
        return LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           num_key_value_heads=heads, intermediate_size=intermediate,
                           max_position_embeddings=EVAL_MAX_LEN, attention_dropout=0.0, **common)
    raise AlibiVizError(f"arch must be one of {ARCHS}, got {arch!r}.")


def build_model(arch: str, layers: int, heads: int, hidden: int, attn_implementation: str):
    """A randomly initialised causal LM for `arch`."""
    from transformers import AutoModelForCausalLM

    config = model_config(arch, layers, heads, hidden)
    return AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)


def lr_at(step: int, cfg: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Learning rate at `step` (0-based): linear warmup, then cosine decay to lr*min_lr_ratio.

    With cfg.max_minutes > 0 the decay follows whichever is further along, the steps or the
    wall-clock budget (elapsed_s of 60 * max_minutes), so a run cut short by the budget still
    ends annealed.
    """
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    if cfg.max_minutes > 0:
        progress = max(progress, elapsed_s / (60 * cfg.max_minutes))
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

    # BLOOM has only the eager path; the baselines train faster with sdpa (same maths).
    attn = "eager" if cfg.arch == "alibi" else "sdpa"
    model = build_model(cfg.arch, cfg.layers, cfg.heads, cfg.hidden, attn)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))

    train_stream = data.corpus_ids("train")
    valid_stream = data.corpus_ids("valid", max_tokens=64 * cfg.seq_len + 1)
    batches = data.random_batches(train_stream, cfg.batch_size, cfg.seq_len, cfg.seed)

    curve, window = [], []
    log_path = out / "training.log"
    start = time.perf_counter()
    with open(log_path, "w") as log, tqdm(range(cfg.steps), desc=f"train {cfg.arch}",
                                          unit="step") as bar:
        log.write(f"{command}\n{n_params} parameters, {len(train_stream)} training tokens\n")
        for step in bar:
            lr = lr_at(step, cfg, time.perf_counter() - start)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = lm_loss(model, next(batches))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            window.append(loss.item())
            bar.set_postfix(loss=f"{sum(window) / len(window):.3f}")
            time_up = cfg.max_minutes > 0 and time.perf_counter() - start >= 60 * cfg.max_minutes
            if len(window) == cfg.log_every or step == cfg.steps - 1 or time_up:
                point = {"step": step + 1, "loss": round(sum(window) / len(window), 4),
                         "lr": round(lr, 6),
                         "seconds": round(time.perf_counter() - start, 1)}
                curve.append(point)
                log.write(json.dumps(point) + "\n")
                log.flush()
                window = []
            if time_up:
                log.write(f"stopped early after {step + 1} steps: --max-minutes reached\n")
                break
    wall = time.perf_counter() - start
    valid = validation_loss(model, valid_stream, cfg.seq_len)

    # Saved for the eager path: that is the one that returns attention probabilities.
    model.config._attn_implementation = "eager"
    model.save_pretrained(out)
    data.make_tokenizer().save_pretrained(out)
    info = {
        **asdict(cfg),
        "train_seq_len": cfg.seq_len,
        "model_class": type(model).__name__,
        "parameters": n_params,
        "train_tokens_available": int(len(train_stream)),
        "steps_done": step + 1,
        "stopped_early": step + 1 < cfg.steps,
        "tokens_seen": (step + 1) * cfg.batch_size * cfg.seq_len,
        "wall_time_s": round(wall, 1),
        "seconds_per_step": round(wall / (step + 1), 3),
        "final_loss": curve[-1]["loss"],
        "valid_loss_at_train_len": round(valid, 4),
        "valid_ppl_at_train_len": round(math.exp(valid), 4),
        "loss_curve": curve,
        "command": command,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "corpus": "Python standard library .py sources (see alibi_viz/data.py)",
    }
    (out / "training.json").write_text(json.dumps(info, indent=1) + "\n")
    write_model_card(out)
    return info


# ----------------------------------------------------------------------------- model card

ARCH_TEXT = {
    "alibi": "BLOOM (`BloomForCausalLM`): ALiBi, no position embeddings; each head adds "
             "-m_h * (i - j) to its attention scores, slopes m_h = 2^-1 .. 2^-8.",
    "learned": "GPT-2 (`GPT2LMHeadModel`): learned absolute position embeddings, table of 4096 "
               "rows of which only the first {seq_len} were ever trained.",
    "rope": "Llama (`LlamaForCausalLM`): rotary position embeddings (RoPE, theta 10000), "
            "SwiGLU MLP.",
}


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
        ARCH_TEXT[info["arch"]].format(seq_len=info["train_seq_len"]),
        f"{info['layers']} layers, {info['heads']} heads, hidden size {info['hidden']}, "
        f"{info['parameters']:,} parameters. Vocabulary: 259 byte-level ids "
        "(`ByT5Tokenizer(extra_ids=0)`: one token per UTF-8 byte, plus pad/eos/unk).",
        "",
        "## Data",
        "The `.py` sources of the Python standard library (Python "
        f"{info['python']}, PSF License), test suites and data tables excluded, about one file "
        "in ten held out for validation (crc32 of the path); files joined with eos. "
        "See `alibi_viz/data.py`.",
        "",
        "## Training",
        f"{info.get('steps_done', info['steps'])} steps of {info['batch_size']} random windows of "
        f"{info['train_seq_len']} tokens ({info['tokens_seen']:,} tokens), AdamW, peak lr "
        f"{info['lr']}, {info['warmup']} warmup steps then cosine decay, seed {info['seed']}, "
        f"{info['threads']} CPU thread(s): {info['wall_time_s'] / 60:.1f} min "
        f"({info['seconds_per_step']} s/step). "
        + (f"The run had a wall-clock budget of {info['max_minutes']} min (`--max-minutes`) "
           f"and stopped there, before the planned {info['steps']} steps; the learning rate "
           "decayed by time, so it still ended annealed. " if info.get("stopped_early") else "")
        + f"Final training loss {info['final_loss']} nats/byte; "
        f"held-out loss at length {info['train_seq_len']}: {info['valid_loss_at_train_len']} "
        f"(perplexity {info['valid_ppl_at_train_len']}).",
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
            f"{max(lengths)}, so each sees between length - {results['stride']} and length "
            "tokens of context.",
            "",
            "| protocol | " + " | ".join(str(n) for n in lengths) + " |",
            "|---|" + "---:|" * len(lengths),
        ]
        for protocol, ppl in rows["perplexity"].items():
            lines.append(f"| {protocol} | " + " | ".join(f"{ppl[str(n)]:.3f}" for n in lengths)
                         + " |")
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
        "Results are reproducible up to floating-point differences between machines"
        + ("; with `--max-minutes` the learning rate also follows wall-clock time, so a "
           "machine of another speed gives a close but not identical model (drop the flag for "
           "a purely step-based schedule)." if info.get("max_minutes") else "."),
        "",
    ]
    (folder / "README.md").write_text("\n".join(lines))


def parse_args(argv=None) -> TrainConfig:
    defaults = TrainConfig(arch="alibi", out="")
    p = argparse.ArgumentParser(prog="python -m alibi_viz.train", description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=ARCHS, required=True)
    p.add_argument("--out", required=True, help="output folder, e.g. assets/models/alibi")
    for name in ("steps", "seq_len", "layers", "heads", "hidden", "batch_size", "warmup", "seed",
                 "threads", "log_every"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("lr", "min_lr_ratio", "weight_decay", "max_minutes"):
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
