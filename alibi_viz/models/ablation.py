"""Which heads matter: the loss increase when one head's output is zeroed (head ablation).

Michel, Levy & Neubig 2019 ("Are Sixteen Heads Really Better than One?") mask one head at a
time and measure what the model loses. Here the head's slice of the attention output is set to
zero just before the output projection (a forward pre-hook on that projection), which is what
a head mask of 0 does, for any of the architectures below:

    BLOOM, Falcon      transformer.h[i].self_attention.dense
    GPT-2              transformer.h[i].attn.c_proj
    GPT-NeoX           gpt_neox.layers[i].attention.dense
    MPT                transformer.blocks[i].attn.out_proj
    LLaMA-like         model.layers[i].self_attn.o_proj

The input of that projection is (batch, tokens, heads x head_dim), head h's output in columns
h x head_dim .. (h + 1) x head_dim.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import contextmanager

import numpy as np
import torch

from alibi_viz import assets, data
from alibi_viz.assets import shipped_models, shipped_train_seq_len
from alibi_viz.errors import AlibiVizError
from alibi_viz.evaluate import load_eval_model
from alibi_viz.i18n import _
from alibi_viz.models.heads import attention_maps_of_ids, head_statistics
from alibi_viz.models.loading import describe_model
from alibi_viz.models.scoring import next_token_nll

OUTPUT_PROJECTIONS = (  # (layers attribute path, projection attribute path inside a layer)
    ("transformer.h", "self_attention.dense"),
    ("transformer.h", "attn.c_proj"),
    ("gpt_neox.layers", "attention.dense"),
    ("transformer.blocks", "attn.out_proj"),
    ("model.layers", "self_attn.o_proj"),
)


def _get(obj, path: str):
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def output_projections(model) -> list[torch.nn.Module]:
    """Per layer, the module whose input holds the heads' outputs side by side."""
    for layers_path, proj_path in OUTPUT_PROJECTIONS:
        layers = _get(model, layers_path)
        if layers is None:
            continue
        found = [_get(layer, proj_path) for layer in layers]
        if found and all(m is not None for m in found):
            return found
    raise AlibiVizError(_("Head ablation does not know where this model's attention output is "
                          "projected ({kind}).").format(kind=type(model).__name__))


@torch.inference_mode()
def _loss(model, ids: torch.Tensor) -> float:
    """Mean next-token loss (nats) of windows (N, T + 1)."""
    return float(next_token_nll(model, ids).mean())


def head_ablation(model, ids, num_heads: int) -> tuple[float, np.ndarray]:
    """(loss of the intact model, (layers, heads) loss increase in nats per token when that one
    head's output is zeroed) on the token windows `ids` (N, T + 1): inputs [:, :-1], targets
    [:, 1:]."""
    ids = torch.as_tensor(np.asarray(ids), dtype=torch.long)
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise AlibiVizError(_("ids must be windows of shape (N, T + 1) with T >= 1."))
    model.eval()
    projections = output_projections(model)
    width = projections[0].in_features if hasattr(projections[0], "in_features") else \
        projections[0].weight.shape[0]  # GPT-2's Conv1D keeps (in, out)
    if width % num_heads:
        raise AlibiVizError(_("The attention output ({width}) does not split into {heads} "
                              "heads.").format(width=width, heads=num_heads))
    head_dim = width // num_heads
    base = _loss(model, ids)
    increase = np.zeros((len(projections), num_heads))
    for layer, module in enumerate(projections):
        for head in range(num_heads):
            with zeroed_head(module, head, head_dim):
                increase[layer, head] = _loss(model, ids) - base
    return base, increase


@contextmanager
def zeroed_head(projection: torch.nn.Module, head: int, head_dim: int):
    """While inside, `head`'s slice of the input of `projection` (an `output_projections`
    entry), columns head x head_dim .. (head + 1) x head_dim, is zero: what a head mask of 0
    does. The forward pre-hook is removed on leaving."""
    def zero(_module, args):
        x = args[0].clone()  # (batch, tokens, heads x head_dim)
        x[..., head * head_dim:(head + 1) * head_dim] = 0
        return (x, *args[1:])

    handle = projection.register_forward_pre_hook(zero)
    try:
        yield
    finally:
        handle.remove()


