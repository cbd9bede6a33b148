"""Train the shipped model family from scratch on CPU: ALiBi and four baselines.

    python -m experiments.train --arch alibi      --out assets/models/alibi
    python -m experiments.train --arch sinusoidal --out assets/models/sinusoidal
    python -m experiments.train --arch rope       --out assets/models/rope
    python -m experiments.train --arch learned    --out assets/models/learned
    python -m experiments.train --arch nope       --out assets/models/nope

One backbone as far as transformers allows: pre-LayerNorm blocks, multi-head attention with
biases, a 4x GELU (tanh approximation) MLP, tied input/output embeddings, no dropout. The five
share depth, width, heads, tokenizer, data, batches (same seed), copy curriculum, steps,
learning-rate schedule and training length; they differ in how a token's position enters:
  alibi       BloomForCausalLM: no position embeddings; each head adds +m_h·j to its scores
              (the row-constant form of -m_h (i - j): the same attention).
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
`experiments.cards`; `python -m experiments.evaluate` fills in its evaluation table).
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

import torch
from tqdm import tqdm

from alibi_viz import data
from alibi_viz.alibi import alibi_slopes
from alibi_viz.assets import SHIPPED
from alibi_viz.errors import AlibiVizError
from alibi_viz.models import layer_slopes
from alibi_viz.models.pretrained import from_pretrained
from alibi_viz.models.scoring import next_token_nll
from alibi_viz.positional import sinusoidal_table
from experiments.cards import write_model_card

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
    snapshot_dir: str = ""  # where the snapshots go (default: <out>/snapshots, experiments.snapshots)
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


def parse_args(argv=None) -> TrainConfig:
    defaults = TrainConfig(arch="alibi", out="")
    p = argparse.ArgumentParser(prog="python -m experiments.train", description=__doc__.split("\n")[0])
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
    info = train(cfg, command="python -m experiments.train " + shlex.join(argv))
    print(f"saved {cfg.out}: final loss {info['final_loss']}, held-out ppl at {cfg.seq_len}: "
          f"{info['valid_ppl_at_train_len']}, {info['wall_time_s']:.0f} s")


if __name__ == "__main__":
    main()
