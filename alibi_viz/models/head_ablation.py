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

`python -m experiments.ablation` (experiments.ablation) measures the shipped
models -> assets/results/ablation.json; alibi_viz.results.ablation reads it back.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

from alibi_viz.errors import AlibiVizError
from alibi_viz.i18n import _
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