# ----------------------------------------------------------------------------- shipped results

ABLATION_WINDOWS = 32  # held-out windows of the training length each head is ablated on


def heldout_windows(windows: int = ABLATION_WINDOWS, seq_len: int = 128) -> np.ndarray:
    """(windows, seq_len + 1) consecutive windows of the shipped held-out text of the four
    kinds, interleaved in their training shares (`data.heldout_mixture_ids`)."""
    ids = data.heldout_mixture_ids(max_tokens=windows * seq_len + 1)
    return np.stack([ids[i * seq_len:(i + 1) * seq_len + 1] for i in range(windows)])


def measure_shipped(log=print) -> dict:
    """Head ablation of every shipped model on `heldout_windows()`, beside each head's slope:
    the ALiBi slope from the config (`ModelInfo.config_slopes`; slope_kind "applied"), or for
    the other models the decay fitted to its attention on the same text
    (`heads.head_statistics`; slope_kind "fitted"). What assets/results/ablation.json holds."""
    out = {"command": "python -m alibi_viz.models.ablation", "torch": torch.__version__,
           "windows": ABLATION_WINDOWS, "models": {}}
    for name, folder in shipped_models().items():
        t0 = time.perf_counter()
        model = load_eval_model(folder, for_attentions=True)
        info = describe_model(model)
        windows = heldout_windows(seq_len=shipped_train_seq_len(folder))
        base, increase = head_ablation(model, windows, info.num_heads)
        if info.config_slopes is not None:
            slope = np.broadcast_to(np.asarray(info.config_slopes), increase.shape)
            slope_kind = "applied"
        else:
            maps = attention_maps_of_ids(model, windows[0, :-1])
            slope = head_statistics(maps).fitted_slope
            slope_kind = "fitted"
        out["models"][name] = {"loss": round(base, 5), "increase": np.round(increase, 5).tolist(),
                               "slope": np.round(slope, 6).tolist(), "slope_kind": slope_kind,
                               "seconds": round(time.perf_counter() - t0, 1)}
        log(f"{name}: loss {base:.4f}, largest increase {increase.max():.4f} "
            f"({time.perf_counter() - t0:.1f} s)")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m alibi_viz.models.ablation",
                                description="Head ablation of the shipped models -> "
                                            "assets/results/ablation.json.")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    assets.ABLATION_PATH.write_text(json.dumps(measure_shipped(), indent=1) + "\n")
    print(f"wrote {assets.ABLATION_PATH}")


def rank_correlation(a, b) -> float:
    """Spearman's rank correlation of two equal-length samples (average ranks for ties)."""
    def ranks(x):
        x = np.asarray(x, dtype=float).ravel()
        order = np.argsort(x, kind="stable")
        r = np.empty(x.size)
        r[order] = np.arange(x.size)
        for value in np.unique(x):  # ties share their mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


MINOR = 0.01  # nats per token: a head whose silencing costs less barely matters here


def ablation_summary(entry: dict) -> dict:
    """The numbers the page states about one model's head ablation (an ablation.json entry):
    heads, the rank correlation of slope and loss increase, the head that matters most (0-based
    layer, head, increase, slope), how many heads cost less than MINOR, and the mean increase of
    the steepest and the gentlest quarter of the heads by slope."""
    increase = np.asarray(entry["increase"], dtype=float)
    slope = np.asarray(entry["slope"], dtype=float)
    layer, head = np.unravel_index(np.argmax(increase), increase.shape)
    order = np.argsort(slope.ravel())
    quarter = max(1, order.size // 4)
    return {"heads": int(increase.size), "rho": rank_correlation(slope, increase),
            "top": (int(layer), int(head), float(increase[layer, head]), float(slope[layer, head])),
            "minor": int((increase < MINOR).sum()),
            "steep": float(increase.ravel()[order[-quarter:]].mean()),
            "gentle": float(increase.ravel()[order[:quarter]].mean())}


if __name__ == "__main__":
    main()
